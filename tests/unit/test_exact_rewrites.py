r"""The URL-domain regex rewrite returns exactly what DuckDB's own regex returns, for every input.

DuckDB (RE2) facts the rewrite relies on, each pinned by a named case below: ``$`` is the very end
of the string, ``.`` does not match ``\n`` (but matches ``\r``, U+0085, U+2028), ``[^/]`` matches
``\n``, ``https?://`` is case sensitive, the optional ``www.`` gives way when the host would be
empty, and a string the regex does not match comes back unchanged from REGEXP_REPLACE and as ''
from REGEXP_EXTRACT.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arcs.auth.tokens import Principal
from arcs.query.engine import Engine
from arcs.query.exact_rewrites import MAX_CALLS, URL_DOMAIN_PATTERN, apply_exact_rewrites, url_domain_case
from arcs.query.service import QueryService
from arcs.query.sql_tokens import tokenize
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import Ingestor
from arcs.write.schema import SchemaRegistry
from tests.helpers import BASE_US, local_ports, queued

P = URL_DOMAIN_PATTERN
REPLACE = f"regexp_replace(s, {P}, '\\1')"
EXTRACT_1 = f"regexp_extract(s, {P}, 1)"
EXTRACT_0 = f"regexp_extract(s, {P}, 0)"
EXTRACT = f"regexp_extract(s, {P})"
CALLS = [REPLACE, EXTRACT_1, EXTRACT_0, EXTRACT]


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect(":memory:")
    yield connection
    connection.close()


def calls_regex(sql: str) -> bool:
    return any(t.kind == "word" and t.text.lower().startswith("regexp_") for t in tokenize(sql))


def run_both(
    con: duckdb.DuckDBPyConnection, values: list[str | None], *calls: str
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The calls over ``values`` as written, and after apply_exact_rewrites: one tuple per row, in order."""
    con.register("t", pa.table({"i": pa.array(range(len(values)), pa.int64()), "s": pa.array(values, pa.string())}))
    original = f"SELECT {', '.join(calls)} FROM t ORDER BY i"
    rewritten = apply_exact_rewrites(original)
    assert rewritten != original
    assert not calls_regex(rewritten)
    return con.execute(original).fetchall(), con.execute(rewritten).fetchall()


# --- named regression cases: input -> what DuckDB's REGEXP_REPLACE returns -----------------------

REGRESSIONS: list[tuple[str, str | None, str | None]] = [
    ("plain http", "http://a.ru/x", "a.ru"),
    ("plain https", "https://a.ru/x?q=1", "a.ru"),
    ("www stripped", "https://www.google.ru/search", "google.ru"),
    ("only one www stripped", "http://www.www.a.ru/", "www.a.ru"),
    ("slash right after host", "http://a/", "a"),
    ("no scheme", "a.ru/x", "a.ru/x"),
    ("http only", "http://", "http://"),
    ("https www and nothing after", "https://www.", "https://www."),
    ("https www then slash: www gives way", "https://www./", "www."),
    ("www then slash and path", "http://www./x/y", "www."),
    ("host without trailing slash", "http://a.ru", "http://a.ru"),
    ("www host without trailing slash", "https://www.a.ru", "https://www.a.ru"),
    ("empty host", "http:///x", "http:///x"),
    ("empty string", "", ""),
    ("null", None, None),
    ("uppercase scheme", "HTTP://a.ru/x", "HTTP://a.ru/x"),
    ("mixed case scheme", "Https://a.ru/x", "Https://a.ru/x"),
    ("uppercase www kept", "http://WWW.a.ru/x", "WWW.a.ru"),
    ("newline after the slash: no match", "http://a.ru/x\ny", "http://a.ru/x\ny"),
    ("trailing newline: $ is the very end", "http://a.ru/x\n", "http://a.ru/x\n"),
    ("newline in the host matches [^/]", "http://a\nb/c", "a\nb"),
    ("newline right after www", "http://www.\n/", "\n"),
    ("carriage return matches .", "http://a/b\r", "a"),
    ("U+2028 matches .", "https://www.a/b\u2028c", "a"),
    ("U+0085 matches .", "http://a/b\x85", "a"),
    ("leading newline", "\nhttp://a/b", "\nhttp://a/b"),
    ("leading space", " http://a/b", " http://a/b"),
    ("ftp", "ftp://a/b", "ftp://a/b"),
    ("non-ASCII host", "http://пример.рф/путь", "пример.рф"),
    ("combining mark after the scheme", "http://\u0301a/b", "\u0301a"),
    ("combining mark after www.", "http://www.\u0301/b", "\u0301"),
    ("NUL in host", "http://\x00/x", "\x00"),
    ("scheme twice", "http://http://a/b", "http:"),
    ("https with one slash", "https:/a/b", "https:/a/b"),
    ("double slash path", "http://a//b", "a"),
    ("port and user", "https://u:p@www.a.ru:8080/x", "u:p@www.a.ru:8080"),
    ("like wildcards in the string", "http://%_/x", "%_"),
]


