"""Continuous queries on the catalog table (docs/continuous-queries.md).

| kind | pk | sk | attributes |
|---|---|---|---|
| continuous query | ``CQ`` | ``{query_id:012d}`` | definition (JSON text), database, name, version |
| query id counter | ``CQCOUNTER`` | ``#`` | next_id: the last id handed out |
| its name | ``CQNAME#{db}`` | ``{name}`` | query_id: keeps names unique per database |
| its progress | ``CQPROGRESS#{query_id}`` | ``#`` | processed_until_us |
| its execution | ``CQRUN#{query_id}`` | ``{started_at}#{execution_id}`` | record (JSON text), expires_at (TTL) |

The progress mark is catalog state, not a lease: it says which windows' rows were written, and
it is created and deleted with the definition in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from arcs.adapters.aws.dynamo_table import (
    NO_SORT,
    TTL_ATTRIBUTE,
    DynamoTable,
    from_item,
    id_sort,
    item_key,
    put_op,
    to_item,
)
from arcs.adapters.records import (
    CQ_EXECUTION_RETENTION,
    cq_from_json,
    cq_to_json,
    execution_from_json,
    execution_to_json,
    sortable_time,
)
from arcs.errors import StorageFault
from arcs.ports import ContinuousQuery, CQExecution

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import QueryInputTypeDef, TransactWriteItemTypeDef

_CQ_PK = "CQ"
_CQ_COUNTER_PK = "CQCOUNTER"


def _cq_name_pk(database: str) -> str:
    return f"CQNAME#{database}"


def _cq_progress_pk(query_id: int) -> str:
    return f"CQPROGRESS#{query_id}"


def _cq_runs_pk(query_id: int) -> str:
    return f"CQRUN#{query_id}"


def _cq_values(query: ContinuousQuery) -> dict[str, object]:
    return {
        "pk": _CQ_PK,
        "sk": id_sort(query.query_id),
        "database": query.database,
        "name": query.name,
        "version": query.version,
        # JSON text: the definition is read whole and never queried inside.
        "definition": json.dumps(cq_to_json(query)),
    }


def _cq_name_values(query: ContinuousQuery) -> dict[str, object]:
    return {"pk": _cq_name_pk(query.database), "sk": query.name, "query_id": query.query_id}


def _cq_progress_values(query_id: int, processed_until_us: int) -> dict[str, object]:
    return {"pk": _cq_progress_pk(query_id), "sk": NO_SORT, "processed_until_us": processed_until_us}


class DynamoContinuousQueries(DynamoTable):
    """The continuous-query part of ``DynamoCatalog``."""

    def create_continuous_query(self, query: ContinuousQuery, processed_until_us: int) -> ContinuousQuery | None:
        query = replace(query, query_id=self.next_id(_CQ_COUNTER_PK))
        codes = self._transact(
            [
                put_op(self.table, _cq_values(query), "attribute_not_exists(pk)"),
                put_op(self.table, _cq_name_values(query), "attribute_not_exists(pk)"),
                put_op(self.table, _cq_progress_values(query.query_id, processed_until_us)),
            ]
        )
        if codes is None:
            return query
        if "ConditionalCheckFailed" in codes:
            return None
        raise StorageFault(f"DynamoDB creation of continuous query {query.name!r} cancelled: {codes}")

    def get_continuous_query(self, query_id: int) -> ContinuousQuery | None:
        item = self._get(_CQ_PK, id_sort(query_id))
        return None if item is None else cq_from_json(json.loads(str(item["definition"])))

    def list_continuous_queries(self, database: str | None = None) -> list[ContinuousQuery]:
        found = [cq_from_json(json.loads(str(item["definition"]))) for item in self._query(_CQ_PK)]
        return sorted(
            (query for query in found if database is None or query.database == database),
            key=lambda query: (query.database, query.name),
        )

    def update_continuous_query(self, query: ContinuousQuery, expected_version: int) -> bool:
        current = self.get_continuous_query(query.query_id)
        if current is None or current.version != expected_version:
            return False
        stored = replace(query, version=expected_version + 1)
        definition = put_op(self.table, _cq_values(stored), "#version = :expected")
        definition["Put"]["ExpressionAttributeNames"] = {"#version": "version"}
        definition["Put"]["ExpressionAttributeValues"] = to_item({":expected": expected_version})
        ops: list[TransactWriteItemTypeDef] = [definition]
        if (current.database, current.name) != (stored.database, stored.name):
            ops += [
                put_op(self.table, _cq_name_values(stored), "attribute_not_exists(pk)"),
                {"Delete": {"TableName": self.table, "Key": item_key(_cq_name_pk(current.database), current.name)}},
            ]
        codes = self._transact(ops)
        if codes is None:
            return True
        if "ConditionalCheckFailed" in codes or "TransactionConflict" in codes:
            return False
        raise StorageFault(f"DynamoDB update of continuous query {query.name!r} cancelled: {codes}")

    def delete_continuous_query(self, query_id: int) -> bool:
        current = self.get_continuous_query(query_id)
        if current is None:
            return False
        # One transaction: a definition is never gone while its name stays taken.
        codes = self._transact(
            [
                {"Delete": {"TableName": self.table, "Key": item_key(_CQ_PK, id_sort(query_id))}},
                {"Delete": {"TableName": self.table, "Key": item_key(_cq_name_pk(current.database), current.name)}},
                {"Delete": {"TableName": self.table, "Key": item_key(_cq_progress_pk(query_id), NO_SORT)}},
            ]
        )
        if codes is not None:
            raise StorageFault(f"DynamoDB deletion of continuous query {current.name!r} cancelled: {codes}")
        pk = _cq_runs_pk(query_id)
        self._delete_keys([(pk, str(item["sk"])) for item in self._query(pk)])
        return True

    def get_cq_progress(self, query_id: int) -> int | None:
        item = self._get(_cq_progress_pk(query_id), NO_SORT)
        return None if item is None else int(item["processed_until_us"])

    def set_cq_progress(self, query_id: int, expected_us: int | None, processed_until_us: int) -> bool:
        values = _cq_progress_values(query_id, processed_until_us)
        if expected_us is None:
            return self._put(values, "attribute_exists(pk)")
        return self._put(values, "#until = :expected", {"#until": "processed_until_us"}, {":expected": expected_us})

    def put_cq_execution(self, execution: CQExecution) -> None:
        values = {
            "pk": _cq_runs_pk(execution.query_id),
            "sk": f"{sortable_time(execution.started_at)}#{execution.execution_id}",
            "record": json.dumps(execution_to_json(execution)),
            # Kept as long as the SQLite catalog keeps it: for a while after it started.
            TTL_ATTRIBUTE: int((execution.started_at + CQ_EXECUTION_RETENTION).timestamp()),
        }
        self._batch_write([{"PutRequest": {"Item": to_item(values)}}])

    def list_cq_executions(self, query_id: int, limit: int = 100) -> list[CQExecution]:
        request: QueryInputTypeDef = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": to_item({":pk": _cq_runs_pk(query_id)}),
            "ConsistentRead": True,
            "ScanIndexForward": False,  # newest first: sort keys start with the start time
            "Limit": min(limit, self.page_size or limit),
        }
        found: list[CQExecution] = []
        while len(found) < limit:
            try:
                response = self.client.query(**request)
            except (ClientError, BotoCoreError) as exc:
                raise self._fault("query", exc) from exc
            found += [execution_from_json(json.loads(str(from_item(item)["record"]))) for item in response["Items"]]
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            request["ExclusiveStartKey"] = last
        return found[:limit]
