"""The standalone server: one process, local adapters, the same routes as the Lambda functions.

HTTP requests become API Gateway proxy events (``arcs.http.proxy``), the token is checked by the same
code as the Lambda authorizer, and the routes of ``arcs.http.api`` answer. A background thread drains
the disk spool into Parquet through ``arcs.write.ingest``, as the ingest function drains SQS; another
runs compaction on a timer (``ARCS_COMPACTION_INTERVAL_S``; 0: only when triggered), as
EventBridge runs the compact function.

The HTTP front (``AsgiApp`` + ``run_http``) takes any ``handle(method, path, query, headers,
body)``: the local serverless emulation (``arcs.emulation``) serves its API Gateway with it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import parse_qsl

from arcs import metrics
from arcs.auth.tokens import Principal, extract_token
from arcs.errors import (
    DISK_FULL_RETRY_S,
    ArcsError,
    PayloadTooLarge,
    RequestTimeout,
    ServiceUnavailable,
    StorageFault,
    TooManyRequests,
)
from arcs.http.api import PUBLIC_PATHS, build_app
from arcs.http.proxy import Admission, HttpResponse, http_response, proxy_event
from arcs.http.resolver import error_response
from arcs.http.routes.imports import UPLOAD_CONTEXT
from arcs.http.routes.writes import is_write_path, write_database
from arcs.lifecycle.schedule import CompactionTimer, PeriodicTask
from arcs.runtime import LocalRuntime
from arcs.settings import Settings
from arcs.write.ingest import QueuedWrite
from arcs.write.paths import is_import_path
from arcs.write.uploads import FileBody

logger = logging.getLogger(__name__)
#: The standalone server's Prometheus endpoint (the Lambda functions emit CloudWatch metrics instead).
METRICS_PATH = "/metrics"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: ``(method, path, query string, headers, body, client address) -> response``: what the HTTP front serves.
HttpHandler = Callable[[str, str, str, dict[str, str], bytes, str | None], HttpResponse]


#: ``(method, path, query string, headers, client address) -> admission``: a check made before
#: the body is read.
HttpScreen = Callable[[str, str, str, dict[str, str], str | None], Admission]
#: ``(method, path, query string, headers, the file streamed to disk, client address) -> response``.
UploadHandler = Callable[[str, str, str, dict[str, str], dict[str, Any], str | None], HttpResponse]


@dataclass(frozen=True)
class Uploads:
    """Where the standalone server streams an import's file, never holding it in memory."""

    directory: Path
    max_bytes: int
    handle: UploadHandler


class _ClientGone(Exception):
    """The client disconnected before its body arrived: there is no one to answer."""


class _LambdaContext:
    """What the resolver may read from a Lambda context; nothing of it matters outside Lambda."""

    function_name = "arcs-standalone"
    aws_request_id = "local"