@pytest.mark.parametrize(("value", "expected"), [(v, e) for _, v, e in REGRESSIONS], ids=[n for n, _, _ in REGRESSIONS])
def test_regression_cases(con: duckdb.DuckDBPyConnection, value: str | None, expected: str | None) -> None:
    regex, rewrite = run_both(con, [value], REPLACE)
    assert regex == [(expected,)]  # pins DuckDB's own behaviour
    assert rewrite == [(expected,)]


def test_regression_cases_every_form(con: duckdb.DuckDBPyConnection) -> None:
    expected, actual = run_both(con, [v for _, v, _ in REGRESSIONS], *CALLS)
    assert actual == expected


def test_regexp_extract_results(con: duckdb.DuckDBPyConnection) -> None:
    values = ["https://www.a.ru/x", "http://a.ru", "", None]
    regex, rewrite = run_both(con, values, EXTRACT_1, EXTRACT_0, EXTRACT)
    assert (
        regex
        == rewrite
        == [("a.ru", "https://www.a.ru/x", "https://www.a.ru/x"), ("", "", ""), ("", "", ""), (None,) * 3]
    )


# --- property: generated strings, biased toward URL-like ones with the tricky parts ---------------

SCHEMES = [
    "",
    "http://",
    "https://",
    "HTTP://",
    "Https://",
    "http:/",
    "http:",
    "https:/",
    "http:///",
    "https//",
    "ftp://",
    " http://",
    "\nhttp://",
    "httpss://",
    "http://http://",
]
WWW = ["", "", "www.", "www.www.", "WWW.", "www", "www/", "ww.", "www..", "www./"]
PIECES = [
    "a",
    "ru",
    ".",
    "-",
    "/",
    "//",
    "\n",
    "\r",
    "\r\n",
    "é",
    "日本",
    "\u0301",
    "\u2028",
    "\x85",
    "\x00",
    " ",
    "%",
    "_",
    "\\",
    "'",
    '"',
    "?",
    "#",
    ":",
    "www.",
    "http://",
    "\t",
    "\U0001f600",
]
chunk = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=6).map("".join)
url_like = st.builds(
    lambda scheme, www, host, tail: scheme + www + host + tail,
    st.sampled_from(SCHEMES),
    st.sampled_from(WWW),
    chunk,
    st.one_of(st.just(""), chunk.map(lambda rest: "/" + rest)),
)
strings = st.one_of(url_like, url_like, url_like, st.text(), st.none(), st.just(""))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(strings, min_size=1, max_size=25))
def test_rewrite_equals_duckdb_regex(con: duckdb.DuckDBPyConnection, values: list[str | None]) -> None:
    """REGEXP_REPLACE and the three REGEXP_EXTRACT forms, each against its rewrite."""
    expected, actual = run_both(con, values, *CALLS)
    assert actual == expected, [(v, e, a) for v, e, a in zip(values, expected, actual, strict=True) if e != a]


def test_many_rows_across_vectors(con: duckdb.DuckDBPyConnection) -> None:
    """Half a million rows (many vectors, multiple threads): not a single difference."""
    case = url_domain_case("s")
    differences = con.execute(
        f"""
        WITH t AS (
            SELECT (['', 'http://', 'https://', 'HTTP://', 'http:/'])[1 + (i * 7) % 5]
                || (['', 'www.', 'www.www.', 'www./'])[1 + (i * 11) % 4]
                || (['a.ru', '', 'b' || chr(10) || 'c', 'é.рф'])[1 + (i * 13) % 4]
                || (['', '/', '/x', '/x' || chr(10), '/x' || chr(13) || 'y'])[1 + (i * 17) % 5] AS s
            FROM range(500000) r(i)
        )
        SELECT count(*) FILTER (WHERE {REPLACE} IS DISTINCT FROM {case}) FROM t
        """
    ).fetchone()
    assert differences == (0,)


def test_constant_argument(con: duckdb.DuckDBPyConnection) -> None:
    sql = f"SELECT {REPLACE} AS r FROM (SELECT 'https://www.a.ru/x' AS s)"
    assert con.execute(apply_exact_rewrites(sql)).fetchall() == con.execute(sql).fetchall() == [("a.ru",)]


