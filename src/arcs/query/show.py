"""What the catalog answers alone: ``SHOW`` statements, measurement listings and query estimates.

None of this runs DuckDB. Every answer is cut to the caller's database scopes before anything
is read about a database, so a token scoped to ``["a", "team-*"]`` never learns another
database's name, measurements, sizes or row counts:

- ``SHOW DATABASES`` lists only the databases the caller may use;
- ``SHOW TABLES`` / ``SHOW MEASUREMENTS [FROM db]`` and the listings check the database against
  the scopes (403) before looking it up;
- an estimate checks every table the SQL names, as the query itself would.

Recognised forms (case-insensitive; comments, extra whitespace and one trailing ``;`` allowed;
names bare or quoted with ``"``, ``'`` or backticks)::

    SHOW DATABASES
    SHOW TABLES [FROM|IN db]
    SHOW MEASUREMENTS [FROM|IN db]

Any other statement starting with ``SHOW`` is a 400 naming these forms: DuckDB's own ``SHOW``
would describe its in-memory catalog, which is not the data.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from arcs.auth.tokens import Principal
from arcs.errors import BadRequest, NotFound
from arcs.layout import measurement_prefix
from arcs.names import check_database, check_measurement
from arcs.ports import DataCatalog, FileRecord, ObjectStore, SchemaCatalog
from arcs.query.sandbox import check_read_only
from arcs.query.sql_tree import block_comment_end, check_sql_size

SHOW_FORMS = "SHOW DATABASES, SHOW TABLES [FROM db], SHOW MEASUREMENTS [FROM db]"
TABLE_COLUMNS = ("database", "table_name", "storage_path", "file_count", "total_size_mb")
_MB = 1024 * 1024

_TOKEN = re.compile(
    r"""
    (?P<skip>\s+|--[^\n]*)
  | (?P<quoted>"(?:[^"]|"")*"|'(?:[^']|'')*'|`(?:[^`]|``)*`)
  | (?P<word>[A-Za-z_](?:[A-Za-z0-9_]|-(?!-))*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


# --- what a measurement holds ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MeasurementInfo:
    database: str
    measurement: str
    file_count: int
    total_bytes: int
    rows: int
    storage_path: str

    @property
    def total_size_mb(self) -> float:
        return round(self.total_bytes / _MB, 6)

    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "measurement": self.measurement,
            "file_count": self.file_count,
            "total_size_mb": self.total_size_mb,
            "storage_path": self.storage_path,
        }


def visible_databases(principal: Principal, catalog: SchemaCatalog) -> list[str]:
    """The databases the caller may use, sorted; the others are never named to it."""
    return sorted(name for name in catalog.list_databases() if principal.may_use(name))


def storage_path(store: ObjectStore, files: Sequence[FileRecord], database: str, measurement: str, prefix: str) -> str:
    """Where the measurement's files live, as the store names it (a directory or ``s3://`` URL)."""
    # Keys are {prefix}/{db}/{m}/YYYY/MM/DD/HH/{file}: the measurement's directory is a key less
    # its last five parts, whatever prefix it was written under.
    base = files[0].key.rsplit("/", 5)[0] + "/" if files else measurement_prefix(prefix, database, measurement)
    return store.url(base)


def measurement_infos(
    catalog: DataCatalog, store: ObjectStore, database: str, prefix: str = ""
) -> list[MeasurementInfo]:
    """Every measurement of ``database`` with its file count, size and rows. Scopes are the caller's job."""
    infos = []
    for schema in catalog.list_schemas(database):
        files = catalog.list_files(database, schema.measurement)
        infos.append(
            MeasurementInfo(
                database,
                schema.measurement,
                len(files),
                sum(f.size for f in files),
                sum(f.rows for f in files),
                storage_path(store, files, database, schema.measurement, prefix),
            )
        )
    return sorted(infos, key=lambda info: info.measurement)


def database_measurements(
    principal: Principal, catalog: DataCatalog, store: ObjectStore, database: str | None, prefix: str = ""
) -> list[MeasurementInfo]:
    """One database's measurements (403 outside the caller's scopes), or those of every visible one."""
    if database is None:
        return [
            info
            for name in visible_databases(principal, catalog)
            for info in measurement_infos(catalog, store, name, prefix)
        ]
    check_database(database)
    principal.require_database(database)
    return measurement_infos(catalog, store, database, prefix)


# --- SHOW --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShowStatement:
    kind: Literal["databases", "tables"]
    database: str | None = None  # FROM db; None: the request's database