class Gateway:
    """Authorizer + router for one process, serving many requests at once.

    The resolver keeps each request's state its own (``arcs.http.resolver.RequestScopedResolver``), so one
    resolver serves every worker thread.
    """

    def __init__(self, runtime: LocalRuntime, recorder: metrics.PrometheusRecorder | None = None) -> None:
        self.runtime = runtime
        self.app = build_app(runtime)
        #: Where ``/metrics`` reads the measurements; None: the route is not served.
        self.recorder = recorder

    def warm(self) -> None:
        """Open DuckDB now, so the first request costs what any other does."""
        self.runtime.engine.connection()

    def screen(
        self, method: str, path: str, query: str, headers: dict[str, str], client: str | None = None
    ) -> Admission:
        """What can be judged before the body is read: the token, and for a write its permission and
        database scope (the write route checks them again)."""
        if path in PUBLIC_PATHS or path == METRICS_PATH:
            return Admission()
        params = dict(parse_qsl(query, keep_blank_values=True))
        try:
            principal = self._principal(params, headers, client)
            if is_write_path(path):
                lowered = {key.lower(): value for key, value in headers.items()}
                principal.require("write")
                principal.require_database(write_database(path, lowered.get, params.get))
        except ArcsError as exc:
            return Admission(refusal=error_http_response(exc))
        return Admission(caller=principal.token_id)

    def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, client: str | None = None
    ) -> HttpResponse:
        if path == METRICS_PATH and self.recorder is not None:
            return self.scrape(method)
        context = None
        if path not in PUBLIC_PATHS:
            # Checked again here, as the Lambda authorizer runs for every request: a verified token
            # comes from the cache, and a token revoked since the screen is refused.
            try:
                context = self._principal(dict(parse_qsl(query, keep_blank_values=True)), headers, client).to_context()
            except ArcsError as exc:
                return error_http_response(exc)
        event = proxy_event(method, path, query, headers, body, context)
        return http_response(self.app.resolve(event, _LambdaContext()))

    def scrape(self, method: str) -> HttpResponse:
        """``/metrics``: every measurement in Prometheus' text format, the spool's backlog read now.

        Like Arc's, it needs no token, so that a scraper holds no secret: its labels name no
        database and no token (``arcs.metrics``)."""
        assert self.recorder is not None
        if method not in ("GET", "HEAD"):
            return HttpResponse(
                405,
                {"Content-Type": "application/json", "Allow": "GET, HEAD"},
                b'{"success":false,"error":"method not allowed"}',
            )
        depth, oldest_s = self.runtime.spool.backlog()
        self.recorder.record({metrics.QUEUE_DEPTH: depth, metrics.QUEUE_OLDEST_AGE: oldest_s}, {})
        body, content_type = self.recorder.render()
        return HttpResponse(200, {"Content-Type": content_type}, b"" if method == "HEAD" else body)

    def handle_upload(
        self,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        upload: dict[str, Any],
        client: str | None = None,
    ) -> HttpResponse:
        """An import whose file the HTTP front streamed to disk: the route reads it from there."""
        try:
            context = self._principal(dict(parse_qsl(query, keep_blank_values=True)), headers, client).to_context()
        except ArcsError as exc:
            return error_http_response(exc)
        event = proxy_event(method, path, query, headers, b"", context)
        event["requestContext"][UPLOAD_CONTEXT] = upload
        return http_response(self.app.resolve(event, _LambdaContext()))

    def _principal(self, params: dict[str, str], headers: dict[str, str], client: str | None) -> Principal:
        """The caller, as the Lambda authorizer would find it (``params``: the query's, last value kept)."""
        return self.runtime.tokens.verify(extract_token(headers, params), client)


def error_http_response(exc: ArcsError) -> HttpResponse:
    response = error_response(exc)
    headers = {"Content-Type": "application/json", **{k: str(v) for k, v in response.headers.items()}}
    return HttpResponse(exc.status, headers, str(response.body).encode())