# --- what gets rewritten, and what never does ---------------------------------------------------

REWRITTEN = [
    ("clickbench q29", f"SELECT REGEXP_REPLACE(Referer, {P}, '\\1') AS k, COUNT(*) AS c FROM hits GROUP BY k"),
    ("lowercase name", f"SELECT regexp_replace(Referer, {P}, '\\1') AS k FROM hits"),
    ("mixed case name", f"SELECT Regexp_Replace(Referer, {P}, '\\1') k FROM hits"),
    ("qualified column", f"SELECT regexp_replace(h.Referer, {P}, '\\1') AS k FROM hits h"),
    ("quoted column", f'SELECT regexp_replace("h"."Referer", {P}, \'\\1\') AS k FROM hits h'),
    ("whitespace and comments", f"SELECT regexp_replace ( Referer /* c */ ,\n {P} -- x\n , '\\1' ) AS k FROM hits"),
    ("unaliased", f"SELECT regexp_replace(Referer, {P}, '\\1') FROM hits"),
    ("unaliased after distinct", f"SELECT DISTINCT regexp_replace(Referer, {P}, '\\1') FROM hits"),
    ("unaliased after distinct on", f"SELECT DISTINCT ON (URL) regexp_replace(Referer, {P}, '\\1') FROM hits"),
    ("unaliased second item", f"SELECT URL, regexp_replace(Referer, {P}, '\\1'), 1 FROM hits"),
    ("in where", f"SELECT URL FROM hits WHERE regexp_replace(Referer, {P}, '\\1') = 'a.ru'"),
    ("in group by and select", f"SELECT regexp_replace(Referer, {P}, '\\1'), count(*) FROM hits GROUP BY 1"),
    ("nested in a function", f"SELECT upper(regexp_replace(Referer, {P}, '\\1')) FROM hits"),
    ("extract group 1", f"SELECT regexp_extract(Referer, {P}, 1) FROM hits"),
    ("extract group 0", f"SELECT regexp_extract(Referer, {P}, 0) AS k FROM hits"),
    ("extract no group", f"SELECT REGEXP_EXTRACT(Referer, {P}) FROM hits"),
    ("in a subquery", f"SELECT k FROM (SELECT regexp_replace(Referer, {P}, '\\1') AS k FROM hits) t"),
    ("two calls", f"SELECT regexp_replace(Referer, {P}, '\\1'), regexp_extract(URL, {P}, 1) FROM hits"),
    ("keyword column", f"SELECT regexp_replace(\"value\", {P}, '\\1') FROM hits"),
    ("column needing quotes", f"SELECT regexp_replace(\"my col\", {P}, '\\1') FROM hits"),
    ("operator expression", f"SELECT regexp_replace(Referer, {P}, '\\1') || '!' FROM hits"),
    ("case expression", f"SELECT CASE WHEN URL <> '' THEN regexp_extract(URL, {P}, 1) END, 2 FROM hits"),
    (
        "aggregate filter",
        f"SELECT count(*) FILTER (WHERE regexp_replace(Referer, {P}, '\\1') = 'go.mail.ru') FROM hits",
    ),
    ("aggregate order by", f"SELECT string_agg(URL, ',' ORDER BY regexp_extract(URL, {P}, 1), URL) FROM hits"),
    ("window", f"SELECT row_number() OVER (PARTITION BY regexp_replace(Referer, {P}, '\\1') ORDER BY URL) FROM hits"),
    ("scalar subquery", f"SELECT (SELECT max(regexp_replace(Referer, {P}, '\\1')) FROM hits), 1"),
    ("star over a subquery", f"SELECT * FROM (SELECT URL, lower(regexp_replace(Referer, {P}, '\\1')) FROM hits) t"),
    ("cte", f"WITH d AS (SELECT regexp_extract(Referer, {P}, 1) FROM hits) SELECT * FROM d"),
    ("union", f"SELECT regexp_replace(Referer, {P}, '\\1') FROM hits UNION ALL SELECT URL FROM hits"),
    ("in order by only", f"SELECT URL FROM hits ORDER BY regexp_replace(Referer, {P}, '\\1'), URL"),
    ("alias kept", f"SELECT upper(regexp_replace(Referer, {P}, '\\1')) AS u, 1 v FROM hits"),
    (
        "grouped by the same expression",
        f"SELECT regexp_replace(Referer, {P}, '\\1'), count(*) FROM hits GROUP BY regexp_replace(Referer, {P}, '\\1')",
    ),
    ("star replace", f"SELECT * REPLACE (regexp_replace(Referer, {P}, '\\1') AS Referer) FROM hits"),
]

