"""Time pruning: named cases of WHERE clauses and the time range each one may match."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from arcs.pruning import TimeRange, time_range
from arcs.rewriter import TableRef, rewrite_tables

CONNECTION = duckdb.connect()
CONNECTION.execute("SET TimeZone = 'UTC'")


def evaluate(expression: str) -> datetime | None:
    try:
        row = CONNECTION.execute(f"SELECT epoch_us(CAST(({expression}) AS TIMESTAMPTZ))").fetchone()
    except duckdb.Error:
        return None
    return None if row is None or row[0] is None else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=row[0])


def ranges(sql: str) -> list[TimeRange]:
    found: list[TimeRange] = []

    def scan(ref: TableRef) -> str:
        found.append(time_range(ref.where, ref.qualifiers, evaluate))
        return "x"

    rewrite_tables(sql, scan)
    return found


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


A, B = "2024-01-01 00:00:00", "2024-01-02 00:00:00"
CASES = [
    ("greater", f"SELECT * FROM cpu WHERE time > '{A}'", TimeRange(ts(A), None)),
    ("less equal", f"SELECT * FROM cpu WHERE time <= '{B}'", TimeRange(None, ts(B))),
    ("and", f"SELECT * FROM cpu WHERE time >= '{A}' AND host = 'x' AND time < '{B}'", TimeRange(ts(A), ts(B))),
    ("between", f"SELECT * FROM cpu WHERE time BETWEEN '{A}' AND '{B}' AND v > 1", TimeRange(ts(A), ts(B))),
    ("flipped", f"SELECT * FROM cpu WHERE '{A}' <= time", TimeRange(ts(A), None)),
    ("typed literal", f"SELECT * FROM cpu WHERE time >= TIMESTAMP '{A}'", TimeRange(ts(A), None)),
    ("date literal", "SELECT * FROM cpu WHERE time >= DATE '2024-01-01'", TimeRange(ts(A), None)),
    ("equality", f"SELECT * FROM cpu WHERE time = '{A}'", TimeRange(ts(A), ts(A))),
    (
        "or hull",
        f"SELECT * FROM cpu WHERE (time > '{A}' AND time < '2024-01-01 01:00:00') OR "
        f"(time > '2024-01-01 05:00:00' AND time < '{B}')",
        TimeRange(ts(A), ts(B)),
    ),
    ("or with an open side", f"SELECT * FROM cpu WHERE time > '{A}' OR host = 'x'", TimeRange()),
    # DuckDB's parser reads NOT over a comparison as the opposite comparison.
    ("not comparison", f"SELECT * FROM cpu WHERE NOT time > '{A}'", TimeRange(None, ts(A))),
    ("not", f"SELECT * FROM cpu WHERE NOT (time > '{A}' AND host = 'x')", TimeRange()),
    ("function of time", f"SELECT * FROM cpu WHERE date_trunc('hour', time) > '{A}'", TimeRange()),
    ("other column", f"SELECT * FROM cpu WHERE other_time > '{A}'", TimeRange()),
    ("qualified", f"SELECT * FROM cpu c WHERE c.time > '{A}'", TimeRange(ts(A), None)),
    ("other qualifier", f"SELECT * FROM cpu c WHERE d.time > '{A}'", TimeRange()),
    ("subquery constant refused", "SELECT * FROM cpu WHERE time > (SELECT max(time) FROM mem)", TimeRange()),
    ("group by after", f"SELECT count(*) FROM cpu WHERE time > '{A}' GROUP BY host", TimeRange(ts(A), None)),
    ("no where", "SELECT * FROM cpu", TimeRange()),
    (
        "inner block only",
        f"SELECT * FROM (SELECT * FROM cpu WHERE time > '{A}') s WHERE s.v > 1",
        TimeRange(ts(A), None),
    ),
]


@pytest.mark.parametrize(("sql", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_time_range(sql: str, expected: TimeRange) -> None:
    assert ranges(sql)[0] == expected


def test_join_applies_each_qualified_bound_to_its_table() -> None:
    sql = f"SELECT * FROM cpu a JOIN mem b ON a.time = b.time WHERE a.time > '{A}' AND b.time < '{B}'"
    assert ranges(sql) == [TimeRange(ts(A), None), TimeRange(None, ts(B))]


def test_union_blocks_have_their_own_where() -> None:
    sql = f"SELECT * FROM cpu WHERE time > '{A}' UNION ALL SELECT * FROM cpu WHERE time < '{B}'"
    assert ranges(sql) == [TimeRange(ts(A), None), TimeRange(None, ts(B))]


def test_clock_relative_upper_bounds_get_slack() -> None:
    [found] = ranges("SELECT * FROM cpu WHERE time > now() - INTERVAL '1 hour' AND time < now()")
    assert found.lower is not None and found.upper is not None
    now = datetime.now(UTC)
    assert now - timedelta(hours=1, minutes=1) < found.lower < now
    assert found.upper > now + timedelta(minutes=59)
