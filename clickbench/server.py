"""``arcs serve`` on a data directory, as a child process the harness and the loader talk to over HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TOKEN = "clickbench-harness-token-0123456789"
DATABASE = "clickbench"
REPO = Path(__file__).resolve().parents[1]


class ArcsServer:
    def __init__(self, data_dir: Path, settings: Mapping[str, str] | None = None) -> None:
        self.data_dir = data_dir
        #: Environment settings of the server beyond the defaults (the api load's compaction ones).
        self.settings = dict(settings or {})
        self._process: subprocess.Popen[str] | None = None
        self._connection: http.client.HTTPConnection | None = None
        self._output: list[str] = []
        self._drainer: threading.Thread | None = None
        self.url = ""

    @property
    def running(self) -> bool:
        return self._process is not None

    def start(self) -> None:
        env = {
            **os.environ,
            "ARCS_BOOTSTRAP_TOKEN": TOKEN,
            "ARCS_QUERY_TIMEOUT_S": "0",
            "PYTHONPATH": str(REPO / "src"),
            **self.settings,
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", "arcs.cli", "serve", "--port", "0", "--data-dir", str(self.data_dir)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._output.append(line)
            if line.startswith('{"event": "listening"'):
                event = json.loads(line)
                self.url = f"http://{event['host']}:{event['port']}"
                self._connection = http.client.HTTPConnection(event["host"], event["port"], timeout=3600)
                break
        else:
            raise RuntimeError("arcs serve exited:\n" + "".join(self._output[-20:]))
        self._drainer = threading.Thread(target=self._drain, args=(self._process,), daemon=True)
        self._drainer.start()

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._output.append(line)

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
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        # The process is gone: its pipe reaches end of file, the drain thread ends, the pipe closes.
        if self._drainer is not None:
            self._drainer.join(10)
        if process.stdout is not None:
            process.stdout.close()
