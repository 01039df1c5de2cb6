"""SHOW parsing and answers, listings, estimates, and the SQL of GET /api/v1/query/{measurement}."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.auth.tokens import Principal
from arcs.errors import BadRequest, Forbidden, NotFound
from arcs.layout import data_key
from arcs.ports import FileRecord, MeasurementSchema
from arcs.query.engine import Engine
from arcs.query.measurement_query import WHERE_RULE, check_single_measurement_query, measurement_query_sql
from arcs.query.show import (
    ShowStatement,
    answer_show,
    database_measurements,
    estimate_query,
    parse_show,
    warning_for,
)

ADMIN = Principal("t0", "admin", frozenset({"admin"}), ())
SCOPED = Principal("t1", "scoped", frozenset({"read"}), ("a", "team-*"))
UNSCOPED = Principal("t2", "reader", frozenset({"read"}), ())
H0 = datetime(2024, 3, 1, tzinfo=UTC)


# --- parsing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "select * from show",
        "-- SHOW TABLES\nSELECT 1",
        "/* SHOW DATABASES */ SELECT 1",
        "/* /* */ SHOW DATABASES */ SELECT 1",  # block comments nest, as DuckDB reads them
        "SHOWTABLES",
        "'SHOW TABLES'",
        '"show" ',
        "WITH show AS (SELECT 1) SELECT * FROM show",
        "",
        "   ",
    ],
)
def test_not_a_show_statement(sql: str) -> None:
    assert parse_show(sql) is None


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SHOW DATABASES", ShowStatement("databases")),
        ("show databases", ShowStatement("databases")),
        ("  Show\n\tDatabases ;  ", ShowStatement("databases")),
        ("/* list */ SHOW DATABASES; -- thanks", ShowStatement("databases")),
        ("SHOW TABLES", ShowStatement("tables")),
        ("SHOW MEASUREMENTS;", ShowStatement("tables")),
        ("show tables from db1", ShowStatement("tables", "db1")),
        ("SHOW MEASUREMENTS IN db1", ShowStatement("tables", "db1")),
        ('SHOW TABLES FROM "my-db"', ShowStatement("tables", "my-db")),
        ("SHOW TABLES FROM 'quoted'", ShowStatement("tables", "quoted")),
        ("SHOW TABLES FROM `ticks`;", ShowStatement("tables", "ticks")),
        ("SHOW MEASUREMENTS FROM team-a", ShowStatement("tables", "team-a")),
        ("SHOW TABLES FROM team-a-- comment", ShowStatement("tables", "team-a")),
        ("SHOW TABLES FROM Mixed_Case", ShowStatement("tables", "Mixed_Case")),
    ],
)
def test_show_forms(sql: str, expected: ShowStatement) -> None:
    assert parse_show(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "SHOW",
        "SHOW;",
        "SHOW ALL TABLES",
        "SHOW TABLES FROM",
        "SHOW TABLES FROM a.b",
        "SHOW TABLES FROM a b",
        "SHOW TABLES a",
        "SHOW DATABASES extra",
        "SHOW DATABASES;;",
        "SHOW DATABASES; SELECT 1",
        "SHOW TABLES; DROP TABLE x",
        "SHOW cpu",
        "SHOW TABLES FROM 1db",
        'SHOW TABLES FROM "a""b"',
        'SHOW TABLES FROM "unterminated',
        "SHOW TABLES FROM ../etc",
        "SHOW TABLES FROM " + "x" * 65,
    ],
)
def test_other_show_statements_are_400(sql: str) -> None:
    with pytest.raises(BadRequest):
        parse_show(sql)


@pytest.mark.parametrize("sql", ["SHOW TABLES FROM system", 'SHOW MEASUREMENTS FROM "Internal"'])
def test_reserved_databases_are_403(sql: str) -> None:
    with pytest.raises(Forbidden):
        parse_show(sql)


def test_warning_levels() -> None:
    assert warning_for(0) == ("none", "")
    assert warning_for(99_999)[0] == "none"
    assert warning_for(100_000)[0] == "low"
    assert warning_for(999_999)[0] == "low"
    assert warning_for(1_000_000)[0] == "medium"
    level, message = warning_for(12_345_678)
    assert level == "high" and "12,345,678" in message


# --- answers from a catalog ----------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> tuple[SqliteCatalog, DirectoryStore]:
    catalog = SqliteCatalog(SqliteDatabase(tmp_path / "catalog.sqlite"))
    store = DirectoryStore(tmp_path / "storage")
    for database, measurement, files in (
        ("a", "cpu", 3),
        ("a", "mem", 0),
        ("team-x", "cpu", 1),
        ("secret", "cpu", 2),
        ("teams", "disk", 1),
    ):
        catalog.put_schema(MeasurementSchema(database, measurement, {"time": "timestamp", "v": "int64"}), None)
        catalog.put_files(
            [
                FileRecord(
                    database,
                    measurement,
                    H0 + timedelta(hours=n),
                    data_key("arcs", database, measurement, H0 + timedelta(hours=n), f"f{n}.parquet"),
                    rows=100 * (n + 1),
                    size=1024 * 1024,
                    min_time_us=0,
                    max_time_us=1,
                    commit_id="c",
                )
                for n in range(files)
            ]
        )
    catalog.create_database("empty")
    return catalog, store


def test_show_databases_is_cut_to_the_scopes(world: tuple[SqliteCatalog, DirectoryStore]) -> None:
    catalog, store = world
    shown = answer_show("SHOW DATABASES", "default", SCOPED, catalog, store)
    assert shown is not None and shown.column("database").to_pylist() == ["a", "team-x"]
    everything = answer_show("SHOW DATABASES", "default", UNSCOPED, catalog, store)
    assert everything is not None
    assert everything.column("database").to_pylist() == ["a", "empty", "secret", "team-x", "teams"]


def test_show_tables_counts_files_and_sizes(world: tuple[SqliteCatalog, DirectoryStore]) -> None:
    catalog, store = world
    table = answer_show("SHOW TABLES", "a", SCOPED, catalog, store)
    assert table is not None
    assert table.column_names == ["database", "table_name", "storage_path", "file_count", "total_size_mb"]
    rows = table.to_pylist()
    assert [(r["database"], r["table_name"], r["file_count"], r["total_size_mb"]) for r in rows] == [
        ("a", "cpu", 3, 3.0),
        ("a", "mem", 0, 0.0),
    ]
    assert rows[0]["storage_path"] == str(store.root / "arcs" / "a" / "cpu")
    assert rows[1]["storage_path"] == str(store.root / "a" / "mem")  # no files: the bare layout
    assert answer_show("SHOW MEASUREMENTS FROM team-x", "a", SCOPED, catalog, store) is not None
    empty = answer_show("SHOW TABLES FROM nowhere", "a", UNSCOPED, catalog, store)
    assert empty is not None and empty.num_rows == 0


@pytest.mark.parametrize(
    ("sql", "database"),
    [
        ("SHOW TABLES FROM secret", "a"),
        ("SHOW TABLES FROM teams", "a"),  # "team-*" is not "team*"
        ("SHOW TABLES", "secret"),
        ("SHOW MEASUREMENTS FROM nowhere", "a"),  # not even whether it exists
    ],
)
def test_show_tables_outside_the_scopes_is_403(
    world: tuple[SqliteCatalog, DirectoryStore], sql: str, database: str
) -> None:
    catalog, store = world
    with pytest.raises(Forbidden):
        answer_show(sql, database, SCOPED, catalog, store)


def test_measurement_listing_is_cut_to_the_scopes(world: tuple[SqliteCatalog, DirectoryStore]) -> None:
    catalog, store = world
    listed = database_measurements(SCOPED, catalog, store, None)
    assert [(i.database, i.measurement) for i in listed] == [("a", "cpu"), ("a", "mem"), ("team-x", "cpu")]
    assert listed[0].to_json() == {
        "database": "a",
        "measurement": "cpu",
        "file_count": 3,
        "total_size_mb": 3.0,
        "storage_path": str(store.root / "arcs" / "a" / "cpu"),
    }
    with pytest.raises(Forbidden):
        database_measurements(SCOPED, catalog, store, "secret")
    with pytest.raises(BadRequest):
        database_measurements(SCOPED, catalog, store, "no/such")
    assert len(database_measurements(ADMIN, catalog, store, None)) == 5


def test_estimates_sum_the_row_counts_of_the_files_read(world: tuple[SqliteCatalog, DirectoryStore]) -> None:
    catalog, store = world
    assert estimate_query("SELECT * FROM cpu", "a", SCOPED, catalog, store).rows == 600
    joined = estimate_query(
        'SELECT * FROM cpu JOIN "team-x".cpu USING (time) WHERE v IN (SELECT v FROM a.mem)', "a", SCOPED, catalog, store
    )
    assert joined.rows == 700 and joined.warning_level == "none"
    assert estimate_query("SHOW DATABASES", "a", SCOPED, catalog, store).rows == 2
    assert estimate_query("SELECT 42", "a", SCOPED, catalog, store).rows == 0
    with pytest.raises(Forbidden):
        estimate_query("SELECT * FROM secret.cpu", "a", SCOPED, catalog, store)
    with pytest.raises(Forbidden):
        estimate_query("SELECT * FROM a.cpu, secret.nothing", "a", SCOPED, catalog, store)
    with pytest.raises(NotFound):
        estimate_query("SELECT * FROM nothing", "a", SCOPED, catalog, store)
    for bad in (None, "", 42):
        with pytest.raises(BadRequest):
            estimate_query(bad, "a", SCOPED, catalog, store)


# --- GET /api/v1/query/{measurement} ---------------------------------------------------------------------

COLUMNS = {"time": "timestamp", "host": "string", "v": "float64", "odd name": "int64"}


def sql_for(**changes: object) -> str:
    arguments: dict[str, object] = {"limit": 100, "offset": 0, "order_by": None, "where": None}
    arguments.update(changes)
    return measurement_query_sql("db", "cpu", COLUMNS, **arguments)  # type: ignore[arg-type]


def test_measurement_query_sql() -> None:
    assert sql_for() == 'SELECT * FROM "db"."cpu"\nORDER BY "time" DESC\nLIMIT 100 OFFSET 0'
    assert sql_for(order_by="V", limit=5, offset=7).endswith('ORDER BY "v" ASC\nLIMIT 5 OFFSET 7')
    assert sql_for(order_by='"odd name" desc').endswith('ORDER BY "odd name" DESC\nLIMIT 100 OFFSET 0')
    assert (
        sql_for(where="v > 1")
        == 'SELECT * FROM "db"."cpu"\nWHERE (\nv > 1\n)\nORDER BY "time" DESC\nLIMIT 100 OFFSET 0'
    )
    assert sql_for(where="   ") == sql_for()


@pytest.mark.parametrize(
    "order_by",
    ["nope", "time sideways", "time; DROP TABLE x", "1", "time DESC, host", '"V"', "odd name", "", "time --"],
)
def test_order_by_is_a_known_column_and_a_direction(order_by: str) -> None:
    with pytest.raises(BadRequest):
        sql_for(order_by=order_by)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("engine")
    return Engine([str(root) + "/"], root / "work")


@pytest.mark.parametrize(
    "where",
    [
        "v > 1",
        "host = 'a' AND (v BETWEEN 1 AND 2 OR v IS NULL)",
        "time > now() - INTERVAL 1 HOUR",
        "host IN ('a', 'b') AND extract(year FROM time) = 2024",
        "host LIKE '%) UNION SELECT 1 --%'",
        "v > 1 -- a comment on its own line is harmless",
    ],
)
def test_plain_where_expressions_pass(engine: Engine, where: str) -> None:
    check_single_measurement_query(sql_for(where=where), "db", "cpu")


@pytest.mark.parametrize(
    "where",
    [
        "1=1) UNION SELECT * FROM other.cpu --",
        "1=1) UNION ALL SELECT * FROM other.cpu ORDER BY 1 LIMIT 5 --",
        "1; DROP TABLE cpu",
        "1=1; SELECT * FROM other.cpu",
        "host IN (SELECT host FROM other.cpu)",
        "EXISTS (FROM other.cpu)",
        "v = (SELECT max(v) FROM cpu)",
        "v = ANY (SELECT 1)",
        "1=1) --",
        "1=1 /*",
        "1=1) ORDER BY 1 LIMIT 1000000 OFFSET 0 --",
        "E'\\'' = '' UNION SELECT * FROM other.cpu --'",
        "1=1) UNION SELECT * FROM read_parquet('/etc/passwd') --",
        "true) GROUP BY ALL --",
        "1=1\n) WITH x AS (SELECT 1) SELECT * FROM x --",
        "1=1\n) , other.cpu WHERE (1=1",
        "1=1\n) JOIN other.cpu ON (true",
        "v >",
    ],
)
def test_hostile_where_expressions_are_400(engine: Engine, where: str) -> None:
    with pytest.raises(BadRequest):
        check_single_measurement_query(sql_for(where=where), "db", "cpu")


def test_the_query_must_name_this_measurement(engine: Engine) -> None:
    with pytest.raises(BadRequest, match="one boolean expression"):
        check_single_measurement_query(sql_for(), "db", "mem")
    assert "subqueries" in WHERE_RULE
