"""Storing an import chunk group by chunk group, exactly once, and resuming one a crash stopped.

Each chunk is a write whose id is derived from the database, the import id and the chunk's number,
stored through the ingest protocol (``arcs.write.ingest``) or queued as a write. A retried import
(the same id), or one resumed after a crash, stores every chunk once: the write markers say which
chunks a previous run committed. ``Importer`` runs an import: the check (``check``), then the store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING

from arcs.errors import ArcsError, Conflict, ServiceUnavailable
from arcs.ports import UploadStore, WriteQueue
from arcs.write.batch import WriteBatch
from arcs.write.import_status import ImportLedger, ImportStatus, chunk_write_id
from arcs.write.imports.check import check_file
from arcs.write.imports.chunks import Chunk, Opener, read_chunks
from arcs.write.imports.options import ImportOptions
from arcs.write.ingest import Ingestor, QueuedWrite, decoded_bytes
from arcs.write.schema import SchemaRegistry

if TYPE_CHECKING:
    from arcs.runtime import Runtime

logger = logging.getLogger(__name__)

#: Decoded bytes stored in one ingest attempt: about a chunk. Ingest holds several times its group
#: while it merges points written twice (rows sharing tags and time), so larger groups cost memory
#: (64 MiB groups: 170 MB more resident) and saved no time.
GROUP_BYTES = 4 << 20
#: Arc's import limit, and ours unless ``ARCS_IMPORT_MAX_BYTES`` says otherwise; it applies to the
#: file as sent and as decompressed.
DEFAULT_MAX_BYTES = 500 * 1024 * 1024
_PROGRESS_EVERY_S = 1.0

#: Where checked chunks go: stored at once, or queued as writes; returns once they are durable.
ChunkSink = Callable[[list[QueuedWrite]], None]


class IngestSink:
    """Chunks stored through the ingest protocol, here and now: the standalone server, and the
    tasks function on AWS. The import's answer comes once every row is queryable."""

    def __init__(self, ingestor: Ingestor) -> None:
        self.ingestor = ingestor

    def __call__(self, writes: list[QueuedWrite]) -> None:
        for attempt in range(5):
            result = self.ingestor.ingest(writes)
            if not result.failed and not result.poison:
                return
            writes = [w for w in writes if w.handle in result.failed]
            if result.poison or attempt == 4:
                reason = next(iter({**result.poison, **result.failed}.values()))
                raise ServiceUnavailable(f"storing the import failed ({reason}); retry it with the same import id")
            time.sleep(0.2 * (attempt + 1))


class QueueSink:
    """Chunks queued as writes (SQS on AWS: the edge function, which stores no data itself); the
    ingest function stores them, each once, by its write id. Durable, as a write's 204 is."""

    def __init__(self, queue: WriteQueue, compression: str | None) -> None:
        self.queue = queue
        self.compression = compression

    def __call__(self, writes: list[QueuedWrite]) -> None:
        for write in writes:
            assert write.batch is not None
            self.queue.enqueue(write.write_id, write.batch.to_bytes(self.compression))


