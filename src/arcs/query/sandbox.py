"""The SQL sandbox's statement check: what a query may read, decided on DuckDB's own parse tree.

The policy: a query is one ``SELECT`` whose only way to read data is the scans the rewriter puts in
place of its measurement references. Concretely, on DuckDB's parse tree (``json_serialize_sql``,
DuckDB's own parser, so comments, quoting and string tricks mean exactly what DuckDB reads):

- exactly one statement, of type ``SELECT`` (no ``COPY``, ``ATTACH``, ``SET``, ``PRAGMA``, ``CALL``,
  DDL, DML, ``EXPLAIN``, ``PREPARE``, ``PIVOT`` statements that create types, ...);
- every base-table reference is a CTE in scope or a measurement (``arcs.query.rewriter``, on the same
  tree, which the rewriter then replaces by a scan of its files at the position DuckDB gives for
  it). So a string path (``FROM 'x.parquet'``), a system view (``pg_settings``) or a name read
  differently never reaches DuckDB's catalog, replacement scans or file readers;
- table functions only from a short allow-list of generators (``range``, ``generate_series``,
  ``unnest``): every other one (``read_parquet``, ``read_csv``, ``glob``, ``query``,
  ``duckdb_secrets``, ``enable_logging``...) is how files, settings or SQL strings are reached;
- no ``DESCRIBE``/``SUMMARIZE`` (``SHOW_REF``), and no scalar function that exposes settings or the
  environment, runs SQL given as a string, or only sleeps (``current_setting``, ``getenv``,
  ``json_serialize_plan``, ``sleep_ms``...).

DuckDB's configuration (``arcs.query.engine``) is the second wall: external access only under the data
root, http(s)/hf file systems disabled, no extension loading, no Python replacement scans,
configuration locked. The data root holds every database, which is why the check above refuses
every direct file reader rather than trusting ``allowed_directories`` alone.
"""

from __future__ import annotations

from typing import Any

from arcs.errors import BadRequest
from arcs.names import check_database, check_measurement
from arcs.query.rewriter import ParsedQuery, parse_query
from arcs.query.sql_tree import parse_select

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


def check_read_only(sql: str) -> ParsedQuery:
    """Refuse (4xx) anything but one SELECT that reads only the measurements it names; returns its reading."""
    statement = parse_select(sql)
    _check_tree(statement)
    query = parse_query(sql, statement)
    for ref in query.references:
        if ref.database is not None:
            check_database(ref.database)
        check_measurement(ref.measurement)
    return query


def _check_tree(root: Any) -> None:
    """Every function and table reference kind of the tree is one a read query may use."""
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("function_name"), str):
            _check_function(node)
        if _is_table_ref(node):
            kind = node["type"]
            if kind not in _TABLE_REF_KINDS:
                if kind == "SHOW_REF":
                    raise BadRequest("DESCRIBE and SUMMARIZE are not supported here; query the measurement with SELECT")
                raise BadRequest(f"table reference of kind {kind} is not allowed")
            if kind == "TABLE_FUNCTION":
                _check_table_function(node)
        stack.extend(value for value in node.values() if isinstance(value, (dict, list)))


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
