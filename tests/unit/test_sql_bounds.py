"""The bounds every caller's SQL is held to before DuckDB's parser reads it."""

from __future__ import annotations

import time

import pytest

from arcs.errors import BadRequest, PayloadTooLarge
from arcs.query.sql_tree import MAX_COMMENT_DEPTH, MAX_SQL_BYTES, check_sql_size


def test_sql_longer_than_the_limit_is_413() -> None:
    with pytest.raises(PayloadTooLarge):
        check_sql_size("SELECT " + "1" * MAX_SQL_BYTES)


@pytest.mark.parametrize("depth", [1, 3, MAX_COMMENT_DEPTH])
def test_comments_nested_up_to_the_limit_are_read(depth: int) -> None:
    check_sql_size("SELECT 1 " + "/*" * depth + " x " + "*/" * depth)


def test_comments_nested_deeper_are_refused_quickly() -> None:
    started = time.perf_counter()
    with pytest.raises(BadRequest, match="nest"):
        check_sql_size("SELECT 1 " + "/*" * 15_000 + "*/" * 15_000)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT '" + "/*" * 100 + "' AS x",
        'SELECT 1 AS "' + "/*" * 100 + '"',
        "SELECT $$" + "/*" * 100 + "$$",
        "SELECT 1 AS x -- " + "/*" * 100,
        "SELECT 1 WHERE 'a' LIKE '%/*%' " * 100,
        "SELECT 1 /* it's */ AS x, '" + "/*" * 100 + "'",
    ],
)
def test_comment_marks_inside_strings_names_and_line_comments_do_not_count(sql: str) -> None:
    check_sql_size(sql)


@pytest.mark.parametrize("opening", ["'", '"', "$$", "$a$ $b$ "])
def test_unclosed_quotes_are_read_in_linear_time(opening: str) -> None:
    started = time.perf_counter()
    check_sql_size(("SELECT 1 " + opening) * 2000 + "/* x */")
    assert time.perf_counter() - started < 0.5
