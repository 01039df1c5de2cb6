"""Storage requests and time per query window through a running ``arcs local``, before and after
the day tier.

    uv run python -m benchmarks.pruning_arcs_local [--days 30] [--rows-per-hour 100]

The user's path end to end: a moto server of this process (so every request the functions make
to S3 and DynamoDB is counted) and an ``arcs local`` process on it (``AWS_ENDPOINT_URL``, as on
LocalStack). ``--days`` days of one measurement are written through the emulated API Gateway as
line protocol, one request per day, so the ingest function leaves one file per hour partition;
the last 1 h, 1 d, 7 d, 30 d and 365 d are then queried over HTTP (windows ending at the newest
data and starting mid-day, as a dashboard's do). Then compaction is triggered through its route,
which merges every day into a day file, and the windows are queried again. Each line counts what
the query function asked of the storage while answering; the time is the client's, to the last
byte. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import httpx

from benchmarks.launch import ArcsProcess
from benchmarks.pruning_requests import (
    HOUR_US,
    START_US,
    WINDOWS,
    CountingApp,
    copy_tables_once_per_transaction,
    start_moto,
)

TOKEN = "arcs-pruning-benchmark-token"
DATABASE = "bench"


class ArcsLocal:
    """An ``arcs local`` process on the given emulator, with a client that sends the token."""

    def __init__(self, endpoint: str, extra_env: dict[str, str] | None = None) -> None:
        settings = {
            "ARCS_COMPACTION_INTERVAL_S": "0",  # compaction runs when triggered, not behind the figures
            "ARCS_RESULT_CACHE": "false",
            # Replaced files are deleted a second after the swap instead of five minutes: nothing
            # else reads them here, and the run waits for every job to settle.
            "ARCS_COMPACTION_GRACE_S": "1",
            **(extra_env or {}),
        }
        self.server = ArcsProcess.local(endpoint, settings, TOKEN).start()
        self.url = self.server.url
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600)

    def json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self.http.request(method, path, json=body)
        response.raise_for_status()
        return response.json()

    def json_retrying(self, method: str, path: str, body: dict[str, Any] | None = None, attempts: int = 10) -> Any:
        """``json``, asked again after a 503 (the emulator busy past the catalog's time-out), as a
        client of the API is told to."""
        for attempt in range(attempts):
            response = self.http.request(method, path, json=body)
            if response.status_code != 503 or attempt == attempts - 1:
                response.raise_for_status()
                return response.json()
            time.sleep(min(2**attempt, 10))
        raise AssertionError("unreachable")

    def stop(self) -> None:
        self.http.close()
        self.server.stop()


def day_of_lines(day: int, rows_per_hour: int) -> bytes:
    step_ns = HOUR_US * 1000 // rows_per_hour
    lines = []
    for hour in range(day * 24, day * 24 + 24):
        start_ns = (START_US + hour * HOUR_US) * 1000
        lines += [f"cpu,host=h{i % 4} value={float(i)} {start_ns + i * step_ns}" for i in range(rows_per_hour)]
    return "\n".join(lines).encode()


def load(server: ArcsLocal, days: int, rows_per_hour: int) -> None:
    started = time.perf_counter()
    for day in range(days):
        response = server.http.post(f"/write?db={DATABASE}&precision=ns", content=day_of_lines(day, rows_per_hour))
        response.raise_for_status()
    expected = days * 24 * rows_per_hour
    while count(server, "SELECT count(*) FROM cpu") < expected:
        time.sleep(0.5)
    print(
        f"wrote {days} requests, {days * 24} hour partitions ({expected:,} rows), "
        f"queryable in {time.perf_counter() - started:.1f} s"
    )


def count(server: ArcsLocal, sql: str) -> int:
    response = server.http.post("/api/v1/query", json={"sql": sql}, headers={"x-arc-database": DATABASE})
    if response.status_code != 200:
        return -1
    return int(response.json()["data"][0][0])


def run_windows(server: ArcsLocal, days: int, counter: CountingApp, label: str) -> None:
    end = days * 24 - 0.5

    def at(hour: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((START_US + int(hour * HOUR_US)) / 1e6))

    count(server, "SELECT 1")  # a warm function: its start-up is not a window's cost
    print(f"\n{label}")
    print(f"{'window':8} {'rows':>9} {'catalog reads':>14} {'S3 LIST':>8} {'S3 HEAD':>8} {'S3 GET':>8} {'ms':>8}")
    for name, hours in WINDOWS:
        if hours > days * 24:
            continue
        sql = f"SELECT count(*), max(value) FROM cpu WHERE time >= '{at(end - hours)}' AND time < '{at(end)}'"
        counter.take()
        started = time.perf_counter()
        rows = count(server, sql)
        elapsed = (time.perf_counter() - started) * 1000
        counts = counter.take()
        catalog_reads = sum(v for k, v in counts.items() if k.startswith("dynamodb"))
        print(
            f"{name:8} {rows:9,} {catalog_reads:14} {counts['s3 LIST']:8} {counts['s3 HEAD']:8} "
            f"{counts['s3 GET']:8} {elapsed:8.0f}"
        )


def compact(server: ArcsLocal, database: str = DATABASE) -> None:
    """Trigger compaction through its route (the tasks function, invoked asynchronously) until no
    partition of ``database`` is a candidate and no job is running."""
    started = time.perf_counter()
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        server.json_retrying("POST", "/api/v1/compaction/trigger", {"database": database})
        for _ in range(60):
            time.sleep(1)
            idle = not server.json_retrying("GET", "/api/v1/compaction/status")["active_jobs"]
            candidates = server.json_retrying("GET", f"/api/v1/compaction/candidates?database={database}")
            if idle and not candidates["count"]:
                history = server.json_retrying("GET", "/api/v1/compaction/history?limit=1000")["jobs"]
                days = [job for job in history if job.get("tier") == "day"]
                print(f"\ncompacted through the route in {time.perf_counter() - started:.1f} s: {len(days)} day jobs")
                return
    raise RuntimeError("compaction still had candidates after 30 minutes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rows-per-hour", type=int, default=100)
    args = parser.parse_args()
    copy_tables_once_per_transaction()
    endpoint, counter = start_moto()
    server = ArcsLocal(endpoint)
    try:
        print(f"== arcs local at {server.url} on moto at {endpoint} ==")
        load(server, args.days, args.rows_per_hour)
        run_windows(server, args.days, counter, "hour tier only (one file per hour):")
        compact(server)
        run_windows(server, args.days, counter, "after the day tier:")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
