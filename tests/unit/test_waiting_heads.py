"""The bound on connections waiting for a request head, over real sockets against the server's
protocol: whom it closes, and that choosing costs no system call on the connection path."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from arcs.http.limits import head_timed_protocol

REQUEST = b"GET /x HTTP/1.1\r\nHost: test\r\n\r\n"
SETTLE_S = 0.3  # ample for the server's loop to read and judge what arrived


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def _server(max_waiting: int, head_timeout_s: float = 30.0) -> Iterator[int]:
    """The port of a server whose connections use the protocol, its loop on a thread of its own."""
    loop = asyncio.new_event_loop()
    protocol = head_timed_protocol(head_timeout_s, max_waiting)
    config = uvicorn.Config(_app, log_level="warning", lifespan="off")
    config.load()
    state = ServerState()
    server = loop.run_until_complete(
        loop.create_server(lambda: protocol(config=config, server_state=state, app_state={}), "127.0.0.1", 0)
    )
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        time.sleep(0.2)  # for the server to see the clients' sockets close, and close its own
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def _connect(port: int, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        sock.sendall(data)
    return sock


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (which sent no whole request)."""
    sock.settimeout(0.2)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _answer(sock: socket.socket) -> bytes:
    """The whole response to the request ``sock`` sent."""
    sock.settimeout(5)
    received = b""
    while not received.endswith(b"\r\n\r\nok") and (piece := sock.recv(4096)):
        received += piece
    return received


def test_choosing_whom_to_close_looks_into_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    duplicated: list[object] = []
    real_fromfd, real_dup = socket.fromfd, socket.socket.dup
    monkeypatch.setattr(socket, "fromfd", lambda *a, **k: duplicated.append(a) or real_fromfd(*a, **k))
    monkeypatch.setattr(socket.socket, "dup", lambda self: duplicated.append(self) or real_dup(self))
    with _server(max_waiting=2) as port:
        held = []
        for data in (b"", b"GET /x HTTP/1.1\r\n", b"", b""):
            held.append(_connect(port, data))
            time.sleep(0.05)
        time.sleep(SETTLE_S)
        assert [_closed(sock) for sock in held].count(True) == 2  # the bound was kept
        held.append(_connect(port, REQUEST))
        assert _answer(held[-1]).startswith(b"HTTP/1.1 200")
        for sock in held:
            sock.close()
    assert duplicated == []


def test_the_slow_sender_goes_first_then_the_silent_that_waited_longest() -> None:
    with _server(max_waiting=2) as port:
        slow = _connect(port, b"GET /x HTTP/1.1\r\nHost: te")
        time.sleep(SETTLE_S)
        first_silent = _connect(port)
        time.sleep(SETTLE_S)
        second_silent = _connect(port)
        time.sleep(SETTLE_S)
        assert [_closed(slow), _closed(first_silent), _closed(second_silent)] == [True, False, False]
        third_silent = _connect(port)
        time.sleep(SETTLE_S)
        assert [_closed(first_silent), _closed(second_silent), _closed(third_silent)] == [True, False, False]
        for sock in (slow, first_silent, second_silent, third_silent):
            sock.close()


def test_a_burst_of_whole_requests_beyond_the_bound_is_answered() -> None:
    with _server(max_waiting=1) as port:
        burst = [_connect(port, REQUEST) for _ in range(8)]
        assert all(_answer(sock).startswith(b"HTTP/1.1 200") for sock in burst)
        for sock in burst:
            sock.close()


def test_a_connection_waiting_too_long_for_its_head_is_closed() -> None:
    with _server(max_waiting=8, head_timeout_s=0.3) as port:
        silent = _connect(port)
        answered = _connect(port, REQUEST)
        assert _answer(answered).startswith(b"HTTP/1.1 200")
        time.sleep(0.6)
        assert _closed(silent)
        assert _closed(answered)  # idle after its response: the same deadline for its next head
        silent.close()
        answered.close()
