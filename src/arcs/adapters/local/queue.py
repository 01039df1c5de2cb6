"""The standalone server's durable queue: a log of accepted writes in preallocated segments.

``enqueue`` writes a checksummed record into the active segment and returns only after an
``fdatasync`` covers it, so a ``kill -9`` right after the 204 loses nothing. Concurrent writers
share one ``fdatasync`` (group commit): whoever finds no sync running syncs everything written so
far, and the others wait for it. Segments are written over blocks that already exist (zeroed when
the segment is new, or left by a recycled one): a sync then flushes data only, with no change to
the file's size or extents to journal, which halves its cost. Only a new segment costs a
directory fsync.

The ingest loop takes the oldest records, commits them through the same protocol as the Lambda
(``arcs.write.ingest``) and marks them done; a segment whose records are all done is kept for reuse
(renamed ``*.free``, a few at most) or deleted. What a crash leaves undone, or done but not yet
deleted, is read again on restart, and the catalog's markers make that harmless. A segment's
header holds a random number drawn for each life of the file and made durable before the file
takes its name; every record repeats it. So a recycled segment's old records (and any bytes a
client sent that look like a record), like its zeroed tail or a record cut short by a crash
(never acknowledged: its sync had not returned), end the segment when it is read.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

import google_crc32c

from arcs.adapters.local.objects import fsync_dir, replace_durably
from arcs.errors import DISK_FULL_RETRY_S, StorageFault

if TYPE_CHECKING:
    from arcs.write.batch import WriteBatch
    from arcs.write.ingest import IngestResult, QueuedWrite

logger = logging.getLogger(__name__)

_SEGMENT_SUFFIX = ".log"
_FREE_SUFFIX = ".free"  # a finished segment kept to be written over by a later one
_LEGACY_SUFFIX = ".write"  # one file per write, as earlier versions spooled them
_POISON_DIR = "dead-letter"
# A segment (of records v2 or v3) starts with its header: magic and a random number drawn for this
# life of the file, made durable before the file takes its name. Every record repeats that number:
# records left from the file's earlier lives (or bytes a client sent, inside an envelope) cannot
# match it.
_SEGMENT_MAGIC = b"ARSG"
_SEGMENT_HEADER = struct.Struct("<4s4xQ")
# Record v3: magic, the segment's number for this life, length of the write id, length of the
# envelope, CRC-32C of the header's other fields, the id and the envelope. CRC-32C because CPUs
# compute it in hardware: 3 us per 50 KB record, where zlib's CRC-32 took 15. A build from before
# v3 reads a v3 record as the end of its segment: drain the spool before going back to one.
_MAGIC = b"ARS3"
_HEADER = struct.Struct("<4sQIII")
# Records v2 (the same with zlib's CRC-32, in segments of this layout) and v1 (appended to growing
# segments) were written by earlier versions and are still read.
_MAGIC_V2 = b"ARS2"
_MAGIC_V1 = b"ARS1"
_HEADER_V1 = struct.Struct("<4sIII")  # magic, id length, envelope length, CRC-32 of id and envelope
SEGMENT_BYTES = 16 << 20
# Decoded batches kept with their records for the ingest loop, counted by their envelopes' size.
HELD_BYTES = 64 << 20
MAX_FREE_SEGMENTS = 2
_ZEROS = bytes(1 << 20)


@dataclass(frozen=True, slots=True)
class SpoolEntry:
    handle: str  # unique within the spool: segment name and offset
    write_id: str
    attempts: int
    path: Path  # the file holding the envelope
    offset: int
    length: int
    # The record's content, decoded, when the edge of this process queued it: the ingest loop
    # uses it instead of reading the record back. Never after a restart.
    batch: WriteBatch | None = field(default=None, compare=False, repr=False)
    # When it was queued (epoch seconds); after a restart, when its segment was last written.
    queued_at: float | None = field(default=None, compare=False)


def _sequence(path: Path) -> int:
    return int(path.name.split(".", 1)[0])


def _header(nonce: int, key: bytes, envelope: bytes) -> bytes:
    fields = struct.pack("<QII", nonce, len(key), len(envelope))
    return b"".join((_MAGIC, fields, struct.pack("<I", _checksum(_MAGIC, fields, key, envelope))))


def _checksum(magic: bytes, fields: bytes, key: bytes, envelope: bytes) -> int:
    """The checksum a record of ``magic`` carries (``fields``: its header between magic and CRC)."""
    if magic == _MAGIC:
        return int(google_crc32c.extend(google_crc32c.extend(google_crc32c.value(fields), key), envelope))
    return zlib.crc32(envelope, zlib.crc32(key, zlib.crc32(fields)))


def _scan(path: Path) -> list[SpoolEntry]:
    """The whole records of a segment, up to the first that is torn, corrupt or not of this life."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:4] == _SEGMENT_MAGIC and len(data) >= _SEGMENT_HEADER.size:
        _magic, nonce = _SEGMENT_HEADER.unpack_from(data)
        return _scan_records(path, data, _SEGMENT_HEADER.size, nonce)
    if data[:4] == _MAGIC_V1:
        return _scan_records(path, data, 0, None)
    return []  # a segment whose header never became durable: no record of it was acknowledged


