"""One contract for each port, run against both adapters: local (directory, SQLite) and AWS (moto)."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from arcs.adapters.aws.catalog import DynamoCatalog
from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.queue import SqsWriteQueue, read_queued_body
from arcs.adapters.aws.tokens import DynamoTokenStore
from arcs.adapters.aws.wiring import AwsClients, create_resources, table_names
from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.adapters.local.tokens import SqliteTokenStore
from arcs.errors import BadRequest, NotFound, StorageFault
from arcs.layout import data_key, parse_data_key, system_key
from arcs.ports import (
    Catalog,
    CommitRecord,
    CompactionJob,
    CompactionState,
    ContinuousQuery,
    CQExecution,
    FileRecord,
    MeasurementSchema,
    ObjectInfo,
    ObjectStore,
    Partition,
    RetentionExecution,
    RetentionPolicy,
    TokenRecord,
    TokenStore,
)
from tests.helpers import LOCAL_AND_SLOW_AWS

if TYPE_CHECKING:
    from tests.conftest import AwsEnv

pytestmark = pytest.mark.functional

H0 = datetime(2024, 3, 1, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@dataclass
class Ports:
    name: str
    store: ObjectStore
    catalog: Catalog
    tokens: TokenStore


@pytest.fixture(params=["local", "aws"])
def ports(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ports]:
    if request.param == "local":
        db = SqliteDatabase(tmp_path / "catalog.sqlite")
        yield Ports("local", DirectoryStore(tmp_path / "data"), SqliteCatalog(db), SqliteTokenStore(db))
        db.close()
        return
    aws: AwsEnv = request.getfixturevalue("aws")
    # Tiny pages so every listing and query goes through pagination.
    yield Ports(
        "aws",
        S3Store(aws.s3, aws.bucket, list_page_size=2),
        DynamoCatalog(aws.dynamodb, aws.catalog_table, aws.leases_table, page_size=2),
        DynamoTokenStore(aws.dynamodb, aws.tokens_table, page_size=2),
    )


def file_record(database: str, measurement: str, hour: datetime, name: str, commit_id: str = "c1") -> FileRecord:
    micros = int((hour - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
    return FileRecord(
        database=database,
        measurement=measurement,
        hour=hour,
        key=data_key("arcs", database, measurement, hour, f"{name}.parquet"),
        rows=10,
        size=1234,
        min_time_us=micros,
        max_time_us=micros + 3_599_999_999,
        commit_id=commit_id,
    )


# --- object store ------------------------------------------------------------------------------


def test_put_if_absent_refuses_overwrite_and_keeps_first(ports: Ports) -> None:
    key = "arcs/db/cpu/2024/03/01/00/a.parquet"
    assert ports.store.put_if_absent(key, b"first")
    assert not ports.store.put_if_absent(key, b"second")
    assert ports.store.get(key) == b"first"
    ports.store.put(key, b"third")  # a plain put does overwrite
    assert ports.store.get(key) == b"third"


def test_get_missing_key_is_not_found(ports: Ports) -> None:
    with pytest.raises(NotFound):
        ports.store.get("arcs/db/cpu/nothing.parquet")
    assert not ports.store.exists("arcs/db/cpu/nothing.parquet")


def test_exists_delete_and_url(ports: Ports) -> None:
    key = "arcs/db/cpu/2024/03/01/00/b.parquet"
    ports.store.put(key, b"\x00\x01binary\xff")
    assert ports.store.exists(key)
    assert ports.store.url(key).endswith(key)
    ports.store.delete(key)
    assert not ports.store.exists(key)
    ports.store.delete(key)  # deleting what is gone is not an error


def test_list_by_prefix(ports: Ports) -> None:
    wanted = [f"arcs/db/cpu/2024/03/01/{hour:02d}/f{i}.parquet" for hour in range(3) for i in range(2)]
    others = ["arcs/db/cpu2/2024/03/01/00/x.parquet", "arcs/db/mem/2024/03/01/00/y.parquet", "arcs/_arcs/claims/w.bin"]
    for n, key in enumerate(wanted + others):
        ports.store.put(key, b"x" * (n + 1))
    listed = sorted(ports.store.list("arcs/db/cpu/"), key=lambda info: info.key)
    assert listed == [ObjectInfo(key, n + 1) for n, key in enumerate(wanted)]
    assert list(ports.store.list("arcs/db/disk/")) == []


# --- schemas and databases -------------------------------------------------------------------


def test_schema_compare_and_set(ports: Ports) -> None:
    catalog = ports.catalog
    schema = MeasurementSchema("db1", "cpu", {"time": "timestamp", "host": "string", "v": "float64"}, ("host",))
    assert catalog.get_schema("db1", "cpu") is None
    assert not catalog.put_schema(schema, 0)  # expecting a version of something that does not exist
    assert catalog.put_schema(schema, None)
    assert catalog.get_schema("db1", "cpu") == replace(schema, version=1)
    assert not catalog.put_schema(schema, None)  # it exists now

    wider = replace(schema, columns={**schema.columns, "w": "int64"})
    assert catalog.put_schema(wider, 1)
    stale = replace(schema, columns={**schema.columns, "z": "bool"})
    assert not catalog.put_schema(stale, 1)
    assert catalog.get_schema("db1", "cpu") == replace(wider, version=2)
    assert catalog.list_databases() == ["db1"]  # a new schema registers its database


def test_many_schemas_are_stored_at_once_and_a_stale_one_stores_none_of_its_transaction(ports: Ports) -> None:
    catalog = ports.catalog
    columns = {"time": "timestamp", "v": "int64"}
    many = [(MeasurementSchema("bulk", f"m{i:03d}", columns), None) for i in range(120)]  # DynamoDB: 3 transactions
    assert catalog.put_schemas(many)
    assert [s.measurement for s in catalog.list_schemas("bulk")] == [f"m{i:03d}" for i in range(120)]
    assert catalog.list_databases() == ["bulk"]
    widened = MeasurementSchema("bulk", "m000", {**columns, "w": "float64"})
    new = MeasurementSchema("bulk", "new", columns)
    stale = MeasurementSchema("bulk", "m001", {**columns, "z": "bool"})
    assert not catalog.put_schemas([(widened, 1), (new, None), (stale, 0)])  # m001 is at version 1
    assert catalog.get_schema("bulk", "m000") == replace(MeasurementSchema("bulk", "m000", columns), version=1)
    assert catalog.get_schema("bulk", "new") is None
    assert catalog.put_schemas([(widened, 1), (new, None)])
    assert catalog.get_schema("bulk", "m000") == replace(widened, version=2)


def test_databases_and_schema_listing(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.create_database("alpha")
    assert not catalog.create_database("alpha")
    cpu = MeasurementSchema("beta", "cpu", {"time": "timestamp", "v": "float64"})
    mem = MeasurementSchema("beta", "mem", {"time": "timestamp", "free": "int64"}, ("host",))
    disk = MeasurementSchema("gamma", "disk", {"time": "timestamp", "used": "int64"})
    for schema in (mem, disk, cpu):
        assert catalog.put_schema(schema, None)
    assert catalog.list_databases() == ["alpha", "beta", "gamma"]
    assert catalog.list_schemas("beta") == [replace(cpu, version=1), replace(mem, version=1)]
    assert catalog.list_schemas("alpha") == []
    assert catalog.list_schemas() == [replace(s, version=1) for s in (cpu, mem, disk)]


def _fill(catalog: Catalog, database: str, measurements: tuple[str, ...], hours: int = 3) -> None:
    for measurement in measurements:
        assert catalog.put_schema(MeasurementSchema(database, measurement, {"time": "timestamp", "v": "int64"}), None)
        catalog.put_files([file_record(database, measurement, H0 + n * HOUR, f"f{n}") for n in range(hours)])


def test_drop_database_removes_schemas_files_and_the_database(ports: Ports) -> None:
    catalog = ports.catalog
    _fill(catalog, "gone", ("cpu", "mem"))
    _fill(catalog, "gone2", ("cpu",))  # shares a prefix with the dropped one: untouched
    _fill(catalog, "kept", ("cpu", "gone"))
    assert catalog.create_database("empty")

    assert catalog.drop_database("gone")
    assert catalog.list_databases() == ["empty", "gone2", "kept"]
    assert catalog.get_schema("gone", "cpu") is None
    assert catalog.list_schemas("gone") == []
    assert catalog.list_files("gone", "cpu") == [] and catalog.list_files("gone", "mem") == []
    assert [s.measurement for s in catalog.list_schemas()] == ["cpu", "cpu", "gone"]
    assert len(catalog.list_files("gone2", "cpu")) == 3
    assert len(catalog.list_files("kept", "gone")) == 3

    assert not catalog.drop_database("gone")  # nothing left to drop
    assert not catalog.drop_database("never")
    assert catalog.drop_database("empty")  # a database without measurements
    assert catalog.list_databases() == ["gone2", "kept"]

    # The name is free again: a new schema starts over at version 1.
    schema = MeasurementSchema("gone", "cpu", {"time": "timestamp", "s": "string"})
    assert catalog.put_schema(schema, None)
    assert catalog.get_schema("gone", "cpu") == replace(schema, version=1)
    assert catalog.list_files("gone", "cpu") == []


def test_a_crashed_drop_never_shows_half_a_measurement_and_a_retry_finishes_it(
    ports: Ports, monkeypatch: pytest.MonkeyPatch
) -> None:
    if ports.name == "local":
        pytest.skip("the SQLite catalog drops a database in one transaction: there is no midway")
    catalog = ports.catalog
    real = catalog._batch_write  # type: ignore[attr-defined]
    crash_at = 0
    while True:
        crash_at += 1
        database = f"crash{crash_at}"
        _fill(catalog, database, ("cpu", "mem", "disk"), hours=4)
        calls = 0

        def failing(requests: object, limit: int = crash_at) -> None:
            nonlocal calls
            calls += 1
            if calls == limit:
                raise StorageFault("injected crash")
            real(requests)

        monkeypatch.setattr(catalog, "_batch_write", failing)
        try:
            catalog.drop_database(database)
        except StorageFault:
            crashed = True
        else:
            crashed = False
        monkeypatch.setattr(catalog, "_batch_write", real)
        for measurement in ("cpu", "mem", "disk"):
            # A measurement is either whole (schema and every file) or not queryable at all.
            if catalog.get_schema(database, measurement) is not None:
                assert len(catalog.list_files(database, measurement)) == 4
        if not crashed:
            break
        assert catalog.drop_database(database)  # the retry finishes the job
        assert database not in catalog.list_databases()
        for measurement in ("cpu", "mem", "disk"):
            assert catalog.get_schema(database, measurement) is None
            assert catalog.list_files(database, measurement) == []
        assert not catalog.drop_database(database)
    assert crash_at > 3  # the journal, the schemas, the files and the database are separate steps


# --- data files ----------------------------------------------------------------------------


def test_files_listed_by_hour_range(ports: Ports) -> None:
    catalog = ports.catalog
    cpu = [file_record("db", "cpu", H0 + n * HOUR, f"f{n}") for n in range(5)]
    cpu.append(file_record("db", "cpu", H0 + 2 * HOUR, "g2"))
    noise = [
        file_record("db", "cpu2", H0 + 2 * HOUR, "x"),
        file_record("db", "mem", H0 + 2 * HOUR, "y"),
        file_record("other", "cpu", H0 + 2 * HOUR, "z"),
    ]
    catalog.put_files(cpu + noise)

    by_time = sorted(cpu, key=lambda f: (f.hour, f.key))
    assert catalog.list_files("db", "cpu") == by_time
    assert catalog.list_files("db", "cpu", H0 + HOUR, H0 + 3 * HOUR) == [
        f for f in by_time if H0 + HOUR <= f.hour <= H0 + 3 * HOUR
    ]
    assert catalog.list_files("db", "cpu", H0 + 2 * HOUR, H0 + 2 * HOUR) == [
        f for f in by_time if f.hour == H0 + 2 * HOUR
    ]
    assert catalog.list_files("db", "cpu", first_hour=H0 + 3 * HOUR) == by_time[-2:]
    assert catalog.list_files("db", "cpu", last_hour=H0 + HOUR) == by_time[:2]
    assert catalog.list_files("db", "cpu", H0 + 3 * HOUR, H0 + HOUR) == []
    assert catalog.list_files("db", "disk") == []


def test_put_files_is_idempotent_and_keeps_the_first(ports: Ports) -> None:
    catalog = ports.catalog
    files = [file_record("db", "cpu", H0 + (n % 7) * HOUR, f"f{n}") for n in range(40)]
    catalog.put_files(files)
    catalog.put_files([*files[:15], replace(files[0], commit_id="c2", rows=99)])
    listed = catalog.list_files("db", "cpu")
    assert sorted(listed, key=lambda f: f.key) == sorted(files, key=lambda f: f.key)


# --- the commit protocol -------------------------------------------------------------------------


def test_marker_swap_semantics(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.get_markers(["w1"]) == {}
    assert catalog.swap_marker("w1", None, "c1")
    assert not catalog.swap_marker("w1", None, "c2")  # None means "unset", and it is set
    assert catalog.get_markers(["w1"]) == {"w1": "c1"}
    assert not catalog.swap_marker("w1", "c9", "c3")  # expected does not match
    assert catalog.get_markers(["w1"]) == {"w1": "c1"}
    assert catalog.swap_marker("w1", "c1", "c2")
    assert catalog.get_markers(["w1"]) == {"w1": "c2"}
    assert not catalog.swap_marker("w2", "c1", "c3")  # expecting a value of an unset marker
    assert catalog.get_markers(["w2"]) == {}


def test_marker_swaps_in_one_call_win_exactly_the_free_ones(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.swap_marker("taken", None, "c0")
    assert catalog.swap_marker("moved", None, "c0")
    claims: list[tuple[str, str | None]] = [
        ("new-1", None),
        ("taken", None),  # already set: lost
        ("new-2", None),
        ("moved", "c0"),  # as expected: won
        ("stale", "c9"),  # expected a value it never had: lost
    ]
    assert catalog.swap_markers(claims, "c1") == {"new-1", "new-2", "moved"}
    assert catalog.get_markers(["new-1", "taken", "new-2", "moved", "stale"]) == {
        "new-1": "c1",
        "taken": "c0",
        "new-2": "c1",
        "moved": "c1",
    }
    assert catalog.swap_markers([("new-3", None), ("new-4", None)], "c2") == {"new-3", "new-4"}


def test_get_markers_in_bulk(ports: Ports) -> None:
    catalog = ports.catalog
    expected = {f"w{n:03d}": f"c{n % 3}" for n in range(130)}
    for write_id, commit_id in expected.items():
        assert catalog.swap_marker(write_id, None, commit_id)
    asked = [*expected, "missing-1", "w000", "missing-2"]  # duplicates and unknown ids too
    assert catalog.get_markers(asked) == expected
    assert catalog.get_markers([]) == {}


def test_commit_is_stored_exactly_once(ports: Ports) -> None:
    catalog = ports.catalog
    record = CommitRecord(
        "c1", "committed", (file_record("db", "cpu", H0, "a"), file_record("db", "mem", H0 + HOUR, "b"))
    )
    assert catalog.get_commit("c1") is None
    assert catalog.put_commit_if_absent(record)
    assert not catalog.put_commit_if_absent(CommitRecord("c1", "aborted"))
    assert not catalog.put_commit_if_absent(record)
    assert catalog.get_commit("c1") == record
    aborted = CommitRecord("c2", "aborted")
    assert catalog.put_commit_if_absent(aborted)
    assert catalog.get_commit("c2") == aborted


# --- compaction: leases, the commit record, the job journal ---------------------------------------


def test_a_holder_s_leases_are_released_together_and_no_others(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "server-a/job1", 900)
    assert catalog.acquire_lease("db/cpu/2024-03-01T01", "server-a/job2", 900)
    assert catalog.acquire_lease("db/cpu/2024-03-01T02", "server-ab/job3", 900)  # a name it prefixes
    assert catalog.acquire_lease("db/cpu/2024-03-01T03", "server-b/job4", 900)
    assert catalog.release_leases("server-a") == ["db/cpu/2024-03-01T00", "db/cpu/2024-03-01T01"]
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "server-b/job5", 900)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T02", "server-b/job6", 900)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T03", "server-a/job7", 900)
    assert catalog.release_leases("server-a") == []


def test_lease_is_held_by_one_owner_until_released_or_expired(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 60)
    assert catalog.acquire_lease("db/cpu/2024-03-01T01", "b", 60)  # another partition is free
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)  # the holder renews
    catalog.release_lease("db/cpu/2024-03-01T00", "b")  # not b's to release
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 60)
    catalog.release_lease("db/cpu/2024-03-01T00", "a")
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 0.2)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)
    time.sleep(0.3)
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)  # b's lease expired
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 60)


def _compaction(catalog: Catalog, hour: datetime, inputs: int, version: int, job: str) -> CompactionState:
    listed = catalog.list_files("db", "cpu", hour, hour)
    assert len(listed) >= inputs
    output = replace(file_record("db", "cpu", hour, f"out-{job}", commit_id=job), rows=sum(f.rows for f in listed))
    return CompactionState(version, job, False, tuple(f.key for f in listed[:inputs]), (output,))


def test_compaction_commit_swaps_inputs_for_outputs_atomically_and_once(ports: Ports) -> None:
    catalog = ports.catalog
    part = Partition("db", "cpu", H0)
    inputs = [file_record("db", "cpu", H0, f"in{n}") for n in range(5)]
    other_hour = file_record("db", "cpu", H0 + HOUR, "other")
    catalog.put_files([*inputs, other_hour])
    assert catalog.get_compaction_state(part) is None

    first = _compaction(catalog, H0, 4, 1, "job1")
    racing = _compaction(catalog, H0, 5, 1, "job2")
    assert catalog.commit_compaction(part, first)
    assert not catalog.commit_compaction(part, racing)  # the same version, taken
    assert catalog.get_compaction_state(part) == first
    # Committed, not settled: readers see the output instead of the four inputs already.
    expected = sorted([first.outputs[0], inputs[4]], key=lambda f: f.key)
    assert catalog.list_files("db", "cpu", H0, H0) == expected
    assert catalog.list_files("db", "cpu") == [*expected, other_hour]
    # A next version waits until this one is settled.
    assert not catalog.commit_compaction(part, replace(racing, version=2))

    catalog.settle_compaction(part, first)
    assert catalog.get_compaction_state(part) == CompactionState(1, "job1", True)
    assert catalog.list_files("db", "cpu") == [*expected, other_hour]
    catalog.settle_compaction(part, first)  # again: nothing changes
    assert catalog.list_files("db", "cpu") == [*expected, other_hour]

    # A late ingest roll-forward of a compacted input's record does not bring it back.
    catalog.put_files(inputs[:2])
    assert catalog.list_files("db", "cpu", H0, H0) == expected

    second = _compaction(catalog, H0, 2, 2, "job3")
    assert catalog.commit_compaction(part, second)
    assert catalog.list_files("db", "cpu", H0, H0) == [second.outputs[0]]
    catalog.settle_compaction(part, first)  # a stale settle of an older version is a no-op
    assert catalog.get_compaction_state(part) == second
    catalog.settle_compaction(part, second)
    assert catalog.list_files("db", "cpu", H0, H0) == [second.outputs[0]]
    assert catalog.list_files("db", "cpu", H0 + HOUR, H0 + HOUR) == [other_hour]


@pytest.mark.parametrize("ports", LOCAL_AND_SLOW_AWS, indirect=True)  # 1100 files through moto
def test_one_compaction_commit_swaps_more_files_than_a_transaction_could_hold(ports: Ports) -> None:
    catalog = ports.catalog
    if isinstance(catalog, DynamoCatalog):
        # DynamoDB's own page size: 2 would take minutes.
        catalog = DynamoCatalog(catalog.client, catalog.table, catalog.leases.table)
    part = Partition("db", "cpu", H0)
    inputs = [file_record("db", "cpu", H0, f"{n:032x}-0000") for n in range(1100)]
    catalog.put_files(inputs)
    state = _compaction(catalog, H0, 1100, 1, "job1")
    assert catalog.commit_compaction(part, state)
    assert catalog.list_files("db", "cpu") == list(state.outputs)
    catalog.settle_compaction(part, state)
    assert catalog.list_files("db", "cpu") == list(state.outputs)
    assert catalog.get_compaction_state(part) == CompactionState(1, "job1", True)


def test_delete_files_and_drop_database_forget_compaction_state(ports: Ports) -> None:
    catalog = ports.catalog
    _fill(catalog, "db", ("cpu",), hours=2)
    listed = catalog.list_files("db", "cpu")
    catalog.delete_files(listed[:1])
    catalog.delete_files(listed[:1])  # already gone
    assert catalog.list_files("db", "cpu") == listed[1:]
    catalog.put_files(listed[:1])  # a late ingest roll-forward
    assert catalog.list_files("db", "cpu") == listed[1:]
    part = Partition("db", "cpu", H0 + HOUR)
    assert catalog.commit_compaction(part, _compaction(catalog, H0 + HOUR, 1, 1, "job1"))
    assert catalog.drop_database("db")
    assert catalog.get_compaction_state(part) is None
    assert catalog.list_files("db", "cpu") == []


def test_compaction_jobs_newest_first_and_the_active_ones(ports: Ports) -> None:
    catalog = ports.catalog
    started = datetime(2024, 3, 2, tzinfo=UTC)
    jobs = [
        CompactionJob(f"job{n}", Partition("db", "cpu", H0 + n * HOUR), "running", started, started, input_keys=("k",))
        for n in range(4)
    ]
    for job in jobs:
        catalog.put_compaction_job(job)
    done = replace(jobs[1], status="done", output_keys=("o1", "o2"), input_bytes=10, base_version=3)
    failed = replace(jobs[2], status="failed", error="boom", delete_after=started + HOUR)
    catalog.put_compaction_job(done)
    catalog.put_compaction_job(failed)
    assert catalog.list_compaction_jobs() == [jobs[3], failed, done, jobs[0]]
    assert catalog.list_compaction_jobs(limit=2) == [jobs[3], failed]
    assert catalog.list_compaction_jobs(active=True) == [jobs[3], jobs[0]]
    assert catalog.get_compaction_job("job2") == failed
    assert catalog.get_compaction_job("job9") is None


def test_listing_during_a_compaction_sees_inputs_or_outputs(ports: Ports, monkeypatch: pytest.MonkeyPatch) -> None:
    if ports.name == "local":
        pytest.skip("SQLite lists under the writers' lock: nothing can commit midway")
    catalog = ports.catalog
    part = Partition("db", "cpu", H0)
    inputs = [file_record("db", "cpu", H0, f"in{n}") for n in range(6)]
    catalog.put_files(inputs)
    state = _compaction(catalog, H0, 6, 1, "job1")
    real = catalog._file_items  # type: ignore[attr-defined]
    calls = 0

    def commit_midway(*args: object) -> object:
        # The files are read page by page; between pages the compaction commits and settles.
        nonlocal calls
        calls += 1
        for n, item in enumerate(real(*args)):
            if n == 2 and calls == 1:
                assert catalog.commit_compaction(part, state)
                catalog.settle_compaction(part, state)
            yield item

    monkeypatch.setattr(catalog, "_file_items", commit_midway)
    assert catalog.list_files("db", "cpu") == [state.outputs[0]]
    assert calls == 2  # the first listing saw the commit happen and read again


# --- tokens ----------------------------------------------------------------------------------


def token(token_id: str, lookup: str, minutes: int, **changes: object) -> TokenRecord:
    record = TokenRecord(
        token_id=token_id,
        name=f"name-{token_id}",
        description="",
        lookup=lookup,
        salt=b"\x00salt\xff" + token_id.encode(),
        secret_hash=bytes(range(32)),
        permissions=("read", "write"),
        databases=(),
        created_at=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes),
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def test_tokens_put_find_get_list_delete(ports: Ports) -> None:
    tokens = ports.tokens
    assert tokens.is_empty()
    assert tokens.list() == []
    second = token("t2", "bbbb", 2, databases=("db1", "db2"), revoked=True)
    first = token("t1", "aaaa", 1, expires_at=datetime(2030, 1, 1, tzinfo=UTC), description="ci")
    tokens.put(second)
    tokens.put(first)
    assert not tokens.is_empty()
    assert tokens.get("t1") == first
    assert tokens.get("t2") == second
    assert tokens.get("t3") is None
    assert tokens.find("aaaa") == [first]
    assert tokens.find("zzzz") == []
    assert tokens.list() == [first, second]  # by creation time

    assert tokens.delete("t1")
    assert not tokens.delete("t1")
    assert tokens.get("t1") is None
    assert tokens.find("aaaa") == []
    assert tokens.list() == [second]


def test_token_lookup_changes_on_re_put(ports: Ports) -> None:
    tokens = ports.tokens
    original = token("t1", "aaaa", 1)
    tokens.put(original)
    rotated = replace(original, lookup="cccc", secret_hash=b"new-hash")
    tokens.put(rotated, previous_lookup="aaaa")
    assert tokens.find("aaaa") == []
    assert tokens.find("cccc") == [rotated]
    assert tokens.get("t1") == rotated
    # Without the hint the store still drops the old lookup.
    again = replace(rotated, lookup="dddd")
    tokens.put(again)
    assert tokens.find("cccc") == []
    assert tokens.find("dddd") == [again]
    assert tokens.list() == [again]


def test_tokens_sharing_a_lookup_are_all_found(ports: Ports) -> None:
    tokens = ports.tokens
    one, two = token("t1", "same", 1), token("t2", "same", 2)
    tokens.put(one)
    tokens.put(two)
    assert sorted(tokens.find("same"), key=lambda t: t.token_id) == [one, two]


# --- the SQS write queue -------------------------------------------------------------------


def receive_bodies(aws: AwsEnv) -> list[str]:
    response = aws.sqs.receive_message(QueueUrl=aws.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return [message["Body"] for message in response.get("Messages", [])]


def make_queue(aws: AwsEnv, claim_check_bytes: int) -> tuple[SqsWriteQueue, S3Store]:
    store = S3Store(aws.s3, aws.bucket)
    return SqsWriteQueue(aws.sqs, aws.queue_url, store, aws.prefix, claim_check_bytes), store


def test_small_envelope_travels_inline(aws: AwsEnv) -> None:
    queue, store = make_queue(aws, claim_check_bytes=1024)
    envelope = b"\x00\x01 small envelope \xff"
    queue.enqueue("w-small", envelope)
    (body,) = receive_bodies(aws)
    assert json.loads(body) == {"id": "w-small", "inline": base64.b64encode(envelope).decode()}
    write_id, load, claim = read_queued_body(body, store)
    assert (write_id, load(), claim) == ("w-small", envelope, None)
    assert list(store.list("")) == []


def test_default_claim_threshold_fits_in_one_message(aws: AwsEnv) -> None:
    # 700 KiB is the default threshold; base64 makes it ~933 KiB, under the queue's 1 MiB.
    queue, store = make_queue(aws, claim_check_bytes=700 * 1024)
    envelope = os.urandom(700 * 1024)
    queue.enqueue("w-edge", envelope)
    (body,) = receive_bodies(aws)
    _write_id, load, claim = read_queued_body(body, store)
    assert claim is None
    assert load() == envelope


def test_big_envelope_goes_through_a_claim_check(aws: AwsEnv) -> None:
    queue, store = make_queue(aws, claim_check_bytes=1024)
    envelope = os.urandom(4096)
    queue.enqueue("w-big", envelope)
    (body,) = receive_bodies(aws)
    key = system_key(aws.prefix, "claims", "w-big.bin")
    assert json.loads(body) == {"id": "w-big", "claim": key}
    assert store.get(key) == envelope
    assert [info.key for info in store.list("")] == [key]
    with pytest.raises(ValueError, match="not a data key"):
        parse_data_key(aws.prefix, key)  # no data glob can reach it
    write_id, load, claim = read_queued_body(body, store)
    assert (write_id, load(), claim) == ("w-big", envelope, key)


def test_envelope_too_big_for_sqs_is_claimed_whatever_the_threshold(aws: AwsEnv) -> None:
    queue, store = make_queue(aws, claim_check_bytes=10 * 1024 * 1024)
    envelope = os.urandom(900 * 1024)
    queue.enqueue("w-huge", envelope)
    (body,) = receive_bodies(aws)
    _write_id, load, claim = read_queued_body(body, store)
    assert claim is not None
    assert load() == envelope


def test_missing_claim_object_is_not_found(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    body = json.dumps({"id": "w1", "claim": system_key("arcs", "claims", "w1.bin")})
    _write_id, load, _claim = read_queued_body(body, store)
    with pytest.raises(NotFound):
        load()


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        '{"inline": "AAAA"}',
        '{"id": "", "inline": "AAAA"}',
        '{"id": 7, "inline": "AAAA"}',
        '{"id": "w"}',
        '{"id": "w", "inline": "AAAA", "claim": "arcs/_arcs/claims/w.bin"}',
        '{"id": "w", "inline": "***"}',
        '{"id": "w", "inline": 5}',
        '{"id": "w", "claim": "arcs/db/cpu/2024/03/01/00/x.parquet"}',
        '{"id": "w", "claim": "arcs/_arcs/claims/../../db/x.bin"}',
        '{"id": "w", "claim": ["arcs/_arcs/claims/w.bin"]}',
    ],
)
def test_malformed_queued_body_is_bad_request(body: str, tmp_path: Path) -> None:
    with pytest.raises(BadRequest):
        read_queued_body(body, DirectoryStore(tmp_path))


# --- resources and error translation ---------------------------------------------------------


def test_create_resources_is_idempotent(aws: AwsEnv) -> None:
    again = create_resources(
        aws.clients,
        bucket=aws.bucket,
        queue_name=aws.queue_url.rsplit("/", 1)[1],
        dlq_name=aws.dlq_url.rsplit("/", 1)[1],
        table_prefix=aws.catalog_table.removesuffix("-catalog"),
        max_receive_count=3,
    )
    assert (again["queue_url"], again["dlq_url"]) == (aws.queue_url, aws.dlq_url)
    attributes = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["MaximumMessageSize"] == "1048576"
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == again["dlq_arn"]
    assert int(redrive["maxReceiveCount"]) == 3
    assert (again["tokens_table"], again["catalog_table"], again["leases_table"]) == (
        aws.tokens_table,
        aws.catalog_table,
        aws.leases_table,
    )
    # Markers, runs, leases and jobs expire; tokens never do by TTL (an expired token stays listed).
    for table, status in (
        (aws.catalog_table, ("ENABLED", "expires_at")),
        (aws.leases_table, ("ENABLED", "expires_at")),
        (aws.tokens_table, ("DISABLED", None)),
    ):
        ttl = aws.dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert (ttl.get("TimeToLiveStatus"), ttl.get("AttributeName")) == status, table


def test_create_resources_from_a_session(aws: AwsEnv) -> None:
    # A bare session has no endpoint, so the moto endpoint comes from clients made here.
    clients = AwsClients.create(aws.session, endpoint_url=aws.endpoint)
    try:
        made = create_resources(clients, "arcs-second", "q-second", "dlq-second", "t-second")
    finally:
        clients.close()
    assert made["queue_url"].endswith("/q-second")
    assert (made["tokens_table"], made["catalog_table"], made["leases_table"]) == table_names("t-second")
    assert table_names("t-second") == ("t-second-tokens", "t-second-catalog", "t-second-leases")


def test_backend_failures_become_storage_faults(aws: AwsEnv) -> None:
    missing_bucket = S3Store(aws.s3, "arcs-no-such-bucket")
    with pytest.raises(StorageFault):
        missing_bucket.get("k")  # a missing bucket is our fault, not a missing object
    with pytest.raises(StorageFault):
        missing_bucket.put("k", b"x")
    with pytest.raises(StorageFault):
        list(missing_bucket.list(""))
    with pytest.raises(StorageFault):
        DynamoCatalog(aws.dynamodb, "no-such-table").get_schema("db", "cpu")
    with pytest.raises(StorageFault):
        DynamoTokenStore(aws.dynamodb, "no-such-table").list()
    with pytest.raises(StorageFault):
        DynamoCatalog(aws.dynamodb, aws.catalog_table, "no-such-table").acquire_lease("p", "me", 60)


def test_a_table_a_function_was_not_given_fails_plainly(aws: AwsEnv) -> None:
    # The edge and ingest functions get the catalog table only (docs/deploy.md).
    catalog = DynamoCatalog(aws.dynamodb, aws.catalog_table)
    assert catalog.list_databases() == []
    with pytest.raises(StorageFault, match="no DynamoDB table is configured"):
        catalog.acquire_lease("p", "me", 60)
    with pytest.raises(StorageFault, match="no DynamoDB table is configured"):
        DynamoTokenStore(aws.dynamodb, "").list()


def _keys(aws: AwsEnv, table: str) -> set[str]:
    return {item["pk"]["S"] for item in aws.dynamodb.scan(TableName=table)["Items"]}


def test_each_kind_of_item_lives_in_its_own_table(aws: AwsEnv) -> None:
    catalog = DynamoCatalog(aws.dynamodb, aws.catalog_table, aws.leases_table)
    tokens = DynamoTokenStore(aws.dynamodb, aws.tokens_table)
    catalog.create_database("db")
    assert catalog.acquire_lease("db.cpu.h", "job1", 60)
    started = datetime(2024, 3, 2, tzinfo=UTC)
    catalog.put_compaction_job(CompactionJob("job1", Partition("db", "cpu", H0), "running", started, started))
    tokens.put(token("t1", "look", 0))
    assert _keys(aws, aws.catalog_table) == {"DATABASES"}
    assert _keys(aws, aws.leases_table) == {"LEASE#db.cpu.h", "CJOBS", "CJOBS#ACTIVE"}
    assert _keys(aws, aws.tokens_table) == {"TOKENS", "TOKENLOOKUP#look"}
    queue = SqsWriteQueue(aws.sqs, aws.queue_url + "-gone", S3Store(aws.s3, aws.bucket), aws.prefix, 1024)
    with pytest.raises(StorageFault):
        queue.enqueue("w1", b"x")


# --- continuous queries ----------------------------------------------------------------------


def continuous_query(name: str, database: str = "db", **changes: object) -> ContinuousQuery:
    query = ContinuousQuery(
        query_id=0,
        name=name,
        database=database,
        source_measurement="cpu",
        destination_measurement="cpu_1h",
        query="SELECT * FROM cpu WHERE time >= {start_time} AND time < {end_time}",
        interval="1h",
        interval_s=3600,
        tag_columns=("host",),
        retention_days=30,
        delete_source_after_days=None,
        is_active=True,
        created_at=H0,
        updated_at=H0,
        description="hourly",
    )
    return replace(query, **changes)  # type: ignore[arg-type]


def test_continuous_query_names_are_unique_per_database_and_ids_count_up(ports: Ports) -> None:
    catalog = ports.catalog
    first = catalog.create_continuous_query(continuous_query("b"), 100)
    second = catalog.create_continuous_query(continuous_query("a"), 200)
    elsewhere = catalog.create_continuous_query(continuous_query("a", database="other"), 300)
    assert first is not None and second is not None and elsewhere is not None
    assert (first.query_id, second.query_id, elsewhere.query_id) == (1, 2, 3)
    assert first == replace(continuous_query("b"), query_id=1)
    assert catalog.create_continuous_query(continuous_query("a"), 400) is None  # taken in "db"
    assert catalog.get_continuous_query(2) == second
    assert catalog.get_continuous_query(99) is None
    assert catalog.list_continuous_queries("db") == [second, first]  # by name
    assert catalog.list_continuous_queries() == [second, first, elsewhere]  # by database, then name
    assert catalog.list_continuous_queries("none") == []
    assert [catalog.get_cq_progress(n) for n in (1, 2, 3, 99)] == [100, 200, 300, None]


def test_continuous_query_update_is_compare_and_set_and_renames_free_the_old_name(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 0)
    taken = catalog.create_continuous_query(continuous_query("b"), 0)
    assert stored is not None and taken is not None
    changed = replace(stored, query="SELECT 2 FROM cpu WHERE {start_time} < {end_time}", is_active=False)
    assert catalog.update_continuous_query(changed, 1)
    assert catalog.get_continuous_query(stored.query_id) == replace(changed, version=2)
    assert not catalog.update_continuous_query(replace(changed, interval="5m"), 1)  # stale version
    assert not catalog.update_continuous_query(replace(changed, name="b"), 2)  # name taken
    assert catalog.get_continuous_query(stored.query_id) == replace(changed, version=2)
    assert catalog.update_continuous_query(replace(changed, name="c"), 2)
    assert [q.name for q in catalog.list_continuous_queries()] == ["b", "c"]
    again = catalog.create_continuous_query(continuous_query("a"), 0)  # the old name is free
    assert again is not None and again.query_id == 3


def test_continuous_query_progress_is_compare_and_set(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 1000)
    assert stored is not None
    query_id = stored.query_id
    assert not catalog.set_cq_progress(query_id, 999, 2000)
    assert catalog.get_cq_progress(query_id) == 1000
    assert catalog.set_cq_progress(query_id, 1000, 2000)
    assert not catalog.set_cq_progress(query_id, 1000, 3000)  # a second runner with the same view loses
    assert catalog.set_cq_progress(query_id, None, 5000)  # unconditional, for an existing query
    assert catalog.get_cq_progress(query_id) == 5000
    assert not catalog.set_cq_progress(77, None, 1)
    assert catalog.get_cq_progress(77) is None


def execution(query_id: int, minute: int, **changes: object) -> CQExecution:
    record = CQExecution(
        execution_id=f"e{minute:03d}",
        query_id=query_id,
        kind="scheduled",
        start_us=minute * 60_000_000,
        end_us=(minute + 1) * 60_000_000,
        status="succeeded",
        rows=minute,
        write_id=f"cq-{query_id}-{minute}",
        started_at=datetime.now(UTC) - timedelta(hours=1) + timedelta(minutes=minute),
        duration_ms=1.5,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def test_continuous_query_executions_newest_first_and_deleted_with_the_query(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 0)
    other = catalog.create_continuous_query(continuous_query("b"), 0)
    assert stored is not None and other is not None
    records = [execution(stored.query_id, minute) for minute in range(7)]
    records.append(execution(stored.query_id, 7, status="failed", rows=0, write_id=None, error="boom", kind="manual"))
    for record in records:
        catalog.put_cq_execution(record)
    catalog.put_cq_execution(execution(other.query_id, 0))
    assert catalog.list_cq_executions(stored.query_id) == records[::-1]
    assert catalog.list_cq_executions(stored.query_id, limit=3) == records[::-1][:3]
    assert catalog.list_cq_executions(99) == []

    assert catalog.delete_continuous_query(stored.query_id)
    assert not catalog.delete_continuous_query(stored.query_id)
    assert catalog.get_continuous_query(stored.query_id) is None
    assert catalog.get_cq_progress(stored.query_id) is None
    assert catalog.list_cq_executions(stored.query_id) == []
    assert [q.name for q in catalog.list_continuous_queries()] == ["b"]
    assert len(catalog.list_cq_executions(other.query_id)) == 1
    again = catalog.create_continuous_query(continuous_query("a"), 0)  # its name is free again
    assert again is not None and again.query_id == 3  # and ids are never reused


def test_continuous_query_executions_expire_after_thirty_days(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 0)
    assert stored is not None
    records = [
        execution(stored.query_id, 0, started_at=datetime.now(UTC) - timedelta(days=31)),
        execution(stored.query_id, 1),
    ]
    for record in records:
        catalog.put_cq_execution(record)
    if ports.name == "local":
        assert catalog.list_cq_executions(stored.query_id) == records[1:]  # pruned as the next one is put
        return
    # DynamoDB deletes expired items by itself (moto does not): each carries its expiry.
    items = catalog.client.query(  # type: ignore[attr-defined]
        TableName=catalog.table,  # type: ignore[attr-defined]
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"CQRUN#{stored.query_id}"}},
    )["Items"]
    expiries = sorted(int(item["expires_at"]["N"]) for item in items)
    assert expiries == [int((record.started_at + timedelta(days=30)).timestamp()) for record in records]


# --- retention policies -------------------------------------------------------------------------


def retention_policy(name: str, database: str = "db", **changes: object) -> RetentionPolicy:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    policy = RetentionPolicy(0, name, database, "cpu", 30, 7, True, moment, moment)
    return replace(policy, **changes)  # type: ignore[arg-type]


RECENT = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)


def retention_run(policy_id: int, minute: int) -> RetentionExecution:
    return RetentionExecution(
        execution_id=f"r{minute:03d}",
        policy_id=policy_id,
        kind="manual",
        dry_run=minute % 2 == 0,
        status="succeeded",
        cutoff_us=minute * 60_000_000,
        partitions=minute,
        files=minute * 2,
        rows=minute * 10,
        bytes=minute * 100,
        started_at=RECENT + timedelta(minutes=minute),  # executions are kept for 30 days
        duration_ms=1.5,
        skipped=("db/cpu/2026-01-01T00",) if minute == 3 else (),
    )


def test_retention_policies_are_unique_per_database_renamed_and_deleted_with_their_executions(ports: Ports) -> None:
    catalog = ports.catalog
    first = catalog.create_retention_policy(retention_policy("b"))
    second = catalog.create_retention_policy(retention_policy("a", measurement=None))
    elsewhere = catalog.create_retention_policy(retention_policy("a", database="other"))
    assert first is not None and second is not None and elsewhere is not None
    assert (first.policy_id, second.policy_id, elsewhere.policy_id) == (1, 2, 3)
    assert catalog.create_retention_policy(retention_policy("a")) is None  # taken in "db"
    assert catalog.get_retention_policy(2) == second and second.measurement is None
    assert catalog.get_retention_policy(99) is None
    assert catalog.list_retention_policies("db") == [second, first]
    assert catalog.list_retention_policies() == [second, first, elsewhere]
    assert not catalog.update_retention_policy(replace(first, name="a"))  # another's name
    assert catalog.update_retention_policy(replace(first, name="c", retention_days=1, is_active=False))
    assert catalog.get_retention_policy(1) == replace(first, name="c", retention_days=1, is_active=False)
    assert catalog.create_retention_policy(retention_policy("b")) is not None  # the old name is free
    assert not catalog.update_retention_policy(replace(first, policy_id=77))
    for minute in (1, 3, 2):
        catalog.put_retention_execution(retention_run(1, minute))
    catalog.put_retention_execution(retention_run(2, 5))
    assert [e.execution_id for e in catalog.list_retention_executions(1)] == ["r003", "r002", "r001"]
    assert catalog.list_retention_executions(1, limit=1) == [retention_run(1, 3)]
    assert catalog.delete_retention_policy(1)
    assert not catalog.delete_retention_policy(1)
    assert catalog.get_retention_policy(1) is None and catalog.list_retention_executions(1) == []
    assert catalog.list_retention_executions(2) == [retention_run(2, 5)]
