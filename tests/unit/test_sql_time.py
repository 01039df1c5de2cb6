"""TIMESTAMPTZ expressions are taken to the UTC wall clock, so they compare with stored times."""

from __future__ import annotations

import duckdb
import pytest

from arcs.query.sql_time import utc_wall_clock


@pytest.fixture(scope="module")
def conn() -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(config={"autoload_known_extensions": False, "autoinstall_known_extensions": False})
    connection.execute("SET TimeZone = 'UTC'")
    # A stored time (nanoseconds, no zone) and one an earlier version stored (microseconds, UTC).
    connection.execute(
        "CREATE TABLE t AS SELECT TIMESTAMP_NS '2020-01-01 00:00:00.000000001' AS time, "
        "TIMESTAMPTZ '2020-01-01 00:00:00+00' AS old"
    )
    return connection


@pytest.mark.parametrize(
    "condition",
    [
        "time > now() - INTERVAL 100 YEAR",
        "time < current_timestamp AND time < CURRENT_TIMESTAMP",
        "time < get_current_timestamp() AND time < transaction_timestamp()",
        "time > TIMESTAMPTZ '2019-12-31T23:00:00-01:00'",
        "time > TIMESTAMP WITH TIME ZONE '2020-01-01 00:00:00+00'",
        "time > CAST('2019-12-31 23:00:00-01' AS TIMESTAMP WITH TIME ZONE)",
        "time > TRY_CAST('2019-12-31 23:00:00-01' AS timestamptz)",
        "time >= '2019-12-31'::timestamptz AND time < to_timestamp(1700000000)",
        "time < make_timestamptz(2021, 1, 1, 0, 0, 0)",
        "time BETWEEN now() - INTERVAL 100 YEAR AND now()",
        "old > now() - INTERVAL 100 YEAR AND old < TIMESTAMPTZ '2020-01-02'",
        "date_trunc('day', now()) > time",
    ],
)
def test_zoned_expressions_compare_with_stored_times(conn: duckdb.DuckDBPyConnection, condition: str) -> None:
    with pytest.raises(duckdb.BinderException):  # what the rewrite is for
        conn.execute(f"SELECT count(*) FROM t WHERE {condition.replace('old', 'time')}").fetchall()
    assert conn.execute(f"SELECT count(*) FROM t WHERE {utc_wall_clock(condition)}").fetchall() == [(1,)]


def test_the_instant_is_kept() -> None:
    assert utc_wall_clock("SELECT TIMESTAMPTZ '2024-01-01T02:00:00+02:00'") == (
        "SELECT (TIMESTAMPTZ '2024-01-01T02:00:00+02:00')::TIMESTAMP"
    )
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    sql = utc_wall_clock("SELECT TIMESTAMPTZ '2024-01-01T02:00:00+02:00' = TIMESTAMP '2024-01-01 00:00:00'")
    assert connection.execute(sql).fetchall() == [(True,)]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'now()', \"now\", t.now FROM t",
        "SELECT * FROM t -- now()\n",
        "SELECT /* TIMESTAMPTZ '2020-01-01' */ 1",
        "SELECT CAST(x AS TIMESTAMP) FROM t",
        "SELECT x::TIMESTAMP FROM t",
        "SELECT 1",
    ],
)
def test_nothing_else_changes(sql: str) -> None:
    assert utc_wall_clock(sql) == sql


def test_comments_nest_as_duckdb_reads_them() -> None:
    # DuckDB's block comments nest: the now() here is inside one, and is left alone.
    sql = "SELECT 1 /* a /* b */ now() */ + 1"
    assert utc_wall_clock(sql) == sql
    assert utc_wall_clock("SELECT /* x */ now()") == "SELECT /* x */ (now())::TIMESTAMP"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT TIMESTAMPTZ '2023-11-15 02:00:00+00' AT TIME ZONE 'America/New_York'",
        "SELECT timezone('America/New_York', TIMESTAMPTZ '2023-11-15 02:00:00+00')",
        "SELECT now() AT TIME ZONE 'Europe/Berlin' > TIMESTAMP '2000-01-01'",
        "SELECT CAST('2023-11-15 02:00:00+00' AS TIMESTAMPTZ) AT TIME ZONE 'Asia/Tokyo'",
        "SELECT '2023-11-15 02:00:00+00'::TIMESTAMPTZ AT TIME ZONE 'Asia/Tokyo'",
        "SELECT time_bucket(INTERVAL '1 day', TIMESTAMPTZ '2023-11-15 02:00:00+00', 'Europe/Berlin')",
        "SELECT (TIMESTAMPTZ '2024-01-01 12:00:00+00') AT TIME ZONE 'America/New_York'",
        "SELECT date_trunc('hour', TIMESTAMPTZ '2024-01-01 12:30:00+00') AT TIME ZONE 'America/New_York'",
        "SELECT ('2024-01-01 12:00:00+00'::TIMESTAMPTZ) AT TIME ZONE 'Asia/Tokyo'",
        "SELECT (to_timestamp(1704110400)) AT TIME ZONE 'Asia/Tokyo'",
        "SELECT [TIMESTAMPTZ '2024-01-01 12:00:00+00'][1] AT TIME ZONE 'Asia/Tokyo'",
        "SELECT greatest(TIMESTAMPTZ '2024-01-01 12:00:00+00', TIMESTAMPTZ '2023-01-01 12:00:00+00')"
        " AT TIME ZONE 'Asia/Tokyo'",
        "SELECT CASE WHEN true THEN TIMESTAMPTZ '2024-01-01 12:00:00+00' END AT TIME ZONE 'Asia/Tokyo'",
        "SELECT (now() - INTERVAL 1 DAY)::TIMESTAMPTZ AT /* c */ TIME ZONE 'Asia/Tokyo' < now()::TIMESTAMP",
    ],
)
def test_expressions_read_in_a_zone_answer_as_duckdb_does(sql: str) -> None:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    as_text = "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM ({}) AS q"  # a TIMESTAMPTZ in Python needs pytz
    assert connection.execute(as_text.format(utc_wall_clock(sql))).fetchall() == (
        connection.execute(as_text.format(sql)).fetchall()
    )


def test_zoned_readings_compare_with_stored_times(conn: duckdb.DuckDBPyConnection) -> None:
    rewritten = utc_wall_clock(
        "SELECT count(*) FROM t WHERE time > '2019-12-31 18:00:00'::TIMESTAMPTZ AT TIME ZONE 'America/New_York'"
        " AND time_bucket(INTERVAL '1 day', time::TIMESTAMPTZ, 'Europe/Berlin') IS NOT NULL"
    )
    assert conn.execute(rewritten).fetchall() == [(1,)]


@pytest.mark.parametrize("column", ["time", "old", "t.time"])
def test_a_stored_time_bucketed_in_a_zone_is_bucketed_as_the_instant_it_is(
    conn: duckdb.DuckDBPyConnection, column: str
) -> None:
    # 2020-01-01 00:00 UTC is 09:00 in Tokyo: its Tokyo day began 2019-12-31 15:00 UTC. A stored time
    # (TIMESTAMP_NS) alone gives DuckDB no time_bucket with a zone to choose.
    sql = f"SELECT CAST(time_bucket(INTERVAL '1 day', {column}, 'Asia/Tokyo') AS VARCHAR) FROM t"
    assert conn.execute(utc_wall_clock(sql)).fetchall() == [("2019-12-31 15:00:00+00",)]