def _scan_records(path: Path, data: bytes, offset: int, nonce: int | None) -> list[SpoolEntry]:
    """Records from ``offset``: v3 and v2 ones of ``nonce``, or v1 ones when it is None."""
    entries: list[SpoolEntry] = []
    torn = False
    while True:
        magic = data[offset : offset + 4]
        if nonce is not None:
            if magic not in (_MAGIC, _MAGIC_V2) or offset + _HEADER.size > len(data):
                break  # the zeroed rest of the segment, or what an earlier life left
            _magic, record_nonce, key_length, length, checksum = _HEADER.unpack_from(data, offset)
            if record_nonce != nonce:
                break  # an earlier life's record
            start = offset + _HEADER.size
            fields = data[offset + 4 : offset + 20]
        else:
            if magic != _MAGIC_V1 or offset + _HEADER_V1.size > len(data):
                break
            _magic, key_length, length, checksum = _HEADER_V1.unpack_from(data, offset)
            start = offset + _HEADER_V1.size
            fields = b""  # v1 checksums cover the id and envelope only (zlib.crc32 of b"" is 0)
        end = start + key_length + length
        key = data[start : start + key_length]
        torn = end > len(data) or _checksum(magic, fields, key, data[start + key_length : end]) != checksum
        if torn:
            break
        try:
            write_id = key.decode()
        except UnicodeDecodeError:
            torn = True
            break
        entries.append(SpoolEntry(f"{path.name}:{offset}", write_id, 1, path, start + key_length, length))
        offset = end
    if torn:
        # Never acknowledged (a crash cut it short, or its write failed): nothing to redeliver.
        logger.warning("spool segment %s: the record at offset %d is not whole", path, offset)
    return entries


