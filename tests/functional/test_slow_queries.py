"""The slow-query log on a real query service (DuckDB over Parquet): a line above the threshold,
none below it, and never the token."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from arcs.http.server import IngestLoop
from arcs.query.slow_queries import SQL_EXCERPT_CHARS
from arcs.runtime import LocalRuntime, local_runtime
from arcs.settings import Settings
from arcs.write.decoders import WireFormat
from arcs.write.edge import WriteRequest

SECRET = "a-secret-token-value-0123456789"


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[LocalRuntime]:
    runtime = local_runtime(Settings(data_dir=tmp_path / "data"))
    body = "\n".join(f"cpu,host=h{i % 4} v={i}i {1_700_000_000 + i}000000000" for i in range(100)).encode()
    runtime.writes.accept(WriteRequest(WireFormat.LINE_PROTOCOL, body, "default"))
    IngestLoop(runtime).drain_once(runtime.spool.take(10))
    yield runtime
    runtime.engine.close()
    runtime.sqlite.close()


def slow_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "arcs.slow_queries"]


def test_slow_queries_are_logged_above_the_threshold_only(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    principal = runtime.tokens.verify(runtime.tokens.bootstrap(SECRET) or SECRET)
    sql = "SELECT host, count(*) FROM cpu GROUP BY host /* " + "x" * 1000 + " */"
    caplog.set_level(logging.WARNING, "arcs.slow_queries")

    runtime.queries.slow_query_ms = 60_000  # far above what this query takes
    assert runtime.queries.run(sql, "default", principal).table.num_rows == 4
    assert slow_lines(caplog) == []

    runtime.queries.slow_query_ms = 0.001  # below it
    assert runtime.queries.run(sql, "default", principal).table.num_rows == 4
    [line] = slow_lines(caplog)
    assert line["event"] == "slow_query"
    assert (line["database"], line["status"], line["files"], line["rows"]) == ("default", "200", 1, 4)
    assert (line["token_name"], line["token_id"]) == (principal.name, principal.token_id)
    assert isinstance(line["bytes_read"], int) and line["bytes_read"] > 0
    assert isinstance(line["sql"], str) and len(line["sql"]) == SQL_EXCERPT_CHARS
    assert SECRET not in caplog.text

    runtime.queries.slow_query_ms = 0  # off
    runtime.queries.run(sql, "default", principal)
    assert len(slow_lines(caplog)) == 1


def test_a_failed_slow_query_is_logged_with_its_status(runtime: LocalRuntime, caplog: pytest.LogCaptureFixture) -> None:
    principal = runtime.tokens.verify(runtime.tokens.bootstrap(SECRET) or SECRET)
    caplog.set_level(logging.WARNING, "arcs.slow_queries")
    runtime.queries.slow_query_ms = 0.001
    with pytest.raises(Exception, match="not found"):
        runtime.queries.run("SELECT * FROM nowhere", "default", principal)
    [line] = slow_lines(caplog)
    assert (line["status"], line["files"], line["bytes_read"], line["rows"]) == ("404", 0, 0, 0)


def test_the_threshold_setting(tmp_path: Path) -> None:
    assert Settings.from_env({}).slow_query_ms == 1000
    assert Settings.from_env({"ARCS_SLOW_QUERY_MS": "250"}).slow_query_ms == 250
    with pytest.raises(Exception, match="ARCS_SLOW_QUERY_MS"):
        Settings.from_env({"ARCS_SLOW_QUERY_MS": "-1"})
