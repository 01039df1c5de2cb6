"""Ingest: queued writes -> time-sorted Parquet, one file per (database, measurement, hour).

Exactly-once visibility under at-least-once delivery (the argument is in docs/ingest.md):

1. Every queued write carries a write id. The catalog keeps a *marker* per write id naming the
   ingest attempt (commit id) that claimed it, and a *commit record* per attempt that is stored
   once, as either ``committed`` (with its files) or ``aborted``, never both.
2. An attempt claims each write by compare-and-set on its marker, writes its Parquet files under
   keys that contain its own commit id (``If-None-Match``), then stores its commit record. That
   single conditional write is the commit point; only then are the file records (what readers
   list) added.
3. A write whose marker names an earlier attempt is done if that attempt committed (its file
   records are rolled forward); if the attempt is unknown it is aborted by storing its record as
   ``aborted`` first — a slow attempt that wakes up later then fails to commit and cleans up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from arcs import layout, metrics, tracing
from arcs.errors import ArcsError, BadRequest, DiskFull
from arcs.names import TIME_COLUMN
from arcs.ports import CommitRecord, FileRecord, IngestCatalog, ObjectStore, QueueDelivery
from arcs.write.batch import ColumnarBody, MeasurementRows, WriteBatch, time_order
from arcs.write.decoders import columnar_lane
from arcs.write.file_writers import StoredFile, store_file
from arcs.write.file_writers import file_writers as file_writers_of
from arcs.write.parquet_encoding import tags_in_one_form
from arcs.write.schema import SchemaRegistry

logger = logging.getLogger(__name__)


#: Decoded bytes one ingest attempt holds at most (``Settings.ingest_group_bytes`` sets it).
DEFAULT_GROUP_BYTES = 256 * 1024 * 1024
#: Files of one attempt encoded and stored at once (``Settings.ingest_file_writers`` sets it).
DEFAULT_FILE_WRITERS = 8


@dataclass(frozen=True, slots=True)
class QueuedWrite:
    handle: str  # what the queue knows the message by (SQS message id, spool record)
    write_id: str
    load: Callable[[], bytes]
    cleanup: Callable[[], None] | None = None  # e.g. delete a claim-check object once committed
    batch: WriteBatch | None = None  # what ``load`` would give, decoded, if the queue kept it
    queued_at: float | None = None  # epoch seconds it was queued, where the queue says


@dataclass
class IngestResult:
    committed: list[str] = field(default_factory=list)  # handles stored by this attempt
    already_done: list[str] = field(default_factory=list)  # handles a previous attempt stored
    failed: dict[str, str] = field(default_factory=dict)  # handle -> reason
    poison: dict[str, str] = field(default_factory=dict)  # handle -> why it can never succeed
    # Handles of ``failed`` whose attempt found no room on the disk: not the writes' fault, so a
    # queue that counts failed deliveries towards its dead letters (the spool) does not count these.
    unavailable: set[str] = field(default_factory=set)
    # Handles left for a later batch, untouched (no marker claimed): a database's share of this
    # attempt was spent. The queue keeps them as they are (the spool's pending records).
    deferred: list[str] = field(default_factory=list)
    files: list[FileRecord] = field(default_factory=list)
    groups: int = 0  # attempts this call made, each at most ``group_bytes`` (or one write)
    largest_group_bytes: int = 0  # the most decoded bytes one of them held


def _measure(writes: Sequence[QueuedWrite], result: IngestResult) -> None:
    """The batch's outcomes, and how long each write it committed waited to become queryable."""
    metrics.record({metrics.INGEST_BATCHES: 1, metrics.INGEST_FILES: len(result.files)})
    outcomes = {
        "committed": len(result.committed),
        "duplicate": len(result.already_done),
        "failed": len(result.failed),
        "poison": len(result.poison),
        "deferred": len(result.deferred),
    }
    for outcome, count in outcomes.items():
        if count:
            metrics.record({metrics.INGEST_WRITES: count}, outcome=outcome)
    committed = set(result.committed)
    now = time.time()
    waited = [max(0.0, now - w.queued_at) for w in writes if w.handle in committed and w.queued_at is not None]
    if waited:
        metrics.record({metrics.WRITE_TO_QUERYABLE: waited})


