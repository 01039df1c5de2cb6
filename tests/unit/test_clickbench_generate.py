"""The ClickBench data generator: the 105 columns of hits_schema.sql, and all 43 queries return rows."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from clickbench.generate import (
    N_FULL,
    PLANTED_REFERER_HASH,
    PLANTED_URL_HASH,
    PLANTED_USER_ID,
    generate_hits,
    hits_schema,
    scale_query,
    to_parquet_layout,
)

from arcs.query.exact_rewrites import apply_exact_rewrites

ROWS = 20_000
REPO = Path(__file__).resolve().parents[2]
# ClickBench's own files (its schema, the DuckDB view, the 43 queries), kept in clickbench/.
REFERENCE_DIR = REPO / "clickbench"


def reference(name: str) -> str:
    return (REFERENCE_DIR / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def hits() -> pa.Table:
    return generate_hits(ROWS, seed=1)


@pytest.fixture(scope="module")
def con(hits: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """ClickBench's own DuckDB view (create.sql, verbatim) over the generated data in hits.parquet's layout."""
    path = tmp_path_factory.mktemp("clickbench") / "hits.parquet"
    pq.write_table(to_parquet_layout(hits), path)
    view = reference("create_duckdb_view.sql")
    assert "'hits.parquet'" in view
    connection = duckdb.connect(":memory:")
    connection.execute(view.replace("'hits.parquet'", "'" + str(path).replace("'", "''") + "'"))
    yield connection
    connection.close()


def test_the_105_columns_of_hits_schema_sql(hits: pa.Table) -> None:
    columns = re.findall(r"^\s+(\w+) ([\w()]+)( NOT NULL)?,?$", reference("hits_schema.sql"), re.MULTILINE)
    assert len(columns) == 105
    assert hits.schema == hits_schema()
    assert hits.column_names == [name for name, _, _ in columns]
    assert [f.nullable for f in hits.schema] == [not not_null for _, _, not_null in columns]
    # The types DuckDB sees are those of CREATE TABLE hits.
    described = duckdb.connect().execute("DESCRIBE SELECT * FROM hits").fetchall()
    duckdb_type = {"TEXT": "VARCHAR", "VARCHAR(255)": "VARCHAR", "CHAR": "VARCHAR", "DATE": "DATE"}
    assert [row[1] for row in described] == [duckdb_type.get(kind.upper(), kind.upper()) for _, kind, _ in columns]
    assert all(column.null_count == 0 for column in hits.columns)


@pytest.mark.timeout(30)
def test_every_clickbench_query_returns_rows(con: duckdb.DuckDBPyConnection) -> None:
    queries = reference("queries.sql").strip().splitlines()
    assert len(queries) == 43
    started = time.perf_counter()
    empty = [number for number, sql in enumerate(queries, 1) if not con.execute(scale_query(sql, ROWS)).fetchall()]
    assert empty == [], f"queries with no rows at {ROWS} rows: {empty}"
    assert time.perf_counter() - started < 20


def test_queries_that_need_no_scaling_return_rows_verbatim(con: duckdb.DuckDBPyConnection) -> None:
    for number, sql in enumerate(reference("queries.sql").strip().splitlines(), 1):
        if scale_query(sql, ROWS) == sql:
            assert con.execute(sql).fetchall(), number


def test_scale_query() -> None:
    q28_tail = "GROUP BY CounterID HAVING COUNT(*) > 100000 ORDER BY l DESC LIMIT 25;"
    assert scale_query(q28_tail, N_FULL) == q28_tail
    assert scale_query(q28_tail, ROWS) == q28_tail.replace("100000", "20")
    assert scale_query("LIMIT 10 OFFSET 10000;", 1_000_000) == "LIMIT 10 OFFSET 100;"
    assert scale_query("LIMIT 10 OFFSET 1000;", ROWS) == "LIMIT 10 OFFSET 1;"


def test_deterministic_per_seed(hits: pa.Table) -> None:
    assert generate_hits(ROWS, seed=1).equals(hits)
    assert not generate_hits(ROWS, seed=2).column("UserID").equals(hits.column("UserID"))


def test_distributions(con: duckdb.DuckDBPyConnection) -> None:
    """The full dataset's shapes, loosely: dates, skewed counters and regions, rare ads, sparse search."""
    row = con.execute(
        "SELECT min(EventDate), max(EventDate), avg((AdvEngineID <> 0)::INT), avg((SearchPhrase <> '')::INT), "
        "avg((Referer = '')::INT), avg(ResolutionWidth), count(*) FILTER (URL LIKE '%google%') FROM hits"
    ).fetchone()
    assert row is not None
    first, last, adv, phrase, referer_empty, width, google = row
    assert (str(first), str(last)) == ("2013-07-02", "2013-07-31")
    assert 0.003 < adv < 0.012
    assert 0.10 < phrase < 0.16
    assert 0.12 < referer_empty < 0.18
    assert 1400 < width < 1600
    assert 10 <= google < 100
    top_counters = [
        row[0] for row in con.execute("SELECT CounterID FROM hits GROUP BY 1 ORDER BY count(*) DESC LIMIT 2").fetchall()
    ]
    assert top_counters == [3922, 199550]
    assert con.execute("SELECT RegionID FROM hits GROUP BY 1 ORDER BY count(*) DESC LIMIT 1").fetchone() == (229,)
    # EventTime is UTC, EventDate the Moscow (UTC+4) date.
    assert con.execute(
        "SELECT count(*) FROM hits WHERE EventDate <> CAST(toDateTime(EventTime) + INTERVAL 4 HOUR AS DATE)"
    ).fetchone() == (0,)


def test_planted_values(hits: pa.Table) -> None:
    assert pc.sum(pc.equal(hits.column("UserID"), PLANTED_USER_ID)).as_py() == 4
    assert pc.sum(pc.equal(hits.column("URLHash"), PLANTED_URL_HASH)).as_py() >= 11
    assert pc.sum(pc.equal(hits.column("RefererHash"), PLANTED_REFERER_HASH)).as_py() >= 11
    # The hashes are functions of the strings.
    pairs = duckdb.connect().execute("SELECT count(DISTINCT URLHash), count(DISTINCT URL) FROM hits").fetchone()
    assert pairs is not None and pairs[0] == pairs[1]


def test_sorted_by_the_clickhouse_primary_key(hits: pa.Table) -> None:
    keys = [(key, "ascending") for key in ("CounterID", "EventDate", "UserID", "EventTime", "WatchID")]
    assert pc.sort_indices(hits, sort_keys=keys).equals(pa.array(range(hits.num_rows), pa.uint64()))


def test_exact_rewrite_gives_q29_the_same_answer(con: duckdb.DuckDBPyConnection) -> None:
    q29 = scale_query(reference("queries.sql").strip().splitlines()[28], ROWS)
    assert "REGEXP_REPLACE" in q29
    expected = con.execute(q29).fetchall()
    assert expected
    assert con.execute(apply_exact_rewrites(q29)).fetchall() == expected
