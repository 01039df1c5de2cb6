"""The SQL sandbox's statement check: what a query may read, decided on DuckDB's own parse tree.

The policy: a query is one ``SELECT`` whose only way to read data is the scans the rewriter puts in
place of its measurement references. Concretely, on DuckDB's parse tree (``json_serialize_sql``,
DuckDB's own parser, so comments, quoting and string tricks mean exactly what DuckDB reads):

- exactly one statement, of type ``SELECT`` (no ``COPY``, ``ATTACH``, ``SET``, ``PRAGMA``, ``CALL``,
  DDL, DML, ``EXPLAIN``, ``PREPARE``, ``PIVOT`` statements that create types, ...);
- the SQL is rewritten with a random marker in place of each measurement reference, and the marked
  SQL parsed again: every marker must be a table reference, exactly once, and every other table
  reference must name a CTE in scope. So the rewriter and DuckDB agree on what is a table, and a
  string path (``FROM 'x.parquet'``), a system view (``pg_settings``) or a name the rewriter missed
  never reaches DuckDB's catalog, replacement scans or file readers;
- table functions only from a short allow-list of generators (``range``, ``generate_series``,
  ``unnest``): every other one (``read_parquet``, ``read_csv``, ``glob``, ``query``,
  ``duckdb_secrets``, ``enable_logging``...) is how files, settings or SQL strings are reached;
- no ``DESCRIBE``/``SUMMARIZE`` (``SHOW_REF``), and no scalar function that exposes settings or the
  environment, runs SQL given as a string, or only sleeps (``current_setting``, ``getenv``,
  ``json_serialize_plan``, ``sleep_ms``...).

DuckDB's configuration (``arcs.engine``) is the second wall: external access only under the data
root, http(s)/hf file systems disabled, no extension loading, no Python replacement scans,
configuration locked. The data root holds every database, which is why the check above refuses
every direct file reader rather than trusting ``allowed_directories`` alone.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

import duckdb

from arcs.engine import Engine
from arcs.errors import BadRequest
from arcs.names import check_database, check_measurement
from arcs.rewriter import TableRef, quote_identifier, rewrite_tables

#: Table functions that only generate values; every other one reads files, URLs, settings or SQL.
ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})

#: Scalar functions refused wherever they appear, with the reason given to the caller.
DENIED_FUNCTIONS: dict[str, str] = {
    "current_setting": "it reveals the engine's settings",
    "getenv": "it reveals the environment",
    "getvariable": "it reads session variables",
    "current_query": "it reveals the rewritten query and its file paths",
    "json_serialize_plan": "it plans SQL given as a string",
    "json_execute_serialized_sql": "it runs SQL given as a string",
    "sleep_ms": "it only holds a worker",
    "pg_sleep": "it only holds a worker",
    "write_log": "it writes to the engine's log",
}

#: Table reference kinds DuckDB's parser produces that a read query may use.
_TABLE_REF_KINDS = frozenset({"BASE_TABLE", "TABLE_FUNCTION", "SUBQUERY", "JOIN", "EXPRESSION_LIST", "EMPTY", "PIVOT"})
_MEASUREMENT_HINT = "queries read measurements by name: FROM measurement or FROM database.measurement"


@dataclass(frozen=True, slots=True)
class _Table:
    catalog: str
    schema: str
    name: str
    visible_ctes: frozenset[str]


def check_read_only(engine: Engine, sql: str) -> None:
    """Refuse (4xx) anything but one SELECT that reads only the measurements it names."""
    cursor = engine.connection().cursor()
    try:
        _parse_tree(cursor, sql, "SQL does not parse")
        nonce = secrets.token_hex(8)
        refs: list[TableRef] = []

        def mark(ref: TableRef) -> str:
            if ref.database is not None:
                check_database(ref.database)
            check_measurement(ref.measurement)
            refs.append(ref)
            return quote_identifier(_marker(nonce, len(refs) - 1))

        marked = rewrite_tables(sql, mark)
        tables = _tables(_parse_tree(cursor, marked, "cannot map the table references of this query"))
    finally:
        cursor.close()
    markers = {_marker(nonce, index): ref for index, ref in enumerate(refs)}
    seen: dict[str, int] = {}
    for table in tables:
        if table.name in markers and not table.schema and not table.catalog:
            seen[table.name] = seen.get(table.name, 0) + 1
            continue
        _check_unmapped(table)
    for marker, ref in markers.items():
        if seen.get(marker) != 1:
            name = ref.measurement if ref.database is None else f"{ref.database}.{ref.measurement}"
            raise BadRequest(
                f"cannot tell whether {name!r} is read as a table here; write the query without comment,"
                " quoting or keyword tricks around it"
            )


def _marker(nonce: str, index: int) -> str:
    return f"arcs_sandbox_{nonce}_{index}"


def _parse_tree(cursor: duckdb.DuckDBPyConnection, sql: str, context: str) -> Any:
    """DuckDB's parse tree of ``sql``, which must be one SELECT; ``context`` prefixes parse errors.

    ``json_serialize_sql`` runs DuckDB's parser and nothing else, and serializes SELECT statements
    only. (``extract_statements`` is no substitute: it also runs pragma handlers, so it reports
    ``PRAGMA version`` as a SELECT and executes ``PRAGMA json_execute_serialized_sql(...)``.)
    """
    try:
        row = cursor.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        tree = json.loads(row[0]) if row is not None else None
    except duckdb.Error as exc:
        raise BadRequest(f"{context}: {_first_line(exc)}") from exc
    except RecursionError as exc:
        raise BadRequest("SQL is nested too deeply") from exc
    if not isinstance(tree, dict):
        raise BadRequest(f"{context}: no parse tree")
    if tree.get("error") is not False:
        if tree.get("error_type") == "parser":
            message = str(tree.get("error_message", "syntax error"))
            if "max_expression_depth" in message:  # its advice, SET, is refused here
                message = "expressions are nested deeper than DuckDB's limit of 1000 levels"
            raise BadRequest(f"{context}: {message}")
        _refuse_statements(sql)
        raise BadRequest(f"{context}: {tree.get('error_message', 'unknown error')}; {_MEASUREMENT_HINT}")
    statements = tree.get("statements")
    if not isinstance(statements, list) or len(statements) != 1:
        count = len(statements) if isinstance(statements, list) else 0
        raise BadRequest(f"send exactly one statement; got {count}")
    return statements[0]


def _refuse_statements(sql: str) -> None:
    """Say why DuckDB would not serialize ``sql``: several statements, or one that is no SELECT.

    Only the message comes from here (DuckDB's tokenizer, for the ``;`` between statements and the
    leading keyword); the refusal itself is the parser's.
    """
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error:
        return
    statements: list[list[tuple[int, Any]]] = [[]]
    for position, kind in tokens:
        if kind == duckdb.token_type.operator and sql[position] == ";":
            statements.append([])
        else:
            statements[-1].append((position, kind))
    statements = [statement for statement in statements if statement]
    if len(statements) > 1:
        raise BadRequest(f"send exactly one statement; got {len(statements)}")
    if statements and statements[0][0][1] == duckdb.token_type.keyword:
        position = statements[0][0][0]
        word = re.match(r"\w+", sql[position:])
        keyword = word.group().upper() if word else ""
        if keyword and keyword not in ("WITH", "SELECT", "FROM", "VALUES"):
            raise BadRequest(f"only SELECT queries are allowed; {keyword} statements are refused")
    raise BadRequest("only SELECT queries are allowed")


def _tables(root: Any) -> list[_Table]:
    """Every base-table reference, with the CTE names in scope there; checks everything else."""
    tables: list[_Table] = []
    stack: list[tuple[Any, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, scope = stack.pop()
        if isinstance(node, list):
            stack.extend((item, scope) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        ctes = node.get("cte_map")
        if isinstance(ctes, dict) and ctes.get("map"):
            # A CTE sees the CTEs before it (and itself only through a recursive node); the body
            # of the query sees them all. DuckDB resolves any other name in its catalog.
            visible = set(scope)
            for entry in ctes["map"]:
                stack.append((entry.get("value"), frozenset(visible)))
                visible.add(str(entry.get("key", "")).lower())
            scope = frozenset(visible)
            node = {key: value for key, value in node.items() if key != "cte_map"}
        if node.get("type") == "RECURSIVE_CTE_NODE":
            own = scope | {str(node.get("cte_name", "")).lower()}
            stack.append((node.get("right"), own))
            node = {key: value for key, value in node.items() if key != "right"}
        if isinstance(node.get("function_name"), str):
            _check_function(node)
        if _is_table_ref(node):
            kind = node["type"]
            if kind not in _TABLE_REF_KINDS:
                if kind == "SHOW_REF":
                    raise BadRequest("DESCRIBE and SUMMARIZE are not supported here; query the measurement with SELECT")
                raise BadRequest(f"table reference of kind {kind} is not allowed")
            if kind == "BASE_TABLE":
                tables.append(
                    _Table(
                        str(node.get("catalog_name") or ""),
                        str(node.get("schema_name") or ""),
                        str(node.get("table_name") or ""),
                        scope,
                    )
                )
            elif kind == "TABLE_FUNCTION":
                _check_table_function(node)
        stack.extend((value, scope) for value in node.values() if isinstance(value, (dict, list)))
    return tables


def _is_table_ref(node: dict[str, Any]) -> bool:
    return (
        isinstance(node.get("type"), str)
        and "query_location" in node
        and "sample" in node
        and "class" not in node
        and "modifiers" not in node
    )


def _check_function(node: dict[str, Any]) -> None:
    name = str(node["function_name"]).lower()
    reason = DENIED_FUNCTIONS.get(name)
    if reason is not None:
        raise BadRequest(f"function {name}() is not allowed in queries: {reason}")


def _check_table_function(node: dict[str, Any]) -> None:
    function = node.get("function")
    name = function.get("function_name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise BadRequest("this table expression is not allowed")
    qualified = any(isinstance(function, dict) and function.get(key) for key in ("schema", "catalog"))
    if name.lower() not in ALLOWED_TABLE_FUNCTIONS or qualified:
        allowed = ", ".join(sorted(ALLOWED_TABLE_FUNCTIONS))
        raise BadRequest(
            f"table function {name}() is not allowed: {_MEASUREMENT_HINT} (the only table functions are {allowed})"
        )


def _check_unmapped(table: _Table) -> None:
    """A table reference the rewriter left alone: fine only as a CTE in scope."""
    if not table.catalog and not table.schema and table.name.lower() in table.visible_ctes:
        return
    shown = ".".join(part for part in (table.catalog, table.schema, table.name) if part)
    if any(ch in table.name for ch in "./\\:") and not table.schema:
        raise BadRequest(f"FROM {shown!r}: files and URLs cannot be read; {_MEASUREMENT_HINT}")
    raise BadRequest(
        f"table {shown!r} cannot be mapped to a measurement here (it is not a CTE in scope, and the rewriter"
        " does not read this form: TABLE, PIVOT/UNPIVOT statements, parenthesized joins, or a CTE of the"
        f" same name elsewhere in the query); {_MEASUREMENT_HINT}"
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
