"""Answers the catalog already holds: a query answered from the file records, before DuckDB opens a file.

The catalog records each file's rows. ``SELECT count(*) FROM m`` (no ``WHERE``, grouping or
modifiers) is then the sum of those rows, unless some files may repeat each other's points and
are read through the merge (``arcs.write.points``), which can make fewer rows than stored. Opening every
file for its footer costs DuckDB about a millisecond a file even with the metadata cached; a
measurement of 720 hour files counted in 0.22 s, the catalog's sum takes none of that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from arcs.ports import FileRecord
from arcs.query.sql_tree import expression_sql
from arcs.write import points


def counted_rows(statement: dict[str, Any], files: Sequence[FileRecord], tags: Sequence[str]) -> pa.Table | None:
    """The answer of ``SELECT count(*) [AS name] FROM measurement`` from the file records; None for
    any other query, or when the scan would merge repeated points."""
    node = statement.get("node") or {}
    table = node.get("from_table") or {}
    if (
        node.get("type") != "SELECT_NODE"
        or (node.get("cte_map") or {}).get("map")
        or node.get("modifiers")
        or node.get("where_clause") is not None
        or node.get("group_expressions")
        or node.get("group_sets")
        or node.get("having") is not None
        or node.get("qualify") is not None
        or node.get("sample") is not None
        or node.get("aggregate_handling") != "STANDARD_HANDLING"
        or table.get("type") != "BASE_TABLE"
        or table.get("sample") is not None
        or len(node.get("select_list") or []) != 1
    ):
        return None
    item = node["select_list"][0]
    if not _is_count_star(item):
        return None
    if tags and points.may_repeat(files):
        return None
    name = item.get("alias") or expression_sql(item)
    if not name:
        return None
    return pa.table({name: pa.array([sum(record.rows for record in files)], pa.int64())})


def _is_count_star(item: dict[str, Any]) -> bool:
    return (
        item.get("class") == "FUNCTION"
        and item.get("function_name") == "count_star"
        and not item.get("schema")
        and not item.get("catalog")
        and not item.get("children")
        and item.get("filter") is None
        and not item.get("distinct")
        and not (item.get("order_bys") or {}).get("orders")
        and not item.get("export_state")
    )
