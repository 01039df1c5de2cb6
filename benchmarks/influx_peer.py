"""InfluxDB 1.x beside ``arcs serve``: the same line-protocol points, the same clients, the same dashboards.

    uv run python -m benchmarks.influx_peer [--points 5000000] [--clients 4] [--runs 5]   (make bench-influx)

Starts ``influxd`` (Debian's ``influxdb`` package, 1.6.7 here; its own temporary directories and
ports, authentication off) and ``arcs serve`` (a temporary data directory) side by side, then:

1. generates the points once: ``cpu`` with tags ``host`` (100) and ``region`` (5), fields
   ``usage_user``, ``usage_system`` (floats) and ``procs`` (integer), one point a second across the
   hosts over 58 days from 2026-06-01 (a Monday and a month's first day, so week and month buckets
   start on the data's first point); fewer points spread the same 58 days;
2. writes them from ``--clients`` HTTP clients in bodies of ``--batch`` lines to InfluxDB's
   ``/write`` and then to ours (the same 1.x endpoint, the token as the password), one server at a
   time so they do not share the two cores, and waits until each answers ``count`` with every
   point: ingest rows/s to the last acknowledgement and to queryable, and per CPU second of the
   server process;
3. triggers our compaction through its route and waits until the run is done and no partition is
   a candidate, as a user's data would be compacted before the dashboards ask;
4. runs each dashboard query of a standard set, InfluxQL on InfluxDB and SQL on ours (JSON over
   HTTP, as Grafana's datasources ask), one untimed try then ``--runs`` timed ones, and compares the
   answers (floats within 1e-9 relative): a day of hourly means per host, 30 days of daily max per
   region, last value per host over a day, Grafana's ``$__timeGroup`` forms (``time_bucket``,
   ``date_trunc``, and the epoch arithmetic of Grafana's PostgreSQL macro), calendar buckets (day,
   Monday weeks, months: InfluxQL has no month, so that row has no InfluxDB figure);
5. runs the calendar buckets in DuckDB alone over the very files our catalog lists, ``time`` as
   stored (``TIMESTAMP_NS``) and cast to a plain ``TIMESTAMP``: what the bucketing costs without
   our request path, on the type the issue compared against.

Prints a table of medians and ratios (InfluxDB / ours: above 1 we are faster). Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import math
import os
import queue
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.launch import ArcsProcess

REPO = Path(__file__).resolve().parent.parent
TOKEN = "influx-peer-benchmark-token"
DATABASE = "bench"
HOSTS = 100
REGIONS = ("us-east", "us-west", "eu-central", "eu-west", "ap-south")
START = datetime(2026, 6, 1, tzinfo=UTC)
DAYS = 58
Rows = list[tuple[object, ...]]


# --- the points -------------------------------------------------------------------------------


def bodies(points: int, batch: int, seed: int = 7) -> list[bytes]:
    """The points as line protocol (seconds), in bodies of ``batch`` lines, in time order."""
    rng = random.Random(seed)
    start = int(START.timestamp())
    step = DAYS * 86_400 / points
    out: list[bytes] = []
    lines: list[str] = []
    for index in range(points):
        host = index % HOSTS
        lines.append(
            f"cpu,host=host{host:03d},region={REGIONS[host % len(REGIONS)]} "
            f"usage_user={rng.random() * 100!r},usage_system={rng.random() * 50!r},procs={rng.randrange(500)}i "
            f"{start + int(index * step)}"
        )
        if len(lines) == batch:
            out.append("\n".join(lines).encode())
            lines = []
    if lines:
        out.append("\n".join(lines).encode())
    return out


# --- the two servers --------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of a process and its waited-for children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


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


# --- the dashboards ---------------------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Dashboard:
    name: str
    sql: str
    influxql: str | None  # None: InfluxQL cannot ask it (months)


def dashboards() -> list[Dashboard]:
    end = START + timedelta(days=DAYS)
    day, month = end - timedelta(days=1), end - timedelta(days=30)
    week, six = end - timedelta(days=7), end - timedelta(hours=6)

    def between(since: datetime, until: datetime = end) -> tuple[str, str]:
        return (
            f"time >= '{_iso(since)}' AND time < '{_iso(until)}'",
            f"time >= '{_iso(since)}' AND time < '{_iso(until)}'",
        )

    d_sql, d_iql = between(day)
    m_sql, m_iql = between(month)
    w_sql, w_iql = between(week)
    s_sql, s_iql = between(six)
    a_sql, a_iql = between(START)
    return [
        Dashboard(
            "1 day, hourly mean per host",
            f"SELECT host, time_bucket(INTERVAL 1 HOUR, time) AS time, avg(usage_user) AS mean FROM cpu "
            f"WHERE {d_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT mean(usage_user) FROM cpu WHERE {d_iql} GROUP BY time(1h), host fill(none)",
        ),
        Dashboard(
            "30 days, daily max per region",
            f"SELECT region, time_bucket(INTERVAL 1 DAY, time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {m_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT max(usage_user) FROM cpu WHERE {m_iql} GROUP BY time(1d), region fill(none)",
        ),
        Dashboard(
            "last value per host (1 day)",
            f"SELECT host, max(time) AS time, arg_max(usage_user, time) AS last FROM cpu WHERE {d_sql} "
            f"GROUP BY host ORDER BY host",
            f"SELECT last(usage_user) FROM cpu WHERE {d_iql} GROUP BY host",
        ),
        Dashboard(
            "6 h, $__timeGroup 1m mean per region (time_bucket)",
            f"SELECT region, time_bucket(INTERVAL '1 minute', time) AS time, avg(usage_system) AS mean FROM cpu "
            f"WHERE {s_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT mean(usage_system) FROM cpu WHERE {s_iql} GROUP BY time(1m), region fill(none)",
        ),
        Dashboard(
            "7 days, $__timeGroup 1h mean per region (date_trunc)",
            f"SELECT region, date_trunc('hour', time) AS time, avg(usage_user) AS mean FROM cpu "
            f"WHERE {w_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT mean(usage_user) FROM cpu WHERE {w_iql} GROUP BY time(1h), region fill(none)",
        ),
        Dashboard(
            "7 days, $__timeGroup 5m max (PostgreSQL's epoch form)",
            f"SELECT floor(extract(epoch FROM time) / 300) * 300 AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {w_sql} GROUP BY 1 ORDER BY 1",
            f"SELECT max(usage_user) FROM cpu WHERE {w_iql} GROUP BY time(5m) fill(none)",
        ),
        Dashboard(
            "58 days, day buckets: max per region",
            f"SELECT region, date_trunc('day', time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {a_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            f"SELECT max(usage_user) FROM cpu WHERE {a_iql} GROUP BY time(1d), region fill(none)",
        ),
        Dashboard(
            "58 days, week buckets (Monday): max per region",
            f"SELECT region, date_trunc('week', time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {a_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            # InfluxDB's weeks count from the epoch, a Thursday: four days on is a Monday.
            f"SELECT max(usage_user) FROM cpu WHERE {a_iql} GROUP BY time(1w, 4d), region fill(none)",
        ),
        Dashboard(
            "58 days, month buckets: max per region",
            f"SELECT region, time_bucket(INTERVAL 1 MONTH, time) AS time, max(usage_user) AS max FROM cpu "
            f"WHERE {a_sql} GROUP BY 1, 2 ORDER BY 1, 2",
            None,
        ),
    ]


#: The dashboards DuckDB also runs alone, on the stored files, for the calendar-bucket comparison.
CALENDAR = ("30 days, daily max per region", "58 days, day buckets", "58 days, week buckets", "58 days, month buckets")


def _seconds(value: object) -> object:
    """A bucket's time as Unix seconds (RFC 3339 text from our JSON, a number from InfluxDB's)."""
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        whole, _, rest = value.rstrip("Z").partition(".")
        moment = datetime.fromisoformat(whole).replace(tzinfo=UTC)
        return int(moment.timestamp()) + (float("0." + rest) if rest else 0)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def from_influx(series: list[dict[str, Any]]) -> Rows:
    """InfluxDB's series as rows: the tag's value (when grouped by one), time, the value."""
    rows: Rows = []
    for item in series:
        tags = list(dict(item.get("tags") or {}).values())
        for values in item["values"]:
            rows.append((*tags, *(_seconds(value) for value in values)))
    return sorted(rows, key=_sort_key)


def from_arcs(answer: dict[str, Any]) -> Rows:
    data: list[list[object]] = answer["data"]
    return sorted((tuple(_seconds(value) for value in row) for row in data), key=_sort_key)


def _sort_key(row: tuple[object, ...]) -> tuple[str, ...]:
    return tuple(f"{value:020.3f}" if isinstance(value, int | float) else str(value) for value in row)


def same(left: Rows, right: Rows) -> str | None:
    """None when equal (floats within 1e-9 relative), else what differs first."""
    if len(left) != len(right):
        return f"{len(left)} rows against {len(right)}"
    for a, b in zip(left, right, strict=True):
        if len(a) != len(b):
            return f"row {a} against {b}"
        for x, y in zip(a, b, strict=True):
            if isinstance(x, int | float) and isinstance(y, int | float):
                if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                    return f"row {a} against {b}"
            elif x != y:
                return f"row {a} against {b}"
    return None


def _unix(value: object) -> object:
    """DuckDB's naive datetimes (UTC wall clocks) as Unix seconds, as the other answers give them."""
    return int(value.replace(tzinfo=UTC).timestamp()) if isinstance(value, datetime) else value


