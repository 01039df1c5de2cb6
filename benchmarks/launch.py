"""The product as a benchmark runs it: ``arcs serve`` or ``arcs local`` as a child process, started
as a user starts it (``python -m arcs.cli``), its URL read from the banner it prints once
listening, and its output kept (and always drained, so a full pipe never blocks the server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOKEN = "bench-admin-token-0123456789abcdef"
_BANNER = '{"event": "listening"'


class ArcsProcess:
    """One ``arcs`` server process. ``settings`` are environment settings beyond this machine's
    (``ARCS_*`` or the emulator's endpoint); the admin token is ``token``."""

    def __init__(self, args: Sequence[str], settings: Mapping[str, str] | None = None, token: str = TOKEN) -> None:
        self.args = list(args)
        self.token = token
        self.env = {
            **os.environ,
            "ARCS_BOOTSTRAP_TOKEN": token,
            "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO / "src"), os.environ.get("PYTHONPATH")))),
            **(settings or {}),
        }
        self.output: list[str] = []
        self.url = ""
        self.host = ""
        self.port = 0
        self._process: subprocess.Popen[str] | None = None
        self._drainer: threading.Thread | None = None

    @classmethod
    def serve(cls, data_dir: Path, settings: Mapping[str, str] | None = None, token: str = TOKEN) -> ArcsProcess:
        """The standalone server on ``data_dir``."""
        args = ["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir)]
        return cls(args, settings, token)

    @classmethod
    def local(cls, endpoint: str, settings: Mapping[str, str] | None = None, token: str = TOKEN) -> ArcsProcess:
        """``arcs local`` on the emulator at ``endpoint``."""
        args = ["local", "--host", "127.0.0.1", "--port", "0"]
        return cls(args, {"AWS_ENDPOINT_URL": endpoint, **(settings or {})}, token)

    @property
    def process(self) -> subprocess.Popen[str]:
        assert self._process is not None, "the server is not started"
        return self._process

    def start(self) -> ArcsProcess:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "arcs.cli", *self.args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.output.append(line)
            if line.startswith(_BANNER):
                event = json.loads(line)
                self.host, self.port = str(event["host"]), int(event["port"])
                self.url = f"http://{self.host}:{self.port}"
                break
        else:
            raise RuntimeError(f"arcs {self.args[0]} exited before listening:\n" + "".join(self.output[-20:]))
        self._drainer = threading.Thread(target=self._drain, args=(self._process,), daemon=True)
        self._drainer.start()
        return self

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line)

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM, as a service manager stops it; killed if it has not exited within ``timeout_s``."""
        if self._process is None:
            return
        process, self._process = self._process, None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # The output ends with the process: read to its end, then closed.
        if self._drainer is not None:
            self._drainer.join(10)
        if process.stdout is not None and (self._drainer is None or not self._drainer.is_alive()):
            process.stdout.close()
