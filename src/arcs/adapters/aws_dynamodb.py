"""The catalog and the token store on one DynamoDB table with string keys ``pk`` and ``sk``.

Items (one table keeps the deployment small and lets transactions span kinds):

| kind | pk | sk | attributes |
|---|---|---|---|
| schema | ``SCHEMA#{db}`` | ``{measurement}`` | columns (map), tags (list), version |
| database | ``DATABASES`` | ``{name}`` | created_at |
| data file | ``FILES#{db}#{measurement}`` | ``{YYYY-MM-DDTHH}#{key}`` | the ``FileRecord`` fields |
| write marker | ``WRITE#{write_id}`` | ``#`` | commit_id, updated_at, expires_at (TTL) |
| commit | ``COMMIT#{commit_id}`` | ``#`` | status, files (JSON text), expires_at (TTL) |
| compacted file | ``FILES#{db}#{measurement}`` | ``{YYYY-MM-DDTHH}#{key}`` | replaced_by, expires_at (TTL); hidden |
| compaction commit | ``COMPACTION#{db}#{measurement}`` | ``{YYYY-MM-DDTHH}`` | version, job_id, settled, in/outputs |
| lease | ``LEASE#{name}`` | ``#`` | owner, until (epoch seconds), expires_at (TTL) |
| compaction job | ``CJOBS`` / ``CJOBS#ACTIVE`` | ``{job_id}`` | the job as JSON text; history items expire (TTL) |
| database drop | ``DROP#{db}`` | ``#`` | measurements (list): what a dropping database had, until it is gone |
| token | ``TOKENS`` | ``{token_id}`` | the ``TokenRecord`` fields, bytes as Binary |
| token lookup | ``TOKENLOOKUP#{lookup}`` | ``{token_id}`` | a copy of the token, so auth is one query |
| continuous query | ``CQ`` | ``{query_id:012d}`` | definition (JSON text), database, name, version |
| query id counter | ``CQCOUNTER`` | ``#`` | next_id: the last id handed out |
| its name | ``CQNAME#{db}`` | ``{name}`` | query_id: keeps names unique per database |
| its progress | ``CQPROGRESS#{query_id}`` | ``#`` | processed_until_us |
| its execution | ``CQRUN#{query_id}`` | ``{started_at}#{execution_id}`` | record (JSON text), expires_at (TTL) |

Names never contain ``#`` (``arcs.names``), so the composite keys cannot collide. Every read is
strongly consistent: the commit protocol and readers listing new files depend on it.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from arcs.adapters.records import (
    CQ_EXECUTION_RETENTION,
    RETENTION_EXECUTION_RETENTION,
    apply_compactions,
    cq_from_json,
    cq_to_json,
    execution_from_json,
    execution_to_json,
    file_from_json,
    file_to_json,
    hour_text,
    job_from_json,
    job_to_json,
    policy_from_json,
    policy_to_json,
    retention_execution_from_json,
    retention_execution_to_json,
    sortable_time,
)
from arcs.errors import StorageFault
from arcs.ports import (
    CommitRecord,
    CompactionJob,
    CompactionState,
    ContinuousQuery,
    CQExecution,
    FileRecord,
    MeasurementSchema,
    Partition,
    RetentionExecution,
    RetentionPolicy,
    TokenRecord,
)

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
_PUT_WORKERS = 8
_MAX_ATTEMPTS = 8
_NO_SORT = "#"
#: How often ``list_files`` reads again when a compaction commit lands while it lists.
_LIST_ATTEMPTS = 5
_JOBS = "CJOBS"
_ACTIVE_JOBS = "CJOBS#ACTIVE"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, "AttributeValueTypeDef"]


def _item(values: Mapping[str, object]) -> Item:
    return {name: _serializer.serialize(value) for name, value in values.items()}


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def _key(pk: str, sk: str) -> Item:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _now() -> datetime:
    return datetime.now(UTC)


def _expiry() -> int:
    return int((_now() + RECORD_TTL).timestamp())


def _backoff(attempt: int) -> None:
    time.sleep(min(0.02 * 2**attempt, 1.0))


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _cancel_codes(exc: ClientError) -> list[str]:
    """Per-item reasons of a cancelled transaction, in item order ('None' for fine items)."""
    reasons = exc.response.get("CancellationReasons", [])
    return [str(reason.get("Code", "None")) for reason in reasons]


class _Table:
    def __init__(self, client: DynamoDBClient, table_name: str, page_size: int | None = None) -> None:
        self.client = client
        self.table = table_name
        # Only tests set a page size: it makes pagination happen with a handful of items.
        self.page_size = page_size

    def _fault(self, action: str, exc: Exception) -> StorageFault:
        return StorageFault(f"DynamoDB {action} on {self.table} failed: {exc}")

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        try:
            response = self.client.get_item(TableName=self.table, Key=_key(pk, sk), ConsistentRead=True)
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("get", exc) from exc
        item = response.get("Item")
        return None if item is None else _plain(item)

    def _query(
        self, pk: str, condition: str = "", values: Mapping[str, str] | None = None, descending: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Items of one partition in sort-key order; ``condition`` further limits ``sk``."""
        expression = "pk = :pk" + (f" AND {condition}" if condition else "")
        request: QueryInputTypeDef = {
            "TableName": self.table,
            "KeyConditionExpression": expression,
            "ExpressionAttributeValues": _item({":pk": pk, **(values or {})}),
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
                yield _plain(item)
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
        request: dict[str, Any] = {"TableName": self.table, "Item": _item(values), "ConditionExpression": condition}
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        if args:
            request["ExpressionAttributeValues"] = _item(args)
        try:
            self.client.put_item(**request)
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
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
                Key=_key(pk, sk),
                ConditionExpression=condition,
                ExpressionAttributeNames=dict(names),
                ExpressionAttributeValues=_item(args),
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._fault("conditional delete", exc) from exc
        except BotoCoreError as exc:
            raise self._fault("conditional delete", exc) from exc
        return True

    def _batch_write(self, requests: Sequence[WriteRequestTypeDef]) -> None:
        """Unconditional puts and deletes, 25 to a request, retrying what DynamoDB leaves unprocessed."""
        for start in range(0, len(requests), BATCH_WRITE_LIMIT):
            pending = list(requests[start : start + BATCH_WRITE_LIMIT])
            for attempt in range(_MAX_ATTEMPTS):
                try:
                    response = self.client.batch_write_item(RequestItems={self.table: pending})
                except (ClientError, BotoCoreError) as exc:
                    raise self._fault("batch write", exc) from exc
                # What comes back is what was sent (the output type differs only in name).
                pending = cast("list[WriteRequestTypeDef]", response.get("UnprocessedItems", {}).get(self.table, []))
                if not pending:
                    break
                _backoff(attempt)
            else:
                raise StorageFault(f"DynamoDB left {len(pending)} writes unprocessed after {_MAX_ATTEMPTS} attempts")

    def _delete_keys(self, keys: Iterable[tuple[str, str]]) -> None:
        self._batch_write([{"DeleteRequest": {"Key": _key(pk, sk)}} for pk, sk in keys])

    def _transact(self, items: Sequence[TransactWriteItemTypeDef]) -> list[str] | None:
        """Run one transaction: None when it committed, else the per-item cancellation codes."""
        try:
            self.client.transact_write_items(TransactItems=list(items))
        except ClientError as exc:
            if _code(exc) == "TransactionCanceledException":
                return _cancel_codes(exc) or ["Unknown"] * len(items)
            raise self._fault("transaction", exc) from exc
        except BotoCoreError as exc:
            raise self._fault("transaction", exc) from exc
        return None


def _put_op(table: str, values: Mapping[str, object], condition: str = "") -> TransactWriteItemTypeDef:
    put: PutTypeDef = {"TableName": table, "Item": _item(values)}
    if condition:
        put["ConditionExpression"] = condition
    return {"Put": put}


def _drop_pk(database: str) -> str:
    return f"DROP#{database}"


def _files_pk(database: str, measurement: str) -> str:
    return f"FILES#{database}#{measurement}"


def _compaction_pk(database: str, measurement: str) -> str:
    return f"COMPACTION#{database}#{measurement}"


def _states_in(
    table: _Table, database: str, measurement: str, first: str | None, last: str | None
) -> dict[str, CompactionState]:
    """The compaction commit records of the hours in [first, last] (hour texts), by hour."""
    pk = _compaction_pk(database, measurement)
    if first is not None and last is not None:
        items = table._query(pk, "sk BETWEEN :lo AND :hi", {":lo": first, ":hi": last})
    elif first is not None:
        items = table._query(pk, "sk >= :lo", {":lo": first})
    elif last is not None:
        items = table._query(pk, "sk <= :hi", {":hi": last})
    else:
        items = table._query(pk)
    return {str(item["sk"]): _state(item) for item in items}


def _state(item: Mapping[str, Any]) -> CompactionState:
    return CompactionState(
        version=int(item["version"]),
        job_id=str(item["job_id"]),
        settled=bool(item["settled"]),
        inputs=tuple(json.loads(str(item.get("inputs", "[]")))),
        outputs=tuple(file_from_json(f) for f in json.loads(str(item.get("outputs", "[]")))),
    )


def _schema(item: Mapping[str, Any]) -> MeasurementSchema:
    return MeasurementSchema(
        database=str(item["database"]),
        measurement=str(item["measurement"]),
        columns={str(name): str(kind) for name, kind in item["columns"].items()},
        tags=tuple(str(tag) for tag in item["tags"]),
        version=int(item["version"]),
    )


class DynamoCatalog(_Table):
    # --- schemas and databases -------------------------------------------------------------
    def get_schema(self, database: str, measurement: str) -> MeasurementSchema | None:
        item = self._get(f"SCHEMA#{database}", measurement)
        return None if item is None else _schema(item)

    def put_schema(self, schema: MeasurementSchema, expected_version: int | None) -> bool:
        values = {
            "pk": f"SCHEMA#{schema.database}",
            "sk": schema.measurement,
            "database": schema.database,
            "measurement": schema.measurement,
            "columns": dict(schema.columns),
            "tags": list(schema.tags),
            "version": (expected_version or 0) + 1,
        }
        put = _put_op(self.table, values)
        if expected_version is None:
            put["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["Put"]["ConditionExpression"] = "#version = :expected"
            put["Put"]["ExpressionAttributeNames"] = {"#version": "version"}
            put["Put"]["ExpressionAttributeValues"] = _item({":expected": expected_version})
        # Registering the database in the same transaction: a schema never exists without it.
        register: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self.table,
                "Key": _key("DATABASES", schema.database),
                "UpdateExpression": "SET created_at = if_not_exists(created_at, :now)",
                "ExpressionAttributeValues": _item({":now": _now().isoformat()}),
            }
        }
        codes = self._transact([put, register])
        if codes is None:
            return True
        if codes[0] == "ConditionalCheckFailed":
            return False
        raise StorageFault(f"DynamoDB schema update of {schema.database}.{schema.measurement} cancelled: {codes}")

    def list_schemas(self, database: str | None = None) -> list[MeasurementSchema]:
        databases = [database] if database else self.list_databases()
        return [_schema(item) for name in databases for item in self._query(f"SCHEMA#{name}")]

    def create_database(self, name: str) -> bool:
        return self._put({"pk": "DATABASES", "sk": name, "created_at": _now().isoformat()}, "attribute_not_exists(pk)")

    def list_databases(self) -> list[str]:
        return [str(item["sk"]) for item in self._query("DATABASES")]

    def drop_database(self, name: str) -> bool:
        # File records are found by measurement. Once the schemas are gone nothing else names
        # the measurements, so a journal item lists them first: a call retried after a crash
        # finds every file partition the crashed one did not get to.
        journal = self._get(_drop_pk(name), _NO_SORT)
        measurements = {str(item["sk"]) for item in self._query(f"SCHEMA#{name}")}
        if journal is not None:
            measurements |= {str(m) for m in journal.get("measurements", [])}
        registered = self._get("DATABASES", name) is not None
        if not measurements and not registered and journal is None:
            return False
        if measurements:
            entry = {"pk": _drop_pk(name), "sk": _NO_SORT, "measurements": sorted(measurements)}
            self._batch_write([{"PutRequest": {"Item": _item({**entry, "created_at": _now().isoformat()})}}])
        # Schemas first: a measurement without a schema is not queryable, so from here on no
        # reader can see a measurement whose file records are half deleted.
        self._delete_keys((f"SCHEMA#{name}", measurement) for measurement in sorted(measurements))
        for measurement in sorted(measurements):
            for pk in (_compaction_pk(name, measurement), _files_pk(name, measurement)):
                self._delete_keys([(pk, str(item["sk"])) for item in self._query(pk)])
        self._delete_keys([("DATABASES", name), (_drop_pk(name), _NO_SORT)])
        return True

    # --- committed data files ---------------------------------------------------------------
    def put_files(self, files: Sequence[FileRecord]) -> None:
        # One conditional put per file keeps the first record of a key, like the SQLite catalog.
        # Not a transaction: files need no atomicity (the commit record is the commit point), and
        # moto copies the whole table for every transaction item, which grows quadratically.
        items: dict[tuple[str, str], dict[str, object]] = {}
        for record in files:
            pk = _files_pk(record.database, record.measurement)
            sk = f"{hour_text(record.hour)}#{record.key}"
            items.setdefault((pk, sk), {"pk": pk, "sk": sk, **file_to_json(record)})
        if len(items) <= 1:
            for values in items.values():
                self._put(values, "attribute_not_exists(pk)")
            return
        with ThreadPoolExecutor(max_workers=min(_PUT_WORKERS, len(items))) as pool:
            # list() surfaces the first StorageFault raised by any worker.
            list(pool.map(lambda values: self._put(values, "attribute_not_exists(pk)"), items.values()))

    def list_files(
        self,
        database: str,
        measurement: str,
        first_hour: datetime | None = None,
        last_hour: datetime | None = None,
    ) -> list[FileRecord]:
        first = None if first_hour is None else hour_text(first_hour)
        last = None if last_hour is None else hour_text(last_hour)
        if first is not None and last is not None and first > last:
            return []
        # A query is no snapshot: a compaction could commit and move records while the files are
        # read. Reading the commit records before and after shows whether one did; if so, again.
        for attempt in range(_LIST_ATTEMPTS):
            before = _states_in(self, database, measurement, first, last)
            items = list(self._file_items(database, measurement, first, last))
            after = _states_in(self, database, measurement, first, last)
            if {h: s.version for h, s in before.items()} == {h: s.version for h, s in after.items()}:
                files = [file_from_json(item) for item in items if "replaced_by" not in item]
                return apply_compactions(files, [state for state in before.values() if not state.settled])
            _backoff(attempt)
        raise StorageFault(f"files of {database}.{measurement} kept changing while being listed")

    def _file_items(self, database: str, measurement: str, first: str | None, last: str | None) -> Iterator[Any]:
        # Sort keys are "{hour}#{key}": "#" < "$", so "{hour}$" sorts after every key of that hour.
        lower = None if first is None else f"{first}#"
        upper = None if last is None else f"{last}$"
        pk = _files_pk(database, measurement)
        if lower is not None and upper is not None:
            return self._query(pk, "sk BETWEEN :lo AND :hi", {":lo": lower, ":hi": upper})
        if lower is not None:
            return self._query(pk, "sk >= :lo", {":lo": lower})
        if upper is not None:
            return self._query(pk, "sk < :hi", {":hi": upper})
        return self._query(pk)

    def delete_files(self, files: Sequence[FileRecord]) -> None:
        # A retired record, as settle_compaction leaves an input's: put_files keeps it retired.
        marker = {"replaced_by": "deleted", TTL_ATTRIBUTE: _expiry()}
        keys = {(_files_pk(f.database, f.measurement), f"{hour_text(f.hour)}#{f.key}") for f in files}
        self._batch_write([{"PutRequest": {"Item": _item({"pk": pk, "sk": sk, **marker})}} for pk, sk in sorted(keys)])

    # --- the ingest commit protocol ----------------------------------------------------------
    def get_markers(self, write_ids: Iterable[str]) -> dict[str, str]:
        ids = list(dict.fromkeys(write_ids))  # BatchGetItem refuses duplicate keys
        found: dict[str, str] = {}
        for start in range(0, len(ids), BATCH_GET_LIMIT):
            keys = [_key(f"WRITE#{write_id}", _NO_SORT) for write_id in ids[start : start + BATCH_GET_LIMIT]]
            for attempt in range(_MAX_ATTEMPTS):
                try:
                    response = self.client.batch_get_item(
                        RequestItems={
                            self.table: {
                                "Keys": keys,
                                "ConsistentRead": True,
                                "ProjectionExpression": "pk, commit_id",
                            }
                        }
                    )
                except (ClientError, BotoCoreError) as exc:
                    raise self._fault("batch get", exc) from exc
                for raw in response.get("Responses", {}).get(self.table, []):
                    item = _plain(raw)
                    found[str(item["pk"]).removeprefix("WRITE#")] = str(item["commit_id"])
                unprocessed = response.get("UnprocessedKeys", {}).get(self.table)
                if not unprocessed or not unprocessed.get("Keys"):
                    break
                keys = list(unprocessed["Keys"])
                _backoff(attempt)
            else:
                raise StorageFault(f"DynamoDB left {len(keys)} write markers unread after {_MAX_ATTEMPTS} attempts")
        return found

    def swap_marker(self, write_id: str, expected: str | None, commit_id: str) -> bool:
        values = {
            "pk": f"WRITE#{write_id}",
            "sk": _NO_SORT,
            "commit_id": commit_id,
            "updated_at": _now().isoformat(),
            TTL_ATTRIBUTE: _expiry(),
        }
        if expected is None:
            return self._put(values, "attribute_not_exists(pk)")
        return self._put(values, "#commit = :expected", {"#commit": "commit_id"}, {":expected": expected})

    def swap_markers(self, claims: Sequence[tuple[str, str | None]], commit_id: str) -> set[str]:
        if len(claims) <= 1:
            return {write_id for write_id, expected in claims if self.swap_marker(write_id, expected, commit_id)}
        with ThreadPoolExecutor(max_workers=min(_PUT_WORKERS, len(claims))) as pool:
            won = pool.map(lambda claim: self.swap_marker(claim[0], claim[1], commit_id), claims)
            return {write_id for (write_id, _expected), ok in zip(claims, won, strict=True) if ok}

    def get_commit(self, commit_id: str) -> CommitRecord | None:
        item = self._get(f"COMMIT#{commit_id}", _NO_SORT)
        if item is None:
            return None
        files = tuple(file_from_json(data) for data in json.loads(str(item["files"])))
        return CommitRecord(commit_id, item["status"], files)

    def put_commit_if_absent(self, record: CommitRecord) -> bool:
        values = {
            "pk": f"COMMIT#{record.commit_id}",
            "sk": _NO_SORT,
            "status": record.status,
            # JSON text, not nested maps: the record is read whole and never queried inside.
            "files": json.dumps([file_to_json(f) for f in record.files]),
            "created_at": _now().isoformat(),
            TTL_ATTRIBUTE: _expiry(),
        }
        return self._put(values, "attribute_not_exists(pk)")

    # --- continuous queries (docs/continuous_queries.md) ---------------------------------------
    def create_continuous_query(self, query: ContinuousQuery, processed_until_us: int) -> ContinuousQuery | None:
        query = replace(query, query_id=self._next_id(_CQ_COUNTER_PK))
        codes = self._transact(
            [
                _put_op(self.table, _cq_values(query), "attribute_not_exists(pk)"),
                _put_op(self.table, _cq_name_values(query), "attribute_not_exists(pk)"),
                _put_op(self.table, _cq_progress_values(query.query_id, processed_until_us)),
            ]
        )
        if codes is None:
            return query
        if "ConditionalCheckFailed" in codes:
            return None
        raise StorageFault(f"DynamoDB creation of continuous query {query.name!r} cancelled: {codes}")

    def _next_id(self, counter_pk: str) -> int:
        """An atomic counter: ids count up from 1 and are never handed out twice."""
        try:
            response = self.client.update_item(
                TableName=self.table,
                Key=_key(counter_pk, _NO_SORT),
                UpdateExpression="ADD next_id :one",
                ExpressionAttributeValues=_item({":one": 1}),
                ReturnValues="UPDATED_NEW",
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._fault("counter update", exc) from exc
        return int(_plain(response["Attributes"])["next_id"])

    def get_continuous_query(self, query_id: int) -> ContinuousQuery | None:
        item = self._get(_CQ_PK, _cq_sort(query_id))
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
        definition = _put_op(self.table, _cq_values(stored), "#version = :expected")
        definition["Put"]["ExpressionAttributeNames"] = {"#version": "version"}
        definition["Put"]["ExpressionAttributeValues"] = _item({":expected": expected_version})
        ops: list[TransactWriteItemTypeDef] = [definition]
        if (current.database, current.name) != (stored.database, stored.name):
            ops += [
                _put_op(self.table, _cq_name_values(stored), "attribute_not_exists(pk)"),
                {"Delete": {"TableName": self.table, "Key": _key(_cq_name_pk(current.database), current.name)}},
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
                {"Delete": {"TableName": self.table, "Key": _key(_CQ_PK, _cq_sort(query_id))}},
                {"Delete": {"TableName": self.table, "Key": _key(_cq_name_pk(current.database), current.name)}},
                {"Delete": {"TableName": self.table, "Key": _key(_cq_progress_pk(query_id), _NO_SORT)}},
            ]
        )
        if codes is not None:
            raise StorageFault(f"DynamoDB deletion of continuous query {current.name!r} cancelled: {codes}")
        pk = _cq_runs_pk(query_id)
        self._delete_keys([(pk, str(item["sk"])) for item in self._query(pk)])
        return True

    def get_cq_progress(self, query_id: int) -> int | None:
        item = self._get(_cq_progress_pk(query_id), _NO_SORT)
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
        self._batch_write([{"PutRequest": {"Item": _item(values)}}])

    def list_cq_executions(self, query_id: int, limit: int = 100) -> list[CQExecution]:
        request: QueryInputTypeDef = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": _item({":pk": _cq_runs_pk(query_id)}),
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
            found += [execution_from_json(json.loads(str(_plain(item)["record"]))) for item in response["Items"]]
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            request["ExclusiveStartKey"] = last
        return found[:limit]

    # --- compaction ------------------------------------------------------------------------------
    def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        now = time.time()
        values = {
            "pk": f"LEASE#{name}",
            "sk": _NO_SORT,
            "owner": owner,
            "until": Decimal(str(round(now + ttl_s, 3))),
            TTL_ATTRIBUTE: int(now + ttl_s + 86_400),  # only tidies the table; ``until`` decides
        }
        return self._put(
            values,
            "attribute_not_exists(pk) OR #until < :now OR #owner = :owner",
            {"#until": "until", "#owner": "owner"},
            {":now": Decimal(str(round(now, 3))), ":owner": owner},
        )

    def release_lease(self, name: str, owner: str) -> None:
        self._delete_if(f"LEASE#{name}", _NO_SORT, "#owner = :owner", {":owner": owner}, {"#owner": "owner"})

    def get_compaction_state(self, partition: Partition) -> CompactionState | None:
        item = self._get(_compaction_pk(partition.database, partition.measurement), hour_text(partition.hour))
        return None if item is None else _state(item)

    def commit_compaction(self, partition: Partition, state: CompactionState) -> bool:
        values = {
            "pk": _compaction_pk(partition.database, partition.measurement),
            "sk": hour_text(partition.hour),
            "version": state.version,
            "job_id": state.job_id,
            "settled": False,
            "inputs": json.dumps(list(state.inputs)),
            "outputs": json.dumps([file_to_json(f) for f in state.outputs]),
        }
        if state.version == 1:
            return self._put(values, "attribute_not_exists(pk)")
        return self._put(
            values,
            "#version = :previous AND settled = :yes",
            {"#version": "version"},
            {":previous": state.version - 1, ":yes": True},
        )

    def settle_compaction(self, partition: Partition, state: CompactionState) -> None:
        current = self.get_compaction_state(partition)
        if current is None or current.settled or (current.version, current.job_id) != (state.version, state.job_id):
            return
        self.put_files(state.outputs)
        # The inputs' records stay as markers that are never listed until a late ingest
        # roll-forward can no longer put them back (put_files keeps an existing item).
        pk = _files_pk(partition.database, partition.measurement)
        marker = {"replaced_by": state.job_id, TTL_ATTRIBUTE: _expiry()}
        self._batch_write(
            [
                {"PutRequest": {"Item": _item({"pk": pk, "sk": f"{hour_text(partition.hour)}#{key}", **marker})}}
                for key in state.inputs
            ]
        )
        self._put(
            {
                "pk": _compaction_pk(partition.database, partition.measurement),
                "sk": hour_text(partition.hour),
                "version": state.version,
                "job_id": state.job_id,
                "settled": True,
            },
            "#version = :version AND job_id = :job",
            {"#version": "version"},
            {":version": state.version, ":job": state.job_id},
        )

    def put_compaction_job(self, job: CompactionJob) -> None:
        body = json.dumps(job_to_json(job))
        history = {"pk": _JOBS, "sk": job.job_id, "body": body, TTL_ATTRIBUTE: _expiry()}
        requests: list[WriteRequestTypeDef] = [{"PutRequest": {"Item": _item(history)}}]
        if job.active:
            requests.append({"PutRequest": {"Item": _item({"pk": _ACTIVE_JOBS, "sk": job.job_id, "body": body})}})
        else:
            requests.append({"DeleteRequest": {"Key": _key(_ACTIVE_JOBS, job.job_id)}})
        self._batch_write(requests)

    def get_compaction_job(self, job_id: str) -> CompactionJob | None:
        item = self._get(_JOBS, job_id)
        return None if item is None else job_from_json(json.loads(str(item["body"])))

    def list_compaction_jobs(self, active: bool = False, limit: int = 100) -> list[CompactionJob]:
        items = self._query(_ACTIVE_JOBS if active else _JOBS, descending=True)
        return [job_from_json(json.loads(str(item["body"]))) for item in itertools.islice(items, limit)]

    # --- retention policies (docs/retention_and_delete.md) ---------------------------------------
    def create_retention_policy(self, policy: RetentionPolicy) -> RetentionPolicy | None:
        policy = replace(policy, policy_id=self._next_id(_POLICY_COUNTER_PK))
        codes = self._transact(
            [
                _put_op(self.table, _policy_values(policy), "attribute_not_exists(pk)"),
                _put_op(self.table, _policy_name_values(policy), "attribute_not_exists(pk)"),
            ]
        )
        if codes is None:
            return policy
        if "ConditionalCheckFailed" in codes:
            return None
        raise StorageFault(f"DynamoDB creation of retention policy {policy.name!r} cancelled: {codes}")

    def get_retention_policy(self, policy_id: int) -> RetentionPolicy | None:
        item = self._get(_POLICY_PK, _cq_sort(policy_id))
        return None if item is None else policy_from_json(json.loads(str(item["definition"])))

    def list_retention_policies(self, database: str | None = None) -> list[RetentionPolicy]:
        found = [policy_from_json(json.loads(str(item["definition"]))) for item in self._query(_POLICY_PK)]
        return sorted(
            (policy for policy in found if database is None or policy.database == database),
            key=lambda policy: (policy.database, policy.name),
        )

    def update_retention_policy(self, policy: RetentionPolicy) -> bool:
        current = self.get_retention_policy(policy.policy_id)
        if current is None:
            return False
        ops: list[TransactWriteItemTypeDef] = [_put_op(self.table, _policy_values(policy), "attribute_exists(pk)")]
        if (current.database, current.name) != (policy.database, policy.name):
            ops += [
                _put_op(self.table, _policy_name_values(policy), "attribute_not_exists(pk)"),
                {"Delete": {"TableName": self.table, "Key": _key(_policy_name_pk(current.database), current.name)}},
            ]
        codes = self._transact(ops)
        if codes is None:
            return True
        if "ConditionalCheckFailed" in codes or "TransactionConflict" in codes:
            return False
        raise StorageFault(f"DynamoDB update of retention policy {policy.name!r} cancelled: {codes}")

    def delete_retention_policy(self, policy_id: int) -> bool:
        current = self.get_retention_policy(policy_id)
        if current is None:
            return False
        # One transaction: a policy is never gone while its name stays taken.
        codes = self._transact(
            [
                {"Delete": {"TableName": self.table, "Key": _key(_POLICY_PK, _cq_sort(policy_id))}},
                {"Delete": {"TableName": self.table, "Key": _key(_policy_name_pk(current.database), current.name)}},
            ]
        )
        if codes is not None:
            raise StorageFault(f"DynamoDB deletion of retention policy {current.name!r} cancelled: {codes}")
        pk = _policy_runs_pk(policy_id)
        self._delete_keys([(pk, str(item["sk"])) for item in self._query(pk)])
        return True

    def put_retention_execution(self, execution: RetentionExecution) -> None:
        values = {
            "pk": _policy_runs_pk(execution.policy_id),
            "sk": f"{sortable_time(execution.started_at)}#{execution.execution_id}",
            "record": json.dumps(retention_execution_to_json(execution)),
            TTL_ATTRIBUTE: int((execution.started_at + RETENTION_EXECUTION_RETENTION).timestamp()),
        }
        self._batch_write([{"PutRequest": {"Item": _item(values)}}])

    def list_retention_executions(self, policy_id: int, limit: int = 100) -> list[RetentionExecution]:
        items = self._query(_policy_runs_pk(policy_id), descending=True)  # sort keys start with the start time
        return [
            retention_execution_from_json(json.loads(str(item["record"]))) for item in itertools.islice(items, limit)
        ]


