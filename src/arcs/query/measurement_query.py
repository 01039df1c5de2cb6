"""The query of ``GET /api/v1/query/{measurement}`` (and of a delete's ``where``): one measurement,
its rows filtered by the caller's ``where``, ordered and paged, checked by DuckDB's parser.

Only ``where`` is the caller's text; it may be one boolean expression over the measurement's
columns, nothing else, whatever quoting, escape string or comment it holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from arcs.errors import BadRequest
from arcs.query.rewriter import quote_identifier
from arcs.query.sql_tree import parse_select

MAX_WHERE_CHARS = 16_384
_ORDER_BY = re.compile(r'\s*("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_]*)(?:\s+(ASC|DESC))?\s*', re.IGNORECASE)
WHERE_RULE = (
    "'where' must be one boolean expression over the measurement's columns: no subqueries, no other "
    "tables, no statement or clause of its own"
)


def _order_by(value: str | None, columns: Mapping[str, str]) -> str:
    """``<column> [ASC|DESC]`` with a column the measurement has; rendered quoted."""
    match = _ORDER_BY.fullmatch(value if value is not None else "time DESC")
    if match is None:
        raise BadRequest("'order_by' must be a column name, optionally followed by ASC or DESC")
    written, direction = match[1], (match[2] or "ASC").upper()
    if written.startswith('"'):
        column = written[1:-1].replace('""', '"')
        found = column if column in columns else None
    else:
        # Unquoted names match without regard to case, as in DuckDB (stored names never differ only in case).
        found = next((name for name in columns if name.lower() == written.lower()), None)
    if found is None:
        raise BadRequest(f"'order_by': the measurement has no column {written!r}")
    return f"{quote_identifier(found)} {direction}"


def measurement_query_sql(
    database: str,
    measurement: str,
    columns: Mapping[str, str],
    *,
    limit: int,
    offset: int,
    order_by: str | None,
    where: str | None,
) -> str:
    """The SQL of ``GET /api/v1/query/{measurement}``; only ``where`` is the caller's text.

    ``where`` is wrapped in parentheses on lines of its own, then the whole statement is checked
    with DuckDB's parser (``check_single_measurement_query``) before it is run as any query is:
    through the sandbox and the rewriter, under the caller's scopes.
    """
    sql = f"SELECT * FROM {quote_identifier(database)}.{quote_identifier(measurement)}"
    if where is not None and where.strip():
        if len(where) > MAX_WHERE_CHARS or "\x00" in where:
            raise BadRequest(f"'where' must be at most {MAX_WHERE_CHARS} characters of text")
        sql += f"\nWHERE (\n{where}\n)"
    return sql + f"\nORDER BY {_order_by(order_by, columns)}\nLIMIT {limit} OFFSET {offset}"


def check_single_measurement_query(sql: str, database: str, measurement: str) -> None:
    """400 unless DuckDB parses ``sql`` as one ``SELECT *`` of this measurement alone, with our ORDER BY and LIMIT.

    DuckDB's own parser decides, so no quoting, escape-string or comment trick in ``where`` can
    make it read differently here than when it runs.
    """
    node = parse_select(sql, "'where' does not parse")["node"]
    source = node.get("from_table") or {}
    select = node.get("select_list") or []
    shaped = (
        node.get("type") == "SELECT_NODE"
        and not (node.get("cte_map") or {}).get("map")
        and source.get("type") == "BASE_TABLE"
        and (source.get("schema_name"), source.get("table_name")) == (database, measurement)
        and not source.get("catalog_name")
        and source.get("sample") is None
        and len(select) == 1
        and select[0].get("class") == "STAR"
        and [modifier.get("type") for modifier in node.get("modifiers") or []] == ["ORDER_MODIFIER", "LIMIT_MODIFIER"]
        and not node.get("group_expressions")
        and not node.get("group_sets")
        and all(node.get(clause) is None for clause in ("having", "qualify", "sample"))
    )
    if not shaped or _holds_a_query(node.get("where_clause")):
        raise BadRequest(WHERE_RULE)


def _holds_a_query(tree: object) -> bool:
    """True if a parsed expression holds a subquery (or any query node) anywhere inside it."""
    if isinstance(tree, dict):
        if tree.get("class") == "SUBQUERY" or "subquery" in tree or "node" in tree:
            return True
        return any(_holds_a_query(value) for value in tree.values())
    if isinstance(tree, list):
        return any(_holds_a_query(value) for value in tree)
    return False