class Importer:
    """Runs imports: checks a whole file, then stores it chunk group by chunk group, exactly once."""

    def __init__(
        self,
        registry: SchemaRegistry,
        sink: ChunkSink,
        ledger: ImportLedger,
        max_bytes: int = DEFAULT_MAX_BYTES,
        group_bytes: int = GROUP_BYTES,
    ) -> None:
        self.registry = registry
        self.sink = sink
        self.ledger = ledger
        self.max_bytes = max_bytes
        self.group_bytes = group_bytes
        self._running: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def begin(
        self, import_id: str, options: ImportOptions, sha256: str | None, size: int, upload: str | None = None
    ) -> ImportStatus:
        """The status record of a new run of ``import_id``, or the finished one when it already ran
        on this same file (sha256); a 409 when it runs now or ran on another file."""
        key = (options.database, import_id)
        self.ledger.count(requests=1)
        with self._lock:
            if key in self._running:
                raise Conflict(f"import {import_id!r} is running; see /api/v1/import/status/{import_id}")
            previous = self.ledger.get(options.database, import_id)
            if previous is not None and previous.sha256 and sha256 and previous.sha256 != sha256:
                raise Conflict(f"import id {import_id!r} was used for another file; choose a new id")
            if previous is not None and previous.state in ("storing", "done") and previous.options != options.to_json():
                # Its chunks are (partly) stored as those parameters read them.
                raise Conflict(f"import id {import_id!r} was used with other parameters; choose a new id")
            if previous is not None and previous.state == "done":
                return previous
            now = time.time()
            status = ImportStatus(
                import_id,
                options.database,
                options.format.value,
                options.to_json(),
                sha256=sha256,
                bytes_total=size,
                # Resumed runs keep the first run's clock: lines without a time land where they did.
                now_micros=previous.now_micros
                if previous is not None and previous.now_micros
                else time.time_ns() // 1000,
                started_at=now,
                upload=upload,
            )
            self._running.add(key)
        return status

    def resume(self, status: ImportStatus, opener: Opener) -> ImportStatus:
        """Run again an import a crash stopped (its chunks already stored are stored once)."""
        with self._lock:
            key = (status.database, status.import_id)
            if key in self._running:
                raise Conflict(f"import {status.import_id!r} is running")
            self._running.add(key)
        status.state, status.error, status.error_status = "validating", None, None
        status.rows_checked = 0
        return self.run(status, opener)

    def run(self, status: ImportStatus, opener: Opener) -> ImportStatus:
        """Check then store the file; returns the finished status (raises with it recorded as failed)."""
        key = (status.database, status.import_id)
        if status.state == "done":
            return status
        options = ImportOptions.from_json(status.options)
        try:
            self.ledger.put(status)
            self._check(status, options, opener)
            status.state = "storing"
            status.bytes_read = 0
            self.ledger.put(status)
            self._store(status, options, opener)
            status.state = "done"
            status.finished_at = time.time()
            status.upload = None
            self.ledger.put(status)
            self.ledger.count(records=status.rows_imported)
            return status
        except ArcsError as exc:
            status.error = exc.message
            status.error_status = exc.status
            status.finished_at = time.time()
            if status.state == "validating" or exc.client_error:
                # Nothing was stored (a client error can only come from the check).
                status.state = "failed"
                status.upload = None
            self.ledger.put(status)
            self.ledger.count(errors=1)
            raise
        finally:
            with self._lock:
                self._running.discard(key)

    def _chunks(self, status: ImportStatus, options: ImportOptions, opener: Opener) -> Iterator[Chunk]:
        last = [0.0]

        def progress(count: int) -> None:
            status.bytes_read = count
            now = time.monotonic()
            if now - last[0] >= _PROGRESS_EVERY_S:
                last[0] = now
                self.ledger.put(status)

        return read_chunks(opener, options, status.now_micros, status.bytes_total, self.max_bytes, progress)

    def _check(self, status: ImportStatus, options: ImportOptions, opener: Opener) -> None:
        check_file(self.registry, status, options, self._chunks(status, options, opener))

    def _store(self, status: ImportStatus, options: ImportOptions, opener: Opener) -> None:
        group: list[tuple[QueuedWrite, int]] = []
        held = 0
        status.rows_imported = 0
        status.chunks_stored = 0
        for chunk in self._chunks(status, options, opener):
            if not chunk.parts:
                continue
            parts = self.registry.apply(options.database, chunk.parts)
            write_id = chunk_write_id(options.database, status.import_id, chunk.number)
            batch = WriteBatch(write_id, options.database, tuple(parts))
            group.append((QueuedWrite(f"chunk-{chunk.number}", write_id, _no_envelope, batch=batch), batch.row_count))
            held += decoded_bytes(batch)
            if held >= self.group_bytes:
                self._commit(status, group)
                group, held = [], 0
        if group:
            self._commit(status, group)

    def _commit(self, status: ImportStatus, group: list[tuple[QueuedWrite, int]]) -> None:
        self.sink([write for write, _rows in group])
        status.rows_imported += sum(rows for _write, rows in group)
        status.chunks_stored += len(group)
        self.ledger.put(status)


def _no_envelope() -> bytes:
    raise AssertionError("an import's chunks are handed to ingest decoded")


def run_uploaded(runtime: Runtime, database: str, import_id: str) -> ImportStatus | None:
    """Import a file a client uploaded to the bucket (the tasks function's ``import`` task).

    Runs again after a failed or cut-short invocation (Lambda retries an event invocation twice):
    the chunks an earlier run stored are stored once. A file refused for what it holds is not
    retried; its status says why. The uploaded object is deleted once the import is over."""
    ledger = runtime.import_ledger
    status = ledger.get(database, import_id)
    if status is None or status.state in ("done", "failed", "awaiting_upload") or status.upload is None:
        return status
    uploads = runtime.uploads
    if uploads is None:
        raise ServiceUnavailable("this deployment has no upload store")
    etag, upload = status.upload_etag, status.upload
    if etag is not None and not upload.endswith(CLAIMED_SUFFIX) and not _claim(runtime, uploads, status, upload, etag):
        return status
    key = status.upload
    size = status.bytes_total

    def opener() -> IO[bytes]:
        return uploads.open_ranges(key, size)

    try:
        status = runtime.importer.resume(status, opener)
    except ArcsError as exc:
        if not exc.client_error:
            raise
        logger.warning("import %s of database %s refused: %s", import_id, database, exc.message)
    runtime.store.delete(key)
    if (uploaded := key.removesuffix(CLAIMED_SUFFIX)) != key:
        runtime.store.delete(uploaded)  # the client's upload, never read once claimed
    return status


#: The import's own copy of an upload, beside it: no upload URL names it, so it cannot change.
CLAIMED_SUFFIX = ".claimed"


def _claim(runtime: Runtime, uploads: UploadStore, status: ImportStatus, upload: str, etag: str) -> bool:
    """Import from a copy of the version completed; False (the import failed) if it changed since."""
    claimed = upload + CLAIMED_SUFFIX
    if not uploads.claim(upload, etag, claimed):
        status.state, status.error_status = "failed", 409
        status.error = "the uploaded file changed or vanished after its upload was completed; import it again"
        status.finished_at, status.upload = time.time(), None
        runtime.import_ledger.put(status)
        runtime.store.delete(upload)
        return False
    status.upload = claimed
    runtime.import_ledger.put(status)
    return True
