"""The standalone server: one process, local adapters, the same routes as the Lambda functions.

HTTP requests become API Gateway proxy events (``arcs.proxy``), the token is checked by the same
code as the Lambda authorizer, and the routes of ``arcs.api`` answer. A background thread drains
the disk spool into Parquet through ``arcs.ingest``, as the ingest function drains SQS; another
runs compaction on a timer (``ARCS_COMPACTION_INTERVAL_S``; 0: only when triggered), as
EventBridge runs the compact function.

The HTTP front (``AsgiApp`` + ``run_http``) takes any ``handle(method, path, query, headers,
body)``: the local serverless emulation (``arcs.emulation``) serves its API Gateway with it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from types import FrameType
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from arcs.api import PUBLIC_PATHS, build_app, error_response
from arcs.errors import ArcsError, PayloadTooLarge, ServiceUnavailable
from arcs.ingest import QueuedWrite
from arcs.proxy import HttpResponse, http_response, proxy_event
from arcs.runtime import LocalRuntime
from arcs.schedule import CompactionTimer, PeriodicTask
from arcs.tokens import extract_token

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: ``(method, path, query string, headers, body, client address) -> response``: what the HTTP front serves.
HttpHandler = Callable[[str, str, str, dict[str, str], bytes, str | None], HttpResponse]


class _LambdaContext:
    """What the resolver may read from a Lambda context; nothing of it matters outside Lambda."""

    function_name = "arcs-standalone"
    aws_request_id = "local"


class Gateway:
    """Authorizer + router for one process; each worker thread has its own resolver (they keep state)."""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self._local = threading.local()

    def _app(self) -> APIGatewayRestResolver:
        app: APIGatewayRestResolver | None = getattr(self._local, "app", None)
        if app is None:
            app = self._local.app = build_app(self.runtime)
        return app

    def warm(self) -> None:
        """Import the routes and open DuckDB now, so the first request costs what any other does."""
        self._app()
        self.runtime.engine.connection()

    def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, client: str | None = None
    ) -> HttpResponse:
        context = None
        if path not in PUBLIC_PATHS:
            try:
                event = proxy_event(method, path, query, headers, b"")
                token = extract_token(headers, event["queryStringParameters"] or {})
                context = self.runtime.tokens.verify(token, client).to_context()
            except ArcsError as exc:
                return error_http_response(exc)
        event = proxy_event(method, path, query, headers, body, context)
        return http_response(self._app().resolve(event, _LambdaContext()))  # type: ignore[arg-type]


def error_http_response(exc: ArcsError) -> HttpResponse:
    response = error_response(exc)
    headers = {"Content-Type": "application/json", **{k: str(v) for k, v in response.headers.items()}}
    return HttpResponse(exc.status, headers, str(response.body).encode())


class AsgiApp:
    """ASGI over a blocking ``handle``: bodies read (up to the payload limit), then handled on worker threads."""

    def __init__(
        self, handle: HttpHandler, max_request_bytes: int, workers: int, queue_timeout_s: float = 10.0
    ) -> None:
        self.handle = handle
        self.max_request_bytes = max_request_bytes
        self.workers = workers
        self.queue_timeout_s = queue_timeout_s
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="arcs-http")
        # Admission: at most ``workers`` requests run; the rest wait up to ``queue_timeout_s`` and
        # are then told to come back (503 + Retry-After) instead of piling up without bound.
        self._slots: asyncio.Semaphore | None = None

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        try:
            body = await self._read_body(receive, headers)
        except ArcsError as exc:
            await self._send(send, error_http_response(exc))
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        try:
            await asyncio.wait_for(self._slots.acquire(), self.queue_timeout_s)
        except TimeoutError:
            busy = ServiceUnavailable(
                f"the server is busy: no worker freed up within {self.queue_timeout_s:g} s; retry", retry_after_s=1
            )
            await self._send(send, error_http_response(busy))
            return
        try:
            loop = asyncio.get_running_loop()
            response = await loop.run_in_executor(
                self.executor,
                self.handle,
                scope["method"],
                scope["path"],
                scope.get("query_string", b"").decode("latin-1"),
                headers,
                body,
                (scope.get("client") or (None,))[0],
            )
        finally:
            self._slots.release()
        await self._send(send, response)

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> bytes:
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_request_bytes:
            raise PayloadTooLarge(f"body is {declared} bytes; the limit is {self.max_request_bytes}")
        chunks = bytearray()
        more = True
        while more:
            message = await receive()
            chunks += message.get("body", b"")
            more = message.get("more_body", False)
            if len(chunks) > self.max_request_bytes:
                raise PayloadTooLarge(f"body exceeds the limit of {self.max_request_bytes} bytes")
        return bytes(chunks)

    @staticmethod
    async def _send(send: Send, response: HttpResponse) -> None:
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
        headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})


class IngestLoop(threading.Thread):
    """Drains the spool into Parquet, with the SQS event source's batching semantics."""

    def __init__(self, runtime: LocalRuntime) -> None:
        super().__init__(name="arcs-ingest", daemon=True)
        self.runtime = runtime
        self.ingestor = runtime.ingestor()
        self._stop_event = threading.Event()
        self.idle = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        spool = self.runtime.spool
        settings = self.runtime.settings
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
                self.drain_once(entries)
            except Exception:
                logger.exception("ingest loop error; retrying")
                self._stop_event.wait(1.0)

    def drain_once(self, entries: list[Any]) -> None:
        spool = self.runtime.spool
        by_handle = {entry.handle: entry for entry in entries}
        writes = [
            QueuedWrite(entry.handle, entry.write_id, partial(spool.read, entry), batch=entry.batch)
            for entry in entries
        ]
        result = self.ingestor.ingest(writes)
        spool.done([by_handle[h] for h in (*result.committed, *result.already_done)])
        for handle, reason in result.poison.items():
            logger.error("write %s can never be ingested (%s); moved to the dead-letter folder", handle, reason)
            spool.dead_letter(by_handle[handle])
        for handle, reason in result.failed.items():
            if spool.failed(by_handle[handle]):
                logger.error(
                    "write %s failed %d times (%s); moved to the dead-letter folder", handle, spool.max_attempts, reason
                )
            else:
                logger.warning("write %s not ingested yet: %s", handle, reason)


