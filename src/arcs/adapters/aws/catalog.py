"""The catalog on DynamoDB: what data exists, on the catalog table, plus the leases port on the
leases table (``DynamoLeases``), as one ``Catalog``.

Catalog table items (continuous queries and retention policies: their own modules):

| kind | pk | sk | attributes |
|---|---|---|---|
| schema | ``SCHEMA#{db}`` | ``{measurement}`` | columns (map), tags (list), version |
| database | ``DATABASES`` | ``{name}`` | created_at |
| data file | ``FILES#{db}#{measurement}`` | ``{YYYY-MM-DDTHH}#{key}`` | the ``FileRecord`` fields |
| write marker | ``WRITE#{write_id}`` | ``#`` | commit_id, updated_at, expires_at (TTL) |
| commit | ``COMMIT#{commit_id}`` | ``#`` | status, files (JSON text), expires_at (TTL) |
| compacted file | ``FILES#{db}#{measurement}`` | ``{YYYY-MM-DDTHH}#{key}`` | replaced_by, expires_at (TTL); hidden |
| compaction commit | ``COMPACTION#{db}#{m}`` | ``{YYYY-MM-DDTHH}`` | version, job_id, settled, inputs, outputs, swap |
| database drop | ``DROP#{db}`` | ``#`` | measurements (list): what a dropping database had, until it is gone |

Compaction commits stay here, not with the leases: readers list files through them. Every
transaction touches this table only. A commit record written by a transaction of several (a day's
swap) names in ``swap`` (JSON text, hour -> version) the version that transaction gave each of its
records, settled or not: a listing that reads one of them and another below that version has seen
the transaction half applied (a Query is read-committed item by item) and reads again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from arcs.adapters.aws.continuous_queries import DynamoContinuousQueries
from arcs.adapters.aws.dynamo_table import (
    BATCH_GET_LIMIT,
    MAX_ATTEMPTS,
    NO_SORT,
    PUT_WORKERS,
    TTL_ATTRIBUTE,
    DynamoTable,
    backoff,
    expiry,
    from_item,
    item_key,
    put_op,
    to_item,
    utc_now,
)
from arcs.adapters.aws.leases import DynamoLeases
from arcs.adapters.aws.retention import DynamoRetentionPolicies
from arcs.adapters.records import apply_compactions, file_from_json, file_to_json, hour_text
from arcs.errors import StorageFault
from arcs.ports import CommitRecord, CompactionJob, CompactionState, FileRecord, MeasurementSchema, Partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

#: How often ``list_files`` reads again when a compaction commit lands while it lists.
_LIST_ATTEMPTS = 5
_SCHEMAS_PER_TRANSACTION = 50
#: DynamoDB's limit of items in one TransactWriteItems (a day's swap: at most 24 hours).
_MAX_TRANSACTION_ITEMS = 100


def _drop_pk(database: str) -> str:
    return f"DROP#{database}"


def _files_pk(database: str, measurement: str) -> str:
    return f"FILES#{database}#{measurement}"


def _compaction_pk(database: str, measurement: str) -> str:
    return f"COMPACTION#{database}#{measurement}"


def _records_in(
    table: DynamoTable, database: str, measurement: str, first: str | None, last: str | None
) -> dict[str, dict[str, Any]]:
    """The compaction commit records (items) of the hours in [first, last] (hour texts), by hour."""
    pk = _compaction_pk(database, measurement)
    if first is not None and last is not None:
        items = table._query(pk, "sk BETWEEN :lo AND :hi", {":lo": first, ":hi": last})
    elif first is not None:
        items = table._query(pk, "sk >= :lo", {":lo": first})
    elif last is not None:
        items = table._query(pk, "sk <= :hi", {":hi": last})
    else:
        items = table._query(pk)
    return {str(item["sk"]): item for item in items}


def _half_applied(items: Mapping[str, Mapping[str, Any]], first: str | None, last: str | None) -> str | None:
    """An hour in [first, last] whose commit record was read below the version that a transaction,
    named by another record of ``items`` (the records read, by hour), gave it; None when every
    transaction read shows whole. Hours outside the range are not read, nor listed."""
    for hour, item in items.items():
        for member, version in json.loads(str(item.get("swap", "{}"))).items():
            if (first is not None and member < first) or (last is not None and member > last):
                continue
            seen = items.get(member)
            if seen is None or int(seen["version"]) < int(version):
                return f"{member} (its swap named by {hour})"
    return None


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


class DynamoCatalog(DynamoContinuousQueries, DynamoRetentionPolicies):
    """``table``: the catalog table; ``leases_table``: the leases table (empty where a function has none)."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, leases_table: str = "", page_size: int | None = None
    ) -> None:
        super().__init__(client, table_name, page_size)
        self.leases = DynamoLeases(client, leases_table, page_size)

    # --- schemas and databases -------------------------------------------------------------
    def get_schema(self, database: str, measurement: str) -> MeasurementSchema | None:
        item = self._get(f"SCHEMA#{database}", measurement)
        return None if item is None else _schema(item)

    def put_schema(self, schema: MeasurementSchema, expected_version: int | None) -> bool:
        return self.put_schemas([(schema, expected_version)])

    def put_schemas(self, changes: Sequence[tuple[MeasurementSchema, int | None]]) -> bool:
        # A transaction holds at most 100 items: 50 schemas, and at most as many databases to register.
        for start in range(0, len(changes), _SCHEMAS_PER_TRANSACTION):
            chunk = changes[start : start + _SCHEMAS_PER_TRANSACTION]
            if not self._put_schemas(chunk, sorted({schema.database for schema, _version in chunk})):
                return False
        return True

    def _put_schemas(self, chunk: Sequence[tuple[MeasurementSchema, int | None]], databases: list[str]) -> bool:
        items = [self._schema_put(schema, version) for schema, version in chunk]
        # Registering the database in the same transaction: a schema never exists without it.
        items += [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": item_key("DATABASES", database),
                    "UpdateExpression": "SET created_at = if_not_exists(created_at, :now)",
                    "ExpressionAttributeValues": to_item({":now": utc_now().isoformat()}),
                }
            }
            for database in databases
        ]
        codes = self._transact(items)
        if codes is None:
            return True
        if "ConditionalCheckFailed" in codes:
            return False
        names = ", ".join(f"{schema.database}.{schema.measurement}" for schema, _version in chunk[:3])
        raise StorageFault(f"DynamoDB schema update of {names}{'...' if len(chunk) > 3 else ''} cancelled: {codes}")

    def _schema_put(self, schema: MeasurementSchema, expected_version: int | None) -> TransactWriteItemTypeDef:
        values = {
            "pk": f"SCHEMA#{schema.database}",
            "sk": schema.measurement,
            "database": schema.database,
            "measurement": schema.measurement,
            "columns": dict(schema.columns),
            "tags": list(schema.tags),
            "version": (expected_version or 0) + 1,
        }
        put = put_op(self.table, values)
        if expected_version is None:
            put["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put["Put"]["ConditionExpression"] = "#version = :expected"
            put["Put"]["ExpressionAttributeNames"] = {"#version": "version"}
            put["Put"]["ExpressionAttributeValues"] = to_item({":expected": expected_version})
        return put

    def list_schemas(self, database: str | None = None) -> list[MeasurementSchema]:
        databases = [database] if database else self.list_databases()
        return [_schema(item) for name in databases for item in self._query(f"SCHEMA#{name}")]

    def create_database(self, name: str) -> bool:
        return self._put(
            {"pk": "DATABASES", "sk": name, "created_at": utc_now().isoformat()}, "attribute_not_exists(pk)"
        )

    def list_databases(self) -> list[str]:
        return [str(item["sk"]) for item in self._query("DATABASES")]

    def drop_database(self, name: str) -> bool:
        # File records are found by measurement. Once the schemas are gone nothing else names
        # the measurements, so a journal item lists them first: a call retried after a crash
        # finds every file partition the crashed one did not get to.
        journal = self._get(_drop_pk(name), NO_SORT)
        measurements = {str(item["sk"]) for item in self._query(f"SCHEMA#{name}")}
        if journal is not None:
            measurements |= {str(m) for m in journal.get("measurements", [])}
        registered = self._get("DATABASES", name) is not None
        if not measurements and not registered and journal is None:
            return False
        if measurements:
            entry = {"pk": _drop_pk(name), "sk": NO_SORT, "measurements": sorted(measurements)}
            self._batch_write([{"PutRequest": {"Item": to_item({**entry, "created_at": utc_now().isoformat()})}}])
        # Schemas first: a measurement without a schema is not queryable, so from here on no
        # reader can see a measurement whose file records are half deleted.
        self._delete_keys((f"SCHEMA#{name}", measurement) for measurement in sorted(measurements))
        for measurement in sorted(measurements):
            for pk in (_compaction_pk(name, measurement), _files_pk(name, measurement)):
                self._delete_keys([(pk, str(item["sk"])) for item in self._query(pk)])
        self._delete_keys([("DATABASES", name), (_drop_pk(name), NO_SORT)])
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
        with ThreadPoolExecutor(max_workers=min(PUT_WORKERS, len(items))) as pool:
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
        # Nor is it one for the commit records: a query may see a day's transaction applied to
        # some hours and not yet to others, which the records' ``swap`` versions show; again too.
        partial = None
        for attempt in range(_LIST_ATTEMPTS):
            before = _records_in(self, database, measurement, first, last)
            items = list(self._file_items(database, measurement, first, last))
            after = _records_in(self, database, measurement, first, last)
            partial = _half_applied(before, first, last)
            versions = {hour: int(item["version"]) for hour, item in before.items()}
            if partial is None and versions == {hour: int(item["version"]) for hour, item in after.items()}:
                files = [file_from_json(item) for item in items if "replaced_by" not in item]
                states = [_state(item) for item in before.values()]
                return apply_compactions(files, [state for state in states if not state.settled])
            backoff(attempt)
        seen = f"a compaction commit seen half applied at {partial}" if partial else "commits landing"
        raise StorageFault(f"files of {database}.{measurement} kept changing while being listed ({seen})")

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
        marker = {"replaced_by": "deleted", TTL_ATTRIBUTE: expiry()}
        keys = {(_files_pk(f.database, f.measurement), f"{hour_text(f.hour)}#{f.key}") for f in files}
        self._batch_write(
            [{"PutRequest": {"Item": to_item({"pk": pk, "sk": sk, **marker})}} for pk, sk in sorted(keys)]
        )

    # --- the ingest commit protocol ----------------------------------------------------------
    def get_markers(self, write_ids: Iterable[str]) -> dict[str, str]:
        ids = list(dict.fromkeys(write_ids))  # BatchGetItem refuses duplicate keys
        found: dict[str, str] = {}
        for start in range(0, len(ids), BATCH_GET_LIMIT):
            keys = [item_key(f"WRITE#{write_id}", NO_SORT) for write_id in ids[start : start + BATCH_GET_LIMIT]]
            for attempt in range(MAX_ATTEMPTS):
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
                    item = from_item(raw)
                    found[str(item["pk"]).removeprefix("WRITE#")] = str(item["commit_id"])
                unprocessed = response.get("UnprocessedKeys", {}).get(self.table)
                if not unprocessed or not unprocessed.get("Keys"):
                    break
                keys = list(unprocessed["Keys"])
                backoff(attempt)
            else:
                raise StorageFault(f"DynamoDB left {len(keys)} write markers unread after {MAX_ATTEMPTS} attempts")
        return found

    def swap_marker(self, write_id: str, expected: str | None, commit_id: str) -> bool:
        values = {
            "pk": f"WRITE#{write_id}",
            "sk": NO_SORT,
            "commit_id": commit_id,
            "updated_at": utc_now().isoformat(),
            TTL_ATTRIBUTE: expiry(),
        }
        if expected is None:
            return self._put(values, "attribute_not_exists(pk)")
        return self._put(values, "#commit = :expected", {"#commit": "commit_id"}, {":expected": expected})

    def swap_markers(self, claims: Sequence[tuple[str, str | None]], commit_id: str) -> set[str]:
        if len(claims) <= 1:
            return {write_id for write_id, expected in claims if self.swap_marker(write_id, expected, commit_id)}
        with ThreadPoolExecutor(max_workers=min(PUT_WORKERS, len(claims))) as pool:
            won = pool.map(lambda claim: self.swap_marker(claim[0], claim[1], commit_id), claims)
            return {write_id for (write_id, _expected), ok in zip(claims, won, strict=True) if ok}

    def get_commit(self, commit_id: str) -> CommitRecord | None:
        item = self._get(f"COMMIT#{commit_id}", NO_SORT)
        if item is None:
            return None
        files = tuple(file_from_json(data) for data in json.loads(str(item["files"])))
        return CommitRecord(commit_id, item["status"], files)

    def put_commit_if_absent(self, record: CommitRecord) -> bool:
        values = {
            "pk": f"COMMIT#{record.commit_id}",
            "sk": NO_SORT,
            "status": record.status,
            # JSON text, not nested maps: the record is read whole and never queried inside.
            "files": json.dumps([file_to_json(f) for f in record.files]),
            "created_at": utc_now().isoformat(),
            TTL_ATTRIBUTE: expiry(),
        }
        return self._put(values, "attribute_not_exists(pk)")

    # --- compaction commits --------------------------------------------------------------------
    def get_compaction_state(self, partition: Partition) -> CompactionState | None:
        item = self._get(_compaction_pk(partition.database, partition.measurement), hour_text(partition.hour))
        return None if item is None else _state(item)

    def commit_compaction(self, partition: Partition, state: CompactionState) -> bool:
        return self._put(*self._commit_put(partition, state))

    def _commit_put(
        self, partition: Partition, state: CompactionState
    ) -> tuple[dict[str, object], str, dict[str, str] | None, dict[str, object] | None]:
        values: dict[str, object] = {
            "pk": _compaction_pk(partition.database, partition.measurement),
            "sk": hour_text(partition.hour),
            "version": state.version,
            "job_id": state.job_id,
            "settled": False,
            "inputs": json.dumps(list(state.inputs)),
            "outputs": json.dumps([file_to_json(f) for f in state.outputs]),
        }
        if state.version == 1:
            return values, "attribute_not_exists(pk)", None, None
        return (
            values,
            "#version = :previous AND settled = :yes",
            {"#version": "version"},
            {":previous": state.version - 1, ":yes": True},
        )

    def commit_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> bool:
        if len(commits) == 1:
            return self.commit_compaction(*commits[0])
        if len(commits) > _MAX_TRANSACTION_ITEMS:
            raise ValueError(f"a transaction holds at most {_MAX_TRANSACTION_ITEMS} commit records")
        # Every record names the versions the transaction gives all of them (list_files checks).
        swap = json.dumps({hour_text(partition.hour): state.version for partition, state in commits}, sort_keys=True)
        items: list[TransactWriteItemTypeDef] = []
        for partition, state in commits:
            values, condition, names, conditions = self._commit_put(partition, state)
            values["swap"] = swap
            put = put_op(self.table, values, condition)
            if names is not None and conditions is not None:
                put["Put"]["ExpressionAttributeNames"] = names
                put["Put"]["ExpressionAttributeValues"] = to_item(conditions)
            items.append(put)
        codes = self._transact(items)
        if codes is None:
            return True
        if "ConditionalCheckFailed" in codes:
            return False
        raise StorageFault(f"DynamoDB compaction commit of {commits[0][0].name} cancelled: {codes}")

    def settle_compaction(self, partition: Partition, state: CompactionState) -> None:
        self.settle_compactions([(partition, state)])

    def settle_compactions(self, commits: Sequence[tuple[Partition, CompactionState]]) -> None:
        pending = []
        swaps: dict[Partition, object] = {}
        for partition, state in commits:
            item = self._get(_compaction_pk(partition.database, partition.measurement), hour_text(partition.hour))
            if item is None or item["settled"]:
                continue
            if (int(item["version"]), str(item["job_id"])) == (state.version, state.job_id):
                pending.append((partition, state))
                if "swap" in item:
                    swaps[partition] = item["swap"]
        if not pending:
            return
        self.put_files([f for _partition, state in pending for f in state.outputs])
        # The inputs' records stay as markers that are never listed until a late ingest
        # roll-forward can no longer put them back (put_files keeps an existing item).
        self._batch_write(
            [
                {
                    "PutRequest": {
                        "Item": to_item(
                            {
                                "pk": _files_pk(partition.database, partition.measurement),
                                "sk": f"{hour_text(partition.hour)}#{key}",
                                "replaced_by": state.job_id,
                                TTL_ATTRIBUTE: expiry(),
                            }
                        )
                    }
                }
                for partition, state in pending
                for key in state.inputs
            ]
        )
        # Last: a record read settled means its files have moved (list_files relies on it). It
        # keeps naming its transaction's versions, which a listing still checks.
        for partition, state in pending:
            swap = {"swap": swaps[partition]} if partition in swaps else {}
            self._put(
                {
                    "pk": _compaction_pk(partition.database, partition.measurement),
                    "sk": hour_text(partition.hour),
                    "version": state.version,
                    "job_id": state.job_id,
                    "settled": True,
                    **swap,
                },
                "#version = :version AND job_id = :job",
                {"#version": "version"},
                {":version": state.version, ":job": state.job_id},
            )

    # --- leases and compaction jobs: the leases table ----------------------------------------
    def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        return self.leases.acquire_lease(name, owner, ttl_s)

    def release_lease(self, name: str, owner: str) -> None:
        self.leases.release_lease(name, owner)

    def release_leases(self, holder: str) -> list[str]:
        return self.leases.release_leases(holder)

    def put_compaction_job(self, job: CompactionJob) -> None:
        self.leases.put_compaction_job(job)

    def get_compaction_job(self, job_id: str) -> CompactionJob | None:
        return self.leases.get_compaction_job(job_id)

    def list_compaction_jobs(self, active: bool = False, limit: int = 100) -> list[CompactionJob]:
        return self.leases.list_compaction_jobs(active, limit)
