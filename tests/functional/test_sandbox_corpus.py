"""The hostile-query corpus: every query is answered 4xx, reads nothing of another database and
creates no file; and the legitimate queries beside it keep working.

Two databases are written through the real write path (``WriteService`` -> spool -> ingest) into
one data directory on the local adapters: ``alpha``, the caller's, and ``bravo``, whose values and
column names are sentinels that must never appear in any answer. The caller's token may use
``alpha`` only. Templates name real paths: another database's Parquet files, the catalog's SQLite
file, the spool, the data root; files a query might create are named with a per-run nonce.
"""

from __future__ import annotations

import glob
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from arcs.auth.tokens import Principal
from arcs.errors import ArcsError
from arcs.http.server import IngestLoop
from arcs.query.results import to_json_document
from arcs.query.service import QueryService
from arcs.query.sql_tree import MAX_SQL_BYTES
from arcs.runtime import LocalRuntime, local_runtime
from arcs.settings import Settings
from arcs.write.decoders import WireFormat
from arcs.write.edge import WriteRequest

T0 = 1_700_000_000  # seconds; 2023-11-14T22:13:20Z
NONCE = uuid.uuid4().hex[:12]
SENTINEL_HOST = f"bravo-host-{NONCE}"
SENTINEL_COLUMN = f"bravo_column_{NONCE}"
SENTINEL_VALUE = f"bravo-value-{NONCE}"
SENTINELS = (SENTINEL_HOST, SENTINEL_COLUMN, SENTINEL_VALUE, "999.25")
TMP_TARGET = f"/tmp/arcs-sandbox-{NONCE}"

ALPHA_LINES = f"""\
cpu,host=a value=1.5,note="x" {T0}
cpu,host=b value=2.5,note="y" {T0 + 1}
cpu,host=a value=3.5,note="z" {T0 + 3600}
cpu,host=b value=4.5,note="https://www.example.com/some/path" {T0 + 3601}
mem,host=a free=10i {T0}
mem,host=b free=20i {T0 + 1}
"""
BRAVO_LINES = f"""\
cpu,host={SENTINEL_HOST} value=999.25 {T0}
vault,host=a {SENTINEL_COLUMN}="{SENTINEL_VALUE}" {T0}
"""
READER = Principal("t-alpha", "alpha-reader", frozenset({"read"}), ("alpha",))


class RecordingCatalog:
    """The runtime's catalog, recording the database of every call that names one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.databases: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], str):
                self.databases.append(args[0])
            return attribute(*args, **kwargs)

        return call


class RecordingStore:
    """The runtime's store, recording every key handed to DuckDB as a URL."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.urls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def url(self, key: str) -> str:
        self.urls.append(key)
        return str(self.inner.url(key))


@dataclass
class World:
    runtime: LocalRuntime
    data_dir: Path
    catalog: RecordingCatalog
    store: RecordingStore
    service: QueryService
    paths: dict[str, str]

    def run(self, sql: str) -> Any:
        return self.service.run(sql, "alpha", READER)

    def files(self) -> set[str]:
        return {
            os.path.relpath(os.path.join(folder, name), self.data_dir)
            for folder, _dirs, names in os.walk(self.data_dir)
            for name in names
        }


