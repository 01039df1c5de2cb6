"""What one caller may hold of the HTTP front, so that no caller can starve the others.

Connections: at most ``max_connections`` (uvicorn answers the rest 503), and of those at most half
may wait for a request head, each for at most ``head_timeout_s`` (``head_timed_protocol``). Bodies:
read only once their head passed the token check, bounded in bytes (``ByteBudget``) and in time
(``read_body``, ``body_pieces``).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from arcs.errors import PayloadTooLarge, RequestTimeout, ServiceUnavailable
from arcs.settings import Settings

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]


@dataclass(frozen=True)
class HttpLimits:
    """The HTTP front's bounds.

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


class ByteBudget:
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


class ClientGone(Exception):
    """The client disconnected before its body arrived: there is no one to answer."""


async def read_body(receive: Receive, limit: int, timeout_s: float) -> bytes:
    """The whole body, at most ``limit`` bytes, arrived within ``timeout_s`` (else 413, 408)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    chunks = bytearray()
    more = True
    while more:
        try:
            message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise RequestTimeout(f"the request body did not arrive within {timeout_s:g} s") from None
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunks += message.get("body", b"")
        more = message.get("more_body", False)
        if len(chunks) > limit:
            raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
    return bytes(chunks)


async def body_pieces(receive: Receive, timeout_s: float) -> AsyncIterator[bytes]:
    """The body piece by piece, each within ``timeout_s`` of the last (a file of gigabytes takes
    longer than any fixed deadline; a stalled one ends with 408)."""
    more = True
    while more:
        try:
            message = await asyncio.wait_for(receive(), timeout_s)
        except TimeoutError:
            raise RequestTimeout(f"the file stopped arriving for {timeout_s:g} s") from None
        if message["type"] == "http.disconnect":
            raise ClientGone
        yield message.get("body", b"")
        more = message.get("more_body", False)


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
