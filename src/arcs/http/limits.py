"""What one caller may hold of the HTTP front, so that no caller can starve the others.

Connections: at most ``max_connections`` (uvicorn answers the rest 503), and of those at most half
may wait for a request head, each for at most ``head_timeout_s`` (``head_timed_protocol``). Bodies:
read only once their head passed the token check, bounded in bytes (``ByteBudget``) and in time
(``read_body``, ``body_pieces``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

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


class WaitingHeads:
    """The connections of one server waiting for a request head, by what was read of that head, so
    that whom to close is known at once, without looking into any socket.

    A connection that has just arrived (or just been answered) is *fresh*: its head may already
    wait in its socket, unread, as after a burst of connections accepted before any was read, so
    it is never the one closed. The event loop reads that socket within two of its turns (the read
    is queued on the turn after the one the connection entered on); by then the connection has
    sent a whole head (and left), part of one (*partial*: a slow sender), or nothing (*silent*).
    Beyond ``bound`` connections waiting, fresh ones included (a client reopening the connections
    closed counts at once), the partial one that has waited longest is closed first, then the
    silent one that has.
    """

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._order = itertools.count()
        #: When each connection began waiting (its place in the queue).
        self._entered: dict[HeadTimedH11Protocol, int] = {}
        self._fresh: dict[HeadTimedH11Protocol, None] = {}
        self._silent: dict[HeadTimedH11Protocol, None] = {}  # oldest first: they settle in order
        # Partial heads, oldest first by when they began waiting; a connection that left leaves its
        # entry behind until it reaches the top or the heap is rebuilt.
        self._partial: set[HeadTimedH11Protocol] = set()
        self._partial_heap: list[tuple[int, HeadTimedH11Protocol]] = []

    def __contains__(self, connection: object) -> bool:
        return connection in self._entered

    def __len__(self) -> int:
        return len(self._entered)

    def enter(self, connection: HeadTimedH11Protocol) -> None:
        """``connection`` now waits for a head (it opened, or its last response was sent)."""
        self.leave(connection)
        entered = next(self._order)
        self._entered[connection] = entered
        self._fresh[connection] = None
        loop = connection.loop
        loop.call_soon(loop.call_soon, self._settle, connection, entered)
        self._make_room()

    def head_started(self, connection: HeadTimedH11Protocol) -> None:
        """Bytes of ``connection``'s head were read, not all of it: a slow sender, closed first."""
        entered = self._entered.get(connection)
        if entered is None or connection in self._partial:
            return
        self._fresh.pop(connection, None)
        self._silent.pop(connection, None)
        self._partial.add(connection)
        heapq.heappush(self._partial_heap, (entered, connection))
        self._make_room()

    def leave(self, connection: HeadTimedH11Protocol) -> None:
        """``connection`` waits no more: its head arrived, or it closed."""
        if self._entered.pop(connection, None) is None:
            return
        self._fresh.pop(connection, None)
        self._silent.pop(connection, None)
        self._partial.discard(connection)
        if len(self._partial_heap) > 2 * len(self._partial) + 16:  # mostly entries of connections gone
            self._partial_heap = [(entered, c) for entered, c in self._partial_heap if self._entered.get(c) == entered]
            heapq.heapify(self._partial_heap)

    def _settle(self, connection: HeadTimedH11Protocol, entered: int) -> None:
        # Still fresh from the same wait: the loop has read what its socket held, and it was nothing.
        if connection in self._fresh and self._entered.get(connection) == entered:
            del self._fresh[connection]
            self._silent[connection] = None
            self._make_room()

    def _make_room(self) -> None:
        for _ in range(len(self._entered) - self.bound):
            victim = self._oldest_partial() or next(iter(self._silent), None)
            if victim is None:
                return  # only fresh ones left: room is made once they are read
            self.leave(victim)
            victim.transport.close()

    def _oldest_partial(self) -> HeadTimedH11Protocol | None:
        while self._partial_heap:
            entered, connection = self._partial_heap[0]
            if connection in self._partial and self._entered.get(connection) == entered:
                return connection
            heapq.heappop(self._partial_heap)  # left, or waiting again since
        return None


class HeadTimedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request head does not arrive within
    ``head_timeout_s`` of its opening or of its last response, and keeping at most ``waiting.bound``
    connections of the server waiting for a head at once (``WaitingHeads``).

    uvicorn closes idle keep-alive connections, but not one that never sends a request, or sends
    its head a byte at a time: such connections would fill the connection limit for good. Even
    timed out, a client reopening them as they close could keep the limit full: hence the bound.
    What it leaves of the connection limit stays for requests whose head arrived.
    """

    head_timeout_s: ClassVar[float]
    waiting: ClassVar[WaitingHeads]
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self in self.waiting:
            self.waiting.head_started(self)  # part of a head, and no more for now

    def handle_events(self) -> None:
        super().handle_events()
        if self._request_in_progress():
            self.waiting.leave(self)  # its head arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing() or self._request_in_progress():
            return  # closing, or a pipelined request already started
        # Idle until its next head; or still sending a body refused unread: only the time-out.
        self._await_head(queue=self.conn.their_state is h11.IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.leave(self)
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        super().connection_lost(exc)

    def _request_in_progress(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _await_head(self, queue: bool = True) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_overdue)
        self.waiting.leave(self)
        if queue:
            self.waiting.enter(self)

    def _head_overdue(self) -> None:
        # A request whose head arrived has its own limits (the body's time-out, the workers').
        if not self._request_in_progress():
            self.waiting.leave(self)
            self.transport.close()


def head_timed_protocol(head_timeout_s: float, max_waiting: int) -> type[HeadTimedH11Protocol]:
    """The protocol class of one server: its head time-out, and its own bound on waiting heads."""
    attributes = {"head_timeout_s": head_timeout_s, "waiting": WaitingHeads(max_waiting)}
    return type("ServerHeadTimedH11Protocol", (HeadTimedH11Protocol,), attributes)
