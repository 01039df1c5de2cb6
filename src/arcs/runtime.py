"""Wiring: adapters chosen by settings, use cases built on them, once per process.

Each Lambda function uses a part of the runtime, so each part is built, and its modules imported,
on first use: the query function never loads the write decoders, the ingest path or SQLite; the
edge and the authorizer never load DuckDB. Cold starts pay only for what their function runs.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from arcs import metrics
from arcs.allocator import keep_large_blocks_on_heap
from arcs.auth.failures import AuthFailures
from arcs.auth.tokens import TokenService
from arcs.errors import ServiceUnavailable, StorageFault
from arcs.ports import Catalog, DownloadStore, ObjectStore, TokenStore, UploadStore, WriteQueue
from arcs.settings import Settings

if TYPE_CHECKING:
    from arcs.adapters.local.queue import Spool
    from arcs.adapters.local.sqlite_database import SqliteDatabase
    from arcs.continuous_queries.service import ContinuousQueries
    from arcs.lifecycle.compaction.compactor import Compactor
    from arcs.lifecycle.deletion import Deleter
    from arcs.lifecycle.retention import Retention
    from arcs.lifecycle.schedule import CompactionTrigger
    from arcs.query.engine import Engine, S3Access
    from arcs.query.handoff import ResultHandoff
    from arcs.query.service import QueryService
    from arcs.write.edge import WriteService
    from arcs.write.import_status import ImportLedger
    from arcs.write.imports.store import Importer
    from arcs.write.ingest import Ingestor

logger = logging.getLogger(__name__)

#: The standalone server's ingest: a database's share of one attempt, in measurement tables
#: (``Ingestor.tables_per_database``): a few seconds of Parquet files written and synced at most.
INGEST_TABLES_PER_DATABASE = 1_000


def ingest_file_writers(settings: Settings, processes: bool = False) -> int:
    """How many files one ingest attempt stores at once: ``ARCS_INGEST_FILE_WRITERS``, else by the
    store and the writers' kind. An S3 PUT waits tens of milliseconds on the network, so eight
    threads overlap well; a local disk writes and syncs a file in under a millisecond, so beyond
    two threads a core they only contend for the interpreter's lock (5 M line-protocol points on
    two cores: about 850,000 rows/s queryable with four, 750,000 to 830,000 with eight), and worker
    processes, which encode without it, are one a core."""
    from arcs.write.ingest import DEFAULT_FILE_WRITERS

    if settings.ingest_file_writers is not None:
        return settings.ingest_file_writers
    cores = os.cpu_count() or 1
    if processes:
        return min(DEFAULT_FILE_WRITERS, cores)
    if settings.backend == "local":
        return min(DEFAULT_FILE_WRITERS, 2 * cores)
    return DEFAULT_FILE_WRITERS


class Runtime:
    def __init__(
        self,
        settings: Settings,
        store: ObjectStore,
        catalog: Catalog,
        token_store: TokenStore,
        queue: WriteQueue,
        allowed_roots: list[str],
        s3_access: Callable[[], S3Access] | None = None,
        downloads: DownloadStore | None = None,
        invoke: Callable[[str, bytes], None] | None = None,
        uploads: UploadStore | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.catalog = catalog
        self.queue = queue
        failures = AuthFailures(settings.auth_failures_per_minute)
        self.tokens = TokenService(token_store, settings.token_cache_ttl_s, failures)
        self._allowed_roots = allowed_roots
        self._s3_access = s3_access
        self._downloads = downloads
        self._invoke = invoke
        #: Where clients put import files themselves (presigned URLs); None on the standalone server.
        self.uploads = uploads
        #: Who holds this process's compaction leases (None: a name of its own, never reclaimed).
        self.holder: str | None = None

    @functools.cached_property
    def writes(self) -> WriteService:
        from arcs.write.edge import WriteService  # lazy: the decoders (msgpack, zstd) serve the edge only

        return WriteService(
            self.catalog,
            self.queue,
            self.settings.max_request_bytes,
            self.settings.max_decompressed_bytes,
            envelope_compression=None if self.settings.backend == "local" else "zstd",
        )

    @functools.cached_property
    def engine(self) -> Engine:
        from arcs.query.engine import Engine  # lazy: DuckDB is for the query function and the server only

        return Engine(
            self._allowed_roots,
            self.work_dir,
            self.settings.duckdb_threads,
            self.settings.duckdb_memory_limit,
            self._s3_access,
            query_timeout_s=self.settings.query_timeout_s or None,
            max_temp_size=self.settings.duckdb_max_temp_size,
        )

    @functools.cached_property
    def queries(self) -> QueryService:
        from arcs.query.result_cache import ResultCache
        from arcs.query.service import QueryService  # lazy: with the engine, for the functions that query

        settings = self.settings
        cache = (
            ResultCache(settings.result_cache_max_bytes, settings.result_cache_ttl_s) if settings.result_cache else None
        )
        return QueryService(
            self.catalog,
            self.store,
            self.engine,
            settings.query_max_rows,
            cache,
            settings.query_max_result_bytes,
            settings.slow_query_ms,
        )

    @functools.cached_property
    def result_handoff(self) -> ResultHandoff | None:
        """How results too big for a Lambda response reach the caller; None where every result fits inline."""
        if self._downloads is None:
            return None
        from arcs.query.handoff import ResultHandoff

        settings = self.settings
        return ResultHandoff(
            self._downloads, settings.prefix, settings.query_inline_max_bytes, settings.query_result_url_expiry_s
        )

    @functools.cached_property
    def importer(self) -> Importer:
        from arcs.write.imports.store import Importer, IngestSink  # lazy: with the decoders, for the routes that import

        # One file at a time: an import's chunks follow the file's order, a few hours each, so side
        # by side writers gain little there, and each writer thread's heap adds to the memory an
        # import must keep bounded (a 200 MB file peaked 167 MiB above the start with two or more
        # writers, under 150 MiB with one).
        sink = IngestSink(self.ingestor(file_writers=1))
        return Importer(self.writes.schemas, sink, self.import_ledger, self.settings.import_max_bytes)

    @functools.cached_property
    def edge_importer(self) -> Importer:
        """The import route's: on AWS the edge function queues the chunks as writes (it stores no
        data itself), so its answer means queued, as a write's; the standalone server stores them."""
        if self.settings.backend == "local":
            return self.importer
        from arcs.write.imports.store import Importer, QueueSink

        writes = self.writes
        sink = QueueSink(writes.queue, writes.envelope_compression)
        return Importer(writes.schemas, sink, self.import_ledger, self.settings.import_max_bytes)

    @functools.cached_property
    def import_ledger(self) -> ImportLedger:
        from arcs.write.import_status import ImportLedger

        return ImportLedger(self.store, self.settings.prefix)

    def ingestor(self, file_writers: int | None = None, file_processes: bool = False) -> Ingestor:
        """An ``Ingestor`` on this runtime's store; ``file_processes``: its file writers are worker
        processes (the standalone server's, on a local disk; see ``arcs.write.file_writers``)."""
        from arcs.write.ingest import Ingestor  # lazy: Parquet writing is the ingest function's alone

        # The spool keeps a deferred write queued as it is; SQS would count it a failed delivery.
        share = INGEST_TABLES_PER_DATABASE if self.settings.backend == "local" else None
        return Ingestor(
            self.catalog,
            self.store,
            self.settings.prefix,
            self.settings.row_group_rows,
            tables_per_database=share,
            group_bytes=self.settings.ingest_group_bytes,
            file_writers=ingest_file_writers(self.settings, file_processes) if file_writers is None else file_writers,
            file_processes=file_processes,
        )

    @functools.cached_property
    def continuous_queries(self) -> ContinuousQueries:
        from arcs.continuous_queries.service import ContinuousQueries  # lazy: it needs both queries and writes

        return ContinuousQueries(
            self.catalog,
            self.queries,
            self.writes,
            delay_s=self.settings.cq_delay_s,
            max_windows=self.settings.cq_max_windows,
        )

    @property
    def work_dir(self) -> Path:
        return self.settings.work_dir or (
            self.settings.data_dir / "work"
            if self.settings.backend == "local"
            else Path(tempfile.gettempdir()) / "arcs"
        )

    @functools.cached_property
    def compactor(self) -> Compactor:
        from arcs.lifecycle.compaction.compactor import Compactor  # lazy: the tasks function and the server only

        return Compactor(
            self.catalog,
            self.store,
            self.settings.prefix,
            self.settings.compaction,
            self.work_dir / "compaction",
            self.settings.row_group_rows,
            holder=self.holder,
        )

    @functools.cached_property
    def retention(self) -> Retention:
        from arcs.lifecycle.retention import Retention  # lazy: it rewrites through the compactor

        return Retention(self.catalog, self.compactor)

    @functools.cached_property
    def deleter(self) -> Deleter:
        from arcs.lifecycle.deletion import Deleter  # lazy: it rewrites through the compactor

        return Deleter(self.catalog, self.store, self.compactor, self.settings.row_group_rows)

    @functools.cached_property
    def compaction_trigger(self) -> CompactionTrigger:
        """What starts a compaction run: the server's timer locally, the tasks function in AWS."""
        from arcs.lifecycle.schedule import CompactionTimer, LambdaCompactionTrigger

        if self.settings.backend == "local" or self._invoke is None:
            return CompactionTimer(lambda: self.compactor, self.settings.compaction.interval_s)
        return LambdaCompactionTrigger(self._invoke, self.settings.compaction.function_name)

    def start_import(self, database: str, import_id: str) -> None:
        """Have the tasks function import an uploaded file, asynchronously (Lambda's event
        invocation: retried twice on failure, which stores each chunk once all the same)."""
        function = self.settings.compaction.function_name
        if self._invoke is None or not function:
            raise ServiceUnavailable("no tasks function is configured to import uploaded files")
        payload = {"task": "import", "database": database, "import_id": import_id}
        try:
            self._invoke(function, json.dumps(payload).encode())
        except Exception as exc:
            raise StorageFault(f"could not start the import: {exc}") from exc

    def use_invoker(self, invoke: Callable[[str, bytes], None]) -> None:
        """Invoke functions asynchronously through ``invoke``: where the local emulation stands in
        for the Lambda service (the compaction trigger invokes the tasks function)."""
        self._invoke = invoke
        self.__dict__.pop("compaction_trigger", None)

    def ready(self) -> bool:
        try:
            self.catalog.list_databases()
        except Exception:
            logger.warning("catalog not reachable", exc_info=True)
            return False
        return True

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
        """The process's runtime: built once per Lambda container or server process."""
        if settings.backend == "local":
            return local_runtime(settings)
        keep_large_blocks_on_heap(settings.mmap_threshold_mb * 1024 * 1024)
        from arcs.adapters.aws.wiring import aws_runtime_parts

        parts = aws_runtime_parts(settings)
        # Lambda answers at most 6 MiB: bigger results are handed off through the bucket.
        return cls(
            settings,
            parts.store,
            parts.catalog,
            parts.tokens,
            parts.queue,
            parts.allowed_roots,
            parts.s3_access,
            downloads=parts.store,
            invoke=parts.invoke,
            uploads=parts.uploads,
        )


