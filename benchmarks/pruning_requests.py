"""Storage requests and time per query window, before and after the day (and month) tier, on both backends.

    uv run python -m benchmarks.pruning_requests [--days 365] [--backend both|aws|local] [--month]

Loads one file per hour for ``--days`` days of one measurement through the real ingest path (a
day's hours per ingest attempt, one file per hour partition), then queries the last 1 h, 1 d, 7 d,
30 d and 365 d (windows ending at the newest data, starting mid-day as a dashboard's do) twice: as
the hour tier leaves them (one file per hour) and after the day tier merged every day into a day
file (and with ``--month``, after the month tier merged the day files of every month). ``aws``: a
moto server (S3 + DynamoDB) and the query service as the Lambda and ``arcs local``'s query function
run it (DuckDB httpfs reading S3); every request the storage saw is counted: catalog reads
(DynamoDB), S3 listings, HEADs and GETs. ``local``: the standalone server's runtime (SQLite + a
directory); it has no requests, so the files a query opens are its cost. Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, make_server

from arcs.adapters.aws.wiring import AwsClients, aws_runtime_parts, create_resources
from arcs.auth.tokens import Principal
from arcs.runtime import Runtime
from arcs.settings import Settings
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import Ingestor, QueuedWrite

HOUR_US = 3_600_000_000
START_US = 1_700_000_000_000_000 - 1_700_000_000_000_000 % HOUR_US
ADMIN = Principal("bench", "bench", frozenset({"admin"}), ())


class CountingApp:
    """WSGI middleware: what each request to the emulated AWS was, by service and operation."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target:
            kind = "dynamodb " + target.split(".")[-1]
        else:
            method = environ["REQUEST_METHOD"]
            query = environ.get("QUERY_STRING", "")
            path = environ.get("PATH_INFO", "").strip("/")
            kind = "s3 LIST" if method == "GET" and ("list-type" in query or "/" not in path) else f"s3 {method}"
        with self.lock:
            self.counts[kind] += 1
        return self.app(environ, start_response)

    def take(self) -> Counter[str]:
        with self.lock:
            counts, self.counts = self.counts, Counter()
        return counts


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def copy_tables_once_per_transaction() -> None:
    """moto backs up the whole table once per item of a ``TransactWriteItems`` (deep copies), which
    makes a day's commit take minutes on a year of records; once per table per call keeps its
    semantics (a failed transaction restores the table as it was) at a 25th of the cost. The
    figures measured are requests and query times, which this does not touch."""
    import copy as copying
    import threading

    from moto.dynamodb import models

    # Per thread: moto's threaded server runs concurrent transactions at once, and each must
    # restore its own copies, never another's.
    local = threading.local()
    shallow = copying.copy

    def copies() -> dict[int, object]:
        if not hasattr(local, "copies"):
            local.copies = {}
        mine: dict[int, object] = local.copies
        return mine

    class _Copy:
        copy = staticmethod(shallow)

        @staticmethod
        def deepcopy(value: object, memo: dict[int, object] | None = None) -> object:
            mine = copies()
            if id(value) not in mine:
                mine[id(value)] = copying.deepcopy(value, memo)
            return mine[id(value)]

    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        copies().clear()
        try:
            original(self, transact_items)
        finally:
            copies().clear()

    models.copy = _Copy  # type: ignore[attr-defined]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def start_moto() -> tuple[str, CountingApp]:
    app = CountingApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", app


def hour_batch(hour: int, rows: int) -> WriteBatch:
    times = [START_US + hour * HOUR_US + i * (HOUR_US // rows) for i in range(rows)]
    table = pa.table(
        {
            "time": pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),  # µs in
            "host": pa.array([f"h{i % 4}" for i in range(rows)]),
            "value": pa.array([float(i) for i in range(rows)]),
        }
    )
    return WriteBatch(uuid.uuid4().hex, "bench", (MeasurementRows("cpu", table, ("host",)),))


WINDOWS = [("1 h", 1), ("1 d", 24), ("7 d", 7 * 24), ("30 d", 30 * 24), ("365 d", 365 * 24)]


def load(runtime: Runtime, prefix: str, days: int, rows_per_hour: int) -> None:
    from arcs.write.schema import SchemaRegistry

    SchemaRegistry(runtime.catalog).apply("bench", [hour_batch(0, 1).parts[0]])
    ingestor = Ingestor(runtime.catalog, runtime.store, prefix)
    started = time.perf_counter()
    for day in range(days):  # one attempt per day: one file per hour partition
        queued = []
        for hour in range(day * 24, day * 24 + 24):
            batch = hour_batch(hour, rows_per_hour)
            data = batch.to_bytes()
            queued.append(QueuedWrite(batch.write_id, batch.write_id, lambda data=data: data))
        ingestor.ingest(queued)
    print(
        f"loaded {days * 24} hourly partitions ({days * 24 * rows_per_hour:,} rows) in "
        f"{time.perf_counter() - started:.1f} s"
    )


def run_windows(runtime: Runtime, days: int, counter: CountingApp | None, label: str) -> None:
    end = days * 24 - 0.5  # the newest data is in the last hour; windows start mid-day

    def at(hour: float) -> str:
        seconds = (START_US + int(hour * HOUR_US)) / 1e6
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))

    runtime.queries.run("SELECT 1", "bench", ADMIN)  # connection, httpfs and the secret: not per query
    if counter is not None:
        counter.take()
    print(f"\n{label}")
    head = f"{'window':8} {'rows':>9} {'files':>6}"
    if counter is not None:
        head += f" {'catalog reads':>14} {'S3 LIST':>8} {'S3 HEAD':>8} {'S3 GET':>8}"
    print(head + f" {'ms':>8}")
    for name, hours in WINDOWS:
        if hours > days * 24:
            continue
        sql = f"SELECT count(*), max(value) FROM cpu WHERE time >= '{at(end - hours)}' AND time < '{at(end)}'"
        files = len(runtime.queries._prepare(sql, "bench", ADMIN).files)
        if counter is not None:
            counter.take()
        started = time.perf_counter()
        result = runtime.queries.run(sql, "bench", ADMIN)
        elapsed = (time.perf_counter() - started) * 1000
        line = f"{name:8} {result.table.column(0)[0].as_py():9,} {files:6}"
        if counter is not None:
            counts = counter.take()
            catalog_reads = sum(v for k, v in counts.items() if k.startswith("dynamodb"))
            line += f" {catalog_reads:14} {counts['s3 LIST']:8} {counts['s3 HEAD']:8} {counts['s3 GET']:8}"
        print(line + f" {elapsed:8.0f}")