FaultHook = Callable[[str], None]


def _no_fault(step: str) -> None:
    return None


class Ingestor:
    def __init__(
        self,
        catalog: IngestCatalog,
        store: ObjectStore,
        prefix: str = "",
        row_group_rows: int = 122_880,
        fault: FaultHook = _no_fault,
        tables_per_database: int | None = None,
        group_bytes: int = DEFAULT_GROUP_BYTES,
        file_writers: int = DEFAULT_FILE_WRITERS,
        file_processes: bool = False,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.prefix = prefix
        self.row_group_rows = row_group_rows
        # Each database's share of one attempt, in measurement tables (each at least a file to
        # write): a writer of many measurements cannot hold the others' writes for long. Only
        # where deferred writes stay queued untouched (the standalone server's spool); None: all.
        self.tables_per_database = tables_per_database
        if group_bytes < 1:
            raise ValueError(f"group_bytes must be at least 1, got {group_bytes}")
        self.group_bytes = group_bytes
        if file_writers < 1:
            raise ValueError(f"file_writers must be at least 1, got {file_writers}")
        # A write spanning many hours is a file per hour, each fsynced (or PUT) before the commit:
        # one after the other, the attempt waits on the disk or the network with a core idle.
        # Side by side on threads, or on worker processes (``file_processes``; a local store's
        # only, see ``arcs.write.file_writers``).
        self._writers = file_writers_of(file_writers, file_processes) if file_writers > 1 else None
        # Tests stop the protocol between any two steps through this hook.
        self._fault = fault

    def start_writers(self) -> None:
        """Start the file writers now rather than on the first file (worker processes import for
        about half a second)."""
        if self._writers is not None:
            self._writers.start()

    def close_writers(self) -> None:
        """Stop the file writers (a later file starts them again)."""
        if self._writers is not None:
            self._writers.close()

    def ingest(self, writes: Sequence[QueuedWrite]) -> IngestResult:
        """Store ``writes`` in groups of at most ``group_bytes`` decoded bytes, in queue order.

        Each group is one attempt of the protocol (its own commit id), written to Parquet before
        the next group is decoded, so what one call holds is bounded by bytes whatever the number
        of writes; a write larger than the bound is a group of its own.
        """
        with tracing.subsegment("## ingest") as annotate:
            result = self._ingest(writes)
            databases = {f.database for f in result.files}
            measurements = {f.measurement for f in result.files}
            annotate(
                database=next(iter(databases)) if len(databases) == 1 else None,
                measurement=next(iter(measurements)) if len(measurements) == 1 else None,
                writes=len(writes),
                files=len(result.files),
                committed=len(result.committed),
                duplicate=len(result.already_done),
                failed=len(result.failed),
                poison=len(result.poison),
                deferred=len(result.deferred),
            )
            return result

    def _ingest(self, writes: Sequence[QueuedWrite]) -> IngestResult:
        result = IngestResult()
        markers = self.catalog.get_markers(w.write_id for w in writes)
        self._fault("markers-read")
        shares = _Shares(self.tables_per_database)
        group: list[Candidate] = []
        held = 0
        seen: set[str] = set()
        for write in writes:
            if write.write_id in seen:  # the same write twice in one batch
                result.already_done.append(write.handle)
                continue
            seen.add(write.write_id)
            try:
                previous = markers.get(write.write_id)
                if previous is not None and self._settled(previous):
                    result.already_done.append(write.handle)
                    continue
                try:
                    batch = write.batch if write.batch is not None else WriteBatch.from_bytes(write.load())
                    batch = columnar_lane.scanned(batch)
                except ArcsError as exc:
                    if exc.client_error:
                        result.poison[write.handle] = exc.message
                        continue
                    raise
            except ArcsError as exc:
                result.failed[write.handle] = exc.message
                continue
            if not shares.take(batch):
                result.deferred.append(write.handle)
                continue
            size = decoded_bytes(batch)
            if group and held + size > self.group_bytes:
                self._commit_group(group, held, result)
                group, held = [], 0
            group.append((write, batch, previous))
            held += size
        if group:
            self._commit_group(group, held, result)
        _measure(writes, result)
        return result

    def _commit_group(self, candidates: list[Candidate], held: int, result: IngestResult) -> None:
        """One attempt: claim the group's writes, write their files, store the commit record."""
        result.groups += 1
        result.largest_group_bytes = max(result.largest_group_bytes, held)
        commit_id = layout.sequence_id()  # time-ordered: file names order the writes
        won = self.catalog.swap_markers([(w.write_id, previous) for w, _b, previous in candidates], commit_id)
        claimed: list[tuple[QueuedWrite, WriteBatch]] = []
        for write, batch, _previous in candidates:
            if write.write_id in won:
                claimed.append((write, batch))
            else:
                result.failed[write.handle] = "claimed concurrently by another ingest attempt"
        del candidates[:]  # the claimed list holds what is still needed
        self._fault("claimed")
        if not claimed:
            return
        try:
            with tracing.subsegment("## ingest group"):
                parts = columnar_lane.tables([batch for _write, batch in claimed])
                files = self._write_files(commit_id, parts)
                self._ensure_schemas(parts)
                self._fault("files-written")
                committed = self.catalog.put_commit_if_absent(CommitRecord(commit_id, "committed", tuple(files)))
        except Exception as exc:
            logger.exception("ingest attempt %s failed before its commit", commit_id)
            for write, _batch in claimed:
                result.failed[write.handle] = f"ingest failed: {exc}"
                if isinstance(exc, DiskFull):
                    result.unavailable.add(write.handle)
            return
        if not committed:
            # Another attempt aborted ours while we were slow: its redelivery owns these writes now.
            self._delete_quietly([f.key for f in files])
            for write, _batch in claimed:
                result.failed[write.handle] = "ingest attempt was aborted by a newer one"
            return
        self._fault("committed")
        self.catalog.put_files(files)
        self._fault("files-listed")
        result.files.extend(files)
        for write, _batch in claimed:
            result.committed.append(write.handle)
            if write.cleanup is not None:
                try:
                    write.cleanup()
                except Exception:
                    logger.warning("could not clean up after write %s", write.write_id, exc_info=True)

    def _settled(self, commit_id: str) -> bool:
        """True if ``commit_id`` committed (its files are then made visible); False if it never will."""
        record = self.catalog.get_commit(commit_id)
        if record is None:
            if self.catalog.put_commit_if_absent(CommitRecord(commit_id, "aborted")):
                return False
            record = self.catalog.get_commit(commit_id)
            if record is None:
                raise ArcsError(f"commit record {commit_id} vanished")
        if record.status == "committed":
            self.catalog.put_files(record.files)  # roll forward: a crash may have come before this
            return True
        return False

    def _ensure_schemas(self, parts: list[tuple[str, MeasurementRows]]) -> None:
        """Committed rows always have a schema to be queried by.

        The edge recorded it before queueing, but the database may have been dropped since (and an
        edge's cache may not know): recreate what is missing. Harmless when nothing is.
        """
        registry = SchemaRegistry(self.catalog)
        for database, part in parts:
            try:
                registry.apply(database, [part])
            except BadRequest as exc:
                # A concurrent writer recreated the measurement with other types; union_by_name
                # still reads both, so store the rows rather than lose an acknowledged write.
                logger.warning("schema of a queued write no longer matches: %s", exc.message)

    def _write_files(self, commit_id: str, parts: list[tuple[str, MeasurementRows]]) -> list[FileRecord]:
        groups: dict[tuple[str, str], tuple[list[pa.Table], dict[str, None], list[tuple[int, int] | None]]] = {}
        for database, part in parts:
            tables, tags, ranges = groups.setdefault((database, part.measurement), ([], {}, []))
            tables.append(part.table)
            tags.update(dict.fromkeys(part.tags))
            ranges.append(part.time_range)
        pieces: list[tuple[str, str, pa.Table, list[str]]] = []  # one per file: an hour's rows
        for (database, measurement), (tables, tags, ranges) in groups.items():
            # Promoting types (for a column missing from some parts) costs more than checking for it.
            same = all(t.schema == tables[0].schema for t in tables[1:])
            if not same:  # tags may come as dictionaries (the lane's fill) beside plain strings
                tables[:] = tags_in_one_form(tables)
            columns = None
            ordered = time_order(ranges)
            span = None
            if ordered is not None:
                order, span = ordered
                if not same:  # the columns keep the order the parts brought them in
                    columns = pa.unify_schemas([t.schema for t in tables], promote_options="permissive").names
                tables[:] = [tables[i] for i in order]  # parts in time order: their rows are, all together
            table = pa.concat_tables(tables, promote_options="default" if same else "permissive")
            del tables[:]  # the concatenation holds the data now; drop the parts' references
            if any(pa.types.is_dictionary(c.type) and c.num_chunks > 1 for c in table.columns):
                table = table.unify_dictionaries()  # one dictionary per tag for the whole file
            if columns is not None and table.column_names != columns:
                table = table.select(columns)
            if span is not None and layout.hour_from_nanos(span[0]) == layout.hour_from_nanos(span[1]):
                runs = [(0, table.num_rows)]  # in order and within one hour, as the readers said
            else:
                # A stable sort: rows with equal times keep their ingest order.
                if span is None and not _is_sorted(table.column(TIME_COLUMN)):
                    table = table.take(pc.sort_indices(table, [(TIME_COLUMN, "ascending")]))
                runs = _runs(_hours(table.column(TIME_COLUMN)))
            for start, stop in runs:
                pieces.append((database, measurement, table.slice(start, stop - start), list(tags)))
        # Every file is durable before this returns (the commit record follows); a failure is
        # raised once all have finished, so none is still being written when the attempt fails.
        keys = [
            self._key(commit_id, index, database, measurement, rows)
            for index, (database, measurement, rows, _tags) in enumerate(pieces)
        ]
        if self._writers is None or len(pieces) < 2:
            return [self._write_file(commit_id, key, *piece) for key, piece in zip(keys, pieces, strict=True)]
        stored = self._writers.store(
            self.store,
            [(key, rows, tags) for key, (_d, _m, rows, tags) in zip(keys, pieces, strict=True)],
            self.row_group_rows,
        )
        records = [
            self._record(commit_id, key, database, measurement, rows, done)
            for key, (database, measurement, rows, _tags), done in zip(keys, pieces, stored, strict=True)
        ]
        errors: list[BaseException] = []
        for _record in records:
            try:
                self._fault("file-written")
            except BaseException as exc:  # each file's step is seen, as each writer saw its own; the first raised
                errors.append(exc)
        if errors:
            raise errors[0]
        return records

    def _key(self, commit_id: str, index: int, database: str, measurement: str, rows: pa.Table) -> str:
        hour = layout.hour_from_nanos(rows.column(TIME_COLUMN)[0].value)
        return layout.data_key(self.prefix, database, measurement, hour, f"{commit_id}-{index:04d}.parquet")

    def _write_file(
        self, commit_id: str, key: str, database: str, measurement: str, rows: pa.Table, tags: list[str]
    ) -> FileRecord:
        stored = store_file(self.store, key, rows, tags, self.row_group_rows)
        record = self._record(commit_id, key, database, measurement, rows, stored)
        self._fault("file-written")
        return record

    def _record(
        self, commit_id: str, key: str, database: str, measurement: str, rows: pa.Table, stored: StoredFile
    ) -> FileRecord:
        """The catalog's record of a stored file (``rows``: its rows before points written twice were
        merged, which keeps their first and last times)."""
        if stored.existed:
            logger.info("data file %s already present", key)
        times = rows.column(TIME_COLUMN)
        first, last = times[0].value, times[-1].value  # the rows are in time order (nanoseconds)
        # The catalog keeps whole microseconds, rounded outward: pruning by them never drops a row.
        low, high = first // 1000, -(-last // 1000)
        hour = layout.hour_from_nanos(first)
        return FileRecord(database, measurement, hour, key, stored.rows, stored.size, low, high, commit_id)

    def _delete_quietly(self, keys: list[str]) -> None:
        for key in keys:
            try:
                self.store.delete(key)
            except Exception:
                logger.warning("could not delete orphan data file %s", key, exc_info=True)


Candidate = tuple[QueuedWrite, WriteBatch, str | None]


class _Shares:
    """Each database's share of one call, in measurement tables: its writes are taken in queue
    order while they fit ``share`` (its first write always); once one does not, the rest of that
    database's writes are deferred, so no newer write of a database is stored before an older one
    (compaction keeps the last written). ``None``: everything is taken."""

    def __init__(self, share: int | None) -> None:
        self.share = share
        self.spent: dict[str, int] = {}
        self.full: set[str] = set()

    def take(self, batch: WriteBatch) -> bool:
        if self.share is None:
            return True
        database, cost = batch.database, len(batch.parts)
        if database in self.full or (database in self.spent and self.spent[database] + cost > self.share):
            self.full.add(database)
            return False
        self.spent[database] = self.spent.get(database, 0) + cost
        return True


def decoded_bytes(batch: WriteBatch) -> int:
    """What a decoded write holds in memory: its tables' buffers, or a queued body's bytes (the
    table it fills is about as big)."""
    return sum(len(part.body) if isinstance(part, ColumnarBody) else part.table.nbytes for part in batch.parts)


def _is_sorted(times: pa.ChunkedArray) -> bool:
    """Time-ordered input is the common case; knowing it saves sorting (a copy of the batch)."""
    previous_last = None
    for chunk in times.chunks:
        if not len(chunk):
            continue
        if previous_last is not None and chunk[0].value < previous_last:
            return False
        if len(chunk) > 1 and not pc.all(pc.greater_equal(chunk.slice(1), chunk.slice(0, len(chunk) - 1))).as_py():
            return False
        previous_last = chunk[-1].value
    return True


_HOUR_NANOS = 3_600_000_000_000


def _hours(times: pa.ChunkedArray) -> pa.Array:
    """Each time's hour as a number: integer kernels (floor_temporal looks up the zone per value)."""
    nanos = times.combine_chunks().view(pa.int64())
    hours = pc.divide(nanos, _HOUR_NANOS)  # truncates toward zero: the floor from 1970 on
    if pc.min(nanos).as_py() < 0:
        # Before 1970 the floor is one less where the division left a remainder.
        behind = pc.less(nanos, pc.multiply(hours, _HOUR_NANOS))
        hours = pc.subtract(hours, behind.cast(pa.int64()))
    return hours


def _runs(values: pa.Array) -> list[tuple[int, int]]:
    """[start, stop) index ranges of equal consecutive values in a sorted array."""
    count = len(values)
    if count == 0:
        return []
    changes = pc.not_equal(values.slice(1), values.slice(0, count - 1))
    if changes.null_count:
        changes = changes.fill_null(True)
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changes).to_pylist())]
    return list(zip(starts, [*starts[1:], count], strict=True))


def ingest_delivery(ingestor: Ingestor, delivery: QueueDelivery) -> IngestResult:
    """Store a batch the write queue delivered and tell the queue what became of each write."""
    result = ingestor.ingest(delivery.writes())
    delivery.settle(result)
    return result
