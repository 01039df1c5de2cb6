"""The standalone server's durable queue: one fsynced file per accepted write.

``enqueue`` returns only after the file and its directory entry are on disk, so a ``kill -9``
right after the 204 loses nothing. The ingest loop reads the oldest files, commits them through
the same protocol as the Lambda (``arcs.ingest``), and deletes them afterwards; a crash before the
delete means the write is read again, and the catalog's markers make that harmless.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from arcs.adapters.local_storage import fsync_dir, replace_durably
from arcs.errors import StorageFault

_SUFFIX = ".write"
_POISON_DIR = "dead-letter"


@dataclass(frozen=True, slots=True)
class SpoolEntry:
    path: Path
    write_id: str
    attempts: int

    def read(self) -> bytes:
        return self.path.read_bytes()


class Spool:
    def __init__(self, root: Path, max_attempts: int = 5) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / _POISON_DIR).mkdir(exist_ok=True)
        self.max_attempts = max_attempts
        self._attempts: dict[str, int] = {}
        self._ready = threading.Condition()
        self._sequence = 0

    # --- producer side (the write edge) ---------------------------------------------------------
    def enqueue(self, write_id: str, envelope: bytes) -> None:
        with self._ready:
            self._sequence += 1
            sequence = self._sequence
        # Names sort by arrival: nanosecond clock, then a per-process counter.
        path = self.root / f"{time.time_ns():020d}-{sequence:08d}-{write_id}{_SUFFIX}"
        try:
            replace_durably(path, envelope)
        except OSError as exc:
            raise StorageFault(f"cannot queue the write: {exc}") from exc
        with self._ready:
            self._ready.notify_all()

    # --- consumer side (the ingest loop) ----------------------------------------------------------
    def wait(self, timeout: float) -> None:
        with self._ready:
            self._ready.wait(timeout)

    def take(self, limit: int) -> list[SpoolEntry]:
        names = sorted(entry.name for entry in os.scandir(self.root) if entry.name.endswith(_SUFFIX))
        entries = []
        for name in names[:limit]:
            write_id = name[: -len(_SUFFIX)].split("-", 2)[2]
            entries.append(SpoolEntry(self.root / name, write_id, self._attempts.get(name, 0) + 1))
        return entries

    def done(self, entries: list[SpoolEntry]) -> None:
        for entry in entries:
            entry.path.unlink(missing_ok=True)
            self._attempts.pop(entry.path.name, None)
        if entries:
            fsync_dir(self.root)

    def failed(self, entry: SpoolEntry) -> bool:
        """Count a failed attempt; after ``max_attempts`` move it to the dead-letter folder (True)."""
        name = entry.path.name
        self._attempts[name] = entry.attempts
        if entry.attempts < self.max_attempts:
            return False
        self.dead_letter(entry)
        return True

    def dead_letter(self, entry: SpoolEntry) -> None:
        """Set a write aside for a person to look at; it is kept, never dropped."""
        os.replace(entry.path, self.root / _POISON_DIR / entry.path.name)
        fsync_dir(self.root)
        self._attempts.pop(entry.path.name, None)
