"""The HTTP front: ASGI over a blocking ``handle(method, path, query, headers, body, client)``.

Each request is screened on its head, its body read (bounded in size, time and number,
``arcs.http.limits``), then handled on a worker thread. The standalone server serves its gateway
with it (``arcs.http.server``), the local serverless emulation its API Gateway (``arcs.emulation``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcs.errors import ArcsError, PayloadTooLarge, ServiceUnavailable, TooManyRequests
from arcs.http.api import PUBLIC_PATHS
from arcs.http.limits import ByteBudget, ClientGone, HttpLimits, Receive, body_pieces, read_body
from arcs.http.proxy import Admission, HttpResponse
from arcs.http.resolver import error_response
from arcs.http.routes.writes import is_write_path
from arcs.write.paths import is_import_path
from arcs.write.uploads import UploadFile

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
#: ``(method, path, query string, headers, body, client address) -> response``: what the HTTP front serves.
HttpHandler = Callable[[str, str, str, dict[str, str], bytes, str | None], HttpResponse]
#: ``(method, path, query string, headers, client address) -> admission``: a check made before
#: the body is read.
HttpScreen = Callable[[str, str, str, dict[str, str], str | None], Admission]
#: ``(method, path, query string, headers, the file streamed to disk, client address) -> response``.
UploadHandler = Callable[[str, str, str, dict[str, str], dict[str, Any], str | None], HttpResponse]
#: A request's head: ``(method, path, query string, headers, client address)``.
Head = tuple[str, str, str, dict[str, str], str | None]


@dataclass(frozen=True)
class Uploads:
    """Where the standalone server streams an import's file, never holding it in memory."""

    directory: Path
    max_bytes: int
    handle: UploadHandler


def error_http_response(exc: ArcsError) -> HttpResponse:
    """``exc`` answered as every route answers it (``arcs.http.resolver``)."""
    response = error_response(exc)
    headers = {"Content-Type": "application/json", **{k: str(v) for k, v in response.headers.items()}}
    return HttpResponse(exc.status, headers, str(response.body).encode())


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
        self._bodies = ByteBudget(limits.max_bodies * limits.max_request_bytes)
        self._by_caller: dict[str, int] = {}  # requests in flight per caller (event loop only)

    def close(self, wait: bool = True) -> None:
        """Stop the workers; ``wait=False`` leaves a request still running to finish on its own."""
        self.executor.shutdown(wait=wait, cancel_futures=True)
        self._streams.shutdown(wait=wait, cancel_futures=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        head = _head_of(scope)
        method, path, _query, headers, _client = head
        upload = self.uploads is not None and method == "POST" and is_import_path(path)
        limit = self._body_limit(path, upload)
        declared = headers.get("content-length", "")
        try:
            if declared.isdigit() and int(declared) > limit:
                raise PayloadTooLarge(f"body is {declared} bytes; the limit for this route is {limit}")
            admission = await self._screen(head)
            if admission.refusal is not None:
                await self._send(send, admission.refusal)
                return
            self._count_caller(admission.caller)
        except ArcsError as exc:
            await self._send(send, error_http_response(exc))
            return
        except asyncio.CancelledError:
            # The server stopped while the token was being checked (in arcs local, the authorizer
            # function running): the request was cut short, which says nothing of its token.
            await self._send(send, ABANDONED)
            return
        try:
            if upload:
                response = await self._answer_upload(receive, head)
            else:
                response = await self._answer(receive, head, limit, _reserved(headers, limit))
        except asyncio.CancelledError:
            # The server stopped before this request finished (its grace ran out): its outcome is
            # unknown, as after a gateway time-out, and is answered so rather than as a 500.
            response = ABANDONED
        finally:
            self._uncount_caller(admission.caller)
        if response is not None:
            await self._send(send, response, receive)

    def _body_limit(self, path: str, upload: bool) -> int:
        """The most bytes ``path``'s body may have."""
        if path in PUBLIC_PATHS:
            return 0  # health checks carry no body, and need no token: none is read
        if upload and self.uploads is not None:
            return self.uploads.max_bytes  # streamed to disk: it holds no memory
        return self.limits.max_request_bytes if is_write_path(path) else self.limits.max_control_bytes

    async def _screen(self, head: Head) -> Admission:
        """A caller without a valid token (or, for a write, without the right to make it) never gets
        a byte of its body read."""
        if self.screen is None:
            return Admission()
        return await asyncio.get_running_loop().run_in_executor(self.executor, self.screen, *head)

    async def _answer(self, receive: Receive, head: Head, limit: int, reserved: int) -> HttpResponse | None:
        """The response once ``reserved`` bytes are set aside, the body read and a worker handled it
        (None: the client left)."""
        method, path, query, headers, client = head
        try:
            await self._bodies.reserve(reserved, self.limits.queue_timeout_s)
        except ArcsError as exc:
            return error_http_response(exc)
        try:
            try:
                body = await read_body(receive, limit, self.limits.body_timeout_s)
                await self._acquire(self._slots, "no worker freed up")
            except ArcsError as exc:
                return error_http_response(exc)
            except ClientGone:
                return None
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    self.executor, self.handle, method, path, query, headers, body, client
                )
            finally:
                self._slots.release()
        finally:
            self._bodies.release(reserved)

    async def _answer_upload(self, receive: Receive, head: Head) -> HttpResponse | None:
        """An import: its file streamed to a file of its own (multipart or raw), then handled."""
        assert self.uploads is not None
        method, path, query, headers, client = head
        loop = asyncio.get_running_loop()
        try:
            with UploadFile(self.uploads.directory, headers.get("content-type"), self.uploads.max_bytes) as file:
                async for piece in body_pieces(receive, self.limits.body_timeout_s):
                    file.write(piece)
                upload = await loop.run_in_executor(self.executor, file.finish)
                await self._acquire(self._slots, "no worker freed up")
                try:
                    return await loop.run_in_executor(
                        self.executor, self.uploads.handle, method, path, query, headers, upload, client
                    )
                finally:
                    self._slots.release()
        except ArcsError as exc:
            return error_http_response(exc)
        except ClientGone:
            return None

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

    async def _send(self, send: Send, response: HttpResponse, receive: Receive | None = None) -> None:
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
        # A client that leaves mid-stream is told by ``receive`` alone (sends to it are dropped):
        # the stream is then closed, so the query (in arcs local, the function) stops producing.
        gone = asyncio.ensure_future(_disconnected(receive)) if receive is not None else None
        try:
            if response.body:
                await send({"type": "http.response.body", "body": response.body, "more_body": True})
            while (piece := await loop.run_in_executor(self._streams, next, response.stream, None)) is not None:
                if gone is not None and gone.done():
                    await loop.run_in_executor(self._streams, _close, response.stream)
                    return
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            if gone is not None:
                gone.cancel()


async def _disconnected(receive: Receive) -> None:
    """Return once the client has gone (the request's body is read whole before any answer)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _close(stream: object) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _head_of(scope: Scope) -> Head:
    headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
    query = scope.get("query_string", b"").decode("latin-1")
    client: str | None = (scope.get("client") or (None,))[0]
    return scope["method"], scope["path"], query, headers, client


def _reserved(headers: dict[str, str], limit: int) -> int:
    """What the body may take: its declared length; a chunked one, the route's limit; a request
    without either has no body (HTTP/1.1's framing)."""
    declared = headers.get("content-length", "")
    if declared.isdigit():
        return int(declared)
    return limit if "chunked" in headers.get("transfer-encoding", "").lower() else 0