def _write(runtime: LocalRuntime, database: str, lines: str) -> None:
    runtime.writes.accept(WriteRequest(WireFormat.LINE_PROTOCOL, lines.encode(), database, precision="s"))
    IngestLoop(runtime).drain_once(runtime.spool.take(100))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("sandbox-data")
    runtime = local_runtime(Settings(data_dir=data_dir, query_max_rows=100_000))
    _write(runtime, "alpha", ALPHA_LINES)
    _write(runtime, "bravo", BRAVO_LINES)
    bravo_files = [runtime.store.url(f.key) for m in ("cpu", "vault") for f in runtime.catalog.list_files("bravo", m)]
    alpha_files = [runtime.store.url(f.key) for f in runtime.catalog.list_files("alpha", "cpu")]
    assert len(bravo_files) == 2 and len(alpha_files) == 2
    storage = str(runtime.store.root)  # type: ignore[attr-defined]
    paths = {
        "bravo_file": bravo_files[0],
        "bravo_vault": bravo_files[1],
        "bravo_dir": os.path.dirname(bravo_files[0]),
        "alpha_file": alpha_files[0],
        "storage": storage,
        "data": str(data_dir.resolve()),
        "catalog": str(data_dir.resolve() / "catalog.sqlite"),
        "spool": str(runtime.spool.root),
        "tmp": TMP_TARGET,
    }
    catalog = RecordingCatalog(runtime.catalog)
    store = RecordingStore(runtime.store)
    service = QueryService(catalog, store, runtime.engine, runtime.settings.query_max_rows)  # type: ignore[arg-type]
    world = World(runtime, data_dir, catalog, store, service, paths)
    world.run("SELECT count(*) FROM cpu")  # warm: the engine's own work files exist from here on
    yield world
    runtime.engine.close()


