"""The catalog's schemas and databases, data files and ingest ledger, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from arcs.errors import StorageFault
from arcs.ports import (
    CommitRecord,
    MeasurementSchema,
)
from tests.functional.ports.contract import H0, HOUR, Ports, file_record, fill

pytestmark = pytest.mark.functional


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


def test_drop_database_removes_schemas_files_and_the_database(ports: Ports) -> None:
    catalog = ports.catalog
    fill(catalog, "gone", ("cpu", "mem"))
    fill(catalog, "gone2", ("cpu",))  # shares a prefix with the dropped one: untouched
    fill(catalog, "kept", ("cpu", "gone"))
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
        fill(catalog, database, ("cpu", "mem", "disk"), hours=4)
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