class Spool:
    def __init__(
        self, root: Path, max_attempts: int = 5, segment_bytes: int = SEGMENT_BYTES, held_bytes: int = HELD_BYTES
    ) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / _POISON_DIR).mkdir(exist_ok=True)
        self.max_attempts = max_attempts
        self.segment_bytes = segment_bytes
        self.held_bytes = held_bytes
        self._held = 0  # envelope bytes of the pending entries that hold their batch (under ``_ready``)
        self._attempts: dict[str, int] = {}
        self._ready = threading.Condition()
        # Not yet done, oldest first; and how many of those each file holds.
        self._pending: dict[str, SpoolEntry] = {}
        self._live: dict[Path, int] = {}
        self._free: list[Path] = []  # finished segments to write the next ones over (under ``_ready``)
        self._readers: dict[Path, int] = {}  # open for ``read``, one per segment (under ``_ready``)
        # The writer side, all under ``_log``: the active segment, what was written to it, what
        # an fdatasync has covered, and whether a sync is running.
        self._log = threading.Condition()
        self._fd = -1
        self._segment: Path | None = None
        self._nonce = 0  # the active segment's
        self._size = 0
        self._written = 0
        self._synced = 0
        self._failed: list[tuple[int, int]] = []  # (synced, written] ranges a failed sync left
        self._syncing = False
        self._broken = False
        self._refused = False  # the last write could not be made durable
        self._recover()

    # --- start-up -------------------------------------------------------------------------------
    def _recover(self) -> None:
        legacy = sorted(p for p in self.root.iterdir() if p.name.endswith(_LEGACY_SUFFIX))
        for path in legacy:
            write_id = path.name[: -len(_LEGACY_SUFFIX)].split("-", 2)[2]
            self._add(SpoolEntry(path.name, write_id, 1, path, 0, path.stat().st_size))
        segments = self._segments()
        free = sorted(p for p in self.root.iterdir() if p.name.endswith(_FREE_SUFFIX))
        # Appends go to a new segment numbered after every earlier one, free ones included, so a
        # name is never taken twice while its file exists.
        self._next_sequence = max((_sequence(p) for p in [*segments, *free]), default=0) + 1
        for path in free:
            self._retire(path)
        for path in segments:
            entries = _scan(path)
            if not entries:
                self._retire(path)
                continue
            for entry in entries:
                self._add(entry)

    def _segments(self) -> list[Path]:
        return sorted(p for p in self.root.iterdir() if p.name.endswith(_SEGMENT_SUFFIX))

    def _retire(self, path: Path) -> None:
        """A segment none of whose records is needed: keep it to write over, or delete it.

        Called holding ``_ready`` (or before any thread runs). The rename needs no fsync: lost in
        a crash, it leaves a segment whose records are all done, which the markers recognize.
        """
        reader = self._readers.pop(path, -1)
        if reader >= 0:
            os.close(reader)  # the file may become another segment: nothing may read it by this
        try:
            reusable = path.name.endswith((_SEGMENT_SUFFIX, _FREE_SUFFIX))  # not an earlier version's file
            if reusable and len(self._free) < MAX_FREE_SEGMENTS and path.stat().st_size >= self.segment_bytes:
                free = path.with_name(f"{_sequence(path):016d}{_FREE_SUFFIX}")
                if free != path:
                    path.rename(free)
                self._free.append(free)
                return
        except OSError:
            logger.warning("spool segment %s could not be kept for reuse", path, exc_info=True)
        path.unlink(missing_ok=True)

    def _add(self, entry: SpoolEntry) -> None:
        self._pending[entry.handle] = entry
        self._live[entry.path] = self._live.get(entry.path, 0) + 1

    # --- producer side (the write edge) ---------------------------------------------------------
    def enqueue(self, write_id: str, envelope: bytes, batch: WriteBatch | None = None) -> None:
        key = write_id.encode()
        with self._log:
            try:
                if self._fd < 0 or self._broken or self._size >= self.segment_bytes:
                    self._rotate()
                offset = self._size
                header = _header(self._nonce, key, envelope)
                _write_at(self._fd, (header, key, envelope), offset)
            except OSError as exc:
                self._broken = True  # a partial record may follow: append elsewhere from now on
                self._refused = True
                full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
                raise StorageFault(f"cannot queue the write: {exc}", DISK_FULL_RETRY_S if full else 1) from exc
            segment = self._segment
            assert segment is not None
            with self._ready:
                # Counted before the sync, so a rotation meanwhile cannot delete the segment.
                self._live[segment] = self._live.get(segment, 0) + 1
            self._size += len(header) + len(key) + len(envelope)
            self._written += 1
            try:
                self._wait_synced(self._written)
            except StorageFault:
                self._refused = True
                with self._ready:
                    self._release(segment)
                raise
            self._refused = False
        start = offset + len(header) + len(key)
        with self._ready:
            if batch is not None and self._held + len(envelope) > self.held_bytes:
                batch = None  # a backlog: its records are read back from disk
            self._held += len(envelope) if batch is not None else 0
            entry = SpoolEntry(
                f"{segment.name}:{offset}", write_id, 1, segment, start, len(envelope), batch, time.time()
            )
            self._pending[entry.handle] = entry
            self._ready.notify_all()

    def writable(self) -> bool:
        """Whether a write could be made durable now, as far as can be told without writing one:
        the active segment has room and the last write succeeded, or the disk has room for a new
        segment (after a refusal, room coming back is what makes writes possible again)."""
        with self._log:
            active = self._fd >= 0 and not self._broken and self._size < self.segment_bytes and not self._refused
        if active:
            return True
        with self._ready:
            if self._free:
                return True
        try:
            disk = os.statvfs(self.root)
        except OSError:
            return False
        return disk.f_bavail * disk.f_frsize >= self.segment_bytes

    def _wait_synced(self, ticket: int) -> None:
        """Group commit; called holding ``_log``. Raises if the sync covering ``ticket`` failed."""
        while True:
            # Checked first: a later sync of another segment moves ``_synced`` past failed tickets.
            if any(low < ticket <= high for low, high in self._failed):
                raise StorageFault("cannot queue the write: the spool could not sync it to disk")
            if self._synced >= ticket:
                return
            if self._syncing:
                self._log.wait()
                continue
            self._syncing = True
            target, fd = self._written, self._fd
            self._log.release()
            error: OSError | None = None
            try:
                os.fdatasync(fd)
            except OSError as exc:
                error = exc
            finally:
                self._log.acquire()
                self._syncing = False
                self._log.notify_all()
            if error is None:
                self._synced = max(self._synced, target)
            else:
                # After a failed fsync the kernel may have dropped the pages: nothing unsynced in
                # this segment can be called durable, and later appends go to a new one.
                logger.error("spool fdatasync failed: %s", error)
                self._fail_unsynced()

    def _fail_unsynced(self) -> None:
        failed = (self._synced, self._written)
        if self._written > self._synced and (not self._failed or self._failed[-1] != failed):
            self._failed.append(failed)
        self._broken = True
        self._log.notify_all()

    def _rotate(self) -> None:
        """Start a new segment; called holding ``_log``."""
        while self._syncing:
            self._log.wait()
        if self._fd >= 0:
            if self._broken:
                self._fail_unsynced()
            else:
                try:
                    os.fdatasync(self._fd)
                    self._synced = self._written
                    self._log.notify_all()
                except OSError:
                    self._fail_unsynced()
            os.close(self._fd)
            self._fd = -1
            with self._ready:  # with ``_release``, which reads ``_segment``: one of them retires it
                previous, self._segment = self._segment, None
                if previous is not None and not self._live.get(previous):
                    self._live.pop(previous, None)
                    self._retire(previous)
        path = self.root / f"{self._next_sequence:016d}{_SEGMENT_SUFFIX}"
        self._next_sequence += 1
        with self._ready:
            reuse = self._free.pop(0) if self._free else None
        nonce = int.from_bytes(os.urandom(8), "little")
        self._fd = self._prepare(path, reuse, nonce)
        with self._ready:
            self._segment = path
        self._nonce, self._size, self._broken = nonce, _SEGMENT_HEADER.size, False

    def _prepare(self, path: Path, reuse: Path | None, nonce: int) -> int:
        """The new segment's file, open for writing: ``reuse`` written over, or a new zeroed one.

        Its header (with ``nonce``) is durable before the file takes the segment's name, and the
        name before any record is written; on failure nothing of it is left.
        """
        try:
            if reuse is not None:
                fd = os.open(reuse, os.O_WRONLY)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            if reuse is not None:
                reuse.unlink(missing_ok=True)
            raise
        try:
            if reuse is None:
                for start in range(0, self.segment_bytes, len(_ZEROS)):
                    _write_at(fd, (_ZEROS[: self.segment_bytes - start],), start)
            _write_at(fd, (_SEGMENT_HEADER.pack(_SEGMENT_MAGIC, nonce),), 0)
            os.fdatasync(fd)
            if reuse is not None:
                reuse.rename(path)
            fsync_dir(self.root)  # the segment's name must survive a crash as its records will
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            if reuse is not None:
                reuse.unlink(missing_ok=True)
            raise
        return fd

    # --- consumer side (the ingest loop) ----------------------------------------------------------
    def wait(self, timeout: float) -> None:
        with self._ready:
            self._ready.wait(timeout)

    def read(self, entry: SpoolEntry) -> bytes:
        """The envelope of a waiting ``entry``, through one descriptor per segment kept open while it has records."""
        with self._ready:
            if entry.handle not in self._pending:
                raise StorageFault(f"spooled write {entry.handle} is not waiting to be ingested")
            reader = self._readers.get(entry.path, -1)
            if reader < 0:
                try:
                    reader = self._readers[entry.path] = os.open(entry.path, os.O_RDONLY)
                except OSError as exc:
                    raise StorageFault(f"cannot read spooled write {entry.handle}: {exc}") from exc
            # Read under the lock: the segment cannot be retired (and its descriptor closed) meanwhile.
            try:
                data = os.pread(reader, entry.length, entry.offset)
            except OSError as exc:
                raise StorageFault(f"cannot read spooled write {entry.handle}: {exc}") from exc
        if len(data) != entry.length:
            raise StorageFault(f"spooled write {entry.handle} is shorter than its record says")
        return data

    def backlog(self) -> tuple[int, float]:
        """Writes queued and not yet done, and the age in seconds of the oldest (0 when none)."""
        with self._ready:
            depth = len(self._pending)
            oldest = next(iter(self._pending.values()), None)
        if oldest is None:
            return 0, 0.0
        queued_at = oldest.queued_at
        if queued_at is None:
            try:
                queued_at = oldest.path.stat().st_mtime
            except OSError:
                return depth, 0.0
        return depth, max(0.0, time.time() - queued_at)

    def take(self, limit: int) -> list[SpoolEntry]:
        with self._ready:
            oldest = list(islice(self._pending.values(), limit))
            # An entry is made with attempts=1, what its first take counts: copied only after a failure.
            return [
                entry if entry.attempts == attempt else replace(entry, attempts=attempt)
                for entry in oldest
                for attempt in (self._attempts.get(entry.handle, 0) + 1,)
            ]

    def done(self, entries: list[SpoolEntry]) -> None:
        # No directory fsync for the deletes: a delete lost in a crash only means those records
        # are read again, and the markers recognize them as done.
        with self._ready:
            for entry in entries:
                pending = self._pending.pop(entry.handle, None)
                if pending is not None:
                    self._held -= pending.length if pending.batch is not None else 0
                    self._attempts.pop(entry.handle, None)
                    self._release(entry.path)

    def _release(self, path: Path) -> None:
        """One record of ``path`` needs keeping no more; called holding ``_ready``."""
        left = self._live[path] - 1
        if left or path == self._segment:
            self._live[path] = left
        else:
            del self._live[path]
            self._retire(path)

    def failed(self, entry: SpoolEntry) -> bool:
        """Count a failed attempt; after ``max_attempts`` move it to the dead-letter folder (True)."""
        with self._ready:
            self._attempts[entry.handle] = entry.attempts
        if entry.attempts < self.max_attempts:
            return False
        self.dead_letter(entry)
        return True

    def dead_letter(self, entry: SpoolEntry) -> None:
        """Set a write aside for a person to look at; it is kept, never dropped."""
        name = entry.handle.replace(":", "-") + "-" + entry.write_id + _LEGACY_SUFFIX
        replace_durably(self.root / _POISON_DIR / name, self.read(entry))
        self.done([entry])


