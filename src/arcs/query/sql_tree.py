"""DuckDB's own reading of a query: its parse tree, the one reading every SQL check works from.

``json_serialize_sql`` runs DuckDB's parser and nothing else (no binding, no catalog, no data), so
comments, quoting and string tricks mean here exactly what they mean when the query runs. Every
module that needs to know what a query names (the sandbox, the table rewriter, time pruning, the
estimate) asks this module instead of reading the text itself.

Parsing is linear in the SQL's length, and the SQL a caller may send is bounded
(``MAX_SQL_BYTES``), so reading a query costs milliseconds whatever it holds.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
from typing import Any

import duckdb

from arcs.allocator import DUCKDB_ALLOCATOR
from arcs.errors import BadRequest, PayloadTooLarge

#: The longest SQL a caller may send (a query, an estimate, a continuous query's definition).
MAX_SQL_BYTES = 64 * 1024
#: How deep block comments may nest (``/* /* */ */``): a real query needs a few levels.
MAX_COMMENT_DEPTH = 64
#: DuckDB's parse-tree marker for "no position in the text".
NO_LOCATION = 2**64 - 1

_MEASUREMENT_HINT = "queries read measurements by name: FROM measurement or FROM database.measurement"

_local = threading.local()
_skeleton_lock = threading.Lock()
_skeleton: dict[str, Any] | None = None


def check_sql_size(sql: str) -> None:
    """413 when ``sql`` is longer than ``MAX_SQL_BYTES``: every cost of reading it grows with its length;
    400 when its block comments nest deeper than ``MAX_COMMENT_DEPTH``: DuckDB's parser takes time
    that grows with the square of their depth (8,000 levels: 3 s)."""
    size = len(sql.encode("utf-8", "surrogatepass"))
    if size > MAX_SQL_BYTES:
        raise PayloadTooLarge(
            f"SQL is longer than {MAX_SQL_BYTES} bytes ({size} bytes); split the query or narrow what it names"
        )
    if "/*" not in sql:
        return
    deepest = _deepest_comment(sql)
    if deepest > MAX_COMMENT_DEPTH:
        raise BadRequest(f"block comments nest {deepest} deep in this SQL; at most {MAX_COMMENT_DEPTH} are read")


#: Outside comments: what can hide a ``/*`` (strings, quoted names, ``$$`` quotes, line comments).
#: Tagged dollar quotes are left out: a search for each distinct unclosed tag would read to the end.
_QUOTED = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|\$\$.*?\$\$|--[^\n]*|/\*""", re.DOTALL)


def _deepest_comment(sql: str) -> int:
    """How deep block comments nest in ``sql``, read as DuckDB reads them (linear)."""
    deepest = 0
    position = 0
    while True:
        found = _QUOTED.search(sql, position)
        if found is None:
            return deepest
        if found.group() != "/*":
            position = found.end()
            continue
        depth = 0  # inside a comment only its own marks count
        for mark in _COMMENT_MARK.finditer(sql, found.start()):
            depth += 1 if mark.group() == "/*" else -1
            deepest = max(deepest, depth)
            if depth == 0:
                position = mark.end()
                break
        else:
            return deepest  # unterminated: DuckDB's parser says so


def _parser() -> duckdb.DuckDBPyConnection:
    """This thread's cursor on a private in-memory database: parsing only, nothing is bound or run."""
    cursor: duckdb.DuckDBPyConnection | None = getattr(_local, "cursor", None)
    if cursor is None:
        cursor = _local.cursor = _database().cursor()
    return cursor


_database_lock = threading.Lock()
_database_connection: duckdb.DuckDBPyConnection | None = None


def _database() -> duckdb.DuckDBPyConnection:
    global _database_connection
    with _database_lock:
        if _database_connection is None:
            _database_connection = duckdb.connect(":memory:", config=DUCKDB_ALLOCATOR)
        return _database_connection


def _scalar(sql: str, parameter: str) -> str:
    row = _parser().execute(sql, [parameter]).fetchone()
    if row is None or not isinstance(row[0], str):
        raise BadRequest("SQL does not parse: no parse tree")
    return row[0]


#: SQL up to this length keeps its serialized parse tree in memory: a query is parsed several times
#: on its way (exact rewrites, the sandbox, pruning), and a dashboard sends the same text again.
_CACHED_SQL_CHARS = 4096


def _serialize(sql: str) -> str:
    return _scalar("SELECT json_serialize_sql(?)", sql)


