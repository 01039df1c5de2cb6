"""``kill -9`` of the standalone server right after 204s loses nothing and duplicates nothing."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

import pytest

from tests.e2e.servers import Client, standalone

pytestmark = pytest.mark.e2e


def test_kill_9_after_acknowledged_writes_loses_nothing(tmp_path: Path) -> None:
    server = standalone(tmp_path / "data").start()
    client = Client(server.url)
    try:
        accepted = 0
        for batch in range(40):
            lines = "\n".join(
                f"crash,host=h{batch} v={i}i {1_700_000_000_000_000_000 + batch * 1000 + i}" for i in range(250)
            )
            response = client.write("/api/v1/write/line-protocol", lines.encode())
            assert response.status_code == 204, response.text
            accepted += 250
    finally:
        client.http.close()
        server.kill()  # no shutdown hook runs: whatever was acknowledged must already be on disk
    restarted = standalone(tmp_path / "data").start()
    client = Client(restarted.url)
    try:
        assert client.wait_count("crash", accepted) == accepted
        assert client.rows("SELECT count(DISTINCT (host, v)) FROM crash") == [[accepted]]
    finally:
        client.http.close()
        restarted.stop()


def test_kill_9_during_ingest_then_restart_keeps_exact_counts(tmp_path: Path) -> None:
    """Kill while the ingest loop is busy; the spool and markers make the replay exact."""
    server = standalone(tmp_path / "data").start()
    client = Client(server.url)
    accepted = 0
    try:
        for batch in range(20):
            body = "\n".join(
                f"busy v={i}i {1_700_000_000_000_000_000 + batch * 10_000_000 + i * 1000}" for i in range(2000)
            )
            assert client.write("/api/v1/write/line-protocol", body.encode()).status_code == 204
            accepted += 2000
            if batch == 10:
                # let ingest start on what is there, then keep writing and kill mid-flight
                client.wait_count("busy", 1)
    finally:
        client.http.close()
        server.kill()
    restarted = standalone(tmp_path / "data").start()
    client = Client(restarted.url)
    try:
        assert client.wait_count("busy", accepted) == accepted
        assert client.rows("SELECT count(DISTINCT time) FROM busy") == [[accepted]]
    finally:
        client.http.close()
        restarted.stop()


def _held_leases(data_dir: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(data_dir / "catalog.sqlite")) as db:
        return db.execute("SELECT name, owner FROM leases").fetchall()


def test_kill_9_during_compaction_then_restart_reclaims_its_leases_at_once(tmp_path: Path) -> None:
    """A crashed compaction's leases (15 minutes by default) are the data directory's holder's: the
    restarted server frees them at start and recovers the jobs at once."""
    data_dir = tmp_path / "data"
    settings = {
        "ARCS_COMPACTION_MIN_FILES": "2",
        "ARCS_COMPACTION_MIN_AGE_S": "0",
        "ARCS_COMPACTION_GRACE_S": "0",
    }
    hours, hour_ns = 60, 3_600_000_000_000
    server = standalone(data_dir, **settings).start()
    client = Client(server.url)
    held: list[tuple[str, str]] = []
    try:
        for copy in range(3):  # each request's rows span every hour: a file per hour each time
            body = "\n".join(
                f"squash,host=h{copy} v={copy}i {1_700_000_000_000_000_000 + h * hour_ns + copy}" for h in range(hours)
            )
            assert client.write("/api/v1/write/line-protocol", body.encode()).status_code == 204
            assert client.wait_count("squash", hours * (copy + 1)) == hours * (copy + 1)
        assert client.http.post("/api/v1/compaction/trigger", json={}).status_code == 202
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            jobs = client.http.get("/api/v1/compaction/jobs").json()["jobs"]
            if any(job["status"] == "running" for job in jobs):
                server.kill()  # mid-job: its lease stays in the catalog
                held = _held_leases(data_dir)
    finally:
        client.http.close()
        server.kill()
    if not held:
        pytest.skip("compaction finished before a job could be caught running")
    assert all(owner.startswith("server-") for _name, owner in held)  # a lease names its holder
    restarted = standalone(data_dir, **settings).start()
    client = Client(restarted.url)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            jobs = client.http.get("/api/v1/compaction/jobs").json()["jobs"]
            if not any(job["status"] == "running" for job in jobs):
                break
            time.sleep(0.2)
        assert not any(job["status"] == "running" for job in jobs), jobs  # recovered, not left for 15 minutes
        assert not set(_held_leases(data_dir)) & set(held)
        assert client.rows("SELECT count(*) FROM squash") == [[hours * 3]]
    finally:
        client.http.close()
        restarted.stop()


def test_a_second_server_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    server = standalone(tmp_path / "data").start()
    try:
        second = standalone(tmp_path / "data")
        with pytest.raises(RuntimeError, match="another process is serving the data directory"):
            second.start(timeout=30)
        assert second.process is not None and second.process.wait(10) != 0
        assert second.process.stdout is not None
        second.process.stdout.close()
    finally:
        server.stop()
