"""The standalone server: one process, local adapters, the same routes as the Lambda functions.

Its gateway (``arcs.http.gateway``) answers behind the HTTP front (``arcs.http.asgi``, bounded by
``arcs.http.limits``). A background thread drains the disk spool into Parquet through
``arcs.write.ingest``, as the ingest function drains SQS; another runs compaction on a timer
(``ARCS_COMPACTION_INTERVAL_S``; 0: only when triggered), as EventBridge runs the tasks function.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from arcs import metrics
from arcs.adapters.local.queue import SpoolDelivery
from arcs.http.asgi import AsgiApp, Uploads
from arcs.http.gateway import Gateway
from arcs.http.limits import HttpLimits, head_timed_protocol
from arcs.lifecycle.schedule import CompactionTimer, PeriodicTask
from arcs.runtime import LocalRuntime
from arcs.write.ingest import IngestResult, ingest_delivery

logger = logging.getLogger(__name__)


class IngestLoop(threading.Thread):
    """Drains the spool into Parquet, with the SQS event source's batching semantics."""

    def __init__(self, runtime: LocalRuntime, file_processes: bool = False) -> None:
        super().__init__(name="arcs-ingest", daemon=True)
        self.runtime = runtime
        # The server's files are encoded on worker processes (``ARCS_INGEST_FILE_PROCESSES``): its
        # HTTP front then keeps the interpreter's lock to itself (``arcs.write.file_writers``).
        self.ingestor = runtime.ingestor(file_processes=file_processes)
        self._stop_event = threading.Event()
        self.idle = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        spool = self.runtime.spool
        settings = self.runtime.settings
        try:
            self.ingestor.start_writers()
        except Exception:
            logger.exception("ingest's file writers could not start; each write starts them")
        while not self._stop_event.is_set():
            try:
                entries = spool.take(settings.ingest_batch_messages)
                if not entries:
                    self.idle.set()
                    spool.wait(0.5)
                    continue
                self.idle.clear()
                if len(entries) < settings.ingest_batch_messages and settings.ingest_batch_window_s > 0:
                    # The batching window: a moment for more writes to join this batch.
                    self._stop_event.wait(settings.ingest_batch_window_s)
                    entries = spool.take(settings.ingest_batch_messages)
                if self.drain_once(entries).unavailable:
                    self._stop_event.wait(1.0)  # the disk is full: room comes back, not in a moment
            except Exception:
                logger.exception("ingest loop error; retrying")
                self._stop_event.wait(1.0)

    def drain_once(self, entries: list[Any]) -> IngestResult:
        return ingest_delivery(self.ingestor, SpoolDelivery(self.runtime.spool, entries))


def banner(url: str, token: str | None, configured: bool = False) -> str:
    """What a user sees on start: where the server is, the admin token once (only if the server made
    it), and examples that read the token from ``$ARCS_TOKEN`` rather than repeating it."""
    lines = [f"Arc Serverless is running at {url}", ""]
    if token and not configured:
        lines += ["Admin token (shown only this once; keep it):", f"  export ARCS_TOKEN={token}", ""]
    elif token:
        lines += ["The admin token is the one set in ARCS_BOOTSTRAP_TOKEN; export it as ARCS_TOKEN.", ""]
    else:
        lines += ["The admin token was printed on first start; export it as ARCS_TOKEN.", ""]
    # Double quotes, so the shell expands $ARCS_TOKEN; a body makes curl POST, and -L then follows a
    # handed-off result (303) with a GET, which an explicit -X POST would turn into a POST.
    lines += [
        "Write a point, then query it (ingest takes about a second):",
        f"  curl -sS '{url}/api/v1/write/line-protocol' -H \"Authorization: Bearer $ARCS_TOKEN\" "
        "--data-binary 'cpu,host=server01 usage=64.2'",
        f"  curl -sS -L '{url}/api/v1/query' -H \"Authorization: Bearer $ARCS_TOKEN\" "
        "-H 'Content-Type: application/json' -d '{\"sql\": \"SELECT * FROM cpu\"}'",
    ]
    return "\n".join(lines)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the process like Ctrl-C: by an exception that lets ``finally`` blocks run.

    uvicorn catches both signals while it serves, shuts down gracefully, restores the previous
    handlers and raises the signal again; with Python's default SIGTERM handler that would end
    the process before anything after the server could stop.
    """

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_http(
    app: AsgiApp,
    host: str,
    port: int,
    token: str | None,
    configured_token: bool = False,
    graceful_s: int | None = None,
) -> None:
    """Serve ``app`` until Ctrl-C or SIGTERM; once bound, print the banner and the listening line.

    On the signal the listener closes at once; requests in flight get ``graceful_s`` seconds to
    finish (None: as long as they take), then their connections are closed unanswered.
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        http=head_timed_protocol(app.limits.head_timeout_s, app.limits.max_waiting_heads),
        # asyncio's loop, whose order of reads and callbacks the bound on waiting heads relies on.
        loop="asyncio",
        # The caller is the peer of the connection: uvicorn would otherwise take X-Forwarded-For
        # from loopback peers as the address, and a caller could name a new one per failed token.
        proxy_headers=False,
        # Connections (and requests in flight) beyond this are answered 503 at once. uvicorn counts
        # the connection asking among those open, so its limit is one above the number served.
        limit_concurrency=app.limits.max_connections + 1,
        timeout_graceful_shutdown=graceful_s,
    )
    server = uvicorn.Server(config)
    original_startup = server.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets)
        bound_port = port
        if server.servers and server.servers[0].sockets:
            bound_port = server.servers[0].sockets[0].getsockname()[1]
        print(banner(f"http://{host}:{bound_port}", token, configured_token), flush=True)
        print(json.dumps({"event": "listening", "host": host, "port": bound_port}), flush=True)

    server.startup = startup  # type: ignore[method-assign]
    with _sigterm_as_interrupt():
        try:
            server.run()
        except KeyboardInterrupt:
            logger.info("stopping")