def compact_tier(runtime: Runtime, prefix: str, work: Path, tier: str) -> None:
    """One compaction run with the tiers up to ``tier`` (``day`` or ``month``)."""
    from arcs.lifecycle.compaction.compactor import Compactor

    tiers = ("hour", "day") if tier == "day" else ("hour", "day", "month")
    config = replace(runtime.settings.compaction, tiers=tiers, grace_s=0)
    compactor = Compactor(runtime.catalog, runtime.store, prefix, config, work)
    started = time.perf_counter()
    report = compactor.run()
    jobs = [job for job in report.jobs if job.partition.tier == tier]
    print(
        f"\n{tier} tier: {len(jobs)} {tier} jobs, {sum(len(j.input_keys) for j in jobs):,} files -> "
        f"{sum(len(j.output_keys) for j in jobs):,} in {time.perf_counter() - started:.1f} s"
    )


def bench_aws(days: int, rows_per_hour: int, month: bool) -> None:
    copy_tables_once_per_transaction()
    endpoint, counter = start_moto()
    session = boto3.Session(aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1")
    resources = create_resources(
        AwsClients.create(session, endpoint_url=endpoint), "bench-data", "bench-q", "bench-dlq", "bench"
    )
    settings = Settings(
        backend="aws",
        bucket="bench-data",
        prefix="arcs",
        queue_url=resources["queue_url"],
        tokens_table=resources["tokens_table"],
        catalog_table=resources["catalog_table"],
        leases_table=resources["leases_table"],
        aws_endpoint_url=endpoint,
        result_cache=False,
        query_timeout_s=0,  # the figures of the slow layout too, not a time-out
    )
    parts = aws_runtime_parts(settings, session)
    runtime = Runtime(
        settings, parts.store, parts.catalog, parts.tokens, parts.queue, parts.allowed_roots, parts.s3_access
    )
    print("== serverless path: the query function on moto's S3 and DynamoDB ==")
    load(runtime, settings.prefix, days, rows_per_hour)
    run_windows(runtime, days, counter, "hour tier only (one file per hour):")
    with tempfile.TemporaryDirectory() as work:
        compact_tier(runtime, settings.prefix, Path(work), "day")
    run_windows(runtime, days, counter, "after the day tier:")
    if month:
        with tempfile.TemporaryDirectory() as work:
            compact_tier(runtime, settings.prefix, Path(work), "month")
        run_windows(runtime, days, counter, "after the month tier:")


def bench_local(days: int, rows_per_hour: int, month: bool) -> None:
    from arcs.runtime import local_runtime

    with tempfile.TemporaryDirectory() as root:
        runtime = local_runtime(Settings(backend="local", data_dir=Path(root), result_cache=False, query_timeout_s=0))
        print("\n== standalone server: SQLite and a directory ==")
        load(runtime, "", days, rows_per_hour)
        run_windows(runtime, days, None, "hour tier only (one file per hour):")
        compact_tier(runtime, "", Path(root) / "work", "day")
        run_windows(runtime, days, None, "after the day tier:")
        if month:
            compact_tier(runtime, "", Path(root) / "work", "month")
            run_windows(runtime, days, None, "after the month tier:")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--rows-per-hour", type=int, default=100)
    parser.add_argument("--backend", choices=["both", "aws", "local"], default="both")
    parser.add_argument("--month", action="store_true", help="then merge every month into month files, and again")
    args = parser.parse_args()
    if args.backend in ("both", "aws"):
        bench_aws(args.days, args.rows_per_hour, args.month)
    if args.backend in ("both", "local"):
        bench_local(args.days, args.rows_per_hour, args.month)


if __name__ == "__main__":
    main()
