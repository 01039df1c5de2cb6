"""``arg_max(x, time)`` and its kin read the stored time as ``epoch_ns(time)``: same answer, same names.

DuckDB orders these aggregates' second argument through generic sort keys for ``TIMESTAMP_NS``
(the stored ``time``), about five times slower than for a ``BIGINT``; ``epoch_ns`` keeps the order
to the nanosecond and keeps NULLs NULL. The rewrite applies only where a bare ``time`` can only be
the measurement's column: one ``SELECT`` from one table, without CTEs, subqueries or alias lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from arcs.auth.tokens import Principal
from arcs.query.engine import Engine
from arcs.query.exact_rewrites import apply_exact_rewrites
from arcs.query.service import QueryService
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import Ingestor
from arcs.write.schema import SchemaRegistry
from tests.helpers import BASE_US, local_ports, queued


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT host, arg_max(v, time) FROM cpu GROUP BY host",
            'SELECT host, arg_max(v, epoch_ns(time)) AS "arg_max(v, ""time"")" FROM cpu GROUP BY host',
        ),
        (
            'SELECT max_by(v, "time") AS last, min_by(v, TIME) AS first FROM db.cpu c WHERE time > now()',
            'SELECT max_by(v, epoch_ns("time")) AS last, min_by(v, epoch_ns(TIME)) AS first FROM db.cpu c '
            "WHERE time > now()",
        ),
        (
            "SELECT argMin(coalesce(a, b), time) AS x, arg_min(v, time) FILTER (WHERE v > 0) AS y FROM cpu",
            "SELECT argMin(coalesce(a, b), epoch_ns(time)) AS x, arg_min(v, epoch_ns(time)) FILTER (WHERE v > 0) AS y "
            "FROM cpu",
        ),
    ],
)
def test_rewritten(sql: str, expected: str) -> None:
    assert apply_exact_rewrites(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT arg_max(v, time) FROM (SELECT 1 AS time, 2 AS v)",  # time may be anything there
        "WITH t AS (SELECT epoch(time) AS time, v FROM cpu) SELECT arg_max(v, time) FROM t",
        "SELECT arg_max(v, time) FROM cpu AS c(time, v)",  # an alias list renames columns
        "SELECT arg_max(v, time) FROM cpu WHERE v IN (SELECT v FROM cpu)",
        "SELECT arg_max(v, time) FROM cpu UNION ALL SELECT arg_max(v, time) FROM mem",
        "SELECT arg_max(v, time) FROM cpu JOIN mem USING (host)",
        "SELECT arg_max(v, time, 3) FROM cpu",  # the top three as a list
        "SELECT arg_max(v, time + INTERVAL 1 HOUR) FROM cpu",
        "SELECT arg_max(v, c.time) FROM cpu c",
        "SELECT arg_max(v, timestamp) FROM cpu",
        "SELECT x.arg_max(v, time) FROM cpu",
        "SELECT 'arg_max(v, time)' FROM cpu",
    ],
)
def test_untouched(sql: str) -> None:
    assert apply_exact_rewrites(sql) == sql


def test_epoch_ns_orders_as_the_stored_time() -> None:
    """Times 1 ns apart, NULLs, times before 1970: the same picks as on TIMESTAMP_NS itself."""
    con = duckdb.connect()
    rows = "(1, '1969-12-31 23:59:59.999999999'), (2, '1970-01-01 00:00:00.000000001'), (3, NULL), "
    rows += "(4, '2026-07-01 00:00:00.000000001'), (5, '2026-07-01 00:00:00.000000002')"
    con.execute(f"CREATE TABLE t AS SELECT v, t::TIMESTAMP_NS AS time FROM (VALUES {rows}) r(v, t)")
    for function in ("arg_max", "arg_min"):
        plain = con.execute(f"SELECT {function}(v, time) FROM t").fetchall()
        assert con.execute(f"SELECT {function}(v, epoch_ns(time)) FROM t").fetchall() == plain
    assert con.execute("SELECT arg_max(v, epoch_ns(time)), arg_min(v, epoch_ns(time)) FROM t").fetchall() == [(5, 1)]


def test_query_service_runs_it_with_the_same_answer_and_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement with points 1 ns apart: the last value per host is DuckDB's own on the files."""
    store, catalog = local_ports(tmp_path)
    base_ns = BASE_US * 1000
    times = [base_ns + offset for offset in (0, 1, 2, 5_000, 5_001, 7)]
    table = pa.table(
        {
            "time": pa.array(times, pa.int64()).cast(TIME_TYPE),
            "host": ["a", "a", "b", "b", "a", "b"],
            "v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    batch = WriteBatch("b1", "db", (MeasurementRows("cpu", table, ("host",)),))
    SchemaRegistry(catalog).apply("db", list(batch.parts))
    Ingestor(catalog, store).ingest([queued(batch)])
    engine = Engine([str(tmp_path / "storage") + "/"], tmp_path / "work")
    service = QueryService(catalog, store, engine, 1_000_000)
    sent: list[str] = []
    original_query = engine.query_arrow

    def spy(sql: str, *args: Any, **kwargs: Any) -> pa.Table:
        sent.append(sql)
        return original_query(sql, *args, **kwargs)

    monkeypatch.setattr(engine, "query_arrow", spy)
    sql = "SELECT host, arg_max(v, time), min_by(v, time) AS first FROM cpu GROUP BY host ORDER BY host"
    result = service.run(sql, "db", Principal("t", "t", frozenset({"admin"}), ())).table
    assert "epoch_ns(time)" in sent[-1]
    files = ", ".join(f"'{f}'" for f in (tmp_path / "storage").rglob("*.parquet"))
    direct = duckdb.connect().execute(sql.replace("FROM cpu", f"FROM read_parquet([{files}])")).to_arrow_table()
    assert result.column_names == direct.column_names == ["host", 'arg_max(v, "time")', "first"]
    assert result.to_pylist() == direct.to_pylist()
    assert [row["first"] for row in result.to_pylist()] == [1.0, 3.0]
    assert [row['arg_max(v, "time")'] for row in result.to_pylist()] == [5.0, 4.0]


def test_a_select_alias_named_time_does_not_capture_it() -> None:
    """In the select list, HAVING and ORDER BY, ``time`` inside an aggregate is still the column."""
    con = duckdb.connect()
    con.execute("CREATE TABLE cpu AS SELECT * FROM (VALUES (1.5, TIMESTAMP_NS '2020-01-01', 'a')) r(v, time, host)")
    sql = (
        "SELECT host, epoch(max(time)) AS time, arg_max(v, time) AS last FROM cpu GROUP BY host "
        "HAVING arg_max(v, time) > 0 ORDER BY arg_max(v, time)"
    )
    rewritten = apply_exact_rewrites(sql)
    assert rewritten.count("epoch_ns(time)") == 3
    assert con.execute(rewritten).fetchall() == con.execute(sql).fetchall() == [("a", 1577836800.0, 1.5)]
