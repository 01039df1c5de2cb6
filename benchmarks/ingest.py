"""Ingest benchmark: throughput per core of the write path, per format, and its memory.

    uv run python -m benchmarks.ingest [--requests 100] [--rows 1000] [--server-seconds 10]

For each wire format it builds 100 requests x 1,000 rows (6 columns: time, 2 tags, 3 fields),
then measures pinned to one core, with CPU time, a running server's write path (``Pipeline``: the
spool's segment started, as recycled ones are, and the measurement's schema and the body's shape
known from a first run that is not counted):
  * the write edge (decompress, decode, validate, schema check, envelope, durable spool write;
    MessagePack columnar bodies take the columnar lane once their shape is known: scan, check,
    queue the body as sent),
  * the ingest step (read envelopes, fill queued bodies into tables, group by hour, sort, write
    Parquet to a directory),
  * their sum, the figure the targets are about (>= 3 M rows/s MessagePack columnar,
    >= 1 M rows/s line protocol, >= 0.5 M rows/s JSON),
and, in a fresh child process, the ingest step's peak memory against the batch's decompressed size.
The allocators are set as the runtimes set them (``arcs.allocator``); ``ARROW_DEFAULT_MEMORY_POOL``
set in the environment keeps Arrow on the pool it names (``mimalloc``: Arrow's default).
Finally it drives the standalone server over HTTP and samples its resident memory.
Figures are printed, never asserted: tests check correctness, this checks speed.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import cast

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq

from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.queue import Spool
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.allocator import glibc, keep_large_blocks_on_heap
from arcs.settings import Settings
from arcs.write.batch import ColumnarBody, MeasurementRows, WriteBatch
from arcs.write.decoders import WireFormat, columnar_lane, decode
from arcs.write.edge import WriteRequest, WriteService
from arcs.write.file_writers import parquet_options
from arcs.write.ingest import Ingestor, IngestResult, QueuedWrite
from arcs.write.parquet_encoding import for_parquet
from arcs.write.schema import SchemaRegistry
from benchmarks.launch import ArcsProcess

HOSTS = [f"server{i:02d}" for i in range(50)]
REGIONS = ["us-east", "us-west", "eu-central", "ap-south"]
START_NS = 1_700_000_000_000_000_000


def columns_for(request: int, rows: int) -> dict[str, list[object]]:
    rng = random.Random(request)
    base_ns = START_NS + request * rows * 1_000_000
    return {
        "time": [base_ns + i * 1_000_000 for i in range(rows)],
        "host": [HOSTS[rng.randrange(len(HOSTS))] for _ in range(rows)],
        "region": [REGIONS[rng.randrange(len(REGIONS))] for _ in range(rows)],
        "usage_user": [rng.random() * 100 for _ in range(rows)],
        "usage_system": [rng.random() * 100 for _ in range(rows)],
        "requests": [rng.randrange(10_000) for _ in range(rows)],
    }


def msgpack_columnar(cols: dict[str, list[object]]) -> bytes:
    return msgpack.packb({"m": "cpu", "columns": cols, "tags": ["host", "region"], "precision": "ns"})


def msgpack_rows(cols: dict[str, list[object]]) -> bytes:
    rows = [
        {
            "m": "cpu",
            "t": t,
            "tags": {"host": h, "region": r},
            "fields": {"usage_user": u, "usage_system": s, "requests": q},
        }
        for t, h, r, u, s, q in zip(*cols.values(), strict=True)
    ]
    return msgpack.packb({"batch": rows})


def line_protocol(cols: dict[str, list[object]]) -> bytes:
    return "\n".join(
        f"cpu,host={h},region={r} usage_user={u!r},usage_system={s!r},requests={q}i {t}"
        for t, h, r, u, s, q in zip(*cols.values(), strict=True)
    ).encode()


def json_columnar(cols: dict[str, list[object]]) -> bytes:
    return json.dumps({"m": "cpu", "columns": cols, "tags": ["host", "region"], "precision": "ns"}).encode()


FORMATS: dict[str, tuple[WireFormat, Callable[[dict[str, list[object]]], bytes], str | None]] = {
    "msgpack-columnar": (WireFormat.MSGPACK, msgpack_columnar, None),
    "msgpack-rows": (WireFormat.MSGPACK, msgpack_rows, "ns"),
    "line-protocol": (WireFormat.LINE_PROTOCOL, line_protocol, "ns"),
    "json-columnar": (WireFormat.JSON, json_columnar, None),
}

#: Formats the columnar lane takes once a shape is known (``arcs.write.decoders.columnar_lane``).
LANE_FORMATS = frozenset({"msgpack-columnar"})


def bodies(fmt: str, requests: int, rows: int) -> list[bytes]:
    return [FORMATS[fmt][1](columns_for(i, rows)) for i in range(requests)]


@contextmanager
def one_core() -> Iterator[None]:
    """Run on one CPU, as the figures are per core (and moving between cores costs cache misses)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def machine_speed() -> float:
    """Seconds of CPU a plain Python loop of 10 M additions takes here, best of 3: machines (and one
    machine from one minute to the next) differ by two to three times, so figures from different
    runs compare only beside this."""
    best = float("inf")
    for _ in range(3):
        start, total = time.process_time(), 0
        for number in range(10_000_000):
            total += number
        best = min(best, time.process_time() - start)
    return best


