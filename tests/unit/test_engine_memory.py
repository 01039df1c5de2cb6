"""A query bigger than the engine's memory spills to the temp directory, or fails with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcs.errors import ResultTooLarge, ServiceUnavailable
from arcs.query.engine import Engine


def _engine(tmp_path: Path, memory_limit: str) -> Engine:
    return Engine([str(tmp_path / "data") + "/"], tmp_path / "work", threads=2, memory_limit=memory_limit)


def test_an_aggregate_over_twice_the_memory_limit_completes_by_spilling(tmp_path: Path) -> None:
    # 6 M distinct strings of ~107 bytes: a hash table of more than 640 MB under a 256 MB limit.
    engine = _engine(tmp_path, "256MB")
    try:
        result = engine.query_arrow(
            "SELECT count(*) AS n, max(s) AS top FROM (SELECT s, count(*) AS c FROM "
            "(SELECT repeat('x', 100) || range::VARCHAR AS s FROM range(6000000)) GROUP BY s)"
        )
        assert result.to_pylist() == [{"n": 6_000_000, "top": "x" * 100 + "999999"}]
    finally:
        engine.close()


def test_what_cannot_spill_fails_with_a_clear_error_and_the_engine_lives_on(tmp_path: Path) -> None:
    engine = _engine(tmp_path, "64MB")
    try:
        with pytest.raises(ServiceUnavailable, match="memory"):
            engine.query_arrow("SELECT list(repeat('y', 50) || range::VARCHAR) FROM range(20000000)")
        assert engine.query_arrow("SELECT 42 AS v").to_pylist() == [{"v": 42}]
    finally:
        engine.close()


def test_a_result_over_the_byte_limit_is_refused_while_it_streams(tmp_path: Path) -> None:
    engine = Engine([str(tmp_path / "data") + "/"], tmp_path / "work", threads=2)
    try:
        # 100 MB of rows of 10 kB, against a 4 MB limit: refused after a few hundred rows.
        sql = "SELECT i, repeat('x', 10000) AS s FROM range(10000) t(i)"
        with pytest.raises(ResultTooLarge, match="larger than 4000000 bytes") as caught:
            engine.query_arrow(sql, max_bytes=4_000_000)
        assert caught.value.status == 400 and "ARCS_QUERY_MAX_RESULT_BYTES" in caught.value.message
        within = engine.query_arrow(sql, max_bytes=200_000_000)
        assert sorted(within.column("i").to_pylist()) == list(range(10000))
        # Fetched a few rows at a time, answered in batches as large as without a limit.
        assert within.column("i").num_chunks <= 2
    finally:
        engine.close()