UNTOUCHED = [
    ("in a string", f"SELECT 'regexp_replace(Referer, {P.replace(chr(39), chr(39) * 2)}, ''\\1'')' FROM hits"),
    ("in a line comment", f"SELECT 1 FROM hits -- regexp_replace(Referer, {P}, '\\1')"),
    ("in a block comment", f"SELECT /* regexp_replace(Referer, {P}, '\\1') */ 1 FROM hits"),
    ("other pattern", "SELECT regexp_replace(Referer, '^https?://(?:www\\.)?([^/]+)/.*', '\\1') FROM hits"),
    ("escape string pattern", f"SELECT regexp_replace(Referer, E{P}, '\\1') FROM hits"),
    ("other replacement", f"SELECT regexp_replace(Referer, {P}, '\\2') FROM hits"),
    ("with options", f"SELECT regexp_replace(Referer, {P}, '\\1', 'g') FROM hits"),
    ("expression argument", f"SELECT regexp_replace(lower(Referer), {P}, '\\1') FROM hits"),
    ("cast argument", f"SELECT regexp_replace(Referer::VARCHAR, {P}, '\\1') FROM hits"),
    ("literal argument", f"SELECT regexp_replace('http://a/b', {P}, '\\1')"),
    ("method call", f"SELECT Referer.regexp_replace({P}, '\\1') FROM hits"),
    ("schema-qualified function", f"SELECT main.regexp_replace(Referer, {P}, '\\1') FROM hits"),
    ("extract group 2", f"SELECT regexp_extract(Referer, {P}, 2) FROM hits"),
    ("extract group as string", f"SELECT regexp_extract(Referer, {P}, '1') FROM hits"),
    ("regexp_matches", f"SELECT regexp_matches(Referer, {P}) FROM hits"),
    ("collate anywhere", f"SELECT regexp_replace(r, {P}, '\\1') FROM (SELECT Referer COLLATE NOCASE AS r FROM hits)"),
    ("unterminated string", f"SELECT regexp_replace(Referer, {P}, '\\1') FROM hits WHERE x = 'oops"),
]


@pytest.mark.parametrize("sql", [s for _, s in UNTOUCHED], ids=[n for n, _ in UNTOUCHED])
def test_untouched(sql: str) -> None:
    assert apply_exact_rewrites(sql) == sql


HITS_VALUES = [
    "https://www.google.ru/search?q=1",
    "http://go.mail.ru/x",
    "http://go.mail.ru/y",
    "https://www./",
    "http://a.ru",
    "HTTP://a.ru/x",
    "http://a.ru/x\ny",
    "",
    None,
    "http://пример.рф/путь",
]


