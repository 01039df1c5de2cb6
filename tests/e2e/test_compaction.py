"""Compaction in the standalone server, over HTTP: the trigger, the timer, the read routes, permissions."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import TOKEN, Client, ServerProcess, local

pytestmark = pytest.mark.e2e

T0_NS = 1_700_000_000 * 10**9  # an hour long past


def server(data_dir: Path, interval_s: str) -> ServerProcess:
    env = {
        **os.environ,
        "ARCS_BOOTSTRAP_TOKEN": TOKEN,
        "ARCS_INGEST_BATCH_WINDOW_S": "0",
        "ARCS_INGEST_BATCH_MESSAGES": "1",  # one file per write: small files to compact
        "ARCS_COMPACTION_INTERVAL_S": interval_s,
        "ARCS_COMPACTION_MIN_AGE_S": "0",
        "ARCS_COMPACTION_MIN_FILES": "4",
        "ARCS_COMPACTION_GRACE_S": "0",
    }
    args = ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir)]
    return ServerProcess(args, env)


@pytest.fixture
def triggered(tmp_path: Path) -> Iterator[Client]:
    process = server(tmp_path / "data", interval_s="0").start()  # the timer is off: only triggers run
    client = Client(process.url)
    yield client
    client.http.close()
    process.stop()


def write_small_files(client: Client, measurement: str, files: int) -> None:
    for n in range(files):
        lines = [f"{measurement},host=h{i % 3} v={n * 10 + i}i {T0_NS + (n * 100 + i) * 1000}" for i in range(10)]
        body = "\n".join(lines)
        assert client.write("/api/v1/write/line-protocol", body.encode()).status_code == 204
        assert client.wait_count(measurement, (n + 1) * 10) == (n + 1) * 10


def wait_for(client: Client, path: str, done: Any, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer: dict[str, Any] = client.http.get(path).json()
        if done(answer):
            return answer
        time.sleep(0.1)
    raise AssertionError(f"{path} did not get there: {answer}")


def file_count(client: Client, measurement: str) -> int:
    listing = client.http.get("/api/v1/databases/default/measurements").json()
    return next(int(m["file_count"]) for m in listing["measurements"] if m["name"] == measurement)


def test_trigger_compacts_and_queries_answer_the_same(triggered: Client) -> None:
    client = triggered
    write_small_files(client, "cpu", 6)
    sql = "SELECT time, host, v FROM cpu ORDER BY time, host"
    before = client.rows(sql)
    assert file_count(client, "cpu") == 6
    candidates = client.http.get("/api/v1/compaction/candidates").json()
    # The hour, and its day (the day tier would merge it too, after the hour tier has run).
    assert [(c["measurement"], c["file_count"], c["tier"]) for c in candidates["candidates"]] == [
        ("cpu", 6, "hour"),
        ("cpu", 6, "day"),
    ]
    status = client.http.get("/api/v1/compaction/status").json()
    assert (status["enabled"], status["settings"]["min_files"], status["settings"]["compression"]) == (
        False,
        4,
        "zstd(3)",
    )

    response = client.http.post("/api/v1/compaction/trigger", json={"database": "default"})
    assert response.status_code == 202, response.text
    history = wait_for(client, "/api/v1/compaction/history", lambda a: [j["status"] for j in a["jobs"]] == ["done"])
    (job,) = history["jobs"]
    assert (job["files_compacted"], job["files_written"], job["rows_before"], job["rows_after"]) == (6, 1, 60, 60)
    assert client.rows(sql) == before
    assert file_count(client, "cpu") == 1
    stats = client.http.get("/api/v1/compaction/stats").json()
    assert (stats["files_compacted"], stats["files_written"], stats["jobs_by_status"]) == (6, 1, {"done": 1})
    assert client.http.get("/api/v1/compaction/jobs").json()["jobs"] == []
    assert client.http.get("/api/v1/compaction/candidates").json()["candidates"] == []


def test_a_run_merges_hours_then_their_day_and_the_routes_report_both_tiers(triggered: Client, tmp_path: Path) -> None:
    client = triggered
    write_small_files(client, "cpu", 4)  # one hour: an hour job, then the day's
    line = f"cpu,host=h9 v=1i {T0_NS + 3600 * 10**9}"  # the next hour: one file, no hour job
    assert client.write("/api/v1/write/line-protocol", line.encode()).status_code == 204
    assert client.wait_count("cpu", 41) == 41
    sql = "SELECT time, host, v FROM cpu ORDER BY time, host"
    before = client.rows(sql)
    assert client.http.post("/api/v1/compaction/trigger", json={}).status_code == 202
    history = wait_for(
        client, "/api/v1/compaction/history", lambda a: [j["status"] for j in a["jobs"]] == ["done", "done"]
    )
    assert sorted((j["tier"], j["files_compacted"], j["files_written"]) for j in history["jobs"]) == [
        ("day", 2, 1),
        ("hour", 4, 1),
    ]
    assert client.rows(sql) == before
    assert file_count(client, "cpu") == 1
    day_files = list((tmp_path / "data" / "storage" / "default" / "cpu").glob("????/??/??/*-d*.parquet"))
    assert len(day_files) == 1  # in the day's directory, Arc's layout
    status = client.http.get("/api/v1/compaction/status").json()
    assert status["settings"]["tiers"] == ["hour", "day"]


def test_trigger_needs_admin_and_reads_are_scoped(triggered: Client) -> None:
    client = triggered
    write_small_files(client, "mem", 4)
    created = client.http.post(
        "/api/v1/auth/tokens", json={"name": "reader", "permissions": ["read"], "databases": ["other"]}
    ).json()
    reader = Client(client.url, created["token"])
    try:
        assert reader.http.post("/api/v1/compaction/trigger", json={}).status_code == 403
        assert reader.http.get("/api/v1/compaction/candidates").json()["candidates"] == []  # not its database
        assert reader.http.get("/api/v1/compaction/candidates?database=default").status_code == 403
        assert reader.http.get("/api/v1/compaction/status").status_code == 200
    finally:
        reader.http.close()
    assert client.http.post("/api/v1/compaction/trigger", json={"database": "bad name"}).status_code == 400
    assert client.http.get("/api/v1/compaction/history?limit=0").status_code == 400


def test_the_timer_compacts_without_being_asked(tmp_path: Path) -> None:
    process = server(tmp_path / "data", interval_s="0.5").start()
    client = Client(process.url)
    try:
        write_small_files(client, "disk", 4)
        # The hour's job, or (the hour being long past) its day's while the writes still arrive.
        wait_for(
            client,
            "/api/v1/compaction/history",
            lambda a: a["jobs"] and {j["status"] for j in a["jobs"]} == {"done"} and file_count(client, "disk") == 1,
        )
        assert client.rows("SELECT count(*) FROM disk") == [[40]]
        status = client.http.get("/api/v1/compaction/status").json()
        assert status["enabled"] is True and status["runs"] >= 1
    finally:
        client.http.close()
        process.stop()


def test_the_local_emulation_runs_the_tasks_function_when_triggered() -> None:
    process = local(
        ARCS_COMPACTION_INTERVAL_S="0",
        ARCS_COMPACTION_MIN_AGE_S="0",
        ARCS_COMPACTION_MIN_FILES="4",
        ARCS_COMPACTION_GRACE_S="0",
        ARCS_INGEST_BATCH_MESSAGES="1",
    ).start()
    client = Client(process.url)
    try:
        write_small_files(client, "net", 4)
        before = client.rows("SELECT time, host, v FROM net ORDER BY time, host")
        assert client.http.post("/api/v1/compaction/trigger", json={}).status_code == 202
        wait_for(client, "/api/v1/compaction/history", lambda a: [j["status"] for j in a["jobs"]] == ["done"])
        assert client.rows("SELECT time, host, v FROM net ORDER BY time, host") == before
        assert file_count(client, "net") == 1
        assert client.http.get("/api/v1/compaction/status").json()["scheduler"] == "eventbridge"
    finally:
        client.http.close()
        process.stop()