@dataclass(frozen=True)
class HttpLimits:
    """What one caller may hold of the HTTP front, so that no caller can starve the others.

    Memory for bodies is bounded by ``max_bodies`` x ``max_request_bytes`` bytes; a body is read only
    once its request's head passed the token check, and must arrive within ``body_timeout_s``;
    connections beyond ``max_connections`` are answered 503 at once (uvicorn's limit).
    """

    max_request_bytes: int
    workers: int = 8
    #: How long a request waits for a worker (or a body slot) before a 503 with Retry-After.
    queue_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    max_connections: int = 256
    #: A connection's next request head must arrive within this (after it opens, or after the last
    #: response), else it is closed: silent connections cannot fill ``max_connections``.
    head_timeout_s: float = 10.0
    #: Bodies of routes other than writes (SQL, token and definition documents) are small.
    max_control_bytes: int = 1024 * 1024

    @property
    def max_requests_per_caller(self) -> int:
        """Requests one caller may have in flight at once, so no one token takes every worker."""
        return max(1, self.workers)

    @property
    def max_waiting_heads(self) -> int:
        """Connections that may wait for a request head at once (new, or idle between requests):
        half the connection limit, so that the other half stays for requests being served."""
        return max(1, self.max_connections // 2)

    @property
    def max_bodies(self) -> int:
        """Bodies read or held at once: the requests running, and as many waiting for a worker."""
        return 2 * self.workers

    @classmethod
    def of(cls, settings: Settings, workers: int) -> HttpLimits:
        return cls(
            settings.max_request_bytes,
            workers,
            settings.queue_timeout_s,
            settings.http_body_timeout_s,
            settings.http_max_connections,
            settings.http_head_timeout_s,
        )


class _ByteBudget:
    """Bytes that request bodies may hold at once; a body reserves its size before it is read."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        self._changed = asyncio.Condition()

    async def reserve(self, size: int, timeout_s: float) -> None:
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: self.free >= size), timeout_s)
            except TimeoutError:
                raise ServiceUnavailable(
                    f"the server is busy: no room for another request body within {timeout_s:g} s; retry",
                    retry_after_s=1,
                ) from None
            self.free -= size

    def release(self, size: int) -> None:
        self.free += size
        # Waiters are woken from a task: release runs in the event loop, where the lock is free.
        asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()


ABANDONED = HttpResponse(
    504,
    {"Content-Type": "application/json", "Connection": "close"},
    b'{"success":false,"error":"the server stopped before this request finished; it may or may not have taken effect"}',
)


class AsgiApp:
    """ASGI over a blocking ``handle``: each request screened on its head, its body read (bounded in
    size, time and number), then handled on a worker thread."""

    def __init__(
        self, handle: HttpHandler, limits: HttpLimits, screen: HttpScreen | None = None, uploads: Uploads | None = None
    ) -> None:
        self.handle = handle
        self.screen = screen
        self.uploads = uploads
        self.limits = limits
        self.executor = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="arcs-http")
        # Streamed bodies are read here, a piece at a time, once their request left its worker.
        self._streams = ThreadPoolExecutor(max_workers=limits.max_connections, thread_name_prefix="arcs-stream")
        # Admission: at most ``workers`` requests run, and bodies in flight reserve at most
        # ``max_bodies`` x ``max_request_bytes`` bytes (each what it declares, or its route's limit);
        # the rest wait up to ``queue_timeout_s`` and are then told to come back (503 + Retry-After)
        # instead of piling up without bound. Slow bodies hold bytes, not a share of the requests, so
        # small requests get in beside them. (asyncio objects bind to the loop that first waits.)
        self._slots = asyncio.Semaphore(limits.workers)
        self._bodies = _ByteBudget(limits.max_bodies * limits.max_request_bytes)
        self._by_caller: dict[str, int] = {}  # requests in flight per caller (event loop only)

    def close(self, wait: bool = True) -> None:
        """Stop the workers; ``wait=False`` leaves a request still running to finish on its own."""
        self.executor.shutdown(wait=wait, cancel_futures=True)
        self._streams.shutdown(wait=wait, cancel_futures=True)

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
        method: str = scope["method"]
        path: str = scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        client: str | None = (scope.get("client") or (None,))[0]
        loop = asyncio.get_running_loop()
        limit = self.limits.max_request_bytes if is_write_path(path) else self.limits.max_control_bytes
        upload = self.uploads is not None and method == "POST" and is_import_path(path)
        if upload and self.uploads is not None:
            limit = self.uploads.max_bytes  # streamed to disk: it holds no memory
        if path in PUBLIC_PATHS:
            limit = 0  # health checks carry no body, and need no token: none is read
        caller: str | None = None
        declared = headers.get("content-length", "")
        try:
            if declared.isdigit() and int(declared) > limit:
                raise PayloadTooLarge(f"body is {declared} bytes; the limit for this route is {limit}")
            if self.screen is not None:
                # A caller without a valid token (or, for a write, without the right to make it)
                # never gets a byte of its body read.
                admission = await loop.run_in_executor(self.executor, self.screen, method, path, query, headers, client)
                if admission.refusal is not None:
                    await self._send(send, admission.refusal)
                    return
                caller = admission.caller
            self._count_caller(caller)
        except ArcsError as exc:
            await self._send(send, error_http_response(exc))
            return
        try:
            # What the body may take: its declared length; a chunked one, the route's limit; a request
            # without either has no body (HTTP/1.1's framing).
            if upload:
                response = await self._answer_upload(receive, (method, path, query, headers, client), loop)
            else:
                if declared.isdigit():
                    reserved = int(declared)
                else:
                    reserved = limit if "chunked" in headers.get("transfer-encoding", "").lower() else 0
                head = (method, path, query, headers, client)
                response = await self._answer(receive, head, limit, reserved, loop)
        except asyncio.CancelledError:
            # The server stopped before this request finished (its grace ran out): its outcome is
            # unknown, as after a gateway time-out, and is answered so rather than as a 500.
            response = ABANDONED
        finally:
            self._uncount_caller(caller)
        if response is not None:
            await self._send(send, response)

    async def _answer(
        self,
        receive: Receive,
        head: tuple[str, str, str, dict[str, str], str | None],
        limit: int,
        reserved: int,
        loop: asyncio.AbstractEventLoop,
    ) -> HttpResponse | None:
        """The response once ``reserved`` bytes are set aside, the body read and a worker handled it
        (None: the client left)."""
        method, path, query, headers, client = head
        try:
            await self._bodies.reserve(reserved, self.limits.queue_timeout_s)
        except ArcsError as exc:
            return error_http_response(exc)
        try:
            try:
                body = await self._read_body(receive, limit)
                await self._acquire(self._slots, "no worker freed up")
            except ArcsError as exc:
                return error_http_response(exc)
            except _ClientGone:
                return None
            try:
                return await loop.run_in_executor(
                    self.executor, self.handle, method, path, query, headers, body, client
                )
            finally:
                self._slots.release()
        finally:
            self._bodies.release(reserved)

    async def _answer_upload(
        self,
        receive: Receive,
        head: tuple[str, str, str, dict[str, str], str | None],
        loop: asyncio.AbstractEventLoop,
    ) -> HttpResponse | None:
        """An import: its file streamed to a file of its own (multipart or raw), then handled."""
        assert self.uploads is not None
        method, path, query, headers, client = head
        directory = self.uploads.directory
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"{os.urandom(12).hex()}.upload"
        try:
            try:
                # Closing flushes what the file still buffers, so a full disk may show only then.
                with open(target, "wb") as sink:
                    body = FileBody(headers.get("content-type"), sink.write, self.uploads.max_bytes)  # type: ignore[arg-type]
                    await self._stream_body(receive, body)
                    body.finish()
                    await loop.run_in_executor(self.executor, os.fsync, sink.fileno())
            except ArcsError as exc:
                return error_http_response(exc)
            except _ClientGone:
                return None
            except OSError as exc:  # a full disk: nothing was imported
                fault = StorageFault(f"the file cannot be kept on disk: {exc}", retry_after_s=DISK_FULL_RETRY_S)
                return error_http_response(fault)
            try:
                await self._acquire(self._slots, "no worker freed up")
            except ArcsError as exc:
                return error_http_response(exc)
            try:
                upload = {"path": str(target), "sha256": body.sha256, "bytes": body.size}
                return await loop.run_in_executor(
                    self.executor, self.uploads.handle, method, path, query, headers, upload, client
                )
            finally:
                self._slots.release()
        finally:
            target.unlink(missing_ok=True)

    async def _stream_body(self, receive: Receive, body: FileBody) -> None:
        """Feed the body to ``body`` as it arrives; each piece must come within the body time-out
        (a file of gigabytes takes longer than any fixed deadline; a stalled one ends)."""
        timeout = self.limits.body_timeout_s
        more = True
        while more:
            try:
                message = await asyncio.wait_for(receive(), timeout)
            except TimeoutError:
                raise RequestTimeout(f"the file stopped arriving for {timeout:g} s") from None
            if message["type"] == "http.disconnect":
                raise _ClientGone
            body.write(message.get("body", b""))
            more = message.get("more_body", False)

    def _count_caller(self, caller: str | None) -> None:
        """One more request of ``caller`` in flight: 429 past its share, so no one token holds them all."""
        if caller is None:
            return
        held = self._by_caller.get(caller, 0)
        if held >= self.limits.max_requests_per_caller:
            raise TooManyRequests(
                f"this token has {held} requests in flight, the most one caller may; retry when one is answered",
                retry_after_s=1,
            )
        self._by_caller[caller] = held + 1

    def _uncount_caller(self, caller: str | None) -> None:
        if caller is None:
            return
        held = self._by_caller.pop(caller, 1) - 1
        if held > 0:
            self._by_caller[caller] = held

    async def _acquire(self, slots: asyncio.Semaphore, what: str) -> None:
        try:
            await asyncio.wait_for(slots.acquire(), self.limits.queue_timeout_s)
        except TimeoutError:
            raise ServiceUnavailable(
                f"the server is busy: {what} within {self.limits.queue_timeout_s:g} s; retry", retry_after_s=1
            ) from None

    async def _read_body(self, receive: Receive, limit: int) -> bytes:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.body_timeout_s
        chunks = bytearray()
        more = True
        while more:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise RequestTimeout(
                    f"the request body did not arrive within {self.limits.body_timeout_s:g} s"
                ) from None
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunks += message.get("body", b"")
            more = message.get("more_body", False)
            if len(chunks) > limit:
                raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
        return bytes(chunks)

    async def _send(self, send: Send, response: HttpResponse) -> None:
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
        if response.stream is None:
            headers.append((b"content-length", str(len(response.body)).encode()))
            await send({"type": "http.response.start", "status": response.status, "headers": headers})
            await send({"type": "http.response.body", "body": response.body})
            return
        # Streamed: chunked, each piece sent as it comes. A stream that breaks raises, and the
        # server drops the connection: the client sees a response cut short, never a whole one.
        headers = [(name, value) for name, value in headers if name != b"content-length"]
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        loop = asyncio.get_running_loop()
        if response.body:
            await send({"type": "http.response.body", "body": response.body, "more_body": True})
        while (piece := await loop.run_in_executor(self._streams, next, response.stream, None)) is not None:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


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
            QueuedWrite(
                entry.handle, entry.write_id, partial(spool.read, entry), batch=entry.batch, queued_at=entry.queued_at
            )
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


def head_timed_protocol(head_timeout_s: float, max_waiting: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request head does not arrive within
    ``head_timeout_s`` of its opening or of its last response.

    uvicorn closes idle keep-alive connections, but not one that never sends a request, or sends
    its head a byte at a time: such connections would fill the connection limit for good. Even
    timed out, a client reopening them as they close could keep the limit full; so at most
    ``max_waiting`` connections of the server may wait for a head at once (new ones, and idle ones
    between requests): a connection arriving beyond that closes the one that has waited longest,
    first among those that sent part of their head (and were read: a slow sender), then among the
    rest (silent, or idle).
    One whose whole head waits in its socket, not yet read, is passed over: a burst of connections
    is accepted before any of them is read, and a client sending its head at once is not closed.
    What the bound leaves of the connection limit stays for requests whose head arrived.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    # The connections of this server waiting for a head, oldest first (a dict keeps insertion order).
    waiting: dict[HeadTimedH11Protocol, None] = {}

    class HeadTimedH11Protocol(H11Protocol):
        _head_deadline: asyncio.TimerHandle | None = None
        #: Whether bytes of the awaited head were read.
        _started = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_head()

        def data_received(self, data: bytes) -> None:
            self._started = True
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                waiting.pop(self, None)  # its head arrived: a request in progress
            elif self in waiting:
                self._make_room()  # part of a head: it may be closed now

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
                return  # closing, or a pipelined request already started
            # Idle until its next head; or still sending a body refused unread: only the time-out.
            self._await_head(queue=self.conn.their_state is h11.IDLE)

        def connection_lost(self, exc: Exception | None) -> None:
            waiting.pop(self, None)
            if self._head_deadline is not None:
                self._head_deadline.cancel()
            super().connection_lost(exc)

        def _await_head(self, queue: bool = True) -> None:
            if self._head_deadline is not None:
                self._head_deadline.cancel()
            self._head_deadline = self.loop.call_later(head_timeout_s, self._head_overdue)
            waiting.pop(self, None)
            self._started = False
            if queue:
                waiting[self] = None
                self._make_room()

        def _make_room(self) -> None:
            # Part of a head read and no more for now: a slow sender, closed first. A whole head
            # waiting to be read is a request: it may exceed the bound until read (the loop's next
            # turn or so).
            closable = [other for other in waiting if other._started]
            closable += [other for other in waiting if not other._started and not other._head_unread()]
            for other in closable[: max(0, len(closable) - max_waiting)]:
                del waiting[other]
                other.transport.close()

        def _head_unread(self) -> bool:
            """Whether a whole request head waits, not yet read, in the socket's buffer."""
            sock = self.transport.get_extra_info("socket")
            if sock is None:
                return False
            # A duplicate, to peek at up to h11's largest head (16 KiB).
            with socket.fromfd(sock.fileno(), sock.family, sock.type) as peer:
                try:
                    pending = peer.recv(16 * 1024, socket.MSG_PEEK | socket.MSG_DONTWAIT)
                except OSError:
                    return False
            return b"\r\n\r\n" in pending

        def _head_overdue(self) -> None:
            # A request whose head arrived has its own limits (the body's time-out, the workers').
            if self.cycle is None or self.cycle.response_complete:
                waiting.pop(self, None)
                self.transport.close()

    return HeadTimedH11Protocol


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
    ingest = IngestLoop(runtime)
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
