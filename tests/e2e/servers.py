"""Starting real server processes for end-to-end tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

TOKEN = "e2e-admin-token-0123456789abcdef"
# An external AWS emulator for ``arcs local`` (LocalStack: docs/localstack.md), and where its
# DynamoDB is if elsewhere. Unset: each ``arcs local`` starts its own moto server.
EMULATOR = os.environ.get("ARCS_E2E_AWS_ENDPOINT_URL", "")
EMULATOR_DYNAMODB = os.environ.get("ARCS_E2E_AWS_ENDPOINT_URL_DYNAMODB", "")
#: The runtimes that serve Arc's HTTP API: the standalone server on local disk, and ``arcs local``
#: (the Lambda handlers behind an emulated API Gateway, on an AWS emulator).
RUNTIMES = ("standalone", "local")


class ServerProcess:
    def __init__(self, args: list[str], env: dict[str, str], switch_interval_s: float | None = None) -> None:
        self.args = args
        self.env = env
        # The interpreter's thread switch interval (5 ms by default): a shorter one switches threads
        # far more often, so a race between requests shows up in seconds instead of hours.
        self.switch_interval_s = switch_interval_s
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []

    @property
    def runtime(self) -> str:
        """``standalone`` or ``local``: which of ``RUNTIMES`` this process is."""
        return "standalone" if self.args[0] == "serve" else "local"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        launcher = ["-m", "arcs.cli"]
        if self.switch_interval_s is not None:
            switch = f"import sys; sys.setswitchinterval({self.switch_interval_s})"
            launcher = ["-c", f"{switch}; import arcs.cli; arcs.cli.main()"]
        self.process = subprocess.Popen(
            [sys.executable, *launcher, *self.args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("server exited:\n" + "".join(self.output))
            self.output.append(line)
            if line.startswith('{"event": "listening"'):
                event = json.loads(line)
                self.url = f"http://{event['host']}:{event['port']}"
                break
        else:
            raise RuntimeError("server did not start:\n" + "".join(self.output))
        # Keep draining output so the pipe never fills up and blocks the server.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        return self

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self._close()

    def _close(self) -> None:
        # The process is gone, so its pipe reaches end of file and the drain thread ends.
        self._drainer.join(10)
        if self.process and self.process.stdout:
            self.process.stdout.close()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()


def standalone(data_dir: Path, token: str = TOKEN, **env: str) -> ServerProcess:
    if EMULATOR:
        pytest.skip("the standalone server uses no AWS emulator: make test runs it")
    env = {
        **os.environ,
        "ARCS_BOOTSTRAP_TOKEN": token,
        "ARCS_INGEST_BATCH_WINDOW_S": "0.05",
        "ARCS_TOKEN_CACHE_TTL_S": "1",
        # Every test's client is 127.0.0.1: refused tokens of one test must not throttle the next.
        "ARCS_AUTH_FAILURES_PER_MINUTE": "0",
        # No compaction behind the tests' backs: file counts stay what the writes made them.
        "ARCS_COMPACTION_INTERVAL_S": "0",
        **env,
    }
    return ServerProcess(["serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir)], env)


def local(token: str = TOKEN, **env: str) -> ServerProcess:
    """``arcs local``: the Lambda handlers on an embedded moto server (or on ``EMULATOR``, under names
    of their own unless the caller names them, as the processes of one run share it); ingest batches
    after 50 ms."""
    emulator = {}
    if EMULATOR:
        emulator = {"AWS_ENDPOINT_URL": EMULATOR, "ARCS_LOCAL_RESOURCE_PREFIX": f"arcs-e2e-{uuid.uuid4().hex[:12]}"}
        if EMULATOR_DYNAMODB:
            emulator["AWS_ENDPOINT_URL_DYNAMODB"] = EMULATOR_DYNAMODB
    # Never an emulator configured for something else: the embedded moto server, or EMULATOR.
    configured = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "ARCS_LOCAL_RESOURCE_PREFIX")
    env = {
        **{name: value for name, value in os.environ.items() if name not in configured},
        "ARCS_BOOTSTRAP_TOKEN": token,
        "ARCS_INGEST_BATCH_WINDOW_S": "0.05",
        "ARCS_TOKEN_CACHE_TTL_S": "1",
        "ARCS_COMPACTION_INTERVAL_S": "0",
        **emulator,
        **env,
    }
    return ServerProcess(["local", "--host", "127.0.0.1", "--port", "0", "--moto-port", "0"], env)


def runtime_server(
    runtime: str,
    data_dir: Path,
    *,
    standalone_env: Mapping[str, str] | None = None,
    local_env: Mapping[str, str] | None = None,
    **env: str,
) -> ServerProcess:
    """One of ``RUNTIMES``, not yet started, with ``env`` for either and the settings of its own
    (a setting can be named differently on each: a timer standalone, a schedule on ``arcs local``)."""
    if runtime == "local":
        return local(**env, **(local_env or {}))
    return standalone(data_dir, **env, **(standalone_env or {}))


def runtime_fixture(
    scope: Literal["session", "package", "module", "class", "function"] = "module",
    *,
    standalone_env: Mapping[str, str] | None = None,
    local_env: Mapping[str, str] | None = None,
    switch_interval_s: float | None = None,
    **env: str,
) -> Callable[..., Iterator[ServerProcess]]:
    """A fixture parametrized over ``RUNTIMES``: a started server with these settings (see
    ``runtime_server``), stopped after its last test. Its name is the name it is assigned to.

    Each runtime gets a data directory of its own, and every server process picks its own free
    ports, so modules (and pytest-xdist workers) never share either.
    """

    @pytest.fixture(scope=scope, params=RUNTIMES)
    def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
        data_dir = tmp_path_factory.mktemp(f"{request.param}-data")
        process = runtime_server(request.param, data_dir, standalone_env=standalone_env, local_env=local_env, **env)
        process.switch_interval_s = switch_interval_s
        process.start()
        try:
            yield process
        finally:
            process.stop()

    return server


class Client:
    def __init__(self, url: str, token: str = TOKEN) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def write(self, path: str, body: bytes, **kwargs: Any) -> httpx.Response:
        return self.http.post(path, content=body, **kwargs)

    def query(self, sql: str, database: str | None = None) -> httpx.Response:
        headers = {"x-arc-database": database} if database else {}
        return self.http.post("/api/v1/query", json={"sql": sql}, headers=headers)

    def rows(self, sql: str, database: str | None = None) -> list[list[Any]]:
        response = self.query(sql, database)
        assert response.status_code == 200, response.text
        return response.json()["data"]  # type: ignore[no-any-return]

    def wait_count(self, measurement: str, expected: int, database: str | None = None, timeout: float = 30) -> int:
        """Ingest is asynchronous: poll until the count is reached (or return the last count)."""
        deadline = time.monotonic() + timeout
        count = -1
        while time.monotonic() < deadline:
            response = self.query(f"SELECT count(*) FROM {measurement}", database)
            if response.status_code == 200:
                count = response.json()["data"][0][0]
                if count >= expected:
                    # give a wrongly duplicated batch the chance to show up before we look
                    time.sleep(0.3)
                    return self.rows(f"SELECT count(*) FROM {measurement}", database)[0][0]  # type: ignore[no-any-return]
            time.sleep(0.1)
        return count