def _token_values(record: TokenRecord) -> dict[str, object]:
    return {
        "token_id": record.token_id,
        "name": record.name,
        "description": record.description,
        "lookup": record.lookup,
        "salt": record.salt,
        "secret_hash": record.secret_hash,
        "permissions": list(record.permissions),
        "databases": list(record.databases),
        "created_at": record.created_at.isoformat(),
        "token_expires_at": None if record.expires_at is None else record.expires_at.isoformat(),
        "revoked": record.revoked,
    }


def _binary(value: Any) -> bytes:
    # The deserializer wraps Binary values; its ``value`` holds the bytes.
    return bytes(getattr(value, "value", value))


def _token(item: Mapping[str, Any]) -> TokenRecord:
    expires = item.get("token_expires_at")
    return TokenRecord(
        token_id=str(item["token_id"]),
        name=str(item["name"]),
        description=str(item["description"]),
        lookup=str(item["lookup"]),
        salt=_binary(item["salt"]),
        secret_hash=_binary(item["secret_hash"]),
        permissions=tuple(str(p) for p in item["permissions"]),
        databases=tuple(str(d) for d in item["databases"]),
        created_at=datetime.fromisoformat(str(item["created_at"])),
        expires_at=None if expires is None else datetime.fromisoformat(str(expires)),
        revoked=bool(item["revoked"]),
    )