# (name, SQL template, expected status, a fragment of the message)
CORPUS: list[tuple[str, str, int, str]] = [
    # --- another database, by name --------------------------------------------------------------
    ("other db qualified", "SELECT * FROM bravo.cpu", 403, "may not use database 'bravo'"),
    ("other db quoted", 'SELECT * FROM "bravo"."cpu"', 403, "'bravo'"),
    ("other db half quoted", 'SELECT * FROM "bravo".cpu', 403, "'bravo'"),
    ("other db upper case", "SELECT * FROM BRAVO.cpu", 403, "'BRAVO'"),
    ("other db in a join", "SELECT * FROM cpu JOIN bravo.cpu b USING (time)", 403, "'bravo'"),
    ("other db in an IN subquery", "SELECT * FROM cpu WHERE host IN (SELECT host FROM bravo.cpu)", 403, "'bravo'"),
    ("other db in a cte", "WITH x AS (SELECT * FROM bravo.vault) SELECT * FROM x", 403, "'bravo'"),
    ("other db materialized cte", "WITH x AS MATERIALIZED (FROM bravo.vault) SELECT * FROM x", 403, "'bravo'"),
    ("other db lateral", "SELECT * FROM cpu, LATERAL (SELECT host FROM bravo.cpu) l", 403, "'bravo'"),
    ("other db scalar subquery", "SELECT (SELECT max(host) FROM bravo.cpu) FROM cpu", 403, "'bravo'"),
    ("other db union", "SELECT host FROM cpu UNION ALL SELECT host FROM bravo.cpu", 403, "'bravo'"),
    ("other db from first", "FROM bravo.vault SELECT *", 403, "'bravo'"),
    ("other db pivot statement", "PIVOT bravo.cpu ON host IN ('a') USING sum(value)", 400, "cannot be mapped"),
    ("other db unpivot", "UNPIVOT bravo.vault ON COLUMNS(*) INTO NAME k VALUE v", 400, "cannot be mapped"),
    ("other db parenthesized join", "SELECT * FROM (cpu JOIN bravo.cpu USING (time))", 403, "'bravo'"),
    ("other db comment in the name", "SELECT * FROM bravo/**/./**/cpu", 403, "'bravo'"),
    ("other db behind a nested comment", "SELECT 1 /* /* */ FROM cpu */ FROM bravo.cpu", 403, "'bravo'"),
    ("other db three-part name", "SELECT * FROM memory.bravo.cpu", 400, "use measurement or database.measurement"),
    ("reserved database", "SELECT * FROM system.cpu", 403, "reserved"),
    ("information schema", "SELECT * FROM information_schema.tables", 403, "'information_schema'"),
    ("system view unqualified", "SELECT * FROM pg_settings", 404, "not found"),
    ("system view pg_catalog", "SELECT * FROM pg_catalog.pg_settings", 403, "'pg_catalog'"),
    ("system view behind its own cte", "WITH pg_settings AS (FROM pg_settings) SELECT * FROM pg_settings", 400, "CTE"),
    (
        "system view out of cte scope",
        "SELECT * FROM duckdb_logs, (WITH duckdb_logs AS (SELECT 1) FROM duckdb_logs)",
        400,
        "CTE",
    ),
    # --- another database's files, by path -----------------------------------------------------
    ("read_parquet other file", "SELECT * FROM read_parquet('{bravo_file}')", 400, "read_parquet() is not allowed"),
    ("read_parquet own file", "SELECT * FROM read_parquet('{alpha_file}')", 400, "read_parquet() is not allowed"),
    ("read_parquet list", "SELECT * FROM read_parquet(['{alpha_file}', '{bravo_vault}'])", 400, "not allowed"),
    ("read_parquet glob", "SELECT * FROM read_parquet('{storage}/**/*.parquet')", 400, "not allowed"),
    ("parquet_scan", "SELECT * FROM parquet_scan('{bravo_vault}')", 400, "parquet_scan() is not allowed"),
    ("string scan of a file", "SELECT * FROM '{bravo_vault}'", 400, "files and URLs cannot be read"),
    ("string scan glob", "SELECT * FROM '{storage}/*/*/*/*.parquet'", 400, "files and URLs cannot be read"),
    ("quoted identifier path", 'SELECT * FROM "{bravo_vault}"', 400, "invalid measurement name"),
    ("string scan in a subquery", "SELECT * FROM cpu WHERE host IN (FROM '{bravo_file}')", 400, "files and URLs"),
    (
        "read_parquet in a scalar subquery",
        "SELECT (SELECT max(host) FROM read_parquet('{bravo_file}'))",
        400,
        "not allowed",
    ),
    ("read_parquet in a cte", "WITH cpu AS (FROM read_parquet('{bravo_file}')) SELECT * FROM cpu", 400, "not allowed"),
    ("parquet_metadata", "SELECT * FROM parquet_metadata('{bravo_vault}')", 400, "parquet_metadata() is not allowed"),
    ("parquet_schema", "SELECT * FROM parquet_schema('{bravo_vault}')", 400, "parquet_schema() is not allowed"),
    ("parquet_kv_metadata", "SELECT * FROM parquet_kv_metadata('{bravo_vault}')", 400, "not allowed"),
    ("glob of the data root", "SELECT * FROM glob('{storage}/**')", 400, "glob() is not allowed"),
    ("read_blob other file", "SELECT * FROM read_blob('{bravo_vault}')", 400, "read_blob() is not allowed"),
    (
        "query() running SQL",
        "SELECT * FROM query('FROM read_parquet(''{bravo_vault}'')')",
        400,
        "query() is not allowed",
    ),
    ("query_table", "SELECT * FROM query_table('{bravo_vault}')", 400, "query_table() is not allowed"),
    ("json_serialize_plan", "SELECT json_serialize_plan('FROM ''{bravo_vault}''')", 400, "json_serialize_plan()"),
    # --- local files ----------------------------------------------------------------------------
    ("read_csv /etc/passwd", "SELECT * FROM read_csv('/etc/passwd')", 400, "read_csv() is not allowed"),
    ("read_text /etc/passwd", "SELECT * FROM read_text('/etc/passwd')", 400, "read_text() is not allowed"),
    ("string scan /etc/passwd", "SELECT * FROM '/etc/passwd'", 400, "files and URLs cannot be read"),
    ("read_csv_auto catalog", "SELECT * FROM read_csv_auto('{catalog}')", 400, "read_csv_auto() is not allowed"),
    ("read_blob catalog", "SELECT * FROM read_blob('{catalog}')", 400, "read_blob() is not allowed"),
    ("read_text spool", "SELECT * FROM read_text('{spool}/*')", 400, "read_text() is not allowed"),
    ("read_json environ", "SELECT * FROM read_json('/proc/self/environ')", 400, "read_json() is not allowed"),
    ("read_ndjson_objects", "SELECT * FROM read_ndjson_objects('/etc/hosts')", 400, "not allowed"),
    ("sniff_csv", "SELECT * FROM sniff_csv('/etc/passwd')", 400, "sniff_csv() is not allowed"),
    ("glob /etc", "SELECT * FROM glob('/etc/*')", 400, "glob() is not allowed"),
    ("read_duckdb", "SELECT * FROM read_duckdb('{catalog}')", 400, "read_duckdb() is not allowed"),
    # --- URLs -----------------------------------------------------------------------------------
    ("metadata endpoint", "SELECT * FROM read_csv('http://169.254.169.254/latest/meta-data/iam/')", 400, "not allowed"),
    (
        "metadata endpoint string",
        "SELECT * FROM 'http://169.254.169.254/latest/meta-data/x.csv'",
        400,
        "files and URLs",
    ),
    ("https url", "SELECT * FROM read_json('https://example.com/x.json')", 400, "read_json() is not allowed"),
    ("s3 url", "SELECT * FROM read_parquet('s3://some-bucket/data/x.parquet')", 400, "not allowed"),
    ("s3 string scan", "SELECT * FROM 's3://some-bucket/data/*.parquet'", 400, "files and URLs cannot be read"),
    ("hf url", "SELECT * FROM 'hf://datasets/x/y/z.parquet'", 400, "files and URLs cannot be read"),
    # --- statements that are no SELECT ----------------------------------------------------------
    ("copy to /tmp", "COPY cpu TO '{tmp}.csv'", 400, "COPY statements are refused"),
    ("copy into the data root", "COPY (SELECT 1 AS x) TO '{storage}/alpha/x.parquet'", 400, "COPY"),
    ("copy from a file", "COPY cpu FROM '/etc/passwd'", 400, "COPY"),
    ("attach memory", "ATTACH ':memory:' AS m", 400, "ATTACH statements are refused"),
    ("attach the catalog", "ATTACH '{catalog}' AS c (TYPE sqlite)", 400, "ATTACH"),
    ("detach", "DETACH memory", 400, "DETACH statements are refused"),
    ("install", "INSTALL httpfs", 400, "INSTALL statements are refused"),
    ("load", "LOAD httpfs", 400, "LOAD statements are refused"),
    ("set", "SET enable_external_access = true", 400, "SET statements are refused"),
    ("reset", "RESET allowed_directories", 400, "RESET statements are refused"),
    ("set variable", "SET VARIABLE x = 1", 400, "SET"),
    ("pragma", "PRAGMA database_list", 400, "PRAGMA statements are refused"),
    ("pragma serialized sql", "PRAGMA json_execute_serialized_sql('{{}}')", 400, "PRAGMA"),
    ("call", "CALL enable_logging()", 400, "CALL statements are refused"),
    ("export database", "EXPORT DATABASE '{tmp}'", 400, "EXPORT statements are refused"),
    ("import database", "IMPORT DATABASE '{tmp}'", 400, "IMPORT statements are refused"),
    ("create table", "CREATE TABLE t AS SELECT * FROM cpu", 400, "CREATE statements are refused"),
    ("create temp table", "CREATE TEMP TABLE t AS SELECT 1", 400, "CREATE"),
    ("create macro", "CREATE MACRO m() AS 1", 400, "CREATE"),
    ("create view", "CREATE VIEW v AS SELECT 1", 400, "CREATE"),
    ("create secret", "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", 400, "CREATE"),
    ("create persistent secret", "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", 400, "CREATE"),
    ("drop secret", "DROP SECRET arcs_data", 400, "DROP statements are refused"),
    ("insert", "INSERT INTO cpu VALUES (1)", 400, "INSERT statements are refused"),
    ("insert behind a cte", "WITH t AS (SELECT 1) INSERT INTO cpu SELECT * FROM t", 400, "only SELECT queries"),
    ("update", "UPDATE cpu SET value = 0", 400, "UPDATE statements are refused"),
    ("delete", "DELETE FROM cpu", 400, "DELETE statements are refused"),
    ("prepare", "PREPARE p AS SELECT * FROM bravo.cpu", 400, "PREPARE statements are refused"),
    ("execute", "EXECUTE p", 400, "EXECUTE statements are refused"),
    ("explain", "EXPLAIN SELECT * FROM read_parquet('{bravo_file}')", 400, "EXPLAIN statements are refused"),
    ("explain analyze copy", "EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp}.csv'", 400, "EXPLAIN"),
    ("checkpoint", "CHECKPOINT;", 400, "CHECKPOINT statements are refused"),
    ("use", "USE system", 400, "USE statements are refused"),
    ("transaction", "BEGIN TRANSACTION", 400, "BEGIN statements are refused"),
    ("pivot statement", "PIVOT cpu ON host USING sum(value)", 400, "PIVOT statements are refused"),
    ("describe", "DESCRIBE bravo.cpu", 400, "DESCRIBE"),
    ("summarize", "SUMMARIZE bravo.vault", 400, "SUMMARIZE"),
    # --- secrets, settings, environment, the engine's state --------------------------------------
    ("duckdb_secrets", "SELECT * FROM duckdb_secrets()", 400, "duckdb_secrets() is not allowed"),
    ("which_secret", "SELECT * FROM which_secret('s3://b/x', 's3')", 400, "which_secret() is not allowed"),
    ("duckdb_settings", "SELECT * FROM duckdb_settings()", 400, "duckdb_settings() is not allowed"),
    ("duckdb_settings as a table", "SELECT * FROM duckdb_settings", 404, "not found"),
    ("current_setting", "SELECT current_setting('home_directory')", 400, "current_setting() is not allowed"),
    ("current_setting allowed dirs", "SELECT current_setting('allowed_directories') FROM cpu", 400, "current_setting"),
    ("getenv", "SELECT getenv('AWS_SECRET_ACCESS_KEY')", 400, "getenv() is not allowed"),
    ("getvariable", "SELECT getvariable('x')", 400, "getvariable() is not allowed"),
    ("current_query leaks paths", "SELECT current_query() FROM cpu", 400, "current_query() is not allowed"),
    ("pg current_query", "SELECT pg_catalog.current_query() FROM cpu", 400, "current_query() is not allowed"),
    ("duckdb_temporary_files", "SELECT * FROM duckdb_temporary_files()", 400, "not allowed"),
    ("duckdb_extensions", "SELECT * FROM duckdb_extensions()", 400, "not allowed"),
    ("pragma table function", "SELECT * FROM pragma_version()", 400, "pragma_version() is not allowed"),
    ("enable_profiling after lock", "SELECT * FROM enable_profiling()", 400, "enable_profiling() is not allowed"),
    (
        "enable_logging kills the process",
        "FROM enable_logging(storage='file', storage_path='{tmp}')",
        400,
        "not allowed",
    ),
    ("checkpoint function", "SELECT * FROM checkpoint()", 400, "checkpoint() is not allowed"),
    ("write_log", "SELECT write_log('x', level := 'error')", 400, "write_log() is not allowed"),
    ("marker guess", "SELECT * FROM arcs_sandbox_0000000000000000_0", 404, "not found"),
    # --- several statements, comments and quoting ------------------------------------------------
    ("second statement", "SELECT 1; COPY cpu TO '{tmp}.csv'", 400, "exactly one statement; got 2"),
    ("semicolon in a string", "SELECT ';' FROM cpu; DROP TABLE cpu", 400, "got 2"),
    ("after a block comment", "SELECT 1 FROM cpu /* x */; ATTACH ':memory:' AS m", 400, "got 2"),
    ("after a line comment", "SELECT 1 FROM cpu -- x\n; ATTACH ':memory:' AS m", 400, "got 2"),
    ("comment hiding a semicolon", "SELECT 1 /* ; */ FROM cpu; SET threads = 1", 400, "got 2"),
    ("dollar quote then statement", "SELECT $$;$$ FROM cpu; LOAD httpfs", 400, "got 2"),
    (
        "dollar quote with a file read",
        "SELECT $a$ ' $a$ FROM read_csv('/etc/passwd')",
        400,
        "read_csv() is not allowed",
    ),
    ("e-string escaped quote", "SELECT E'\\'', * FROM read_csv('/etc/passwd') -- '", 400, "read_csv() is not allowed"),
    ("unicode quotes", "SELECT * FROM \u201c/etc/passwd\u201d", 400, "does not parse"),
    ("unicode escaped identifier", 'SELECT * FROM U&"\\0062ravo".cpu', 400, "does not parse"),
    ("nested quotes", 'SELECT * FROM "bravo"".""cpu"', 400, "invalid measurement name"),
    ("only comments", "-- SELECT * FROM bravo.cpu", 400, "exactly one statement; got 0"),
    ("quoted function name", "SELECT * FROM \"READ_PARQUET\"('{bravo_file}')", 400, "not allowed"),
    ("schema-qualified function", "SELECT * FROM main.read_parquet('{bravo_file}')", 400, "not allowed"),
    # --- resource bombs (what is enforceable without a query timeout) ----------------------------
    ("huge repeat", "SELECT repeat('x', 5000000000)", 400, "maximum supported string size"),
    ("nested repeat", "SELECT repeat(repeat('x', 100000), 100000) FROM cpu", 400, "maximum supported string size"),
    ("sleep", "SELECT sleep_ms(600000)", 400, "sleep_ms() is not allowed"),
    ("pg_sleep", "SELECT pg_sleep(600)", 400, "pg_sleep() is not allowed"),
    ("deep nesting", "SELECT " + "abs(" * 3000 + "1" + ")" * 3000, 400, "does not parse"),
    ("too many rows", "SELECT * FROM range(200000)", 400, "more than 100000 rows"),
    ("huge literal", "SELECT '" + "x" * MAX_SQL_BYTES + "'", 413, "longer than"),
]


