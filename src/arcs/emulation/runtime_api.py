"""Lambda's Runtime API as a runtime sees it, over real HTTP: for running ``arcs.http.runtime_api``
outside Lambda (its tests, the layers' smoke test). Standard library only.

Events are queued with ``invoke``; a runtime's ``next`` takes the oldest (it waits while there is
none), and what it posts back is recorded: a streamed response with its headers, its chunks
decoded and its trailers, or an error document.
"""

from __future__ import annotations

import http.server
import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

API_PREFIX = "/2018-06-01/runtime"


@dataclass
class Posted:
    """What a runtime posted for one invocation."""

    kind: str  # "response" or "error"
    headers: dict[str, str]
    body: bytes
    trailers: dict[str, str] = field(default_factory=dict)
    chunks: int = 0


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A runtime stopped while it waited for its next event: nothing to report."""


class RuntimeApiServer:
    """A Runtime API on loopback; ``address`` is what ``AWS_LAMBDA_RUNTIME_API`` takes."""

    def __init__(self, function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:f") -> None:
        self.function_arn = function_arn
        self.events: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.posted: dict[str, Posted] = {}
        self._done = threading.Condition()
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="runtime-api", daemon=True)

    def __enter__(self) -> RuntimeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def invoke(self, event: Any) -> str:
        """Queue ``event``; its request id."""
        request_id = str(uuid.uuid4())
        self.events.put((request_id, json.dumps(event).encode()))
        return request_id

    def wait(self, request_id: str, timeout_s: float = 120) -> Posted:
        """What the runtime posted for ``request_id``, once it has."""
        deadline = time.monotonic() + timeout_s
        with self._done:
            while request_id not in self.posted:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer to {request_id} within {timeout_s:g} s")
                self._done.wait(left)
            return self.posted[request_id]

    def _record(self, request_id: str, posted: Posted) -> None:
        with self._done:
            self.posted[request_id] = posted
            self._done.notify_all()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != f"{API_PREFIX}/invocation/next":
                    self._answer(404, b"{}")
                    return
                request_id, event = api.events.get()
                self.send_response(200)
                self.send_header("Lambda-Runtime-Aws-Request-Id", request_id)
                self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 900_000))
                self.send_header("Lambda-Runtime-Invoked-Function-Arn", api.function_arn)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(event)))
                self.end_headers()
                self.wfile.write(event)

            def do_POST(self) -> None:
                parts = self.path.removeprefix(f"{API_PREFIX}/").split("/")
                headers = dict(self.headers.items())
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body, trailers, chunks = self._read_chunked()
                else:
                    body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    trailers, chunks = {}, 0
                if len(parts) == 3 and parts[0] == "invocation" and parts[2] in ("response", "error"):
                    api._record(parts[1], Posted(parts[2], headers, body, trailers, chunks))
                elif parts[:2] == ["init", "error"]:
                    api._record("init", Posted("error", headers, body))
                self._answer(202, b'{"status": "OK"}')

            def _read_chunked(self) -> tuple[bytes, dict[str, str], int]:
                body = bytearray()
                chunks = 0
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        break
                    body += self.rfile.read(size)
                    chunks += 1
                    self.rfile.readline()  # the CRLF after the chunk
                trailers: dict[str, str] = {}
                while (line := self.rfile.readline().strip()) != b"":
                    name, _, value = line.decode("latin-1").partition(":")
                    trailers[name.strip()] = value.strip()
                return bytes(body), trailers, chunks

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