def _tokens(sql: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(sql):
        if sql.startswith("/*", position):
            position = block_comment_end(sql, position)  # nested, as DuckDB reads comments
            continue
        match = _TOKEN.match(sql, position)
        assert match is not None  # "other" matches any character
        position = match.end()
        kind = match.lastgroup or "other"
        if kind != "skip":
            yield kind, match.group()


def _name(kind: str, text: str) -> str | None:
    if kind == "word":
        return text
    if kind == "quoted":
        quote = text[0]
        return text[1:-1].replace(quote * 2, quote)
    return None


def parse_show(sql: str) -> ShowStatement | None:
    """The ``SHOW`` statement ``sql`` is; None if it does not start with ``SHOW``; 400 for other ``SHOW`` forms."""
    tokens = _tokens(sql)
    first = next(tokens, None)
    if first is None or first[0] != "word" or first[1].lower() != "show":
        return None
    rest: list[tuple[str, str]] = []
    for token in tokens:  # only SHOW statements get here: they are short, or wrong
        rest.append(token)
        if len(rest) > 5:
            break
    if rest and rest[-1] == ("other", ";"):
        rest.pop()
    words = [text.lower() if kind == "word" else None for kind, text in rest]
    if words == ["databases"]:
        return ShowStatement("databases")
    if words and words[0] in ("tables", "measurements"):
        if len(rest) == 1:
            return ShowStatement("tables")
        if len(rest) == 3 and words[1] in ("from", "in"):
            name = _name(*rest[2])
            if name is not None:
                return ShowStatement("tables", check_database(name))
    raise BadRequest(f"unsupported SHOW statement; supported: {SHOW_FORMS}")


def _tables_table(infos: Sequence[MeasurementInfo]) -> pa.Table:
    return pa.table(
        {
            "database": pa.array([i.database for i in infos], pa.string()),
            "table_name": pa.array([i.measurement for i in infos], pa.string()),
            "storage_path": pa.array([i.storage_path for i in infos], pa.string()),
            "file_count": pa.array([i.file_count for i in infos], pa.int64()),
            "total_size_mb": pa.array([i.total_size_mb for i in infos], pa.float64()),
        }
    )


def answer_show(
    sql: str, database: str, principal: Principal, catalog: DataCatalog, store: ObjectStore, prefix: str = ""
) -> pa.Table | None:
    """The answer to a ``SHOW`` statement; None when ``sql`` is not one (it is then a query)."""
    statement = parse_show(sql)
    if statement is None:
        return None
    if statement.kind == "databases":
        return pa.table({"database": pa.array(visible_databases(principal, catalog), pa.string())})
    target = statement.database or database
    principal.require_database(target)
    return _tables_table(measurement_infos(catalog, store, target, prefix))


# --- estimates ---------------------------------------------------------------------------------

# Rows the query would read (not return), and what we say about them.
WARNING_LEVELS: tuple[tuple[int, str, str], ...] = (
    (10_000_000, "high", "reads about {rows:,} rows: expect a slow query; narrow the time range or aggregate"),
    (1_000_000, "medium", "reads about {rows:,} rows: consider a time range or a LIMIT"),
    (100_000, "low", "reads about {rows:,} rows"),
)


@dataclass(frozen=True, slots=True)
class Estimate:
    rows: int
    warning_level: str
    warning_message: str


def warning_for(rows: int) -> tuple[str, str]:
    """``none`` below 100 k rows read, ``low`` from 100 k, ``medium`` from 1 M, ``high`` from 10 M."""
    for threshold, level, message in WARNING_LEVELS:
        if rows >= threshold:
            return level, message.format(rows=rows)
    return "none", ""


def estimate_query(
    sql: object, database: str, principal: Principal, catalog: DataCatalog, store: ObjectStore
) -> Estimate:
    """An upper bound of the rows ``sql`` reads: the catalog's row counts of every measurement it names.

    Every file of each named measurement counts (a time range does not narrow the estimate), once
    per reference (a self-join reads twice). The SQL is checked by the sandbox (a query that would
    be refused has no estimate), and names are checked and scoped exactly as by the query.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise BadRequest("'sql' must be a non-empty string")
    check_sql_size(sql)
    check_database(database)
    shown = answer_show(sql, database, principal, catalog, store)
    if shown is not None:
        return Estimate(shown.num_rows, "none", "")
    rows = 0
    for ref in check_read_only(sql).references:
        target = check_database(ref.database) if ref.database is not None else database
        measurement = check_measurement(ref.measurement)
        principal.require_database(target)
        if catalog.get_schema(target, measurement) is None:
            raise NotFound(f"measurement {measurement!r} not found in database {target!r}")
        rows += sum(f.rows for f in catalog.list_files(target, measurement))
    return Estimate(rows, *warning_for(rows))