def _render(template: str, paths: dict[str, str]) -> str:
    return template.format(**paths)


@pytest.mark.parametrize(("case", "template", "status", "fragment"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_query_is_refused_and_reads_nothing(
    world: World, case: str, template: str, status: int, fragment: str
) -> None:
    sql = _render(template, world.paths)
    before = world.files()
    world.catalog.databases.clear()
    world.store.urls.clear()
    with pytest.raises(ArcsError) as caught:
        world.run(sql)
    error = caught.value
    assert (error.status, fragment) == (status, fragment) and fragment in error.message, error.message
    assert all(sentinel not in error.message for sentinel in SENTINELS), error.message
    assert "bravo" not in world.catalog.databases
    assert not any(key.startswith("bravo/") or "/bravo/" in key for key in world.store.urls)
    assert world.files() == before
    assert not glob.glob(f"/tmp/*{NONCE}*")


def test_the_corpus_is_big_and_named() -> None:
    names = [case[0] for case in CORPUS]
    assert len(names) >= 60 and len(set(names)) == len(names)


def test_the_engine_is_unchanged_after_the_corpus(world: World) -> None:
    for _case, template, _status, _fragment in CORPUS:
        with pytest.raises(ArcsError):
            world.run(_render(template, world.paths))
    cursor = world.runtime.engine.connection().cursor()
    try:
        databases = sorted(row[0] for row in cursor.execute("SELECT database_name FROM duckdb_databases()").fetchall())
        assert databases == ["memory", "system", "temp"]
        assert cursor.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)
        assert cursor.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone() == (0,)
        assert cursor.execute("SELECT count(*) FROM duckdb_variables()").fetchone() == (0,)
        settings = dict(
            cursor.execute(
                "SELECT name, value FROM duckdb_settings()"
                " WHERE name IN ('enable_external_access', 'lock_configuration', 'enable_profiling')"
            ).fetchall()
        )
        assert settings["enable_external_access"] == "false" and settings["lock_configuration"] == "true"
        assert settings["enable_profiling"] in (None, "")
    finally:
        cursor.close()
    assert world.run("SELECT count(*) AS n FROM cpu").table.column("n").to_pylist() == [4]


def _rows(world: World, sql: str) -> list[list[Any]]:
    return [list(row) for row in json.loads(to_json_document(world.run(sql)))["data"]]


LEGITIMATE: list[tuple[str, str, Callable[[list[list[Any]]], bool]]] = [
    ("count", "SELECT count(*) FROM cpu", lambda r: r == [[4]]),
    ("own database qualified", "SELECT count(*) FROM alpha.cpu", lambda r: r == [[4]]),
    ("own database quoted", 'SELECT count(*) FROM "alpha"."cpu"', lambda r: r == [[4]]),
    (
        "join",
        "SELECT c.host, c.value, m.free FROM cpu c JOIN mem m ON c.host = m.host AND c.time = m.time ORDER BY 1",
        lambda r: r == [["a", 1.5, 10], ["b", 2.5, 20]],
    ),
    ("join using", "SELECT count(*) FROM cpu JOIN mem USING (host, time)", lambda r: r == [[2]]),
    (
        "cte",
        "WITH hourly AS (SELECT date_trunc('hour', time) AS h, avg(value) AS v FROM cpu GROUP BY 1)"
        " SELECT v FROM hourly ORDER BY h",
        lambda r: r == [[2.0], [4.0]],
    ),
    (
        "cte named like the measurement",
        "WITH cpu AS (SELECT * FROM alpha.cpu WHERE host = 'a') SELECT count(*) FROM cpu",
        lambda r: r == [[2]],
    ),
    (
        "window function",
        "SELECT host, value, row_number() OVER (PARTITION BY host ORDER BY time) FROM cpu ORDER BY host, time",
        lambda r: [row[2] for row in r] == [1, 2, 1, 2],
    ),
    (
        "lag and qualify",
        "SELECT host, value - lag(value) OVER (PARTITION BY host ORDER BY time) AS d FROM cpu QUALIFY d IS NOT NULL"
        " ORDER BY host",
        lambda r: r == [["a", 2.0], ["b", 2.0]],
    ),
    ("range", "SELECT sum(range) FROM range(10)", lambda r: r == [[45]]),
    ("generate_series", "SELECT count(*) FROM generate_series(1, 5)", lambda r: r == [[5]]),
    ("unnest table", "SELECT * FROM unnest([3, 1, 2]) t(x) ORDER BY x", lambda r: r == [[1], [2], [3]]),
    ("unnest scalar", "SELECT unnest(['a', 'b'])", lambda r: r == [["a"], ["b"]]),
    (
        "range joined to a measurement",
        "SELECT count(*) FROM range(2) r JOIN cpu ON r.range = CAST(floor(cpu.value) AS INT) - 1",
        lambda r: r == [[2]],
    ),
    (
        "regexp functions",
        "SELECT regexp_replace(note, '^https?://(?:www\\.)?([^/]+)/.*$', '\\1'),"
        " regexp_extract(note, '//([^/]+)/', 1), regexp_matches(note, 'example') FROM cpu WHERE host = 'b'"
        " ORDER BY time",
        lambda r: r == [["y", "", False], ["example.com", "www.example.com", True]],
    ),
    (
        "strftime and date_trunc",
        "SELECT strftime(date_trunc('hour', time), '%Y-%m-%d %H') AS h, count(*) FROM cpu GROUP BY h ORDER BY h",
        lambda r: r == [["2023-11-14 22", 2], ["2023-11-14 23", 2]],
    ),
    (
        "time_bucket",
        "SELECT time_bucket(INTERVAL '1 hour', time) AS b, max(value) FROM cpu GROUP BY b ORDER BY b",
        lambda r: [row[1] for row in r] == [2.5, 4.5],
    ),
    (
        "time filter with now() and interval",
        "SELECT count(*) FROM cpu WHERE time > now() - INTERVAL '100 years' AND time BETWEEN"
        " TIMESTAMPTZ '2023-11-14 22:00:00+00' AND TIMESTAMPTZ '2023-11-14 23:00:00+00'",
        lambda r: r == [[2]],
    ),
    (
        "extract and substring",
        "SELECT DISTINCT EXTRACT(hour FROM time), substring(host FROM 1) FROM cpu",
        lambda r: len(r) == 4,
    ),
    (
        "recursive cte",
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 10) SELECT sum(n) FROM t",
        lambda r: r == [[55]],
    ),
    (
        "union and except",
        "SELECT host FROM cpu UNION SELECT host FROM mem EXCEPT SELECT 'b' ORDER BY 1",
        lambda r: r == [["a"]],
    ),
    (
        "in subquery and exists",
        "SELECT count(*) FROM cpu WHERE host IN (SELECT host FROM mem WHERE free > 15) AND EXISTS (SELECT 1 FROM mem)",
        lambda r: r == [[2]],
    ),
    ("from first", "FROM cpu SELECT max(value)", lambda r: r == [[4.5]]),
    ("values", "SELECT * FROM (VALUES (1, 'x'), (2, 'y')) v(i, s) ORDER BY i", lambda r: r == [[1, "x"], [2, "y"]]),
    (
        "pivot clause",
        "SELECT * FROM (SELECT host, value FROM cpu) PIVOT (sum(value) FOR host IN ('a', 'b'))",
        lambda r: r == [[5.0, 7.0]],
    ),
    (
        "strings and comments naming forbidden things",
        "SELECT 'FROM bravo.cpu; COPY x TO ''/tmp/y''' AS s, $$read_parquet('/etc/passwd')$$ AS d"
        " /* FROM bravo.vault */ FROM cpu -- ; DROP TABLE cpu\nLIMIT 1",
        lambda r: r == [["FROM bravo.cpu; COPY x TO '/tmp/y'", "read_parquet('/etc/passwd')"]],
    ),
    (
        "json and lists",
        "SELECT json_extract('{\"a\": [1, 2]}', '$.a[1]'), list_sum([1, 2, 3])",
        lambda r: r == [["2", 6]],
    ),
    ("lambda", "SELECT list_transform([1, 2], x -> x * 10)", lambda r: r == [[[10, 20]]]),
    (
        "distinct on",
        "SELECT DISTINCT ON (host) host, value FROM cpu ORDER BY host, time DESC",
        lambda r: r == [["a", 3.5], ["b", 4.5]],
    ),
    (
        "case and coalesce",
        "SELECT sum(CASE WHEN host = 'a' THEN 1 ELSE 0 END), coalesce(NULL, 1) FROM cpu",
        lambda r: r == [[2, 1]],
    ),
    ("trailing semicolon", "SELECT count(*) FROM mem;", lambda r: r == [[2]]),
    ("version", "SELECT version() IS NOT NULL", lambda r: r == [[True]]),
]


@pytest.mark.parametrize(("case", "sql", "expected"), LEGITIMATE, ids=[c[0] for c in LEGITIMATE])
def test_legitimate_query_works(world: World, case: str, sql: str, expected: Callable[[list[list[Any]]], bool]) -> None:
    rows = _rows(world, sql)
    assert expected(rows), rows