# Text, not trees: each caller gets its own tree to change (json.loads costs a tenth of a parse).
_serialized = functools.lru_cache(maxsize=256)(_serialize)


def parse_select(sql: str, context: str = "SQL does not parse") -> dict[str, Any]:
    """DuckDB's parse tree of ``sql``, which must be one SELECT; ``context`` prefixes parse errors.

    The tree is the statement's (``{"node": ...}``). (``extract_statements`` is no substitute for
    ``json_serialize_sql``: it also runs pragma handlers, so it reports ``PRAGMA version`` as a
    SELECT and executes ``PRAGMA json_execute_serialized_sql(...)``.)
    """
    check_sql_size(sql)  # every parse of a caller's SQL is bounded, whichever route it came by
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"{context}: the SQL is not valid Unicode text (a lone surrogate)") from exc
    try:
        tree = json.loads(_serialized(sql) if len(sql) <= _CACHED_SQL_CHARS else _serialize(sql))
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
    statement = statements[0]
    if not isinstance(statement, dict) or not isinstance(statement.get("node"), dict):
        raise BadRequest(f"{context}: no parse tree")
    return statement


def _refuse_statements(sql: str) -> None:
    """Say why DuckDB would not serialize ``sql``: several statements, or one that is no SELECT.

    Only the message comes from here (DuckDB's tokenizer, for the ``;`` between statements and the
    leading keyword); the refusal itself is the parser's.
    """
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error:
        return
    data = sql.encode("utf-8", "surrogatepass")
    statements: list[list[tuple[int, Any]]] = [[]]
    for position, kind in tokens:
        if kind == duckdb.token_type.operator and data[position : position + 1] == b";":
            statements.append([])
        else:
            statements[-1].append((position, kind))
    statements = [statement for statement in statements if statement]
    if len(statements) > 1:
        raise BadRequest(f"send exactly one statement; got {len(statements)}")
    if statements and statements[0][0][1] == duckdb.token_type.keyword:
        position = statements[0][0][0]
        word = re.match(rb"\w+", data[position:])
        keyword = word.group().decode().upper() if word else ""
        if keyword and keyword not in ("WITH", "SELECT", "FROM", "VALUES"):
            raise BadRequest(f"only SELECT queries are allowed; {keyword} statements are refused")
    raise BadRequest("only SELECT queries are allowed")


def expression_sql(expression: dict[str, Any]) -> str | None:
    """DuckDB's own printing of a parsed expression (None if it cannot print it)."""
    literal = _string_literal(expression)
    return literal if literal is not None else _printed_by_duckdb(expression)


def _printed_by_duckdb(expression: dict[str, Any]) -> str | None:
    global _skeleton
    with _skeleton_lock:
        if _skeleton is None:
            _skeleton = json.loads(_scalar("SELECT json_serialize_sql(?)", "SELECT 1"))
        statement = copy.deepcopy(_skeleton)
    statement["statements"][0]["node"]["select_list"] = [expression]
    try:
        printed = _scalar("SELECT json_deserialize_sql(?)", json.dumps(statement))
    except (duckdb.Error, BadRequest):
        return None
    return printed.removeprefix("SELECT ") if printed.startswith("SELECT ") else None


def _string_literal(expression: dict[str, Any]) -> str | None:
    """A string constant as DuckDB prints it (quoted, quotes doubled), without a round trip: the
    time bounds dashboards send are such literals."""
    if expression.get("class") != "CONSTANT" or expression.get("alias"):
        return None
    value = expression.get("value")
    if not isinstance(value, dict) or value.get("is_null") is not False:
        return None
    kind = value.get("type")
    text = value.get("value")
    if not isinstance(kind, dict) or kind.get("id") != "VARCHAR" or kind.get("type_info") is not None:
        return None
    if not isinstance(text, str):
        return None
    return "'" + text.replace("'", "''") + "'"


_COMMENT_MARK = re.compile(r"/\*|\*/")


def block_comment_end(sql: str, start: int) -> int:
    """Just past the block comment opening at ``start``: ``/* ... */`` pairs nest inside it, as DuckDB
    reads them (for the few places that scan SQL text themselves); 400 when it never ends."""
    depth = 0
    for mark in _COMMENT_MARK.finditer(sql, start):
        depth += 1 if mark.group() == "/*" else -1
        if depth == 0:
            return mark.end()
    raise BadRequest("unterminated comment in SQL")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