_TOKENS = "TOKENS"


def _lookup_pk(lookup: str) -> str:
    return f"TOKENLOOKUP#{lookup}"


class DynamoTokenStore(_Table):
    """Tokens by id, plus a copy under their lookup so authentication is a single query.

    The two items change together in one transaction, guarded by the lookup the main item had
    when we read it, so a concurrent change is retried instead of leaving a stale pointer.
    """

    def put(self, record: TokenRecord, previous_lookup: str | None = None) -> None:
        values = _token_values(record)
        for attempt in range(_MAX_ATTEMPTS):
            current = self._get(_TOKENS, record.token_id)
            current_lookup = None if current is None else str(current["lookup"])
            main = _put_op(self.table, {"pk": _TOKENS, "sk": record.token_id, **values})
            if current_lookup is None:
                main["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
            else:
                main["Put"]["ConditionExpression"] = "#lookup = :seen"
                main["Put"]["ExpressionAttributeNames"] = {"#lookup": "lookup"}
                main["Put"]["ExpressionAttributeValues"] = _item({":seen": current_lookup})
            ops: list[TransactWriteItemTypeDef] = [
                main,
                _put_op(self.table, {"pk": _lookup_pk(record.lookup), "sk": record.token_id, **values}),
            ]
            stale = {previous_lookup, current_lookup} - {None, record.lookup}
            ops += [
                {"Delete": {"TableName": self.table, "Key": _key(_lookup_pk(str(old)), record.token_id)}}
                for old in sorted(str(old) for old in stale)
            ]
            codes = self._transact(ops)
            if codes is None:
                return
            if "ConditionalCheckFailed" not in codes and "TransactionConflict" not in codes:
                raise StorageFault(f"DynamoDB token update cancelled: {codes}")
            _backoff(attempt)
        raise StorageFault(f"token {record.token_id} kept changing; giving up after {_MAX_ATTEMPTS} attempts")

    def get(self, token_id: str) -> TokenRecord | None:
        item = self._get(_TOKENS, token_id)
        return None if item is None else _token(item)

    def find(self, lookup: str) -> list[TokenRecord]:
        return [_token(item) for item in self._query(_lookup_pk(lookup))]

    def delete(self, token_id: str) -> bool:
        for attempt in range(_MAX_ATTEMPTS):
            current = self._get(_TOKENS, token_id)
            if current is None:
                return False
            lookup = str(current["lookup"])
            codes = self._transact(
                [
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": _key(_TOKENS, token_id),
                            "ConditionExpression": "#lookup = :seen",
                            "ExpressionAttributeNames": {"#lookup": "lookup"},
                            "ExpressionAttributeValues": _item({":seen": lookup}),
                        }
                    },
                    {"Delete": {"TableName": self.table, "Key": _key(_lookup_pk(lookup), token_id)}},
                ]
            )
            if codes is None:
                return True
            if "ConditionalCheckFailed" not in codes and "TransactionConflict" not in codes:
                raise StorageFault(f"DynamoDB token delete cancelled: {codes}")
            _backoff(attempt)
        raise StorageFault(f"token {token_id} kept changing; giving up after {_MAX_ATTEMPTS} attempts")

    def is_empty(self) -> bool:
        for _item_found in self._query(_TOKENS):
            return False
        return True

    def list(self) -> list[TokenRecord]:
        return sorted((_token(item) for item in self._query(_TOKENS)), key=lambda record: record.created_at)


