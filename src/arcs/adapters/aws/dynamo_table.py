"""What the DynamoDB adapters share: a table with string keys ``pk`` and ``sk``, item conversion,
conditional writes, batches and transactions.

The deployment has three tables, one per concept (docs/deploy.md): the catalog
(``arcs.adapters.aws.catalog``), the leases and compaction jobs (``arcs.adapters.aws.leases``)
and the tokens (``arcs.adapters.aws.tokens``). Names never contain ``#`` (``arcs.names``), so
the composite keys cannot collide. Every read is strongly consistent: the commit protocol and
readers listing new files depend on it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from arcs.errors import StorageFault

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        PutTypeDef,
        QueryInputTypeDef,
        TransactWriteItemTypeDef,
        WriteRequestTypeDef,
    )

# Markers and commit records only matter while SQS may redeliver (14 days at most).
RECORD_TTL = timedelta(days=15)
TTL_ATTRIBUTE = "expires_at"
BATCH_GET_LIMIT = 100
BATCH_WRITE_LIMIT = 25
# boto3 clients are thread-safe; a few concurrent puts keep a big backfill's commit short.
PUT_WORKERS = 8
MAX_ATTEMPTS = 8
NO_SORT = "#"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, "AttributeValueTypeDef"]


def to_item(values: Mapping[str, object]) -> Item:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def item_key(pk: str, sk: str) -> Item:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def utc_now() -> datetime:
    return datetime.now(UTC)


def expiry() -> int:
    return int((utc_now() + RECORD_TTL).timestamp())


def backoff(attempt: int) -> None:
    time.sleep(min(0.02 * 2**attempt, 1.0))


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def cancel_codes(exc: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction, in item order ('None' for fine items)."""
    reasons = exc.response.get("CancellationReasons", [])
    return [str(reason.get("Code", "None")) for reason in reasons]


class DynamoTable:
    """One table; ``table_name`` may be empty in a function the stack gives no such table."""

    def __init__(self, client: DynamoDBClient, table_name: str, page_size: int | None = None) -> None:
        self.client = client
        self._table_name = table_name
        # Only tests set a page size: it makes pagination happen with a handful of items.
        self.page_size = page_size

    @property
    def table(self) -> str:
        # Each function gets only the tables it needs: using another is a wiring bug, said plainly.
        if not self._table_name:
            raise StorageFault(f"{type(self).__name__}: no DynamoDB table is configured in this environment")
        return self._table_name

    def _fault(self, action: str, exc: Exception) -> StorageFault:
        return StorageFault(f"DynamoDB {action} on {self._table_name} failed: {exc}")

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        try:
            response = self.client.get_item(TableName=self.table, Key=item_key(pk, sk), ConsistentRead=True)
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("get", exc) from exc
        item = response.get("Item")
        return None if item is None else from_item(item)

    def _query(
        self, pk: str, condition: str = "", values: Mapping[str, str] | None = None, descending: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Items of one partition in sort-key order; ``condition`` further limits ``sk``."""
        expression = "pk = :pk" + (f" AND {condition}" if condition else "")
        request: QueryInputTypeDef = {
            "TableName": self.table,
            "KeyConditionExpression": expression,
            "ExpressionAttributeValues": to_item({":pk": pk, **(values or {})}),
            "ConsistentRead": True,
            "ScanIndexForward": not descending,
        }
        if self.page_size:
            request["Limit"] = self.page_size
        while True:
            try:
                response = self.client.query(**request)
            except (ClientError, BotoCoreError) as exc:
                raise self._fault("query", exc) from exc
            for item in response.get("Items", []):
                yield from_item(item)
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def _put(
        self,
        values: Mapping[str, object],
        condition: str,
        names: Mapping[str, str] | None = None,
        args: Mapping[str, object] | None = None,
    ) -> bool:
        """A conditional put; False when the condition does not hold."""
        request: dict[str, Any] = {"TableName": self.table, "Item": to_item(values), "ConditionExpression": condition}
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        if args:
            request["ExpressionAttributeValues"] = to_item(args)
        try:
            self.client.put_item(**request)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._fault("conditional put", exc) from exc
        except BotoCoreError as exc:
            raise self._fault("conditional put", exc) from exc
        return True

    def _delete_if(
        self, pk: str, sk: str, condition: str, args: Mapping[str, object], names: Mapping[str, str]
    ) -> bool:
        try:
            self.client.delete_item(
                TableName=self.table,
                Key=item_key(pk, sk),
                ConditionExpression=condition,
                ExpressionAttributeNames=dict(names),
                ExpressionAttributeValues=to_item(args),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._fault("conditional delete", exc) from exc
        except BotoCoreError as exc:
            raise self._fault("conditional delete", exc) from exc
        return True

    def _batch_write(self, requests: Sequence[WriteRequestTypeDef]) -> None:
        """Unconditional puts and deletes, 25 to a request, retrying what DynamoDB leaves unprocessed."""
        for start in range(0, len(requests), BATCH_WRITE_LIMIT):
            pending = list(requests[start : start + BATCH_WRITE_LIMIT])
            for attempt in range(MAX_ATTEMPTS):
                try:
                    response = self.client.batch_write_item(RequestItems={self.table: pending})
                except (ClientError, BotoCoreError) as exc:
                    raise self._fault("batch write", exc) from exc
                # What comes back is what was sent (the output type differs only in name).
                pending = cast("list[WriteRequestTypeDef]", response.get("UnprocessedItems", {}).get(self.table, []))
                if not pending:
                    break
                backoff(attempt)
            else:
                raise StorageFault(f"DynamoDB left {len(pending)} writes unprocessed after {MAX_ATTEMPTS} attempts")

    def _delete_keys(self, keys: Iterable[tuple[str, str]]) -> None:
        self._batch_write([{"DeleteRequest": {"Key": item_key(pk, sk)}} for pk, sk in keys])

    def _transact(self, items: Sequence[TransactWriteItemTypeDef]) -> list[str] | None:
        """Run one transaction: None when it committed, else the per-item cancellation codes."""
        try:
            self.client.transact_write_items(TransactItems=list(items))
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return cancel_codes(exc) or ["Unknown"] * len(items)
            raise self._fault("transaction", exc) from exc
        except BotoCoreError as exc:
            raise self._fault("transaction", exc) from exc
        return None

    def next_id(self, counter_pk: str) -> int:
        """An atomic counter: ids count up from 1 and are never handed out twice."""
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key=item_key(counter_pk, NO_SORT),
                UpdateExpression="ADD next_id :one",
                ExpressionAttributeValues=to_item({":one": 1}),
                ReturnValues="UPDATED_NEW",
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("counter update", exc) from exc
        return int(from_item(response["Attributes"])["next_id"])


def put_op(table: str, values: Mapping[str, object], condition: str = "") -> TransactWriteItemTypeDef:
    put: PutTypeDef = {"TableName": table, "Item": to_item(values)}
    if condition:
        put["ConditionExpression"] = condition
    return {"Put": put}


def id_sort(numeric_id: int) -> str:
    """The sort key of a numbered item: fixed width, so listing order is id order."""
    return f"{numeric_id:012d}"