def banner(url: str, token: str | None) -> str:
    shown = token or "$ARCS_TOKEN"
    lines = [f"Arc Serverless is running at {url}", ""]
    if token:
        lines += ["Admin token (shown only this once; keep it):", f"  {token}", ""]
    else:
        lines += ["The admin token was printed on first start; export it as ARCS_TOKEN.", ""]
    lines += [
        "Write a point, then query it (ingest takes about a second):",
        f"  curl -sS -X POST '{url}/api/v1/write/line-protocol' -H 'Authorization: Bearer {shown}' "
        "--data-binary 'cpu,host=server01 usage=64.2'",
        f"  curl -sS -X POST '{url}/api/v1/query' -H 'Authorization: Bearer {shown}' "
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


def run_http(app: AsgiApp, host: str, port: int, token: str | None) -> None:
    """Serve ``app`` until Ctrl-C or SIGTERM; once bound, print the banner and the listening line."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    original_startup = server.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets)
        bound_port = port
        if server.servers and server.servers[0].sockets:
            bound_port = server.servers[0].sockets[0].getsockname()[1]
        print(banner(f"http://{host}:{bound_port}", token), flush=True)
        print(json.dumps({"event": "listening", "host": host, "port": bound_port}), flush=True)

    server.startup = startup  # type: ignore[method-assign]
    with _sigterm_as_interrupt():
        try:
            server.run()
        except KeyboardInterrupt:
            logger.info("stopping")


def serve(runtime: LocalRuntime, host: str, port: int, workers: int = 8) -> None:
    token = runtime.tokens.bootstrap(runtime.settings.bootstrap_token)
    ingest = IngestLoop(runtime)
    ingest.start()
    cq_timer = continuous_queries_timer(runtime)
    retention_timer = retention_schedule(runtime)
    trigger = runtime.compaction_trigger
    timer = trigger if isinstance(trigger, CompactionTimer) else None
    if timer is not None:
        timer.start()
    gateway = Gateway(runtime)
    gateway.warm()  # before the server says it is listening
    app = AsgiApp(gateway.handle, runtime.settings.max_request_bytes, workers, runtime.settings.queue_timeout_s)
    try:
        run_http(app, host, port, token)
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
