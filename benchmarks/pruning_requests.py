"""Storage requests per query, pruned and unpruned, against a moto server.

    uv run python -m benchmarks.pruning_requests [--days 30]

Loads one file per hour for ``--days`` days of one measurement through the real ingest path onto a
moto server (S3 + DynamoDB), then runs queries over ranges of different sizes through the query
service as the Lambda runs it (DuckDB httpfs reading S3) and prints, per query, every request the
storage saw: catalog reads (DynamoDB), S3 listings, S3 object reads. A bounded query must make a
constant number of listing requests, not one per partition. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import boto3
import pyarrow as pa
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, make_server

from arcs.adapters.aws import AwsClients, aws_runtime_parts, create_resources
from arcs.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.ingest import Ingestor, QueuedWrite
from arcs.runtime import Runtime
from arcs.settings import Settings
from arcs.tokens import Principal

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--rows-per-hour", type=int, default=100)
    args = parser.parse_args()
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
    )
    store, catalog, tokens, queue, roots, s3, _invoke = aws_runtime_parts(settings, session)
    runtime = Runtime(settings, store, catalog, tokens, queue, roots, s3)
    hours = args.days * 24
    from arcs.schema import SchemaRegistry

    SchemaRegistry(catalog).apply("bench", [hour_batch(0, 1).parts[0]])
    ingestor = Ingestor(catalog, store, settings.prefix)
    started = time.perf_counter()
    for hour in range(hours):  # one ingest batch per hour: one file per partition
        batch = hour_batch(hour, args.rows_per_hour)
        data = batch.to_bytes()
        ingestor.ingest([QueuedWrite(batch.write_id, batch.write_id, lambda data=data: data)])
    print(
        f"loaded {hours} hourly partitions ({hours * args.rows_per_hour:,} rows) in "
        f"{time.perf_counter() - started:.1f} s\n"
    )

    def at(hour: float) -> str:
        seconds = (START_US + int(hour * HOUR_US)) / 1e6
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))

    queries = [
        ("one hour", f"SELECT count(*) FROM cpu WHERE time >= '{at(100)}' AND time < '{at(101)}'"),
        ("one hour, BETWEEN", f"SELECT avg(value) FROM cpu WHERE time BETWEEN '{at(200)}' AND '{at(200.5)}'"),
        ("one day", f"SELECT host, max(value) FROM cpu WHERE time >= '{at(48)}' AND time < '{at(72)}' GROUP BY 1"),
        ("a week", f"SELECT count(*) FROM cpu WHERE time >= '{at(0)}' AND time < '{at(168)}'"),
        ("no data in range", "SELECT count(*) FROM cpu WHERE time > '2030-01-01'"),
        ("unbounded", "SELECT count(*) FROM cpu"),
    ]
    runtime.queries.run("SELECT 1", "bench", ADMIN)  # connection, httpfs and the secret: not per query
    counter.take()
    print(f"{'query':20} {'rows':>8} {'catalog reads':>14} {'S3 LIST':>8} {'S3 HEAD':>8} {'S3 GET':>8} {'ms':>8}")
    for label, sql in queries:
        started = time.perf_counter()
        result = runtime.queries.run(sql, "bench", ADMIN)
        elapsed = (time.perf_counter() - started) * 1000
        counts = counter.take()
        catalog_reads = sum(v for k, v in counts.items() if k.startswith("dynamodb"))
        print(
            f"{label:20} {result.table.num_rows:8} {catalog_reads:14} {counts['s3 LIST']:8} "
            f"{counts['s3 HEAD']:8} {counts['s3 GET']:8} {elapsed:8.0f}"
        )


if __name__ == "__main__":
    main()
