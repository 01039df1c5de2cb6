"""A growing table of named rewriter cases: input SQL -> SQL with scans substituted."""

from __future__ import annotations

import pytest

from arcs.errors import BadRequest
from arcs.query.rewriter import TableRef, rewrite_tables, table_references


def scan(ref: TableRef) -> str:
    return f"SCAN<{ref.database or ''}.{ref.measurement}>"


CASES = [
    ("plain", "SELECT * FROM cpu", 'SELECT * FROM SCAN<.cpu> AS "cpu"'),
    ("qualified", "SELECT * FROM db.cpu", 'SELECT * FROM SCAN<db.cpu> AS "cpu"'),
    ("quoted", 'SELECT * FROM "my-db"."cpu"', 'SELECT * FROM SCAN<my-db.cpu> AS "cpu"'),
    ("alias kept", "SELECT c.x FROM cpu c", "SELECT c.x FROM SCAN<.cpu> c"),
    ("as alias kept", "SELECT c.x FROM cpu AS c", "SELECT c.x FROM SCAN<.cpu> AS c"),
    ("string literal untouched", "SELECT 'FROM cpu' FROM mem", "SELECT 'FROM cpu' FROM SCAN<.mem> AS \"mem\""),
    (
        "escape string with a backslash-quoted quote untouched",
        r"SELECT E'it\'s FROM cpu', e'\\' FROM mem",
        "SELECT E'it\\'s FROM cpu', e'\\\\' FROM SCAN<.mem> AS \"mem\"",
    ),
    (
        "a word ending in e before a string",
        "SELECT note FROM mem WHERE note='x'",
        """SELECT note FROM SCAN<.mem> AS "mem" WHERE note='x'""",
    ),
    ("line comment untouched", "SELECT 1 FROM mem -- FROM cpu", 'SELECT 1 FROM SCAN<.mem> AS "mem" -- FROM cpu'),
    ("block comment untouched", "SELECT /* FROM cpu */ 1 FROM mem", 'SELECT /* FROM cpu */ 1 FROM SCAN<.mem> AS "mem"'),
    (
        "join",
        "SELECT * FROM cpu JOIN mem ON cpu.time = mem.time",
        'SELECT * FROM SCAN<.cpu> AS "cpu" JOIN SCAN<.mem> AS "mem" ON cpu.time = mem.time',
    ),
    (
        "comma list",
        "SELECT * FROM cpu, db.mem m WHERE 1=1",
        'SELECT * FROM SCAN<.cpu> AS "cpu", SCAN<db.mem> m WHERE 1=1',
    ),
    ("subquery", "SELECT * FROM (SELECT * FROM cpu) t", 'SELECT * FROM (SELECT * FROM SCAN<.cpu> AS "cpu") t'),
    (
        "cte name untouched",
        "WITH t AS (SELECT * FROM cpu) SELECT * FROM t",
        'WITH t AS (SELECT * FROM SCAN<.cpu> AS "cpu") SELECT * FROM t',
    ),
    (
        "two ctes",
        "WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b, cpu",
        'WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b, SCAN<.cpu> AS "cpu"',
    ),
    (
        "in subquery",
        "SELECT * FROM cpu WHERE host IN (SELECT host FROM mem)",
        'SELECT * FROM SCAN<.cpu> AS "cpu" WHERE host IN (SELECT host FROM SCAN<.mem> AS "mem")',
    ),
    (
        "extract from is no table",
        "SELECT extract(year FROM time) FROM cpu",
        'SELECT extract(year FROM time) FROM SCAN<.cpu> AS "cpu"',
    ),
    (
        "is distinct from is no table",
        "SELECT * FROM cpu WHERE a IS DISTINCT FROM b",
        'SELECT * FROM SCAN<.cpu> AS "cpu" WHERE a IS DISTINCT FROM b',
    ),
    ("table function left alone", "SELECT * FROM range(3)", "SELECT * FROM range(3)"),
    ("from first", "FROM cpu SELECT count(*)", 'FROM SCAN<.cpu> AS "cpu" SELECT count(*)'),
    ("group by after", "SELECT count(*) FROM cpu GROUP BY 1", 'SELECT count(*) FROM SCAN<.cpu> AS "cpu" GROUP BY 1'),
    (
        "union",
        "SELECT 1 FROM cpu UNION ALL SELECT 2 FROM mem",
        'SELECT 1 FROM SCAN<.cpu> AS "cpu" UNION ALL SELECT 2 FROM SCAN<.mem> AS "mem"',
    ),
    (
        "nested comments are one comment, as DuckDB reads them",
        "SELECT 1 /* /* */ FROM cpu */ FROM mem",
        'SELECT 1 /* /* */ FROM cpu */ FROM SCAN<.mem> AS "mem"',
    ),
    ("comment inside a qualified name", "SELECT * FROM db/**/./**/cpu", 'SELECT * FROM SCAN<db.cpu> AS "cpu"'),
    ("column alias list kept", "SELECT * FROM cpu AS c(a, b)", "SELECT * FROM SCAN<.cpu> AS c(a, b)"),
    (
        "parenthesized join",
        "SELECT * FROM (cpu JOIN mem USING (time))",
        'SELECT * FROM (SCAN<.cpu> AS "cpu" JOIN SCAN<.mem> AS "mem" USING (time))',
    ),
    ("non-ascii text before", "SELECT 'é' AS e FROM cpu", "SELECT 'é' AS e FROM SCAN<.cpu> AS \"cpu\""),
    (
        "escaped quote in string",
        "SELECT 'it''s FROM cpu' FROM mem",
        "SELECT 'it''s FROM cpu' FROM SCAN<.mem> AS \"mem\"",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_rewrite(sql: str, expected: str) -> None:
    assert rewrite_tables(sql, scan) == expected


def test_references_are_listed() -> None:
    assert table_references("SELECT * FROM a.b JOIN c ON true") == [TableRef("a", "b"), TableRef(None, "c")]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'unterminated FROM cpu",
        r"SELECT E'unterminated\' FROM cpu",
        'SELECT * FROM "cpu',
        "SELECT (1 FROM cpu",
        "SELECT * FROM a.b.c",
        "TABLE cpu",
        "PIVOT cpu ON host IN ('a') USING sum(v)",
        "SELECT * FROM cpu, (WITH cpu AS (SELECT 1) SELECT * FROM cpu) s",
    ],
)
def test_malformed_sql_is_a_bad_request(sql: str) -> None:
    with pytest.raises(BadRequest):
        rewrite_tables(sql, scan)
