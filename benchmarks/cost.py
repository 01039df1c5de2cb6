"""What the stack costs, measured: ingest per format, the ClickBench queries, a dashboard, idle.

    uv run python -m benchmarks.cost [--rows 1000000] [--clickbench-rows 100000] [--out cost.md]

The user's path end to end, as benchmarks/pruning_arcs_local.py runs it: a moto server of this
process meters every request the functions make (S3 by request class, SQS in 64 KB chunks,
DynamoDB in request units estimated from the item and answer sizes, S3 bytes read), and an
``arcs local`` process on it runs the functions' handlers with ``ARCS_LOCAL_INVOCATION_LOG`` on
(``arcs.emulation.measure``): each invocation reports its wall time, the process's CPU time
meanwhile and its peak resident memory. The client sends one request at a time and waits for
its ingest invocation, so an invocation's CPU time is its own.

- Ingest: ``--rows`` rows in each write format (line protocol, MessagePack columnar and row,
  JSON), requests of ``--rows-per-request`` rows; the edge, authorizer and ingest invocations.
- Queries: ClickBench's 43 over ``--clickbench-rows`` generated rows written through the
  MessagePack API and compacted; a dashboard (last hour, day and 30 days, by minute/hour/day and
  host) over 30 days written as line protocol and compacted.
- Idle: each scheduled task (compaction, continuous queries, retention) run by its rule on the
  stack before any data, so it finds nothing to do, priced at the stack's default schedules (infra/compact.py).

Each invocation is billed for its measured wall time at the function's configured memory
(infra/params.py): that assumes a Lambda core as fast as this machine's and S3's latency as low
as the local emulator's; see docs/cost.md. Prices: benchmarks/cost_prices.py.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import boto3

from arcs import envvars
from arcs.emulation.local import CQ_SCHEDULE_S, EDGE_FUNCTION, RETENTION_SCHEDULE_S, TASKS_FUNCTION
from benchmarks import cost_prices as prices
from benchmarks.cost_metering import MeteringApp, Request, s3_bytes_read, start_metered_moto, storage_usage
from benchmarks.cost_prices import Usage
from benchmarks.ingest import FORMATS, columns_for
from benchmarks.pruning_arcs_local import ArcsLocal, compact, day_of_lines
from benchmarks.pruning_requests import HOUR_US, START_US, copy_tables_once_per_transaction

#: The stack's configured memory per function (infra/params.py DEFAULT_MEMORY_MB), by the name
#: ``arcs local`` gives each.
MEMORY_MB = {
    EDGE_FUNCTION: 2048,
    "arcs-ingest": 2048,
    "arcs-query": 3008,
    "arcs-authorizer": 1024,
    TASKS_FUNCTION: 3008,
}
#: The stack's schedules (infra/compact.py DEFAULT_SCHEDULES), seconds between runs.
SCHEDULES_S = {"compaction": 15 * 60, "continuous_queries": 60, "retention": 3600}
#: The stack's alarms and dashboards (tests/infra/test_deploy_app.py EXPECTED_RESOURCE_TYPES).
SCHEDULES_OFF = {envvars.COMPACTION_INTERVAL_S: "0", CQ_SCHEDULE_S: "0", RETENTION_SCHEDULE_S: "0"}
STACK_ALARMS = 17
STACK_DASHBOARDS = 1
STACK_SECRETS = 1  # the admin token
WRITE_PATHS = {
    "line-protocol": ("/api/v1/write/line-protocol?precision=ns", "text/plain"),
    "msgpack-columnar": ("/api/v1/write/msgpack", "application/msgpack"),
    "msgpack-rows": ("/api/v1/write/msgpack", "application/msgpack"),
    "json-columnar": ("/api/v1/write/json", "application/json"),
}
DASHBOARD = [("last hour", 1, "minute"), ("last day", 24, "hour"), ("last 30 days", 30 * 24, "day")]
DASHBOARD_DB = "dashboard"
CLICKBENCH_DB = "clickbench"
DASHBOARD_ROWS_PER_HOUR = 60


#: How long a write may wait for its ingest invocation. A guard against a hung emulator only: a
#: 4 MB ClickBench write spans a month of hours, hundreds of files and catalog transactions, which
#: the emulated DynamoDB takes minutes for on a small machine.
INVOCATION_WAIT_S = 1800


@dataclass(slots=True)
class Invocation:
    function: str
    wall_s: float
    cpu_s: float
    rss_peak: int
    rss_growth: int


class InvocationLog:
    """The JSON lines ``arcs local`` appends, one per invocation (``arcs.emulation.measure``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def mark(self) -> int:
        return len(self.read())

    def read(self) -> list[Invocation]:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        invocations = []
        for line in lines:
            record = json.loads(line)
            invocations.append(
                Invocation(
                    record["function"],
                    record["wall_s"],
                    record["cpu_s"],
                    record["rss_peak"],
                    record["rss_peak"] - record["rss_before"],
                )
            )
        return invocations

    def since(self, mark: int) -> list[Invocation]:
        return self.read()[mark:]

    def wait_for(self, function: str, mark: int, timeout_s: float = INVOCATION_WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(i.function == function for i in self.since(mark)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {function} invocation within {timeout_s:g} s")
            time.sleep(0.05)


def memory_of(function: str) -> int:
    return MEMORY_MB.get(function, MEMORY_MB[TASKS_FUNCTION])


@dataclass(slots=True)
class Measured:
    """One workload's measures: its invocations and the storage requests they made."""

    label: str
    invocations: list[Invocation]
    requests: list[Request]
    api_requests: int
    wall_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    def usage(self) -> Usage:
        usage = Usage(api_requests=self.api_requests)
        for invocation in self.invocations:
            usage.add_invocation(memory_of(invocation.function), invocation.wall_s)
        storage_usage(self.requests, usage)
        return usage

    def cpu_s(self, *functions: str) -> float:
        return sum(i.cpu_s for i in self.invocations if not functions or i.function in functions)

    def peak_mib(self, *functions: str) -> float:
        peaks = [i.rss_peak for i in self.invocations if not functions or i.function in functions]
        return max(peaks, default=0) / 2**20

    def wall_s_of(self, function: str) -> float:
        return sum(i.wall_s for i in self.invocations if i.function == function)

    def count(self, service: str, operation: str | None = None) -> int:
        return sum(1 for r in self.requests if r.service == service and operation in (None, r.operation))


class Bench:
    """One ``arcs local`` on the metered moto, with the invocation log on."""

    def __init__(self, endpoint: str, meter: MeteringApp, work: Path, extra_env: dict[str, str] | None = None) -> None:
        self.meter = meter
        self.log = InvocationLog(work / f"invocations-{time.monotonic_ns()}.jsonl")
        env = {envvars.LOCAL_INVOCATION_LOG: str(self.log.path), **(extra_env or {})}
        self.server = ArcsLocal(endpoint, env)

    def measure(self, label: str, run: Callable[[], int]) -> Measured:
        """Run ``run`` (it returns the API requests it sent) once every invocation settled."""
        log_mark, meter_mark = self.log.mark(), self.meter.mark()
        started = time.perf_counter()
        api_requests = run()
        wall = time.perf_counter() - started
        return Measured(label, self.log.since(log_mark), self.meter.since(meter_mark), api_requests, wall)

    def write(self, database: str, path: str, content_type: str, body: bytes) -> None:
        """One write, then its ingest invocation: one invocation at a time, so each CPU time is its own."""
        mark = self.log.mark()
        response = self.server.http.post(
            path, content=body, headers={"Content-Type": content_type, "x-arc-database": database}
        )
        if response.status_code != 204:
            raise RuntimeError(f"write: HTTP {response.status_code}: {response.text[:300]}")
        self.log.wait_for("arcs-ingest", mark)

    def query(self, database: str, sql: str) -> int:
        response = self.server.http.post("/api/v1/query/arrow", json={"sql": sql}, headers={"x-arc-database": database})
        if response.status_code != 200:
            raise RuntimeError(f"query {sql[:80]!r}: HTTP {response.status_code}: {response.text[:300]}")
        return len(response.content)

    def stop(self) -> None:
        self.server.stop()


def measure_ingest(bench: Bench, fmt: str, rows: int, rows_per_request: int) -> Measured:
    path, content_type = WRITE_PATHS[fmt]
    encode = FORMATS[fmt][1]
    # Warm functions: a container's start-up is paid once per container, not per write.
    bench.write("warmup", path, content_type, encode(columns_for(10**6, 10)))
    requests = math.ceil(rows / rows_per_request)
    bodies = [encode(columns_for(i, min(rows_per_request, rows - i * rows_per_request))) for i in range(requests)]

    def run() -> int:
        for body in bodies:
            bench.write(ingest_database(fmt), path, content_type, body)
        return len(bodies)

    measured = bench.measure(fmt, run)
    measured.extra["rows"] = rows
    measured.extra["body_bytes"] = sum(len(b) for b in bodies)
    return measured


def ingest_database(fmt: str) -> str:
    return "ingest_" + fmt.replace("-", "_")


def stored_bytes(endpoint: str, prefix: str) -> int:
    # moto takes any key: these name the emulator's account, not a real one.
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    total = 0
    for bucket in s3.list_buckets()["Buckets"]:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            total += sum(
                o["Size"] for o in page.get("Contents", []) if prefix in o["Key"] and o["Key"].endswith(".parquet")
            )
    return total


def load_dashboard(bench: Bench, days: int) -> None:
    for day in range(days):
        lines = day_of_lines(day, DASHBOARD_ROWS_PER_HOUR)
        bench.write(DASHBOARD_DB, "/api/v1/write/line-protocol?precision=ns", "text/plain", lines)


def dashboard_queries(days: int) -> list[tuple[str, str]]:
    end = days * 24 - 0.5

    def at(hour: float) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((START_US + int(hour * HOUR_US)) / 1e6))

    return [
        (
            name,
            f"SELECT date_trunc('{unit}', time) AS t, host, avg(value), max(value) FROM cpu "
            f"WHERE time >= '{at(end - hours)}' AND time < '{at(end)}' GROUP BY 1, 2 ORDER BY 1, 2",
        )
        for name, hours, unit in DASHBOARD
    ]


def load_clickbench(bench: Bench, rows: int, work: Path) -> None:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq
    from clickbench.generate import generate_hits, to_parquet_layout
    from clickbench.load import api_select, msgpack_requests

    source_path = work / "hits.parquet"
    pq.write_table(to_parquet_layout(generate_hits(rows, seed=1)), source_path)
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET preserve_insertion_order = true")
    source = f"read_parquet('{source_path}', binary_as_string = true)"
    for batch in con.execute(api_select(con, source)).to_arrow_reader(100_000):
        for body in msgpack_requests(pa.Table.from_batches([batch])):
            bench.write(CLICKBENCH_DB, "/api/v1/write/msgpack", "application/msgpack", body)
    con.close()


def measure_queries(bench: Bench, database: str, queries: list[tuple[str, str]]) -> list[Measured]:
    bench.query(database, "SELECT 1")  # a warm function: its start-up is not a query's cost
    results = []
    for label, sql in queries:
        measured = bench.measure(label, lambda sql=sql: (bench.query(database, sql), 1)[1])
        measured.extra["bytes_read"] = s3_bytes_read(measured.requests)
        results.append(measured)
    return results


def measure_idle(endpoint: str, meter: MeteringApp, work: Path, seconds: float) -> dict[str, Measured]:
    """Each scheduled task alone, run every 2 s by its rule for ``seconds``."""
    names = {
        "compaction": (envvars.COMPACTION_INTERVAL_S, TASKS_FUNCTION),
        "continuous_queries": (CQ_SCHEDULE_S, f"{TASKS_FUNCTION}-continuous-queries"),
        "retention": (RETENTION_SCHEDULE_S, f"{TASKS_FUNCTION}-retention"),
    }
    results = {}
    for task, (variable, function) in names.items():
        bench = Bench(endpoint, meter, work, {**SCHEDULES_OFF, variable: "2"})
        try:
            measured = bench.measure(task, lambda: (time.sleep(seconds), 0)[1])
        finally:
            bench.stop()
        measured.invocations = [i for i in measured.invocations if i.function == function]
        # The poller's empty receives are the ingest path's idle cost, counted apart.
        measured.extra["empty_receives"] = sum(
            1 for r in measured.requests if r.operation == "ReceiveMessage" and r.items < 2
        )
        results[task] = measured
    return results


# -- the tables ----------------------------------------------------------------------------------


def per_invocation(measured: Measured) -> Usage:
    runs = max(1, len(measured.invocations))
    return measured.usage().scaled(1 / runs)


def idle_month(idle: dict[str, Measured]) -> tuple[float, dict[str, float]]:
    """The scheduled tasks' month at the stack's schedules; alarms, dashboard and secret; the event source
    mapping's long polls (assumed: 5 pollers, a 20 s poll each, as Lambda's SQS pollers idle)."""
    parts = {}
    for task, measured in idle.items():
        parts[task] = prices.total(per_invocation(measured).scaled(prices.monthly_runs(SCHEDULES_S[task])))
    parts["sqs polling"] = 5 * prices.monthly_runs(20) * prices.price("sqs_request")
    parts["fixed"] = prices.idle_fixed_month(STACK_ALARMS, STACK_DASHBOARDS, STACK_SECRETS)
    return sum(parts.values()), parts


def render(
    args: argparse.Namespace,
    ingest: list[Measured],
    stored: dict[str, int],
    clickbench: list[Measured],
    dashboard: list[Measured],
    idle: dict[str, Measured],
) -> str:
    out: list[str] = []
    out.append("### Ingest, per million rows\n")
    out.append(
        "| format | edge CPU s | ingest CPU s | authorizer CPU s | edge peak MiB | ingest peak MiB | invocations "
        "| S3 PUT/LIST | S3 GET/HEAD | SQS req | DynamoDB R/W units | Parquet MB | $ per billion rows |"
    )
    out.append("|" + "---|" * 13)
    per_billion = {}
    for m in ingest:
        scale = 1e6 / m.extra["rows"]
        usage = m.usage()
        dollars_b = prices.total(usage.scaled(1e9 / m.extra["rows"]))
        per_billion[m.label] = dollars_b
        cpu = [m.cpu_s(f) * scale for f in (EDGE_FUNCTION, "arcs-ingest", "arcs-authorizer")]
        units = f"{usage.ddb_read_units * scale:,.0f}/{usage.ddb_write_units * scale:,.0f}"
        out.append(
            f"| {m.label} | {cpu[0]:.1f} | {cpu[1]:.1f} | {cpu[2]:.1f} "
            f"| {m.peak_mib(EDGE_FUNCTION):.0f} | {m.peak_mib('arcs-ingest'):.0f} "
            f"| {usage.invocations * scale:,.0f} | {usage.s3_put * scale:,.0f} | {usage.s3_get * scale:,.0f} "
            f"| {usage.sqs_requests * scale:,.0f} | {units} | {stored[m.label] * scale / 1e6:.1f} | ${dollars_b:,.2f} |"
        )
    out.append("")
    for title, measured in (("Dashboard queries", dashboard), ("ClickBench queries", clickbench)):
        out.append(f"### {title}\n")
        out.append(
            "| query | CPU s | wall s | peak MiB | S3 GET/HEAD | S3 LIST | DynamoDB reads | MB read | $ per thousand |"
        )
        out.append("|" + "---|" * 9)
        for m in measured:
            usage = m.usage()
            out.append(
                f"| {m.label} | {m.cpu_s('arcs-query'):.2f} | {m.wall_s_of('arcs-query'):.2f} "
                f"| {m.peak_mib('arcs-query'):.0f} | {usage.s3_get} | {m.count('s3', 'LIST')} | {m.count('dynamodb')} "
                f"| {m.extra['bytes_read'] / 1e6:.2f} | ${prices.total(usage) * 1000:.4f} |"
            )
        out.append("")
    out.append("### Idle, per scheduled run\n")
    out.append("| task | runs a month | CPU s a run | wall s a run | S3 req a run | DynamoDB req a run | $ a month |")
    out.append("|---|---|---|---|---|---|---|")
    idle_total, idle_parts = idle_month(idle)
    for task, m in idle.items():
        runs = max(1, len(m.invocations))
        out.append(
            f"| {task} | {prices.monthly_runs(SCHEDULES_S[task]):,.0f} | {m.cpu_s() / runs:.3f} "
            f"| {sum(i.wall_s for i in m.invocations) / runs:.3f} | {m.count('s3') / runs:.1f} "
            f"| {m.count('dynamodb') / runs:.1f} | ${idle_parts[task]:.2f} |"
        )
    out.append("")
    out.append(summary(args, ingest, per_billion, stored, clickbench, dashboard, idle_total, idle_parts))
    return "\n".join(out)


def summary(
    args: argparse.Namespace,
    ingest: list[Measured],
    per_billion: dict[str, float],
    stored: dict[str, int],
    clickbench: list[Measured],
    dashboard: list[Measured],
    idle_total: float,
    idle_parts: dict[str, float],
) -> str:
    dashboard_k = sum(prices.total(m.usage()) for m in dashboard) / len(dashboard) * 1000
    clickbench_k = sum(prices.total(m.usage()) for m in clickbench) / max(1, len(clickbench)) * 1000
    athena_dashboard_k = sum(prices.athena_query(m.extra["bytes_read"]) for m in dashboard) / len(dashboard) * 1000
    athena_clickbench_k = (
        sum(prices.athena_query(m.extra["bytes_read"]) for m in clickbench) / max(1, len(clickbench)) * 1000
    )
    stored_per_billion = statistics.mean(stored[m.label] * 1e9 / m.extra["rows"] for m in ingest)
    lines = ["### Summary (us-east-1, prices of " + prices.PRICES_DATE + ")\n"]
    lines.append("| | Arc Serverless | Firehose + Parquet + Athena |")
    lines.append("|---|---|---|")
    for m in ingest:
        row_bytes = m.extra["body_bytes"] / m.extra["rows"]
        per_row = prices.firehose_ingest(10**9, row_bytes)
        batched = prices.firehose_ingest(math.ceil(10**9 / args.rows_per_request), row_bytes * args.rows_per_request)
        lines.append(
            f"| per billion rows ingested, {m.label} ({row_bytes:.0f} B a row) | ${per_billion[m.label]:,.2f} "
            f"| ${per_row:,.2f} a row per record; ${batched:,.2f} {args.rows_per_request:,} rows per record |"
        )
    lines.append(f"| per thousand dashboard queries | ${dashboard_k:.4f} | ${athena_dashboard_k:.4f} |")
    clickbench_label = f"per thousand ClickBench queries ({args.clickbench_rows:,} rows)"
    lines.append(f"| {clickbench_label} | ${clickbench_k:.4f} | ${athena_clickbench_k:.4f} |")
    storage = prices.storage_month(args.idle_gb * prices.GB)
    lines.append(
        f"| per month idle, {args.idle_gb:g} GB stored | ${idle_total + storage:,.2f} "
        f"(schedules and polling ${idle_total - idle_parts['fixed']:,.2f}, alarms, dashboard and secret "
        f"${idle_parts['fixed']:.2f}, storage ${storage:,.2f}) | ${storage:,.2f} (storage) |"
    )
    lines.append(
        f"| storage per billion rows a month | ${prices.storage_month(stored_per_billion):,.2f} "
        f"({stored_per_billion / 1e9:,.1f} GB) | the same Parquet |"
    )
    lines.append("")
    lines.append(
        f"Measured by `python -m benchmarks.cost {' '.join(args.argv)}` "
        f"on {platform.machine()} Linux, {os.cpu_count()} cores, Python {platform.python_version()}."
    )
    return "\n".join(lines)


def _without_out(argv: list[str]) -> list[str]:
    """The command line as the table quotes it: without ``--out`` and its path, in either form."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return kept


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows written in each format")
    parser.add_argument("--rows-per-request", type=int, default=10_000)
    parser.add_argument("--clickbench-rows", type=int, default=100_000)
    parser.add_argument("--clickbench-queries", type=int, default=43, help="the first N of the 43")
    parser.add_argument("--dashboard-days", type=int, default=30)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--idle-gb", type=float, default=100.0, help="the dataset an idle stack stores")
    parser.add_argument(
        "--compact", action=argparse.BooleanOptionalAction, default=True, help="compact before the queries"
    )
    parser.add_argument("--out", type=Path, help="write the markdown tables here")
    args = parser.parse_args(argv)
    args.argv = _without_out(sys.argv[1:] if argv is None else argv)

    from clickbench.generate import scale_query
    from clickbench.harness import queries

    copy_tables_once_per_transaction()
    endpoint, meter = start_metered_moto()
    with tempfile.TemporaryDirectory(prefix="arcs-cost-") as tmp:
        work = Path(tmp)
        # Idle first: the stack as deployed, before any data, each scheduled run finding nothing to do.
        idle = measure_idle(endpoint, meter, work, args.idle_seconds)
        # The schedules off: each figure is the workload's alone.
        bench = Bench(endpoint, meter, work, SCHEDULES_OFF)
        try:
            ingest = []
            for fmt in WRITE_PATHS:
                ingest.append(measure_ingest(bench, fmt, args.rows, args.rows_per_request))
                print(f"ingest {fmt}: {ingest[-1].wall_s:.1f} s", file=sys.stderr)
            stored = {fmt: stored_bytes(endpoint, f"{ingest_database(fmt)}/") for fmt in WRITE_PATHS}
            load_dashboard(bench, args.dashboard_days)
            load_clickbench(bench, args.clickbench_rows, work)
            if args.compact:
                # Queries read what compaction leaves, as they do once it has caught up.
                for database in (DASHBOARD_DB, CLICKBENCH_DB):
                    compact(bench.server, database)
            dashboard = measure_queries(bench, DASHBOARD_DB, dashboard_queries(args.dashboard_days))
            sqls = [scale_query(sql, args.clickbench_rows) for sql in queries()[: args.clickbench_queries]]
            clickbench = measure_queries(bench, CLICKBENCH_DB, [(f"Q{n}", sql) for n, sql in enumerate(sqls)])
        finally:
            bench.stop()
    table = render(args, ingest, stored, clickbench, dashboard, idle)
    print(table)
    if args.out:
        args.out.write_text(table + "\n", encoding="utf-8")
    return table


if __name__ == "__main__":
    main()
