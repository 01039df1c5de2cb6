from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.errors import BadRequest
from arcs.write.batch import TIME_TYPE, MeasurementRows
from arcs.write.schema import SchemaRegistry


def rows(measurement: str = "cpu", **columns: pa.Array) -> MeasurementRows:
    n = len(next(iter(columns.values())))
    return MeasurementRows(measurement, pa.table({"time": pa.array(range(n), pa.int64()).cast(TIME_TYPE), **columns}))


@pytest.fixture
def registry(tmp_path: Path) -> SchemaRegistry:
    return SchemaRegistry(SqliteCatalog(SqliteDatabase(tmp_path / "c.sqlite")))


def test_new_columns_are_recorded_and_ints_widen_into_floats(registry: SchemaRegistry) -> None:
    registry.apply("db", [rows(v=pa.array([1.5]))])
    [part] = registry.apply("db", [rows(v=pa.array([2]), extra=pa.array(["x"]))])
    assert part.table.schema.field("v").type == pa.float64()
    stored = registry.catalog.get_schema("db", "cpu")
    assert stored is not None
    assert stored.columns == {"time": "timestamp", "v": "float64", "extra": "string"}
    assert stored.version == 2


@pytest.mark.parametrize(("first", "second"), [("float64", "string"), ("int64", "float64"), ("bool", "int64")])
def test_conflicts_name_column_and_both_types_and_change_nothing(
    registry: SchemaRegistry, first: str, second: str
) -> None:
    samples = {"float64": pa.array([1.5]), "string": pa.array(["s"]), "int64": pa.array([1]), "bool": pa.array([True])}
    registry.apply("db", [rows(v=samples[first])])
    with pytest.raises(BadRequest) as error:
        registry.apply("db", [rows("other", w=pa.array([1])), rows(v=samples[second], new=pa.array([1]))])
    assert all(text in error.value.message for text in ("'v'", first, second))
    # all or nothing: the other measurement and the new column were not recorded
    assert registry.catalog.get_schema("db", "other") is None
    stored = registry.catalog.get_schema("db", "cpu")
    assert stored is not None
    assert "new" not in stored.columns


def test_case_only_clash_with_a_stored_column(registry: SchemaRegistry) -> None:
    registry.apply("db", [rows(value=pa.array([1.0]))])
    with pytest.raises(BadRequest, match="differs only in case"):
        registry.apply("db", [rows(Value=pa.array([1.0]))])


def test_a_stale_cache_cannot_let_a_conflicting_type_in(tmp_path: Path) -> None:
    catalog = SqliteCatalog(SqliteDatabase(tmp_path / "c.sqlite"))
    first, second = SchemaRegistry(catalog), SchemaRegistry(catalog)  # two processes
    first.apply("db", [rows(a=pa.array([1.0]))])
    second.apply("db", [rows(a=pa.array([1.0]))])  # second caches version 1
    first.apply("db", [rows(b=pa.array(["text"]))])  # version 2 adds b as string
    with pytest.raises(BadRequest, match="'b'"):
        second.apply("db", [rows(b=pa.array([1]))])  # second's cache lacks b: the CAS fails, re-read


def test_a_shape_once_accepted_skips_the_catalog_but_never_other_shapes(
    registry: SchemaRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.apply("db", [rows(v=pa.array([1.5]), n=pa.array([1]))])
    [first] = registry.apply("db", [rows(v=pa.array([2.5]), n=pa.array([2]))])
    reads: list[tuple[str, str]] = []
    real = registry.catalog.get_schema

    def counting(database: str, measurement: str):  # type: ignore[no-untyped-def]
        reads.append((database, measurement))
        return real(database, measurement)

    monkeypatch.setattr(registry.catalog, "get_schema", counting)
    monkeypatch.setattr(registry, "_cache", {})  # any look at a schema would now read the catalog
    same = rows(v=pa.array([3.5]), n=pa.array([3]))
    assert registry.apply("db", [same]) == [same] and reads == []
    # An int into the float column is cast, a wrong type refused: neither shape was accepted.
    [widened] = registry.apply("db", [rows(v=pa.array([4]), n=pa.array([4]))])
    assert widened.table.schema.field("v").type == pa.float64()
    with pytest.raises(BadRequest, match="'n' is int64 in storage"):
        registry.apply("db", [rows(v=pa.array([1.0]), n=pa.array(["x"]))])
    assert first.table.schema == same.table.schema


def test_a_request_s_new_measurements_are_registered_in_one_catalog_write(
    registry: SchemaRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    real = registry.catalog.put_schemas
    monkeypatch.setattr(registry.catalog, "put_schemas", lambda changes: writes.append(len(changes)) or real(changes))
    parts = [rows(f"m{i}", v=pa.array([i])) for i in range(500)]
    registry.apply("db", parts)
    assert writes == [500]
    assert len(registry.catalog.list_schemas("db")) == 500
    registry.apply("db", parts)  # known now: nothing to write
    assert writes == [500]


def test_more_measurements_than_a_request_may_write_are_refused_and_change_nothing(registry: SchemaRegistry) -> None:
    from arcs.write.schema import MAX_MEASUREMENTS_PER_REQUEST

    parts = [rows(f"m{i}", v=pa.array([i])) for i in range(MAX_MEASUREMENTS_PER_REQUEST + 1)]
    with pytest.raises(BadRequest, match=f"the limit is {MAX_MEASUREMENTS_PER_REQUEST} per request"):
        registry.apply("db", parts)
    assert registry.catalog.list_schemas("db") == []


def test_integers_beyond_2_to_the_53_widen_to_the_nearest_float(registry: SchemaRegistry) -> None:
    registry.apply("db", [rows(v=pa.array([1.5]))])
    (part,) = registry.apply("db", [rows(v=pa.array([2**53 + 1, -(2**63)]))])
    assert part.table.column("v").to_pylist() == [2.0**53, -(2.0**63)]
