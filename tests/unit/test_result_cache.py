"""The result cache's own rules: bounded in bytes (least recently used first), by age, and what it never keeps."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from arcs.layout import hour_from_micros
from arcs.ports import FileRecord
from arcs.query.engine import Engine
from arcs.query.result_cache import ResultCache, cache_key
from tests.helpers import BASE_US


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def table(values: int) -> pa.Table:
    return pa.table({"v": pa.array(range(values), pa.int64())})


def test_a_hit_is_the_table_put_until_the_ttl_runs_out() -> None:
    clock = Clock()
    cache = ResultCache(max_bytes=10_000, ttl_s=60, clock=clock)
    cache.put("k", table(10))
    clock.now += 59.9
    assert cache.get("k") == table(10)
    clock.now += 0.1
    assert cache.get("k") is None and cache.size_bytes == 0
    assert (cache.hits, cache.misses) == (1, 1)


def test_the_least_recently_used_go_first_when_bytes_run_out() -> None:
    cache = ResultCache(max_bytes=3 * table(100).get_total_buffer_size(), ttl_s=60, clock=Clock())
    for key in "abc":
        cache.put(key, table(100))
    assert cache.get("a") is not None  # now "b" is the least recently used
    cache.put("d", table(100))
    assert [key for key in "abcd" if cache.get(key) is not None] == ["a", "c", "d"]
    assert cache.size_bytes <= cache.max_bytes


def test_a_table_bigger_than_the_whole_cache_is_not_kept_and_evicts_nothing() -> None:
    cache = ResultCache(max_bytes=table(100).get_total_buffer_size(), ttl_s=60, clock=Clock())
    cache.put("small", table(100))
    cache.put("big", table(1000))
    assert cache.get("big") is None and cache.get("small") is not None


def file(key: str, size: int = 100, commit_id: str = "c1") -> FileRecord:
    return FileRecord("db", "cpu", hour_from_micros(BASE_US), key, 10, size, BASE_US, BASE_US, commit_id)


def test_the_key_changes_with_sql_database_row_cap_and_every_files_identity() -> None:
    base = cache_key("SELECT 1", "db", [file("a"), file("b")], 100)
    assert cache_key("SELECT 1", "db", [file("b"), file("a")], 100) == base  # the order of listing does not matter
    assert (
        len(
            {
                base,
                cache_key("SELECT 2", "db", [file("a"), file("b")], 100),
                cache_key("SELECT 1", "other", [file("a"), file("b")], 100),
                cache_key("SELECT 1", "db", [file("a"), file("b")], 101),
                cache_key("SELECT 1", "db", [file("a")], 100),
                cache_key("SELECT 1", "db", [file("a"), file("b"), file("c")], 100),
                cache_key("SELECT 1", "db", [file("a"), file("b", size=101)], 100),
                cache_key("SELECT 1", "db", [file("a"), file("b", commit_id="c2")], 100),
            }
        )
        == 8
    )


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root: Path = tmp_path_factory.mktemp("cache-engine")
    return Engine([str(root / "data") + "/"], root / "work")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT host, avg(v) FROM cpu GROUP BY host",
        "SELECT time_bucket(INTERVAL '5 minutes', time) AS t, max(v) FROM cpu GROUP BY t ORDER BY t",
        "SELECT date_trunc('hour', time), count(*) FROM db.cpu WHERE time >= '2023-11-14' AND host LIKE 'a%'",
        "SELECT row_number() OVER (ORDER BY time), lag(v) OVER (ORDER BY time), v::INT, host || '!' FROM cpu",
        "WITH x AS (SELECT * FROM cpu) SELECT count(*) FROM x, range(3)",
        "SELECT strftime(time, '%Y'), epoch_us(time) FROM cpu",
    ],
)
def test_queries_of_files_alone_are_repeatable(engine: Engine, sql: str) -> None:
    assert ResultCache(1000, 60).repeatable(engine, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM cpu WHERE time > now() - INTERVAL '1 hour'",
        "SELECT count(*) FROM cpu WHERE time > current_timestamp - INTERVAL 1 DAY",
        "SELECT CURRENT_DATE, v FROM cpu",
        "SELECT localtimestamp FROM cpu",
        "SELECT today()",
        "SELECT current_localtimestamp()",
        "SELECT get_current_time()",
        "SELECT transaction_timestamp()",
        "SELECT v FROM cpu ORDER BY random() LIMIT 3",
        "SELECT uuid(), gen_random_uuid() FROM cpu",
        "SELECT * FROM cpu USING SAMPLE 10%",
        "SELECT * FROM (SELECT * FROM cpu) TABLESAMPLE 5 ROWS",
        "SELECT (SELECT max(time) FROM cpu WHERE time < now())",
        "SELECT epoch_ms(now())",
        "SELECT no_such_function(v) FROM cpu",
        "not sql at all",
    ],
)
def test_queries_that_read_the_clock_or_chance_are_never_cached(engine: Engine, sql: str) -> None:
    assert not ResultCache(1000, 60).repeatable(engine, sql)
