"""A full disk is nobody's write's fault: the standalone server's ingest keeps the writes it cannot
store queued, uncounted, until there is room, and never moves an acknowledged write to the
dead-letter folder for it."""

from __future__ import annotations

import errno
import pickle
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from arcs.adapters.local import objects
from arcs.errors import DiskFull, StorageFault
from arcs.http.server import IngestLoop
from arcs.runtime import LocalRuntime
from arcs.write.decoders import WireFormat
from arcs.write.edge import WriteRequest

pytestmark = pytest.mark.functional


def test_a_full_disk_keeps_acknowledged_writes_queued_not_dead_lettered(
    runtime: LocalRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = b"cpu,host=a usage=1 1700000000000000000\ncpu,host=b usage=2 1700000000000000000"
    runtime.writes.accept(WriteRequest(WireFormat.LINE_PROTOCOL, body, "default"))
    loop = IngestLoop(runtime)
    real = objects.write_durably

    def nearly_full(path: Path, data: bytes | memoryview) -> Path:
        # The data files do not fit; a small copy (a dead letter) still would.
        if path.suffix == ".parquet":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(objects, "write_durably", nearly_full)
    for _ in range(runtime.spool.max_attempts + 2):
        loop.drain_once(runtime.spool.take(10))
    dead = runtime.spool.root / "dead-letter"
    assert not dead.exists() or not list(dead.iterdir())

    monkeypatch.setattr(objects, "write_durably", real)  # room again
    loop.drain_once(runtime.spool.take(10))
    assert runtime.spool.take(10) == []
    files = list((tmp_path / "data" / "storage").rglob("*.parquet"))
    assert sum(pq.read_metadata(f).num_rows for f in files) == 2


def test_a_full_disk_is_told_apart_after_crossing_a_process_boundary() -> None:
    # Ingest's files are stored on worker processes: the error comes back pickled.
    error = pickle.loads(pickle.dumps(DiskFull("cannot write k: [Errno 28] No space left on device")))
    assert isinstance(error, DiskFull) and isinstance(error, StorageFault)
    assert error.message == "cannot write k: [Errno 28] No space left on device"
