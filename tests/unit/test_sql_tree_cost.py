"""The parse tree's fixed costs: a query's text is parsed by DuckDB once, and string constants are
printed without a round trip, each exactly as DuckDB's own parsing and printing would give."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.query import sql_tree
from arcs.query.sql_tree import _printed_by_duckdb, expression_sql, parse_select


def _first_item(sql: str) -> dict[str, Any]:
    item = parse_select(sql)["node"]["select_list"][0]
    assert isinstance(item, dict)
    return item


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40))
def test_a_string_constant_prints_as_duckdb_prints_it(text: str) -> None:
    item = _first_item("SELECT " + "'" + text.replace("'", "''") + "'")
    assert expression_sql(item) == _printed_by_duckdb(item)


def test_other_constants_and_expressions_are_printed_by_duckdb() -> None:
    for sql in ("SELECT 42", "SELECT NULL", "SELECT TIMESTAMP '2026-01-01'", "SELECT now() - INTERVAL 1 DAY"):
        item = _first_item(sql)
        assert expression_sql(item) == _printed_by_duckdb(item) is not None
    aliased = _first_item("SELECT 'x' AS label")
    assert expression_sql(aliased) == _printed_by_duckdb(aliased)


def test_the_same_text_is_parsed_by_duckdb_once_and_each_caller_gets_its_own_tree() -> None:
    sql = "SELECT host, arg_max(usage_user, time) FROM cpu WHERE time >= '2026-07-28T00:00:00Z' GROUP BY host"
    before = sql_tree._serialized.cache_info()
    first = parse_select(sql)
    first["node"]["select_list"].clear()  # a caller that rewrites its tree
    second = parse_select(sql)
    after = sql_tree._serialized.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses + 1
    assert len(second["node"]["select_list"]) == 2