def warm_spool(spool: Spool) -> None:
    """Start the spool's segment before timing: a new one is zeroed once (16 MB), and a running
    server writes over recycled segments instead, so that cost is not the steady state's."""
    spool.enqueue("warm-up", b"")
    spool.done(spool.take(1))


class MemoryQueue:
    """A queue without durability: what the edge hands over, kept in memory (as the spool hands its
    consumer the batches it holds). With it a run measures body bytes in to Parquet stored with
    no queue write or sync in the figure."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bytes, WriteBatch | None]] = []

    def enqueue(self, write_id: str, envelope: bytes, batch: WriteBatch | None = None) -> None:
        self.items.append((write_id, envelope, batch))

    def take_all(self) -> list[QueuedWrite]:
        items, self.items = self.items, []
        return [
            QueuedWrite(str(i), write_id, partial(bytes, envelope), batch=batch)
            for i, (write_id, envelope, batch) in enumerate(items)
        ]


class Pipeline:
    """A running server's write path for one format: catalog, queue (the spool, or with ``durable``
    off a ``MemoryQueue``), data directory and edge, kept from one run to the next. The run made
    on construction is not a figure: there the catalog records the measurement's schema and the
    lane learns the body's shape (a shape's first two requests take the general path, once per
    process), as a server does once for each writer."""

    def __init__(self, fmt: str, requests: int, rows: int, workdir: Path, durable: bool = True) -> None:
        self.fmt, self.requests, self.rows = fmt, requests, rows
        self.payloads = bodies(fmt, requests, rows)
        shutil.rmtree(workdir, ignore_errors=True)
        self.catalog = SqliteCatalog(SqliteDatabase(workdir / "catalog.sqlite"))
        self.spool = Spool(workdir / "spool") if durable else None
        self.memory = MemoryQueue()
        if self.spool is not None:
            warm_spool(self.spool)
        self.store = DirectoryStore(workdir / "storage")
        self.edge = WriteService(self.catalog, self.spool or self.memory, 10 << 20, 100 << 20)
        self.run()

    def ingest(self) -> IngestResult:
        """The ingest step over everything queued, its records then marked done."""
        if self.spool is None:
            return Ingestor(self.catalog, self.store).ingest(self.memory.take_all())
        entries = self.spool.take(self.requests)
        writes = [QueuedWrite(e.handle, e.write_id, partial(self.spool.read, e), batch=e.batch) for e in entries]
        result = Ingestor(self.catalog, self.store).ingest(writes)
        self.spool.done(entries)
        return result

    def run(self, writers: int = 1) -> dict[str, float]:
        """Edge then ingest step; with ``writers`` > 1 the requests arrive from that many threads at
        once (as a busy server's handler threads take them), so spool syncs are shared."""
        kind, _encode, precision = FORMATS[self.fmt]
        payloads, requests, rows, edge = self.payloads, self.requests, self.rows, self.edge

        def send(share: list[bytes]) -> None:
            for body in share:
                edge.accept(WriteRequest(kind, body, "bench", None, precision))

        threads = [threading.Thread(target=send, args=(payloads[i::writers],)) for i in range(writers)]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if writers == 1:
            send(payloads)  # on this thread: no thread start-up in the figure
        else:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        cpu1, wall1 = time.process_time(), time.perf_counter()
        result = self.ingest()
        cpu2, wall2 = time.process_time(), time.perf_counter()
        assert len(result.committed) == requests, result
        stored = sum(f.rows for f in result.files)
        assert stored == requests * rows
        return {
            "edge_cpu": cpu1 - cpu0,
            "edge_wall": wall1 - wall0,
            "ingest_cpu": cpu2 - cpu1,
            "ingest_wall": wall2 - wall1,
            "body_bytes": float(sum(map(len, payloads))),
            "parquet_bytes": float(sum(f.size for f in result.files)),
            "files": float(len(result.files)),
        }


def stages(fmt: str, requests: int, rows: int, workdir: Path, repeat: int, lane: bool) -> dict[str, float]:
    """Where the time goes: each stage alone, CPU microseconds per request (best of ``repeat``).

    The edge's stages are the calls ``WriteService.accept`` makes, in order; the ingest step's
    are reading the envelopes back and writing the batch's Parquet (the rest is the catalog's
    markers and commit record, and the file writes). With ``lane`` the edge's are the columnar
    lane's (its scan and the registry's look-up), as for every request after a shape's first two,
    and reading back includes filling the bodies into one table.
    """
    kind, _encode, precision = FORMATS[fmt]
    payloads = bodies(fmt, requests, rows)
    shutil.rmtree(workdir, ignore_errors=True)
    catalog = SqliteCatalog(SqliteDatabase(workdir / "catalog.sqlite"))
    registry = SchemaRegistry(catalog)
    spool = Spool(workdir / "spool")
    warm_spool(spool)

    def best(step: Callable[[], object]) -> tuple[float, object]:
        times, out = [], None
        for _ in range(repeat):
            start = time.process_time()
            out = step()
            times.append(time.process_time() - start)
        return min(times) / requests * 1e6, out

    parts: list[list[MeasurementRows | ColumnarBody]]
    if lane:
        for _ in range(2):  # a shape's first write records it, the second finds it as it is
            registry.apply("bench", decode(kind, payloads[0], 0, precision))
        decode_us, scanned = best(lambda: [columnar_lane.scan(body, precision) for body in payloads])
        laned = cast(list[columnar_lane.ScannedBody], scanned)
        assert all(body is not None for body in laned), "the lane declined a benchmark body"
        schema_us, _ = best(lambda: [registry.accepts("bench", b.measurement, b.tags, b.schema) for b in laned])
        parts = [[body] for body in laned]
    else:
        decode_us, decoded = best(lambda: [decode(kind, body, 0, precision) for body in payloads])
        schema_us, checked = best(
            lambda: [registry.apply("bench", p) for p in cast(list[list[MeasurementRows]], decoded)]
        )
        parts = [list(p) for p in cast(list[list[MeasurementRows]], checked)]
    batches = [WriteBatch(uuid.uuid4().hex, "bench", tuple(p)) for p in parts]
    envelope_us, packed = best(lambda: [b.to_bytes() for b in batches])
    envelopes = cast(list[bytes], packed)
    wall = time.perf_counter()
    spool_us, _ = best(lambda: [spool.enqueue(b.write_id, e) for b, e in zip(batches, envelopes, strict=True)])
    spool_wall_us = (time.perf_counter() - wall) / (repeat * requests) * 1e6

    def read_back() -> list[tuple[str, MeasurementRows]]:
        return columnar_lane.tables([columnar_lane.scanned(WriteBatch.from_bytes(e)) for e in envelopes])

    read_us, read = best(read_back)
    table = pa.concat_tables([part.table for _database, part in cast(list[tuple[str, MeasurementRows]], read)])
    tags = [name for name in table.column_names if name in ("host", "region")]
    options = parquet_options(table.schema, tags)

    def write_parquet() -> None:
        pq.write_table(for_parquet(table, tags), pa.BufferOutputStream(), **options)

    parquet_us, _ = best(write_parquet)
    return {
        "decode": decode_us,
        "schema": schema_us,
        "envelope": envelope_us,
        "spool": spool_us,
        "spool_wall": spool_wall_us,
        "read": read_us,
        "parquet": parquet_us,
    }


def queue_batch(fmt: str, requests: int, rows: int, root: Path) -> int:
    """The batch's requests through the edge into a spool and catalog under ``root``, for the child;
    their decompressed size."""
    kind, _encode, precision = FORMATS[fmt]
    catalog = SqliteCatalog(SqliteDatabase(root / "catalog.sqlite"))
    edge = WriteService(catalog, Spool(root / "spool", held_bytes=0), 10 << 20, 100 << 20)
    payloads = bodies(fmt, requests, rows)
    for body in payloads:
        edge.accept(WriteRequest(kind, body, "bench", None, precision))
    return sum(map(len, payloads))


def peak_memory_child(requests: int, workdir: str, decompressed: int) -> None:
    """In a fresh process that never ran the edge (as the Lambda ingest function): read the queued
    batch, then measure the ingest step's peak RSS over its baseline."""
    root = Path(workdir)
    catalog = SqliteCatalog(SqliteDatabase(root / "catalog.sqlite"))
    # The Lambda's path: messages read and decoded (no batch handed over, as the server's spool does).
    spool = Spool(root / "spool", held_bytes=0)
    # Warm up imports and allocators on a throwaway batch so the baseline holds them.
    entries = spool.take(requests)
    assert len(entries) == requests, len(entries)
    envelopes = [spool.read(e) for e in entries]
    envelope_bytes = sum(map(len, envelopes))
    writes = [
        QueuedWrite(e.handle, e.write_id, (lambda data=data: data)) for e, data in zip(entries, envelopes, strict=True)
    ]
    Ingestor(catalog, DirectoryStore(root / "warmup")).ingest(writes[:1])
    _return_free_heap()  # freed memory kept by the C heap (the spool's scan) would flatter the growth
    baseline = _rss_bytes()
    _reset_peak()
    Ingestor(catalog, DirectoryStore(root / "storage")).ingest(writes[1:])
    peak = _peak_rss_bytes()
    print(json.dumps({"baseline": baseline, "peak": peak, "decompressed": decompressed, "envelopes": envelope_bytes}))


def _status(field: str, pid: str = "self") -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _rss_bytes(pid: str = "self") -> int:
    return _status("VmRSS", pid)


def _peak_rss_bytes() -> int:
    return _status("VmHWM")


def _return_free_heap() -> None:
    if glibc():
        ctypes.CDLL(None).malloc_trim(0)


def _reset_peak() -> None:
    # Writing 5 to clear_refs resets the peak RSS (VmHWM) on Linux.
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def server_memory(seconds: float, rows: int) -> dict[str, float]:
    import httpx

    data = Path(tempfile.mkdtemp(prefix="arcs-bench-server-"))
    token = "bench-token-0123456789abcdef"
    server = ArcsProcess.serve(data, token=token).start()
    proc, url = server.process, server.url
    payloads = bodies("msgpack-columnar", 20, rows)
    sent = [0]
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes(str(proc.pid)))
            time.sleep(0.1)

    def send() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            i = 0
            while not stop.is_set():
                response = client.post("/api/v1/write/msgpack", content=payloads[i % len(payloads)])
                assert response.status_code == 204, response.text
                sent[0] += rows
                i += 1

    threads = [threading.Thread(target=sample)] + [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        deadline = time.monotonic() + 120
        stored = 0
        while time.monotonic() < deadline:
            stored = client.post("/api/v1/query", json={"sql": "SELECT count(*) FROM cpu"}).json()["data"][0][0]
            if stored >= sent[0]:
                break
            time.sleep(0.5)
    server.stop()
    shutil.rmtree(data, ignore_errors=True)
    return {"rows_sent": float(sent[0]), "rows_stored": float(stored), "seconds": seconds, "peak_rss": float(peak[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs per format")
    parser.add_argument("--server-seconds", type=float, default=10.0)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--writers", type=int, default=8, help="concurrent writers of the second edge figure")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    # The C heap as the runtimes tune it (the child too, as the ingest function); Arrow's pool: benchmarks/__init__.
    tuned = keep_large_blocks_on_heap(Settings.from_env().mmap_threshold_mb * 1024 * 1024)
    if args.child:
        peak_memory_child(args.requests, args.child[0], int(args.child[1]))
        return
    total_rows = args.requests * args.rows
    print(
        f"ingest benchmark: {args.requests} requests x {args.rows} rows, 6 columns (2 tags), one core, "
        f"best of {args.repeat}; CPU seconds"
    )
    heap = "tuned as the runtimes tune it" if tuned else "not tuned"
    print(f"C heap {heap}; Arrow's pool: {pa.default_memory_pool().backend_name}")
    with one_core():
        print(f"machine: a Python loop of 10 M additions takes {machine_speed():.2f} s of CPU (best of 3)")
    header = (
        f"{'format':18} {'body MB':>8} {'edge rows/s':>12} {'edge us/req':>12} {'ingest rows/s':>14} "
        f"{'body->parquet':>14} {'total rows/s':>13} {f'{args.writers} writers':>11} {'parquet MB':>10} "
        f"{'peak/decomp':>11}"
    )
    print(header)
    print("-" * len(header))
    breakdown: dict[str, tuple[dict[str, float], dict[str, float]]] = {}
    for fmt in args.formats.split(","):
        with tempfile.TemporaryDirectory(prefix="arcs-bench-") as tmp:
            with one_core():
                pipeline = Pipeline(fmt, args.requests, args.rows, Path(tmp) / "runs")
                runs = [pipeline.run() for _ in range(args.repeat)]
                busy = [pipeline.run(args.writers) for _ in range(args.repeat)]
                in_memory = Pipeline(fmt, args.requests, args.rows, Path(tmp) / "memory", durable=False)
                unqueued = [in_memory.run() for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["edge_cpu"] + r["ingest_cpu"])
            best_unqueued = min(unqueued, key=lambda r: r["edge_cpu"] + r["ingest_cpu"])
            best_busy = min(busy, key=lambda r: r["edge_cpu"] + r["ingest_cpu"])
            decompressed = queue_batch(fmt, args.requests, args.rows, Path(tmp) / "mem")
            child = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.ingest",
                    "--requests",
                    str(args.requests),
                    "--rows",
                    str(args.rows),
                    "--child",
                    str(Path(tmp) / "mem"),
                    str(decompressed),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            memory = json.loads(child.stdout.strip().splitlines()[-1])
            with one_core():
                breakdown[fmt] = (best, stages(fmt, args.requests, args.rows, Path(tmp) / "stages", args.repeat, False))
                if fmt in LANE_FORMATS:
                    lane = stages(fmt, args.requests, args.rows, Path(tmp) / "lane", args.repeat, True)
                    breakdown[f"{fmt} (lane)"] = (best, lane)
        growth = max(memory["peak"] - memory["baseline"], 0)
        print(
            f"{fmt:18} {best['body_bytes'] / 1e6:8.1f} {total_rows / best['edge_cpu']:12,.0f} "
            f"{best['edge_cpu'] / args.requests * 1e6:12,.0f} {total_rows / best['ingest_cpu']:14,.0f} "
            f"{total_rows / (best_unqueued['edge_cpu'] + best_unqueued['ingest_cpu']):14,.0f} "
            f"{total_rows / (best['edge_cpu'] + best['ingest_cpu']):13,.0f} "
            f"{total_rows / (best_busy['edge_cpu'] + best_busy['ingest_cpu']):11,.0f} "
            f"{best['parquet_bytes'] / 1e6:10.2f} "
            f"{growth / memory['decompressed']:10.2f}x"
        )
    print(
        "\ningest: the ingest step alone, queued bodies to Parquet stored; body->parquet: request bodies to Parquet "
        "stored (the edge's decoding and checks, then the ingest step) with the queue in memory, so no spool write "
        f"or sync;\ntotal: edge + ingest, each request durable in the spool before the next is sent; {args.writers} "
        f"writers: the same with the requests arriving from {args.writers} threads at once (spool syncs shared, as "
        "on a busy server)"
    )
    print("peak/decomp: the ingest step's resident-memory growth over the batch's decompressed request bodies")
    print(f"\nper request of {args.rows} rows, CPU us (each stage alone, best of {args.repeat}):")
    columns = ("decode", "schema", "envelope", "spool", "read", "parquet")
    line = f"{'format':23} {'edge':>7} " + " ".join(f"{c:>9}" for c in columns[:4])
    line += f" {'(wall)':>8} {'ingest':>7} " + " ".join(f"{c:>8}" for c in columns[4:])
    print(line)
    for fmt, (best, stage) in breakdown.items():
        per = 1e6 / args.requests
        # A format the lane takes ran through it: its edge and ingest figures go on the lane's row.
        ran = fmt not in LANE_FORMATS
        edge = f"{best['edge_cpu'] * per:7,.0f}" if ran else f"{'-':>7}"
        ingest = f"{best['ingest_cpu'] * per:7,.0f}" if ran else f"{'-':>7}"
        print(
            f"{fmt:23} {edge} "
            + " ".join(f"{stage[c]:9,.0f}" for c in columns[:4])
            + f" {stage['spool_wall']:8,.0f} {ingest} "
            + " ".join(f"{stage[c]:8,.0f}" for c in columns[4:])
        )
    print(
        "edge = decompress + decode (with validation) + schema + envelope + spool; spool = one fdatasync'd record "
        "(wall: its elapsed time);\ningest = read (envelopes -> tables) + parquet (one snappy file) + catalog "
        "markers, commit record and file writes;\n(lane): the columnar lane, which the runs above took (decode: its "
        "scan; schema: the registry's look-up; read: the bodies filled into one table); the row above it is the "
        "general path, which a shape's first two requests take"
    )
    if args.server_seconds > 0:
        figures = server_memory(args.server_seconds, args.rows)
        print(
            f"\nstandalone server, msgpack columnar over HTTP from 4 client threads for {figures['seconds']:.0f} s: "
            f"{figures['rows_sent'] / figures['seconds']:,.0f} rows/s accepted, "
            f"{figures['rows_stored']:,.0f} of {figures['rows_sent']:,.0f} rows stored, "
            f"peak RSS {figures['peak_rss'] / 2**20:,.0f} MiB"
        )


if __name__ == "__main__":
    main()