# --- continuous queries (docs/continuous_queries.md) ---------------------------------------------

_CQ_PK = "CQ"
_CQ_COUNTER_PK = "CQCOUNTER"


def _cq_sort(query_id: int) -> str:
    return f"{query_id:012d}"  # fixed width: listing order is id order


def _cq_name_pk(database: str) -> str:
    return f"CQNAME#{database}"


def _cq_progress_pk(query_id: int) -> str:
    return f"CQPROGRESS#{query_id}"


def _cq_runs_pk(query_id: int) -> str:
    return f"CQRUN#{query_id}"


def _cq_values(query: ContinuousQuery) -> dict[str, object]:
    return {
        "pk": _CQ_PK,
        "sk": _cq_sort(query.query_id),
        "database": query.database,
        "name": query.name,
        "version": query.version,
        # JSON text: the definition is read whole and never queried inside.
        "definition": json.dumps(cq_to_json(query)),
    }


def _cq_name_values(query: ContinuousQuery) -> dict[str, object]:
    return {"pk": _cq_name_pk(query.database), "sk": query.name, "query_id": query.query_id}


def _cq_progress_values(query_id: int, processed_until_us: int) -> dict[str, object]:
    return {"pk": _cq_progress_pk(query_id), "sk": _NO_SORT, "processed_until_us": processed_until_us}


# --- retention policies (docs/retention_and_delete.md) -------------------------------------------

_POLICY_PK = "RETENTION"
_POLICY_COUNTER_PK = "RETENTIONCOUNTER"


def _policy_name_pk(database: str) -> str:
    return f"RETENTIONNAME#{database}"


def _policy_runs_pk(policy_id: int) -> str:
    return f"RETENTIONRUN#{policy_id}"


def _policy_values(policy: RetentionPolicy) -> dict[str, object]:
    return {
        "pk": _POLICY_PK,
        "sk": _cq_sort(policy.policy_id),  # fixed width: listing order is id order
        "database": policy.database,
        "name": policy.name,
        "definition": json.dumps(policy_to_json(policy)),
    }


def _policy_name_values(policy: RetentionPolicy) -> dict[str, object]:
    return {"pk": _policy_name_pk(policy.database), "sk": policy.name, "policy_id": policy.policy_id}
