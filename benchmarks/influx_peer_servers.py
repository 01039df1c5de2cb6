"""The InfluxDB peer benchmark's two servers, ``influxd`` and ``arcs serve``, each started in its own
temporary directories and ports, and the clients that write the same points to either
(``benchmarks/influx_peer.py``).
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import signal
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.launch import ArcsProcess

REPO = Path(__file__).resolve().parent.parent
TOKEN = "influx-peer-benchmark-token"
DATABASE = "bench"


# --- the two servers --------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of a process and all its descendants, live (a server's worker processes)
    or waited for, from /proc."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = sum(int(value) for value in fields[11:15])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent and child not in tree]
        tree.update(children)
        frontier.extend(children)
    return sum(ticks.get(member, 0) for member in tree) / os.sysconf("SC_CLK_TCK")


class Server:
    name = ""
    process: subprocess.Popen[bytes] | subprocess.Popen[str]
    host = "127.0.0.1"
    port = 0

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=600)

    def write_path(self) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        return {}

    def count(self) -> int:
        raise NotImplementedError

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def cpu(self) -> float:
        return _cpu_seconds(self.process.pid)


class Influx(Server):
    name = "InfluxDB"

    def __init__(self, root: Path) -> None:
        self.port = _free_port()
        root.mkdir(parents=True, exist_ok=True)
        config = root / "influxdb.conf"
        config.write_text(
            f"""reporting-disabled = true
bind-address = "127.0.0.1:{_free_port()}"
[meta]
  dir = "{root}/meta"
[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false
  cache-max-memory-size = 0
[coordinator]
  query-timeout = "0s"
[monitor]
  store-enabled = false
[http]
  bind-address = "127.0.0.1:{self.port}"
  auth-enabled = false
  log-enabled = false
[logging]
  level = "error"
[continuous_queries]
  enabled = false
""",
            encoding="utf-8",
        )
        self.process = subprocess.Popen(
            ["influxd", "-config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                connection = self.connection()
                connection.request("GET", "/ping")
                if connection.getresponse().status == 204:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("influxd did not start")
            time.sleep(0.2)
        self.influxql(f"CREATE DATABASE {DATABASE}", method="POST")

    def version(self) -> str:
        connection = self.connection()
        connection.request("GET", "/ping")
        return connection.getresponse().getheader("X-Influxdb-Version") or "?"

    def write_path(self) -> str:
        return f"/write?db={DATABASE}&precision=s"

    def influxql(self, text: str, method: str = "GET") -> list[dict[str, Any]]:
        params = urllib.parse.urlencode({"db": DATABASE, "q": text, "epoch": "s"})
        connection = self.connection()
        connection.request(method, f"/query?{params}")
        response = connection.getresponse()
        payload = json.loads(response.read())
        if response.status != 200 or "error" in payload["results"][0]:
            raise RuntimeError(f"InfluxDB: {payload}")
        return list(payload["results"][0].get("series", []))

    def count(self) -> int:
        series = self.influxql("SELECT count(usage_user) FROM cpu")
        return int(series[0]["values"][0][1]) if series else 0


class Arcs(Server):
    name = "arcs"

    def __init__(self, root: Path) -> None:
        self.data_dir = root / "arcs"
        self.server = ArcsProcess.serve(self.data_dir, {"ARCS_QUERY_TIMEOUT_S": "0"}, TOKEN).start()
        self.process = self.server.process
        self.port = self.server.port

    def write_path(self) -> str:
        return f"/write?db={DATABASE}&precision=s"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    def call(self, method: str, path: str, body: object | None = None, headers: dict[str, str] | None = None) -> Any:
        connection = self.connection()
        data = None if body is None else json.dumps(body).encode()
        sent = {**self.headers(), "Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, data, sent)
        response = connection.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise RuntimeError(f"arcs {path}: HTTP {response.status}: {payload[:500]!r}")
        return json.loads(payload)

    def sql(self, text: str) -> Any:
        return self.call("POST", "/api/v1/query", {"sql": text}, {"x-arc-database": DATABASE})

    def count(self) -> int:
        try:
            return int(self.sql("SELECT count(*) FROM cpu")["data"][0][0])
        except RuntimeError as exc:
            if "not found" not in str(exc):
                raise
            return 0  # the measurement is not there yet

    def compact(self) -> tuple[float, int]:
        """Trigger compaction through its route; wait until runs are done and nothing is a candidate."""
        started = time.perf_counter()
        jobs = 0
        for _ in range(20):
            runs = int(self.call("GET", "/api/v1/compaction/status")["runs"])
            self.call("POST", "/api/v1/compaction/trigger", {"database": DATABASE})
            while True:
                status = self.call("GET", "/api/v1/compaction/status")
                if int(status["runs"]) > runs and not status["running"]:
                    break
                time.sleep(0.5)
            last = status.get("last_run") or {}
            jobs += len(last.get("jobs") or [])
            if not self.call("GET", f"/api/v1/compaction/candidates?database={DATABASE}")["count"]:
                break
        return time.perf_counter() - started, jobs

    def files(self) -> list[str]:
        """The paths of the files the catalog lists for ``cpu`` (read from the data directory's catalog)."""
        from arcs.runtime import local_runtime
        from arcs.settings import Settings

        runtime = local_runtime(Settings().with_(backend="local", data_dir=self.data_dir))
        try:
            records = runtime.catalog.list_files(DATABASE, "cpu", None, None)
            return [runtime.store.url(record.key) for record in records]
        finally:
            runtime.sqlite.close()


@dataclass(frozen=True, slots=True)
class Ingest:
    acknowledged_s: float
    queryable_s: float
    cpu_s: float


def write_all(server: Server, payloads: list[bytes], clients: int, expected: int) -> Ingest:
    """Every body from ``clients`` threads (each its own connection), then wait for ``count``."""
    work: queue.Queue[bytes] = queue.Queue()
    for payload in payloads:
        work.put(payload)
    errors: list[str] = []

    def client() -> None:
        connection = server.connection()
        headers = {**server.headers(), "Content-Type": "text/plain"}
        while True:
            try:
                payload = work.get_nowait()
            except queue.Empty:
                return
            for attempt in range(20):
                connection.request("POST", server.write_path(), payload, headers)
                response = connection.getresponse()
                answer = response.read()
                if response.status in (200, 204):
                    break
                if response.status in (429, 503) and attempt < 19:
                    time.sleep(float(response.getheader("Retry-After") or 0.5))
                    continue
                errors.append(f"{server.name}: HTTP {response.status}: {answer[:300]!r}")
                return

    cpu_before = server.cpu()
    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    acknowledged = time.perf_counter() - started
    if errors:
        raise RuntimeError(errors[0])
    while (found := server.count()) < expected:
        time.sleep(0.05)
    queryable = time.perf_counter() - started
    if found != expected:
        raise RuntimeError(f"{server.name} counts {found} points, {expected} were written")
    return Ingest(acknowledged, queryable, server.cpu() - cpu_before)


@contextmanager
def servers(root: Path) -> Iterator[tuple[Influx, Arcs]]:
    influx = Influx(root / "influx")
    try:
        arcs = Arcs(root)
        try:
            yield influx, arcs
        finally:
            arcs.stop()
    finally:
        influx.stop()