@pytest.fixture(scope="module")
def hits(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute('CREATE TABLE hits (Referer VARCHAR, URL VARCHAR, "value" VARCHAR, "my col" VARCHAR)')
    con.executemany("INSERT INTO hits VALUES (?, ?, ?, ?)", [(v, v, v, v) for v in HITS_VALUES])
    return con


@pytest.mark.parametrize("sql", [s for _, s in REWRITTEN], ids=[n for n, _ in REWRITTEN])
def test_rewritten_queries_give_the_same_result_and_column_names(hits: duckdb.DuckDBPyConnection, sql: str) -> None:
    rewritten = apply_exact_rewrites(sql)
    assert not calls_regex(rewritten)
    original = hits.execute(sql)
    names, types, rows = [d[0] for d in original.description], [d[1] for d in original.description], original.fetchall()
    result = hits.execute(rewritten)
    assert [d[0] for d in result.description] == names
    assert [d[1] for d in result.description] == types
    assert sorted(result.fetchall(), key=repr) == sorted(rows, key=repr)


def test_clickbench_q29_text() -> None:
    q29 = (
        f"SELECT REGEXP_REPLACE(Referer, {P}, '\\1') AS k, AVG(STRLEN(Referer)) AS l, COUNT(*) AS c, MIN(Referer) "
        "FROM hits WHERE Referer <> '' GROUP BY k HAVING COUNT(*) > 100000 ORDER BY l DESC LIMIT 25;"
    )
    rewritten = apply_exact_rewrites(q29)
    assert rewritten.startswith("SELECT (CASE WHEN Referer LIKE 'https://www.%/%'")
    assert rewritten.endswith(
        "ELSE CAST(Referer AS VARCHAR) END) AS k, AVG(STRLEN(Referer)) AS l, COUNT(*) AS c, MIN(Referer) "
        "FROM hits WHERE Referer <> '' GROUP BY k HAVING COUNT(*) > 100000 ORDER BY l DESC LIMIT 25;"
    )


def test_column_type_rules_match(con: duckdb.DuckDBPyConnection) -> None:
    """Non-VARCHAR columns: an integer is rejected and JSON is read as VARCHAR, as by the regex."""
    con.execute("CREATE OR REPLACE TEMP TABLE typed (i INTEGER, j JSON)")
    con.execute("""INSERT INTO typed VALUES (1, '"http://a/b"')""")
    with pytest.raises(duckdb.BinderException):
        con.execute(f"SELECT regexp_replace(i, {P}, '\\1') FROM typed")
    with pytest.raises(duckdb.BinderException):
        con.execute(apply_exact_rewrites(f"SELECT regexp_replace(i, {P}, '\\1') FROM typed"))
    sql = f"SELECT regexp_replace(j, {P}, '\\1') AS r FROM typed"
    original = con.execute(sql)
    expected = ([d[1] for d in original.description], original.fetchall())
    rewritten = con.execute(apply_exact_rewrites(sql))
    assert ([d[1] for d in rewritten.description], rewritten.fetchall()) == expected


def test_why_collations_are_left_alone(con: duckdb.DuckDBPyConnection) -> None:
    """LIKE follows a NOCASE collation where the regex does not: the CASE would differ."""
    sql = f"SELECT regexp_replace(r, {P}, '\\1') FROM (SELECT 'HTTP://a/b' COLLATE NOCASE AS r)"
    assert con.execute(sql).fetchall() == [("HTTP://a/b",)]
    case = url_domain_case("r")
    assert con.execute(f"SELECT {case} FROM (SELECT 'HTTP://a/b' COLLATE NOCASE AS r)").fetchall() == [("a",)]
    assert apply_exact_rewrites(sql) == sql


# --- through the query service: the hook in QueryService.run ------------------------------------


def test_query_service_runs_the_rewrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Q29's shape on a measurement: same rows as DuckDB's regex on the same files, and no regex run."""
    store, catalog = local_ports(tmp_path)
    referers = [v for _, v, _ in REGRESSIONS if v is not None] * 3
    times = [BASE_US + i * 1_000_000 for i in range(len(referers))]
    table = pa.table({"time": pa.array(times, pa.int64()).cast(TIME_TYPE), "Referer": pa.array(referers)})
    batch = WriteBatch("b1", "db", (MeasurementRows("hits", table, ()),))
    SchemaRegistry(catalog).apply("db", list(batch.parts))
    Ingestor(catalog, store).ingest([queued(batch)])
    engine = Engine([str(tmp_path / "storage") + "/"], tmp_path / "work")
    service = QueryService(catalog, store, engine, 1_000_000)
    sent: list[str] = []
    original_query = engine.query_arrow

    def spy(sql: str, *args: Any, **kwargs: Any) -> pa.Table:
        sent.append(sql)
        return original_query(sql, *args, **kwargs)

    monkeypatch.setattr(engine, "query_arrow", spy)
    q29 = (
        f"SELECT REGEXP_REPLACE(Referer, {P}, '\\1') AS k, AVG(STRLEN(Referer)) AS l, COUNT(*) AS c, MIN(Referer) "
        "FROM hits WHERE Referer <> '' GROUP BY k HAVING COUNT(*) > 0 ORDER BY l DESC, k"
    )
    result = service.run(q29, "db", Principal("t", "t", frozenset({"admin"}), ())).table
    assert not calls_regex(sent[-1])
    files = ", ".join(f"'{f}'" for f in (tmp_path / "storage").rglob("*.parquet"))
    direct = duckdb.connect().execute(q29.replace("FROM hits", f"FROM read_parquet([{files}])")).to_arrow_table()
    assert result.column_names == direct.column_names
    assert result.to_pylist() == direct.to_pylist()


def test_at_most_max_calls_are_rewritten() -> None:
    call = f"regexp_replace(Referer, {P}, '\\1')"
    assert not calls_regex(apply_exact_rewrites(f"SELECT {', '.join([call] * MAX_CALLS)} FROM hits"))
    many = f"SELECT {', '.join([call] * (MAX_CALLS + 1))} FROM hits"
    assert apply_exact_rewrites(many) == many


def test_linear_in_the_query_size() -> None:
    """A 700 kB select list with MAX_CALLS calls: one tokenizing pass, no walk per call."""
    call = f"regexp_replace(Referer, {P}, '\\1')"
    sql = "SELECT " + ", ".join([call] * MAX_CALLS + ["x + 1"] * 100_000) + " FROM hits"
    started = time.perf_counter()
    assert apply_exact_rewrites(sql) != sql
    assert time.perf_counter() - started < 10
