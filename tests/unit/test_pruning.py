"""Time pruning: named cases of WHERE clauses and the time range each one may match."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from arcs.query.pruning import TimeConstants, TimeRange, time_range
from arcs.query.rewriter import TableRef, rewrite_tables

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
    # Only what DuckDB applies to the scan of the measurement narrows the range.
    (
        "nested comment hides a predicate",
        f"SELECT * FROM cpu /* /* */ WHERE time > '{A}' AND */ WHERE true",
        TimeRange(),
    ),
    ("renamed columns", f"SELECT * FROM cpu AS c(t0, time, u) WHERE time >= '{A}'", TimeRange()),
    ("sampled table", f"SELECT * FROM cpu TABLESAMPLE 10% WHERE time >= '{A}'", TimeRange()),
    ("sampled select", f"SELECT * FROM cpu WHERE time >= '{A}' USING SAMPLE 10", TimeRange()),
    ("current_date may be a column", "SELECT * FROM cpu WHERE time >= current_date", TimeRange()),
    (
        "current_date()",
        "SELECT * FROM cpu WHERE time >= current_date() - INTERVAL 1 DAY",
        None,  # yesterday's midnight, taken when the test runs (below)
    ),
    ("interval keyword", f"SELECT * FROM cpu WHERE time > TIMESTAMP '{B}' - INTERVAL 1 DAY", TimeRange(ts(A), None)),
    ("cast", f"SELECT * FROM cpu WHERE time >= '{A}'::TIMESTAMPTZ", TimeRange(ts(A), None)),
    ("outer where of a subquery", f"SELECT * FROM (SELECT * FROM cpu) s WHERE time > '{A}'", TimeRange()),
    ("cte body", f"WITH t AS (SELECT * FROM cpu) SELECT * FROM t WHERE time > '{A}'", TimeRange()),
    ("parenthesized", f"SELECT * FROM cpu WHERE ((time > '{A}') AND ((host = 'x')))", TimeRange(ts(A), None)),
    ("empty between", f"SELECT * FROM cpu WHERE time BETWEEN '{B}' AND '{A}'", TimeRange(ts(B), ts(A))),
    (
        "inner block only",
        f"SELECT * FROM (SELECT * FROM cpu WHERE time > '{A}') s WHERE s.v > 1",
        TimeRange(ts(A), None),
    ),
]


@pytest.mark.parametrize(("sql", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_time_range(sql: str, expected: TimeRange | None) -> None:
    if expected is None:
        # The date may turn while the query is read: either day's is right.
        days = [datetime.now(UTC).date()]
        found = ranges(sql)[0]
        days.append(datetime.now(UTC).date())
        midnights = [datetime.combine(day, datetime.min.time(), UTC) - timedelta(days=1) for day in days]
        assert found in [TimeRange(midnight, None) for midnight in midnights]
        return
    assert ranges(sql)[0] == expected


def test_join_applies_each_qualified_bound_to_its_table() -> None:
    sql = f"SELECT * FROM cpu a JOIN mem b ON a.time = b.time WHERE a.time > '{A}' AND b.time < '{B}'"
    assert ranges(sql) == [TimeRange(ts(A), None), TimeRange(None, ts(B))]


@pytest.mark.parametrize(
    ("join", "expected"),
    [
        ("JOIN", [TimeRange(ts(A), None), TimeRange(None, ts(B))]),
        ("LEFT JOIN", [TimeRange(ts(A), None), TimeRange(None, ts(B))]),
        ("FULL OUTER JOIN", [TimeRange(ts(A), None), TimeRange(None, ts(B))]),
        ("POSITIONAL JOIN", [TimeRange(), TimeRange()]),  # rows are paired by position
        ("ASOF JOIN", [TimeRange(), TimeRange()]),
    ],
)
def test_joins_that_keep_the_where_for_a_side_prune_it(join: str, expected: list[TimeRange]) -> None:
    on = "" if join == "POSITIONAL JOIN" else " ON a.time >= b.time" if join == "ASOF JOIN" else " ON a.host = b.host"
    sql = f"SELECT * FROM cpu a {join} mem b{on} WHERE a.time > '{A}' AND b.time < '{B}'"
    assert ranges(sql) == expected


def test_semi_and_anti_joins_prune_only_their_left_side() -> None:
    """The right side is not in the WHERE's scope: ``time`` there is the left side's."""
    for join in ("SEMI JOIN", "ANTI JOIN"):
        sql = f"SELECT * FROM cpu a {join} mem b ON a.host = b.host WHERE time > '{A}'"
        assert ranges(sql) == [TimeRange(ts(A), None), TimeRange()]


def test_deep_nesting_leaves_the_range_open() -> None:
    sql = f"SELECT * FROM cpu WHERE {'(' * 200}time > '{A}'{')' * 200}"
    assert ranges(sql) == [TimeRange(ts(A), None)]  # DuckDB's parser drops redundant parentheses

    def nested(depth: int) -> str:
        expression = f"time > '{A}'"
        for _ in range(depth):
            expression = f"(time > '{A}' OR (host = 'x' AND {expression}))"
        return f"SELECT * FROM cpu WHERE {expression}"

    assert ranges(nested(10)) == [TimeRange(ts(A), None)]
    assert ranges(nested(100)) == [TimeRange()]  # past MAX_DEPTH: open, never wrong


def test_union_blocks_have_their_own_where() -> None:
    sql = f"SELECT * FROM cpu WHERE time > '{A}' UNION ALL SELECT * FROM cpu WHERE time < '{B}'"
    assert ranges(sql) == [TimeRange(ts(A), None), TimeRange(None, ts(B))]


def test_clock_relative_upper_bounds_get_slack() -> None:
    [found] = ranges("SELECT * FROM cpu WHERE time > now() - INTERVAL '1 hour' AND time < now()")
    assert found.lower is not None and found.upper is not None
    now = datetime.now(UTC)
    assert now - timedelta(hours=1, minutes=1) < found.lower < now
    assert found.upper > now + timedelta(minutes=59)


def test_hundreds_of_tables_sharing_a_where_cost_bounded_work() -> None:
    """900 tables and 900 conditions: each reference's range is right or wider, never narrower,
    and reading them costs a bounded number of steps, not their product."""
    tables = ", ".join(f"cpu c{i}" for i in range(900))
    conditions = " AND ".join(f"c{i}.time > '{A}'" for i in range(900))
    sql = f"SELECT count(*) FROM {tables} WHERE {conditions}"
    evaluated: list[str] = []

    def counting(expression: str) -> datetime | None:
        evaluated.append(expression)
        return evaluate(expression)

    started = time.perf_counter()
    found: list[TimeRange] = []
    constants = TimeConstants(counting)
    rewrite_tables(sql, lambda ref: found.append(time_range(ref.where, ref.qualifiers, constants)) or "x")
    assert time.perf_counter() - started < 2
    assert len(found) == 900 and found[0] == TimeRange(ts(A), None)
    assert set(found) <= {TimeRange(ts(A), None), TimeRange()}
    assert len(evaluated) == 1  # one constant, printed and evaluated once
