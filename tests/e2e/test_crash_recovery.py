"""``kill -9`` of the standalone server right after 204s loses nothing and duplicates nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
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


def _workers(server_pid: int) -> list[int]:
    """The server's ingest worker processes (``arcs.write.file_writers``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == server_pid and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _started_workers(server_pid: int) -> list[int]:
    """The server's ingest workers, once it has started them (it starts one a core, two here)."""
    deadline = time.monotonic() + 30
    while len(_workers(server_pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    return _workers(server_pid)


def _hours_body(measurement: str, batch: int) -> bytes:
    """2,000 points 72 s apart, 40 hours a body: many files in each ingest attempt."""
    return "\n".join(
        f"{measurement},host=h{i % 5} v={i}i {1_700_000_000_000_000_000 + (batch * 2000 + i) * 72_000_000_000}"
        for i in range(2000)
    ).encode()


def _gone(pids: list[int], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [pid for pid in pids if Path(f"/proc/{pid}").exists()]:
            return True
        time.sleep(0.1)
    return False


def test_an_ingest_worker_killed_while_writes_arrive_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """Files are encoded on worker processes: one killed mid-run costs a retry, never a row."""
    server = standalone(tmp_path / "data").start()
    assert server.process is not None
    client = Client(server.url)
    accepted = 0
    try:
        victims = _started_workers(server.process.pid)
        assert victims, "no worker processes"
        for batch in range(30):
            assert client.write("/api/v1/write/line-protocol", _hours_body("workers", batch)).status_code == 204
            accepted += 2000
            if batch == 10:
                os.kill(victims[0], signal.SIGKILL)
        assert client.wait_count("workers", accepted) == accepted
        assert client.rows("SELECT count(DISTINCT time) FROM workers") == [[accepted]]
    finally:
        client.http.close()
        server.stop()


def test_ingest_workers_killed_again_and_again_dead_letter_nothing(tmp_path: Path) -> None:
    """A worker's death (the out-of-memory killer, say) is never the writes' fault: with workers
    killed every 50 ms while writes of many hours arrive and are stored, no acknowledged write is
    dead-lettered or lost."""
    server = standalone(tmp_path / "data").start()
    assert server.process is not None
    server_pid = server.process.pid
    client = Client(server.url)
    stop = threading.Event()

    def killer() -> None:
        while not stop.wait(0.05):
            for pid in _workers(server_pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    accepted = 0
    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        for batch in range(40):
            assert client.write("/api/v1/write/line-protocol", _hours_body("doomed", batch)).status_code == 204
            accepted += 2000
        assert client.wait_count("doomed", accepted, timeout=20) == accepted  # killing all along
        stop.set()
        thread.join()
        assert client.rows("SELECT count(DISTINCT time) FROM doomed") == [[accepted]]
        dead = tmp_path / "data" / "spool" / "dead-letter"
        assert not dead.exists() or not list(dead.iterdir())
    finally:
        stop.set()
        client.http.close()
        server.stop()


def test_kill_9_of_the_server_ends_its_ingest_workers(tmp_path: Path) -> None:
    server = standalone(tmp_path / "data").start()
    assert server.process is not None
    workers = _started_workers(server.process.pid)
    assert workers
    server.kill()
    assert _gone(workers), "ingest workers outlived their server"
