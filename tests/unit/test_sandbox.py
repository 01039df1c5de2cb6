"""The sandbox's statement check on DuckDB's parse tree, and the engine's DuckDB controls.

Fast: no data, no catalog; the check runs on an engine over an empty data root.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from arcs.errors import ArcsError, BadRequest, Forbidden
from arcs.query.engine import Engine
from arcs.query.sandbox import ALLOWED_TABLE_FUNCTIONS, check_read_only


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    root = tmp_path_factory.mktemp("sandbox-unit")
    (root / "storage").mkdir()
    engine = Engine([str(root / "storage") + "/"], root / "work")
    yield engine
    engine.close()


ALLOWED = [
    ("plain", "SELECT * FROM cpu"),
    ("qualified", "SELECT * FROM db.cpu"),
    ("quoted", 'SELECT * FROM "db"."cpu"'),
    ("trailing semicolon and comment", "SELECT 1 FROM cpu; -- done"),
    ("join", "SELECT * FROM cpu c JOIN mem m USING (time)"),
    ("natural, asof and anti joins", "SELECT * FROM cpu NATURAL JOIN mem ASOF JOIN disk USING (host, time)"),
    ("cte", "WITH t AS (SELECT * FROM cpu) SELECT * FROM t"),
    ("cte seeing an earlier cte", "WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM a) SELECT * FROM b"),
    ("cte of a measurement's name", "WITH cpu AS (SELECT * FROM db.cpu) SELECT * FROM cpu"),
    ("recursive cte", "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT * FROM t"),
    ("subquery in where", "SELECT * FROM cpu WHERE host IN (SELECT host FROM mem)"),
    ("lateral", "SELECT * FROM cpu, LATERAL (SELECT cpu.host) AS l(h)"),
    ("range", "SELECT * FROM range(10) t(i)"),
    ("generate_series and unnest", "SELECT * FROM generate_series(1, 3), unnest([1, 2])"),
    ("from first", "FROM cpu SELECT host"),
    ("values", "SELECT * FROM (VALUES (1, 'a')) v(i, s)"),
    ("pivot clause", "SELECT * FROM cpu PIVOT (sum(value) FOR host IN ('a', 'b'))"),
    ("window", "SELECT avg(value) OVER (PARTITION BY host ORDER BY time ROWS 3 PRECEDING) FROM cpu"),
    ("qualify", "SELECT * FROM cpu QUALIFY row_number() OVER (PARTITION BY host ORDER BY time DESC) = 1"),
    ("extract and substring", "SELECT EXTRACT(hour FROM time), substring(host FROM 2) FROM cpu"),
    ("is distinct from", "SELECT host IS DISTINCT FROM 'a' FROM cpu"),
    ("strings naming files", "SELECT 'read_parquet(''/etc/passwd'')', $$; COPY x TO 'y'$$ FROM cpu"),
    ("escape strings", "SELECT E'it\\'s', e'\\\\ FROM x' FROM cpu WHERE host <> E'a\\'b'"),
    ("comments naming files", "SELECT 1 /* FROM read_csv('/etc/passwd') */ FROM cpu -- ; DROP TABLE x"),
    ("regexp and time functions", "SELECT regexp_replace(host, 'a', 'b'), date_trunc('hour', time) FROM cpu"),
    ("json_serialize_sql only parses", "SELECT json_serialize_sql('SELECT 1')"),
    ("no table", "SELECT 1 + 1"),
    # Read as DuckDB reads them (one reading: the rewriter maps what the parser names).
    ("nested comment around a reference", "SELECT 1 /* /* */ FROM cpu */ FROM mem"),
    ("comment inside a qualified name", "SELECT * FROM db/**/./**/cpu"),
]


@pytest.mark.parametrize(("case", "sql"), ALLOWED, ids=[case for case, _ in ALLOWED])
def test_allowed(engine: Engine, case: str, sql: str) -> None:
    check_read_only(sql)


REFUSED = [
    # statement types
    ("copy", "COPY (SELECT 1) TO 'x.csv'", "COPY statements are refused"),
    ("attach memory", "ATTACH ':memory:' AS m", "ATTACH"),
    ("detach", "DETACH memory", "DETACH"),
    ("install", "INSTALL httpfs", "INSTALL statements are refused"),
    ("load", "LOAD httpfs", "LOAD"),
    ("set", "SET threads = 1", "SET"),
    ("reset", "RESET threads", "SET"),
    ("set variable", "SET VARIABLE x = 1", "SET"),
    ("pragma", "PRAGMA version", "PRAGMA"),
    ("call", "CALL enable_logging()", "CALL"),
    ("export", "EXPORT DATABASE 'x'", "EXPORT"),
    ("create temp table", "CREATE TEMP TABLE t AS SELECT 1", "CREATE"),
    ("create macro", "CREATE MACRO m() AS 1", "CREATE"),
    ("create secret", "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')", "CREATE"),
    ("drop", "DROP TABLE cpu", "DROP"),
    ("insert", "INSERT INTO cpu VALUES (1)", "INSERT"),
    ("update", "UPDATE cpu SET value = 1", "UPDATE"),
    ("delete", "DELETE FROM cpu", "DELETE"),
    ("explain", "EXPLAIN SELECT 1", "EXPLAIN"),
    ("explain analyze", "EXPLAIN ANALYZE SELECT * FROM read_parquet('x')", "EXPLAIN"),
    ("prepare", "PREPARE p AS SELECT 1", "PREPARE"),
    ("pivot statement", "PIVOT cpu ON host USING sum(value)", "PIVOT statements are refused"),
    ("pivot statement with values", "PIVOT cpu ON host IN ('a') USING sum(value)", "cannot be mapped"),
    ("pragma expanded to a select", "PRAGMA database_list", "PRAGMA statements are refused"),
    ("pragma running serialized sql", "PRAGMA json_execute_serialized_sql('x')", "PRAGMA"),
    ("insert behind a cte", "WITH t AS (SELECT 1) INSERT INTO cpu SELECT * FROM t", "only SELECT queries"),
    # several statements
    ("two selects", "SELECT 1; SELECT 2", "exactly one statement; got 2"),
    ("semicolon in a string then a second statement", "SELECT ';'; DROP TABLE x", "got 2"),
    ("after a block comment", "SELECT 1 /* */; COPY (SELECT 1) TO 'x'", "got 2"),
    ("after a line comment", "SELECT 1 -- x\n; ATTACH ':memory:' AS m", "got 2"),
    # table functions and string scans
    ("read_parquet", "SELECT * FROM read_parquet('x.parquet')", "read_parquet() is not allowed"),
    ("parquet_scan", "SELECT * FROM parquet_scan('x.parquet')", "parquet_scan() is not allowed"),
    ("read_csv in a subquery", "SELECT (SELECT count(*) FROM read_csv('/etc/passwd'))", "read_csv() is not allowed"),
    ("read_text in a cte", "WITH t AS (FROM read_text('/etc/passwd')) SELECT * FROM t", "read_text() is not allowed"),
    ("glob", "SELECT * FROM glob('/*')", "glob() is not allowed"),
    ("parquet_metadata", "SELECT * FROM parquet_metadata('x.parquet')", "parquet_metadata() is not allowed"),
    ("query", "SELECT * FROM query('SELECT 1')", "query() is not allowed"),
    ("duckdb_secrets", "SELECT * FROM duckdb_secrets()", "duckdb_secrets() is not allowed"),
    ("duckdb_settings", "SELECT * FROM duckdb_settings()", "duckdb_settings() is not allowed"),
    ("enable_logging", "SELECT * FROM enable_logging(storage = 'file')", "enable_logging() is not allowed"),
    ("quoted function name", "SELECT * FROM \"READ_PARQUET\"('x')", "is not allowed"),
    ("qualified allowed function", "SELECT * FROM main.range(3)", "range() is not allowed"),
    ("string path", "SELECT * FROM 'x.parquet'", "files and URLs cannot be read"),
    ("string url", "SELECT * FROM 'https://example.com/x.csv'", "files and URLs cannot be read"),
    ("string path in an IN subquery", "SELECT 1 FROM cpu WHERE 1 IN (FROM '/etc/passwd')", "files and URLs"),
    ("quoted identifier path", 'SELECT * FROM "x.parquet"', "invalid measurement name"),
    ("three-part name", "SELECT * FROM memory.main.cpu", "use measurement or database.measurement"),
    ("describe", "DESCRIBE cpu", "DESCRIBE"),
    ("summarize", "SUMMARIZE SELECT 1", "SUMMARIZE"),
    # scalar functions
    ("current_setting", "SELECT current_setting('home_directory')", "current_setting() is not allowed"),
    ("getenv", "SELECT getenv('HOME')", "getenv() is not allowed"),
    ("current_query", "SELECT current_query() FROM cpu", "current_query() is not allowed"),
    ("json_serialize_plan", "SELECT json_serialize_plan('SELECT 1')", "json_serialize_plan() is not allowed"),
    ("sleep", "SELECT sleep_ms(100000)", "sleep_ms() is not allowed"),
    ("denied function deep inside", "SELECT * FROM range(3) WHERE (SELECT upper(getenv('X'))) IS NULL", "getenv"),
    # names the rewriter and DuckDB would read differently
    ("system view shadowed by its own cte", "WITH pg_settings AS (SELECT * FROM pg_settings) SELECT 1", "CTE"),
    ("cte used before it is defined", "WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT * FROM a", "CTE"),
    ("cte out of scope", "SELECT * FROM cpu, (WITH cpu AS (SELECT 1) SELECT * FROM cpu) s", "CTE"),
    ("table statement", "TABLE cpu", "cannot be mapped"),
    (
        "e-string escape hiding a read",
        "SELECT E'\\' FROM cpu' AS q, * FROM read_text('/x')",
        "read_text() is not allowed",
    ),
    ("unterminated e-string", "SELECT E'\\' AS q, 1 FROM cpu", "unterminated"),
    ("unicode quotes", "SELECT * FROM \u201c/etc/passwd\u201d", "does not parse"),
    ("lone surrogate", "SELECT '\ud800' FROM cpu", "not valid Unicode"),
    ("empty", "-- nothing", "exactly one statement; got 0"),
]


@pytest.mark.parametrize(("case", "sql", "message"), REFUSED, ids=[case for case, _, _ in REFUSED])
def test_refused(engine: Engine, case: str, sql: str, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        check_read_only(sql)
    assert message in caught.value.message


def test_reserved_database_is_forbidden(engine: Engine) -> None:
    with pytest.raises(Forbidden):
        check_read_only("SELECT * FROM system.cpu")


def test_every_refusal_is_a_client_error(engine: Engine) -> None:
    for _case, sql, _message in REFUSED:
        with pytest.raises(ArcsError) as caught:
            check_read_only(sql)
        assert 400 <= caught.value.status < 500


def test_every_allowed_table_function_runs(engine: Engine) -> None:
    assert {"range", "generate_series", "unnest"} == ALLOWED_TABLE_FUNCTIONS
    rows = engine.query_arrow("SELECT count(*) AS n FROM range(3), generate_series(1, 2), unnest([7])")
    assert rows.column("n").to_pylist() == [6]


@pytest.mark.parametrize("depth", [600, 5000])
def test_deeply_nested_sql_is_refused(engine: Engine, depth: int) -> None:
    with pytest.raises(BadRequest):
        check_read_only("SELECT " + "abs(" * depth + "1" + ")" * depth)


# --- DuckDB's own controls on the engine's connection -----------------------------------------


def test_configuration_is_locked(engine: Engine) -> None:
    cursor = engine.connection().cursor()
    for statement in ("SET enable_external_access = true", "RESET allowed_directories", "SET threads = 1"):
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            cursor.execute(statement)


def test_files_outside_the_data_root_are_refused_by_duckdb(engine: Engine, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("x\n1\n")
    cursor = engine.connection().cursor()
    for statement in (
        f"SELECT * FROM read_csv('{secret}')",
        f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
        "SELECT * FROM read_csv('http://169.254.169.254/latest/meta-data/')",
        "INSTALL httpfs",
    ):
        with pytest.raises(duckdb.PermissionException):
            cursor.execute(statement)
    assert not (tmp_path / "out.csv").exists()


def test_python_variables_are_never_tables(engine: Engine) -> None:
    leaked = pa.table({"secret": ["SENTINEL"]})  # noqa: F841 - what a replacement scan would find
    cursor = engine.connection().cursor()
    with pytest.raises(duckdb.CatalogException):
        cursor.execute("SELECT * FROM leaked")
