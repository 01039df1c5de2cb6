"""The 43 ClickBench queries over hits data loaded through the write path, against DuckDB itself.

Generated hits rows go in as MessagePack columnar writes over HTTP to the standalone server; each
query then runs through the query API (JSON and Arrow) and directly in DuckDB over the very files
the server stored, the way ClickBench's DuckDB view reads hits.parquet. Both use one thread, so
rows tied under ORDER BY ... LIMIT come out in the same order on both sides.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import msgpack
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from clickbench.generate import generate_hits, scale_query, to_parquet_layout

from arcs.query.exact_rewrites import apply_exact_rewrites
from tests.e2e.servers import TOKEN, Client, standalone

pytestmark = pytest.mark.e2e

ROWS = 3_000
ROWS_PER_REQUEST = 500
QUERIES_FILE = Path(__file__).resolve().parents[2] / "clickbench" / "queries.sql"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LOAD_TIME_S = 1_373_846_400  # 2013-07-15T00:00:00Z


def _queries() -> list[str]:
    return [line.strip() for line in QUERIES_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_bodies(hits: pa.Table) -> Iterator[bytes]:
    """hits.parquet's physical layout as MessagePack columns: times as Unix seconds, EventDate a timestamp."""
    physical = to_parquet_layout(hits)
    columns: dict[str, list[Any]] = {}
    for field in physical.schema:
        column = physical.column(field.name)
        if pa.types.is_binary(field.type):
            column = column.cast(pa.string())
        if field.name == "EventDate":
            columns[field.name] = [_EPOCH + dt.timedelta(days=days) for days in column.to_pylist()]
        else:
            columns[field.name] = column.to_pylist()
    # The storage time is not what the queries read: packing it into one hour keeps the test to a
    # few files (EventTime spreads over 30 days, which would make one file per hour per request).
    columns["time"] = [LOAD_TIME_S + row for row in range(hits.num_rows)]
    for start in range(0, hits.num_rows, ROWS_PER_REQUEST):
        chunk = {name: values[start : start + ROWS_PER_REQUEST] for name, values in columns.items()}
        yield msgpack.packb({"m": "hits", "columns": chunk, "precision": "s"}, datetime=True)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, duckdb.DuckDBPyConnection]]:
    data_dir = tmp_path_factory.mktemp("clickbench-data")
    server = standalone(data_dir, ARCS_DUCKDB_THREADS="1").start()
    client = Client(server.url, TOKEN)
    try:
        for body in _write_bodies(generate_hits(ROWS, seed=7)):
            response = client.write("/api/v1/write/msgpack", body)
            assert response.status_code == 204, response.text
        assert client.wait_count("hits", ROWS) == ROWS
        # The files the server lists, in its order: both sides then scan rows in the same order.
        files = sorted(str(path) for path in data_dir.rglob("*.parquet") if "/hits/" in str(path))
        baseline = duckdb.connect(":memory:", config={"threads": 1})
        baseline.execute("SET TimeZone = 'UTC'")
        baseline.execute("CREATE MACRO toDateTime(t) AS epoch_ms(t * 1000)")
        paths = ", ".join("'" + path.replace("'", "''") + "'" for path in files)
        baseline.execute(f"CREATE VIEW hits AS SELECT * FROM read_parquet([{paths}], union_by_name = true)")
        yield client, baseline
        baseline.close()
    finally:
        client.http.close()
        server.stop()


def _json_value(value: Any, kind: pa.DataType) -> Any:
    """What the JSON answer holds for one value DuckDB returned, worked out without arcs.query.results."""
    if value is None:
        return None
    if pa.types.is_timestamp(kind) and kind.unit == "ns":  # nine fraction digits
        moment = _EPOCH + dt.timedelta(microseconds=value // 1000)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{value % 1000:03d}Z"
    if pa.types.is_timestamp(kind):
        moment = _EPOCH + dt.timedelta(microseconds=value)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _expected_json(table: pa.Table) -> tuple[list[str], list[list[Any]]]:
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_timestamp(field.type):
            column = column.cast(pa.timestamp(field.type.unit)).cast(pa.int64())
            if field.type.unit in ("s", "ms"):
                column = pc.multiply(column, {"s": 1_000_000, "ms": 1_000}.get(field.type.unit, 1))
        columns.append([_json_value(value, field.type) for value in column.to_pylist()])
    return table.column_names, [list(row) for row in zip(*columns, strict=True)]


def _utc(table: pa.Table) -> pa.Table:
    """DuckDB names the zone 'Etc/UTC' where the API says 'UTC', and leaves a UTC wall clock
    zone-less where the API's Arrow answer says UTC: the instants are what we compare."""
    fields = [
        f.with_type(pa.timestamp(f.type.unit, tz="UTC")) if pa.types.is_timestamp(f.type) else f for f in table.schema
    ]
    return table.cast(pa.schema(fields))


QUERY_NUMBERS = list(range(1, 44))


@pytest.mark.parametrize("number", QUERY_NUMBERS, ids=[f"Q{n}" for n in QUERY_NUMBERS])
def test_clickbench_query_equals_duckdb_on_the_same_files(
    loaded: tuple[Client, duckdb.DuckDBPyConnection], number: int
) -> None:
    client, baseline = loaded
    sql = scale_query(_queries()[number - 1], ROWS)
    expected = baseline.execute(sql).to_arrow_table()
    assert expected.num_rows > 0, "the generated data must give every query rows"

    response = client.http.post("/api/v1/query/arrow", json={"sql": sql})
    assert response.status_code == 200, response.text
    ours = pa.ipc.open_stream(response.content).read_all()
    assert ours.column_names == expected.column_names
    assert _utc(ours).equals(_utc(expected)), f"Q{number}: Arrow results differ"

    document = client.query(sql).json()
    assert document["success"] is True, document
    names, rows = _expected_json(expected)
    assert document["columns"] == names
    assert document["row_count"] == len(rows)
    assert document["data"] == rows, f"Q{number}: JSON results differ"


def test_the_regex_query_runs_as_the_exact_rewrite(loaded: tuple[Client, duckdb.DuckDBPyConnection]) -> None:
    """Q29 reaches DuckDB as the CASE form, not the regex, and still equals the regex's answer above."""
    sql = _queries()[28]
    assert re.search(r"REGEXP_REPLACE", sql)
    assert "REGEXP_REPLACE" not in apply_exact_rewrites(sql).upper()
