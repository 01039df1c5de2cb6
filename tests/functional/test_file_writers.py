"""Ingest's file writers: on worker processes (the standalone server's) they store the very files
threads store, a dead worker fails only the attempt it was part of, and none outlives its server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arcs.adapters.local.objects import DirectoryStore
from arcs.write.file_writers import FileWriters, Piece

T0 = 1_780_272_000 * 10**9


def _pieces(count: int, rows: int = 500) -> list[Piece]:
    """``count`` hours of rows of two schemas (the second half has a string field too)."""
    pieces: list[Piece] = []
    for hour in range(count):
        start = T0 + hour * 3_600 * 10**9
        columns: dict[str, pa.Array] = {
            "time": pa.array([start + i * 10**9 for i in range(rows)], pa.timestamp("ns", tz="UTC")),
            "host": pa.array([f"host{i % 7}" for i in range(rows)]),
            "v": pa.array([float(i * hour) for i in range(rows)]),
        }
        if hour >= count // 2:
            columns["note"] = pa.array([f"n{i}" for i in range(rows)])
        pieces.append((f"db/m/h{hour:03d}/f.parquet", pa.table(columns), ["host"]))
    return pieces


@pytest.fixture
def processes() -> FileWriters:
    writers = FileWriters(2, processes=True)
    yield writers
    writers.close()


def test_worker_processes_store_the_files_threads_store(tmp_path: Path, processes: FileWriters) -> None:
    pieces = _pieces(9)
    threads = FileWriters(3, processes=False)
    try:
        by_threads = threads.store(DirectoryStore(tmp_path / "threads"), pieces, 122_880)
    finally:
        threads.close()
    by_processes = processes.store(DirectoryStore(tmp_path / "processes"), pieces, 122_880)
    assert by_processes == by_threads
    assert [s.rows for s in by_processes] == [500] * 9 and not any(s.existed for s in by_processes)
    for key, table, _tags in pieces:
        assert (tmp_path / "processes" / key).read_bytes() == (tmp_path / "threads" / key).read_bytes()
        assert pq.read_table(tmp_path / "processes" / key).column("v").equals(table.column("v"))


def test_a_file_already_stored_is_reported_not_replaced(tmp_path: Path, processes: FileWriters) -> None:
    store = DirectoryStore(tmp_path)
    pieces = _pieces(4)
    store.put_if_absent(pieces[1][0], b"stored before")
    stored = processes.store(store, pieces, 122_880)
    assert [s.existed for s in stored] == [False, True, False, False]
    assert (tmp_path / pieces[1][0]).read_bytes() == b"stored before"


def test_a_worker_that_dies_idle_is_replaced_unnoticed(tmp_path: Path, processes: FileWriters) -> None:
    processes.start()
    victim = _worker_pids()[0]
    os.kill(victim, signal.SIGKILL)
    _wait_gone(victim)
    stored = processes.store(DirectoryStore(tmp_path), _pieces(6), 122_880)
    assert [s.rows for s in stored] == [500] * 6
    assert victim not in _worker_pids()


def test_a_worker_that_dies_mid_write_costs_its_share_again_not_the_attempt(
    tmp_path: Path, processes: FileWriters
) -> None:
    """Its share goes to new workers; what it had stored is found there, not written twice."""
    processes.start()
    store = DirectoryStore(tmp_path)
    victim = _worker_pids()[0]
    idle = _cpu_ticks(victim)
    outcome: list[object] = []

    def attempt() -> None:
        try:
            outcome.append(processes.store(store, _pieces(40, rows=100_000), 122_880))
        except Exception as exc:
            outcome.append(exc)

    running = threading.Thread(target=attempt)
    running.start()
    deadline = time.monotonic() + 30
    while _cpu_ticks(victim) < idle + 5 and time.monotonic() < deadline:
        time.sleep(0.005)  # until the victim is busy with a share of the files
    os.kill(victim, signal.SIGKILL)
    running.join(60)
    [stored] = outcome
    assert isinstance(stored, list) and [s.rows for s in stored] == [100_000] * 40
    for key, table, _tags in _pieces(40, rows=100_000):
        assert pq.read_table(tmp_path / key).column("v").equals(table.column("v"))
    assert victim not in _worker_pids()


def test_workers_that_keep_dying_have_their_files_stored_here(
    tmp_path: Path, processes: FileWriters, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past one more try on new workers, the server's own process stores the shares left: a
    worker's death (the kernel's out-of-memory killer, say) never fails the writes' attempt."""
    processes.start()
    real_submit = FileWriters._submit_chunk

    def submit_then_kill(self: FileWriters, *args: object) -> object:
        future = real_submit(self, *args)  # type: ignore[arg-type]
        for pid in _worker_pids():
            os.kill(pid, signal.SIGKILL)
        return future

    monkeypatch.setattr(FileWriters, "_submit_chunk", submit_then_kill)
    pieces = _pieces(4, rows=100_000)
    stored = processes.store(DirectoryStore(tmp_path), pieces, 122_880)
    assert [s.rows for s in stored] == [100_000] * 4
    for key, table, _tags in pieces:
        assert pq.read_table(tmp_path / key).column("v").equals(table.column("v"))
    monkeypatch.undo()
    assert [s.rows for s in processes.store(DirectoryStore(tmp_path), _pieces(2), 122_880)] == [500] * 2


def test_a_worker_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    """``kill -9`` of the server tells its workers nothing: they notice and end."""
    probe = (
        "import sys, time\n"
        "from arcs.write.file_writers import FileWriters\n"
        "writers = FileWriters(2, processes=True)\n"
        "writers.start()\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        workers = _children(parent.pid)
        assert len(workers) >= 2  # the workers (and multiprocessing's resource tracker)
    finally:
        parent.kill()
        parent.wait(10)
        assert parent.stdout is not None
        parent.stdout.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _worker_pids() -> list[int]:
    """This process's live worker processes (a pool shut down leaves its workers ending)."""
    return [
        pid
        for pid in _children(os.getpid())
        if _alive(pid) and b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
