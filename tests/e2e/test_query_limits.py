"""A read-only caller cannot exhaust the standalone server: bounded SQL, bounded results, over HTTP."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from arcs.query.sql_tree import MAX_SQL_BYTES
from arcs.settings import default_max_result_bytes, memory_bytes
from tests.e2e.servers import Client, ServerProcess, standalone

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000
MB = 1024 * 1024
LIMIT = default_max_result_bytes(memory_bytes(os.environ))  # the server's, by default


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A standalone server with its default limits."""
    data_dir: Path = tmp_path_factory.mktemp("limits-data")
    process = standalone(data_dir).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    client = Client(server.url)
    client.http.timeout = 120
    response = client.write("/write?db=default&precision=s", f"cpu,host=a v=1i {T0}".encode())
    assert response.status_code == 204, response.text
    assert client.wait_count("cpu", 1) == 1
    yield client
    client.http.close()


def _memory_kb(server: ServerProcess, field: str) -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (the peak) of the server process, in kB."""
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc status")


def test_a_result_above_the_limit_is_refused_without_ballooning(server: ServerProcess, client: Client) -> None:
    client.query("SELECT count(*) FROM cpu")  # the engine and the routes are warm
    before = _memory_kb(server, "VmRSS")
    # 1,200 rows of 1 MB: 1.2 GB of result, more than four times the default limit (at most 256 MiB).
    response = client.query("SELECT repeat('x', 1000000) AS s FROM range(1200)")
    assert response.status_code == 400, response.text[:200]
    error = response.json()["error"]
    assert str(LIMIT) in error and "ARCS_QUERY_MAX_RESULT_BYTES" in error
    # DuckDB computes its 1,200-row vector (1.2 GB) whole; the result stops one fetch of 256 rows
    # past the limit instead of being built, converted to JSON and answered (4.8 GB at the peak).
    peak_growth = (_memory_kb(server, "VmHWM") - before) * 1024
    assert peak_growth < 1200 * MB + 256 * MB + 2 * LIMIT, peak_growth  # the vector, one fetch, the rest
    # The server answers as before, and gives the memory back within seconds.
    assert client.rows("SELECT count(*) FROM cpu") == [[1]]
    deadline = time.monotonic() + 20
    while (_memory_kb(server, "VmRSS") - before) * 1024 > 2 * LIMIT and time.monotonic() < deadline:
        time.sleep(0.5)
    assert (_memory_kb(server, "VmRSS") - before) * 1024 <= 2 * LIMIT


def test_a_refused_result_gives_its_memory_back(tmp_path: Path) -> None:
    """The first query of a fresh server is too large: its pages go back to the system, unasked."""
    fresh = standalone(tmp_path / "data").start()
    try:
        caller = Client(fresh.url)
        caller.http.timeout = 120
        before = _memory_kb(fresh, "VmRSS")
        response = caller.query("SELECT repeat('x', 1000000) AS s FROM range(1200)")
        assert response.status_code == 400, response.text[:200]
        deadline = time.monotonic() + 20
        while (_memory_kb(fresh, "VmRSS") - before) * 1024 > LIMIT and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (_memory_kb(fresh, "VmRSS") - before) * 1024 <= LIMIT
        caller.http.close()
    finally:
        fresh.stop()


def test_a_result_under_the_limit_is_answered(client: Client) -> None:
    rows = client.rows(
        "SELECT count(*) AS n, sum(length(s)) AS total FROM (SELECT repeat('x', 1000) AS s FROM range(1000))"
    )
    assert rows == [[1000, 1_000_000]]
    assert len(client.rows("SELECT repeat('x', 1000) AS s FROM range(10000)")) == 10000


def test_sql_above_the_limit_is_413_at_once(client: Client) -> None:
    sql = "SELECT 1 AS x" + " " * MAX_SQL_BYTES
    for path in ("/api/v1/query", "/api/v1/query/estimate"):
        started = time.perf_counter()
        response = client.http.post(path, json={"sql": sql})
        assert response.status_code == 413, response.text
        assert str(MAX_SQL_BYTES) in response.json()["error"]
        assert time.perf_counter() - started < 2


def _many_tables(size: int) -> str:
    """UNION ALL of SELECTs over 900 tables each with time predicates, up to ``size`` bytes."""

    def block(offset: int) -> str:
        tables = ", ".join(f"cpu c{i}" for i in range(offset, offset + 900))
        where = " AND ".join(f"c{i}.time > '2024-01-01'" for i in range(offset, offset + 900, 10))
        return f"SELECT count(*) FROM {tables} WHERE {where}"

    sql, offset = block(0), 900
    while len(sql) + len(" UNION ALL " + block(offset)) <= size:
        sql, offset = sql + " UNION ALL " + block(offset), offset + 900
    return sql


def test_a_query_of_many_tables_and_predicates_is_read_in_well_under_a_second_or_two(client: Client) -> None:
    within = _many_tables(MAX_SQL_BYTES - 1024)
    assert len(within) > 50_000
    started = time.perf_counter()
    response = client.http.post("/api/v1/query/estimate", json={"sql": within})
    assert response.status_code == 200, response.text[:300]
    assert response.json()["estimated_rows"] == within.count("cpu c")
    assert time.perf_counter() - started < 2
    too_long = _many_tables(122_000)
    started = time.perf_counter()
    assert client.http.post("/api/v1/query/estimate", json={"sql": too_long}).status_code == 413
    assert time.perf_counter() - started < 2


def test_eight_long_queries_at_once_leave_the_workers_free_within_seconds(client: Client) -> None:
    """As many 51 KB estimates as the server has workers: all answered within seconds, then more."""
    sql = _many_tables(51_000)

    def estimate(_: int) -> int:
        return client.http.post("/api/v1/query/estimate", json={"sql": sql}).status_code

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(estimate, range(8))) == [200] * 8
    assert time.perf_counter() - started < 8
    assert client.rows("SELECT count(*) FROM cpu") == [[1]]
