"""Ingest's data files: a table of one hour's rows made a Parquet file and stored under its key,
several at a time, on threads or, for a store on a local disk, on worker processes.

Why processes there: the standalone server's HTTP front and its ingest share one interpreter
lock, and each file's encoding hands that lock back and forth some sixty times (every Arrow call
and system call releases it). Measured on two cores (5 M line-protocol points from 4 clients), the
front alone acknowledged 1.67 M rows/s on 1.2 cores and ingest alone stored 2.1 M rows/s, but
together in one process they reached 1.0 M rows/s on 1.3 cores: the lock spent most of its time
passing between threads. Worker processes have their own. Each piece travels as an Arrow IPC
stream (a copy of its rows only; pickling a slice of a table copies the whole table's buffers).

On S3 (the ingest function, ``arcs local``) a file's PUT waits on the network, threads overlap
those waits, and Lambda has no shared memory for process pools: threads.
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from arcs.ports import ObjectStore
from arcs.write.batch import type_name
from arcs.write.parquet_encoding import column_encodings, for_parquet
from arcs.write.points import merge_points

logger = logging.getLogger(__name__)

# Row groups: enough of them for DuckDB to scan a file on several threads, none tiny.
MIN_ROW_GROUP_ROWS = 16_384
TARGET_ROW_GROUPS_PER_FILE = 4


def parquet_options(schema: pa.Schema, tags: Sequence[str]) -> dict[str, object]:
    """How ingest writes a data file of ``schema`` (``pq.write_table``'s options, row groups aside)."""
    return {
        # Ingest-time files are compacted later (to zstd): snappy, which every Parquet reader knows.
        # With these encodings it costs the least for about the same size (measured on the ingest
        # benchmark's batch, per 1,000 rows: snappy 66 us and 1.74 MB, lz4 67 us and 1.73 MB, zstd
        # level 1 79 us and 1.69 MB, none 64 us and 1.90 MB).
        "compression": "snappy",
        # Tags repeat, so dictionaries pay; for fields (mostly distinct numbers) building one cost
        # as much as the rest of the write and made the file bigger.
        "use_dictionary": [tag for tag in tags if tag in schema.names],
        "column_encoding": column_encodings(schema),
        # Min and max of strings were a fifth of the write and prune nothing here: the rows are in
        # time order, so each row group spans its tags' whole range. Time's (and the numbers',
        # which cost little) are kept: queries prune by them, and compaction reads time's.
        "write_statistics": [f.name for f in schema if type_name(f.type) != "string"],
        "write_page_checksum": True,  # lets compaction tell a damaged file from a good one
        "store_schema": False,  # the file's own types read back as ours (``for_parquet``)
    }


@dataclass(frozen=True, slots=True)
class StoredFile:
    rows: int
    size: int
    #: The key was there already: a retry of this very attempt (keys hold its unique id).
    existed: bool


def store_file(store: ObjectStore, key: str, table: pa.Table, tags: Sequence[str], row_group_rows: int) -> StoredFile:
    """``table`` (one hour's rows, in time order) as a Parquet file at ``key``, durable on return."""
    # A point written twice in the batch is stored once, merged (docs/compaction.md).
    table = merge_points(table, tags)
    rows = table.num_rows
    row_group = max(MIN_ROW_GROUP_ROWS, math.ceil(rows / TARGET_ROW_GROUPS_PER_FILE))
    sink = pa.BufferOutputStream()
    options = parquet_options(table.schema, tags)
    pq.write_table(for_parquet(table, tags), sink, row_group_size=min(row_group, row_group_rows), **options)
    data = memoryview(sink.getvalue())  # the Arrow buffer itself, not a copy
    return StoredFile(rows, len(data), existed=not store.put_if_absent(key, data))


#: One file to write: its key, its rows (one hour's, in time order) and the table's tag columns.
Piece = tuple[str, pa.Table, Sequence[str]]


def _store_sent(
    store: ObjectStore, stream: pa.Buffer, pieces: list[tuple[str, int, list[str]]], row_group_rows: int
) -> list[StoredFile]:
    """``store_file`` for each piece, in a worker process: the pieces' rows one after the other in
    ``stream`` (an Arrow IPC stream), each piece's key, row count and tags beside it."""
    table = pa.ipc.open_stream(stream).read_all()
    sliced, start = [], 0
    for key, rows, tags in pieces:
        sliced.append((key, table.slice(start, rows), tags))
        start += rows
    return _store_here(store, sliced, row_group_rows)


def _ready() -> None:
    """A worker's first task: its imports done before a write waits on them."""


def _start_worker(parent: int) -> None:
    """A worker's start. Ctrl-C reaches the whole process group, but the server decides when its
    workers stop (after the attempt in progress), not the terminal. A server killed outright
    (``kill -9``) tells them nothing, and they would wait for work forever: they watch for it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="arcs-parent-watch", daemon=True).start()


class FileWriters:
    """Stores files ``size`` at a time, on threads or worker processes; one per process and kind
    (``file_writers``), as a Lambda function builds an ``Ingestor`` per invocation."""

    def __init__(self, size: int, processes: bool) -> None:
        self.size = size
        self.processes = processes
        self._lock = threading.Lock()
        self._pool: Executor | None = None

    def store(self, store: ObjectStore, pieces: Sequence[Piece], row_group_rows: int) -> list[StoredFile]:
        """Every piece stored, in order. Raises the first failure once all have finished, so none is
        still being written when the caller gives up.

        A worker process that dies (killed, out of memory) takes its tasks with it: the shares it
        left are sent once more to new workers. Storing a piece again is harmless: its key is the
        attempt's own, and a file the dead worker had stored is found there (``existed``). Should
        the new workers die too, the shares still left are stored in this process, as threads
        would: a worker's death is never the writes' fault, and must not count against them."""
        if not self.processes:
            pool = self._executor()
            return self._results([pool.submit(_store_here, store, [piece], row_group_rows) for piece in pieces])
        chunks = _chunks(pieces, 4 * self.size)
        pending = [self._submit_chunk(store, chunk, row_group_rows) for chunk in chunks]
        for last_try in (False, True):
            wait(pending)
            lost = [index for index, f in enumerate(pending) if isinstance(f.exception(), BrokenProcessPool)]
            if not lost:
                break
            self._replace_broken()
            if last_try:
                logger.warning("ingest's worker processes keep dying: %d shares of files stored here", len(lost))
            for index in lost:
                retry = _stored_here if last_try else self._submit_chunk
                pending[index] = retry(store, chunks[index], row_group_rows)
        return self._results(pending)

    @staticmethod
    def _results(pending: list[Future[list[StoredFile]]]) -> list[StoredFile]:
        wait(pending)
        errors = [exc for f in pending if (exc := f.exception()) is not None]
        if errors:
            raise errors[0]
        return [stored for f in pending for stored in f.result()]

    def _submit_chunk(
        self, store: ObjectStore, chunk: Sequence[Piece], row_group_rows: int
    ) -> Future[list[StoredFile]]:
        """A worker's share: the pieces' rows as one IPC stream (a copy of those rows only; pickling
        a slice of a table would copy the whole table's buffers)."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, chunk[0][1].schema) as writer:
            for _key, table, _tags in chunk:
                writer.write_table(table)
        described = [(key, table.num_rows, list(tags)) for key, table, tags in chunk]
        stream = sink.getvalue()
        try:
            return self._executor().submit(_store_sent, store, stream, described, row_group_rows)
        except (BrokenProcessPool, OSError, ValueError):
            # A pool whose worker died before it noticed fails the submit while it starts another
            # worker ("OSError: handle is closed", "ValueError: bad value(s) in fds_to_keep"): it
            # is as broken, and the share goes to new workers as a dead worker's does.
            self._replace_broken()
        try:
            return self._executor().submit(_store_sent, store, stream, described, row_group_rows)
        except (BrokenProcessPool, OSError, ValueError) as exc:
            lost: Future[list[StoredFile]] = Future()  # ``store`` stores it here
            lost.set_exception(exc if isinstance(exc, BrokenProcessPool) else BrokenProcessPool(str(exc)))
            return lost

    def start(self) -> None:
        """Start the workers now (a process imports Arrow and Parquet for about half a second)."""
        if self.processes:
            for started in [self._executor().submit(_ready) for _ in range(self.size)]:
                started.result()

    def _executor(self) -> Executor:
        with self._lock:
            if self._pool is None:
                if self.processes:
                    # spawn: a fork would copy a server's threads' locks mid-use.
                    context = multiprocessing.get_context("spawn")
                    self._pool = ProcessPoolExecutor(
                        self.size, mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
                    )
                else:
                    self._pool = ThreadPoolExecutor(self.size, thread_name_prefix="arcs-ingest-file")
            return self._pool

    def _replace_broken(self) -> None:
        with self._lock:
            broken, self._pool = self._pool, None
        if broken is not None:
            logger.warning("an ingest worker process died; starting new ones")
            broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _store_here(store: ObjectStore, pieces: Sequence[Piece], row_group_rows: int) -> list[StoredFile]:
    """``pieces`` stored in this process (a thread's task, or a share no worker could keep)."""
    return [store_file(store, key, table, tags, row_group_rows) for key, table, tags in pieces]


def _stored_here(store: ObjectStore, chunk: Sequence[Piece], row_group_rows: int) -> Future[list[StoredFile]]:
    """A share stored in this process, as a finished future."""
    done: Future[list[StoredFile]] = Future()
    try:
        done.set_result(_store_here(store, chunk, row_group_rows))
    except Exception as exc:
        done.set_exception(exc)
    return done


def _chunks(pieces: Sequence[Piece], count: int) -> list[list[Piece]]:
    """``pieces`` in order, in about ``count`` runs of similar rows, each of one schema: a task per
    file would cost the server's lock more in sending it than the file costs to write."""
    total = sum(table.num_rows for _key, table, _tags in pieces)
    share = max(1, -(-total // count))
    chunks: list[list[Piece]] = []
    rows = 0
    for piece in pieces:
        if not chunks or rows >= share or not piece[1].schema.equals(chunks[-1][0][1].schema):
            chunks.append([])
            rows = 0
        chunks[-1].append(piece)
        rows += piece[1].num_rows
    return chunks


@functools.cache
def file_writers(size: int, processes: bool = False) -> FileWriters:
    """The process's writers of one size and kind: a pool each time would start them again on
    every call of a function that builds an ``Ingestor`` per invocation."""
    return FileWriters(size, processes)