def timed(run: Callable[[], Any], runs: int) -> tuple[float, Any]:
    first = run()  # untimed: caches warm, as on a dashboard's refresh
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), first


def duckdb_alone(files: list[str], sql: str, runs: int, plain: bool) -> tuple[float, Rows]:
    """``sql`` in DuckDB over ``files``: ``time`` as stored, or cast to a plain ``TIMESTAMP`` first."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        listed = ", ".join("'" + path.replace("'", "''") + "'" for path in files)
        source = f"read_parquet([{listed}], union_by_name = true)"
        con.execute(f"CREATE TABLE stored AS SELECT * FROM {source}")
        column = "time::TIMESTAMP AS time" if plain else "time"
        con.execute(f"CREATE TABLE cpu AS SELECT * EXCLUDE (time), {column} FROM stored")
        con.execute("DROP TABLE stored")
        median, rows = timed(lambda: con.execute(sql).fetchall(), runs)
        return median, sorted((tuple(map(_unix, row)) for row in rows), key=_sort_key)
    finally:
        con.close()


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.influx_peer", description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=5_000_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--batch", type=int, default=5000, help="lines per write request")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per query (after one untimed)")
    parser.add_argument("--keep", type=Path, help="keep both servers' data in this directory")
    args = parser.parse_args(argv)
    if shutil.which("influxd") is None:
        parser.error("influxd is not installed (apt-get install -y influxdb; make bench-influx does it)")

    print(f"generating {args.points:,} points ({HOSTS} hosts, {DAYS} days) ...", flush=True)
    payloads = bodies(args.points, args.batch)
    megabytes = sum(map(len, payloads)) / 1e6
    print(f"  {len(payloads)} bodies of {args.batch} lines, {megabytes:.0f} MB", flush=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="influx-peer-"))
    root.mkdir(parents=True, exist_ok=True)
    failures = 0
    try:
        with servers(root) as (influx, arcs):
            print(f"InfluxDB {influx.version()} on :{influx.port}, arcs serve on :{arcs.port}", flush=True)
            ingests = {}
            for server in (influx, arcs):
                ingests[server.name] = write_all(server, payloads, args.clients, args.points)
                i = ingests[server.name]
                print(
                    f"  {server.name}: acknowledged in {i.acknowledged_s:.1f} s, queryable in {i.queryable_s:.1f} s, "
                    f"{i.cpu_s:.1f} CPU s",
                    flush=True,
                )
            seconds, jobs = arcs.compact()
            files = arcs.files()
            print(f"  arcs compaction: {jobs} jobs in {seconds:.1f} s; cpu has {len(files)} files", flush=True)

            print(f"\nIngest, {args.points:,} points from {args.clients} clients in bodies of {args.batch} lines")
            print(f"{'':>14} {'acked rows/s':>14} {'queryable rows/s':>17} {'rows per CPU s':>15}")
            for name, i in ingests.items():
                print(
                    f"{name:>14} {args.points / i.acknowledged_s:>14,.0f} {args.points / i.queryable_s:>17,.0f} "
                    f"{args.points / i.cpu_s:>15,.0f}"
                )
            ratio = ingests["InfluxDB"].queryable_s / ingests["arcs"].queryable_s
            per_core = ingests["InfluxDB"].cpu_s / ingests["arcs"].cpu_s
            print(f"{'ours / theirs':>14} {'':>14} {ratio:>16.2f}x {per_core:>14.2f}x")

            print(f"\nDashboards: median of {args.runs} hot runs (ms); ratio = InfluxDB / ours (> 1: we are faster)")
            print(f"{'query':<54} {'InfluxDB':>9} {'ours':>9} {'ratio':>6}  answer")
            timings: dict[str, float] = {}
            for board in dashboards():
                ours, answer = timed(functools.partial(arcs.sql, board.sql), args.runs)
                timings[board.name] = ours
                ours_rows = from_arcs(answer)
                if board.influxql is None:
                    print(f"{board.name:<54} {'-':>9} {ours * 1000:>9.1f} {'-':>6}  {len(ours_rows)} rows")
                    continue
                theirs, series = timed(functools.partial(influx.influxql, board.influxql), args.runs)
                verdict = same(from_influx(series), ours_rows)
                failures += verdict is not None
                print(
                    f"{board.name:<54} {theirs * 1000:>9.1f} {ours * 1000:>9.1f} {theirs / ours:>6.2f}  "
                    + (f"equal, {len(ours_rows)} rows" if verdict is None else f"DIFFERS: {verdict}"),
                    flush=True,
                )

            print("\nCalendar buckets: DuckDB alone over the same files, in-memory (ms)")
            print(f"{'query':<54} {'stored':>9} {'TIMESTAMP':>9} {'ours':>9}  answer")
            for board in dashboards():
                if not board.name.startswith(CALENDAR):
                    continue
                stored, stored_rows = duckdb_alone(files, board.sql, args.runs, plain=False)
                plain, plain_rows = duckdb_alone(files, board.sql, args.runs, plain=True)
                verdict = same(stored_rows, plain_rows) or same(stored_rows, from_arcs(arcs.sql(board.sql)))
                failures += verdict is not None
                print(
                    f"{board.name:<54} {stored * 1000:>9.1f} {plain * 1000:>9.1f} {timings[board.name] * 1000:>9.1f}  "
                    + ("equal" if verdict is None else f"DIFFERS: {verdict}"),
                    flush=True,
                )
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
