"""``arcs serve`` on a data directory, as a child process the harness and the loader talk to over HTTP."""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.launch import ArcsProcess

TOKEN = "clickbench-harness-token-0123456789"
DATABASE = "clickbench"


class ArcsServer:
    def __init__(self, data_dir: Path, settings: Mapping[str, str] | None = None) -> None:
        self.data_dir = data_dir
        #: Environment settings of the server beyond the defaults (the api load's compaction ones).
        self.settings = dict(settings or {})
        self._server: ArcsProcess | None = None
        self._connection: http.client.HTTPConnection | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        return "" if self._server is None else self._server.url

    def start(self) -> None:
        settings = {"ARCS_QUERY_TIMEOUT_S": "0", **self.settings}
        self._server = ArcsProcess.serve(self.data_dir, settings, TOKEN).start()
        self._connection = http.client.HTTPConnection(self._server.host, self._server.port, timeout=3600)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """One request with the token and the database; the status and the whole body."""
        assert self._connection is not None, "the server is not running"
        sent = {"Authorization": f"Bearer {TOKEN}", "x-arc-database": DATABASE, **(headers or {})}
        self._connection.request(method, path, body, sent)
        response = self._connection.getresponse()
        return response.status, response.read()

    def json(self, method: str, path: str, document: object | None = None) -> Any:
        body = None if document is None else json.dumps(document).encode()
        status, payload = self.request(method, path, body, {"Content-Type": "application/json"})
        if status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {status}: {payload[:300].decode(errors='replace')}")
        return json.loads(payload)

    def stop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        server, self._server = self._server, None
        if server is not None:
            server.stop()
