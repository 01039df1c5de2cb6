"""The result-equality rules of the harness: strict, tolerant only where the SQL leaves the answer open."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from clickbench.compare import compare, shape, without_limit


def table(**columns: list[object]) -> pa.Table:
    return pa.table(columns)


def test_equal_results_and_value_normalization() -> None:
    expected = pa.table({"d": pa.array([dt.date(2013, 7, 2)]), "n": pa.array([5], pa.int64()), "x": [1.0]})
    # A timestamp at midnight UTC is that date; int widths do not matter; floats within 1e-9.
    actual = pa.table(
        {
            "d": pa.array([dt.datetime(2013, 7, 2, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC")),
            "n": pa.array([5], pa.uint64()),
            "x": [1.0 + 1e-12],
        }
    )
    assert compare("SELECT MIN(d), COUNT(*), AVG(x) FROM t", expected, actual).equal


def test_integers_against_a_timestamp_are_unix_seconds() -> None:
    expected = pa.table({"m": pa.array([dt.datetime(2013, 7, 14, 0, 1)], pa.timestamp("us"))})
    seconds = int(dt.datetime(2013, 7, 14, 0, 1, tzinfo=dt.UTC).timestamp())
    assert compare("SELECT m FROM t", expected, pa.table({"m": pa.array([seconds], pa.uint32())})).equal
    assert not compare("SELECT m FROM t", expected, pa.table({"m": pa.array([seconds + 60], pa.uint32())})).equal


def test_a_wrong_value_a_missing_row_or_a_float_off_by_more_than_the_tolerance_differs() -> None:
    sql = "SELECT k, c FROM t ORDER BY c DESC LIMIT 3"
    expected = table(k=["a", "b", "c"], c=[3, 2, 1])
    assert not compare(sql, expected, table(k=["a", "b", "d"], c=[3, 2, 0])).equal
    assert not compare(sql, expected, table(k=["a", "b"], c=[3, 2])).equal
    assert not compare("SELECT AVG(x) FROM t", table(x=[1.0]), table(x=[1.0 + 1e-6])).equal


def test_ties_may_come_in_any_order_and_differ_only_at_the_window_edge() -> None:
    sql = "SELECT k, c FROM t ORDER BY c DESC LIMIT 4"
    expected = table(k=["a", "b", "c", "d"], c=[5, 5, 4, 3])
    # Tied rows swapped inside the window: equal.
    assert compare(sql, expected, table(k=["b", "a", "c", "d"], c=[5, 5, 4, 3])).equal
    # Another row of the last key group (c = 3) chosen by LIMIT: equal.
    assert compare(sql, expected, table(k=["a", "b", "c", "z"], c=[5, 5, 4, 3])).equal
    # A different row inside the window is not a tie at the edge.
    assert not compare(sql, expected, table(k=["a", "z", "c", "d"], c=[5, 5, 4, 3])).equal
    # Without OFFSET the first group is whole: a row of it may not be replaced.
    assert not compare(sql, table(k=["a", "b", "c"], c=[5, 5, 4]), table(k=["a", "z", "c"], c=[5, 5, 4])).equal
    # With OFFSET the window may start inside a key group.
    offset = "SELECT k, c FROM t ORDER BY c DESC LIMIT 3 OFFSET 1"
    assert compare(offset, table(k=["b", "c", "d"], c=[5, 4, 3]), table(k=["a", "c", "d"], c=[5, 4, 3])).equal


def test_sort_keys_are_found_by_alias_expression_position_or_star() -> None:
    columns = ["URL", "count_star()"]
    assert shape("SELECT URL, COUNT(*) FROM t GROUP BY URL ORDER BY COUNT(*) DESC LIMIT 10", columns).keys == (1,)
    assert shape("SELECT URL, COUNT(*) AS c FROM t GROUP BY 1 ORDER BY c DESC LIMIT 10", columns).keys == (1,)
    assert shape("SELECT * FROM t ORDER BY EventTime LIMIT 10", ["WatchID", "EventTime"]).keys == (1,)
    assert shape("SELECT SearchPhrase FROM t ORDER BY EventTime LIMIT 10", ["SearchPhrase"]).keys is None


def test_limit_without_order_by_takes_any_rows_of_the_full_result() -> None:
    sql = "SELECT u, p, COUNT(*) FROM t GROUP BY u, p LIMIT 2"
    full = table(u=[1, 2, 3], p=["x", "y", "z"], n=[1, 1, 2])
    expected = table(u=[1, 2], p=["x", "y"], n=[1, 1])
    assert compare(sql, expected, table(u=[3, 1], p=["z", "x"], n=[2, 1]), lambda: full).equal
    assert not compare(sql, expected, table(u=[3, 9], p=["z", "q"], n=[2, 1]), lambda: full).equal
    assert without_limit(sql + ";") == "SELECT u, p, COUNT(*) FROM t GROUP BY u, p"


def test_columns_in_another_order_match_by_name_and_own_columns_are_left_out() -> None:
    expected = table(a=[1], b=["x"])
    assert compare("SELECT * FROM t", expected, table(b=["x"], a=[1])).equal
    assert not compare("SELECT * FROM t", expected, table(b=["y"], a=[1])).equal
    assert compare("SELECT * FROM t", expected, table(a=[1], b=["x"], time=[0]), own_columns=("time",)).equal
    assert not compare("SELECT * FROM t", expected, table(a=[1], b=["x"], time=[0])).equal


def test_raw_days_against_a_date() -> None:
    expected = pa.table({"d": pa.array([dt.date(2013, 7, 2)])})
    assert compare("SELECT d FROM t", expected, pa.table({"d": pa.array([15888], pa.uint16())})).equal