def serve(runtime: LocalRuntime, host: str, port: int, workers: int = 8) -> None:
    token = runtime.tokens.bootstrap(runtime.settings.bootstrap_token)
    ingest = IngestLoop(runtime, file_processes=runtime.settings.ingest_file_processes)
    ingest.start()
    cq_timer = continuous_queries_timer(runtime)
    retention_timer = retention_schedule(runtime)
    trigger = runtime.compaction_trigger
    timer = trigger if isinstance(trigger, CompactionTimer) else None
    if timer is not None:
        timer.start()
    recorder = metrics.PrometheusRecorder()
    metrics.use(recorder)
    gateway = Gateway(runtime, recorder)
    gateway.warm()  # before the server says it is listening
    resume_imports(runtime)
    limits = HttpLimits.of(runtime.settings, workers)
    uploads = Uploads(runtime.upload_dir, runtime.settings.import_max_bytes, gateway.handle_upload)
    app = AsgiApp(gateway.handle, limits, screen=gateway.screen, uploads=uploads)
    try:
        run_http(app, host, port, token, configured_token=runtime.settings.bootstrap_token is not None)
    finally:
        app.close()
        if cq_timer is not None:
            cq_timer.stop()
        if retention_timer is not None:
            retention_timer.stop()
        ingest.stop()
        if timer is not None:
            timer.stop()  # a job in progress finishes or is recovered by the next start
        ingest.join(timeout=10)
        ingest.ingestor.close_writers()


def resume_imports(runtime: LocalRuntime) -> threading.Thread | None:
    """Finish, in the background, the imports a crash stopped while they stored their chunks (their
    files wait in the upload directory); uploads no import holds any more are removed."""
    directory = runtime.upload_dir
    unfinished = [s for s in runtime.import_ledger.unfinished() if s.upload and Path(s.upload).is_file()]
    keep = {Path(s.upload).name for s in unfinished if s.upload}
    if directory.is_dir():
        for leftover in directory.iterdir():
            if leftover.name not in keep:
                leftover.unlink(missing_ok=True)
    if not unfinished:
        return None

    from arcs.write.imports.chunks import file_opener

    def resume() -> None:
        for status in unfinished:
            path = Path(str(status.upload))
            try:
                runtime.importer.resume(status, file_opener(str(path)))
                logger.info("import %s of database %s finished after a restart", status.import_id, status.database)
            except Exception:
                logger.exception("import %s of database %s could not be finished", status.import_id, status.database)
            finally:
                path.unlink(missing_ok=True)

    thread = threading.Thread(target=resume, name="arcs-import-resume", daemon=True)
    thread.start()
    return thread


def continuous_queries_timer(runtime: LocalRuntime) -> PeriodicTask | None:
    """The standalone server's schedule of continuous queries (``ARCS_CQ_TIMER_S``; 0 turns it off)."""
    every_s = runtime.settings.cq_timer_s
    if every_s <= 0:
        return None
    timer = PeriodicTask("continuous-queries", every_s, lambda: runtime.continuous_queries.run_due(datetime.now(UTC)))
    timer.start()
    return timer


def retention_schedule(runtime: LocalRuntime) -> PeriodicTask | None:
    """The standalone server's retention schedule: policies and the continuous queries' derived rules
    (``ARCS_RETENTION_INTERVAL_S``; 0 turns it off)."""
    every_s = runtime.settings.retention_interval_s
    if every_s <= 0:
        return None
    timer = PeriodicTask("retention", every_s, runtime.retention.run_due)
    timer.start()
    return timer