class LocalRuntime(Runtime):
    """The standalone server's wiring: everything under one data directory."""

    spool: Spool
    sqlite: SqliteDatabase

    def reclaim_compaction(self) -> list[str]:
        """Free the leases this data directory's holder took before a crash, and recover the jobs
        they held in the background; the partitions freed. Only with the directory's claim held."""
        if self.holder is None:
            return []  # not serving the directory: its leases may be a live server's
        reclaimed = self.compactor.reclaim_leases()
        if reclaimed:
            logger.info("reclaimed %d compaction leases of this data directory's last run", len(reclaimed))
            threading.Thread(target=self.compactor.recover_now, name="arcs-compaction-recovery", daemon=True).start()
        return reclaimed

    @property
    def upload_dir(self) -> Path:
        """Where import files wait while they are imported (outside the storage root)."""
        return self.settings.data_dir.resolve() / "imports"

    def ready(self) -> bool:
        # Not ready while a write could not be made durable (a full disk): writes would get 503.
        if not self.spool.writable():
            logger.warning("the spool cannot take writes (is the disk full?)")
            return False
        return super().ready()


def local_runtime(settings: Settings, serve: bool = False) -> LocalRuntime:
    """The standalone server's runtime on ``settings.data_dir``; ``serve``: the process serves it,
    so it claims the directory (``arcs.adapters.local.holder``) and its compaction leases carry the directory's
    holder name. Tools that only read or load a directory leave ``serve`` off."""
    # Imported here: SQLite and the spool are the standalone server's, never a Lambda function's.
    from arcs.adapters.local.wiring import local_runtime_parts

    keep_large_blocks_on_heap(settings.mmap_threshold_mb * 1024 * 1024)
    parts = local_runtime_parts(settings.data_dir, serve)
    runtime = LocalRuntime(settings, parts.store, parts.catalog, parts.tokens, parts.spool, parts.allowed_roots)
    runtime.spool = parts.spool
    runtime.sqlite = parts.sqlite
    runtime.holder = parts.holder
    return runtime


@functools.cache
def lambda_runtime() -> Runtime:
    """One runtime per Lambda container, built on first use and reused while the container is warm;
    its measurements leave as CloudWatch embedded metrics (``arcs.metrics``)."""
    settings = Settings.from_env()
    metrics.use(metrics.EmfRecorder(settings.metrics_namespace))
    return Runtime.from_settings(settings)