def _write_at(fd: int, pieces: tuple[bytes, ...], offset: int) -> None:
    """Write ``pieces`` back to back at ``offset``, in one system call when the kernel takes them all."""
    written = os.pwritev(fd, pieces, offset)
    rest = memoryview(b"".join(pieces))[written:] if written < sum(map(len, pieces)) else memoryview(b"")
    offset += written
    while rest:
        written = os.pwrite(fd, rest, offset)
        rest, offset = rest[written:], offset + written


class SpoolDelivery:
    """A batch taken from the spool, as the ingest use case reads it (``ports.QueueDelivery``)."""

    def __init__(self, spool: Spool, entries: list[SpoolEntry]) -> None:
        self.spool = spool
        self.entries = {entry.handle: entry for entry in entries}

    def writes(self) -> list[QueuedWrite]:
        from arcs.write.ingest import QueuedWrite  # lazy: it loads pyarrow.parquet

        return [
            QueuedWrite(
                handle, entry.write_id, partial(self.spool.read, entry), batch=entry.batch, queued_at=entry.queued_at
            )
            for handle, entry in self.entries.items()
        ]

    def settle(self, result: IngestResult) -> None:
        self.spool.done([self.entries[h] for h in (*result.committed, *result.already_done)])
        for handle, reason in result.poison.items():
            logger.error("write %s can never be ingested (%s); moved to the dead-letter folder", handle, reason)
            self.spool.dead_letter(self.entries[handle])
        for handle, reason in result.failed.items():
            if handle in result.unavailable:
                # A full disk is no fault of the write's: it waits for room, uncounted, however long.
                logger.warning("write %s not ingested yet, the disk is full: %s", handle, reason)
            elif self.spool.failed(self.entries[handle]):
                logger.error(
                    "write %s failed %d times (%s); moved to the dead-letter folder",
                    handle,
                    self.spool.max_attempts,
                    reason,
                )
            else:
                logger.warning("write %s not ingested yet: %s", handle, reason)
