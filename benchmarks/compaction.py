"""Compaction benchmark: many small files of one hour partition -> a few large ones.

    uv run python -m benchmarks.compaction [--files 1000] [--rows 1000] [--repeat 5]

Ingests ``--files`` writes of ``--rows`` rows each (the cpu shape of benchmarks/ingest.py: time,
two tags, three fields) into one hour of one measurement through the ingest path, so the
partition holds that many small files. Then, for each sort order (time; tags then time), on a
copy of that data directory, it compacts the partition on one DuckDB thread and prints:
  * file count and bytes before and after,
  * compaction throughput per core (input MB / CPU seconds of the whole process),
  * the same queries before and after: identical results, and the speedup (best of --repeat).
``--interleaved`` makes every file's times span the hour (file i holds times i, i + files, ...), as
many writers' requests do: the files' time ranges meet, so queries before compaction read them
through the merge of a point's rows (docs/compaction.md); without it each file holds its own
stretch of the hour and is read as it is.
Figures are printed, never asserted: tests check correctness, this checks speed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from arcs.auth.tokens import Principal
from arcs.runtime import LocalRuntime, local_runtime
from arcs.settings import CompactionSort, Settings
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.ingest import QueuedWrite

HOSTS = [f"server{i:02d}" for i in range(50)]
REGIONS = ["us-east", "us-west", "eu-central", "ap-south"]
HOUR_US = 3_600_000_000
START_US = 1_700_000_000_000_000 - 1_700_000_000_000_000 % HOUR_US
ADMIN = Principal("bench", "bench", frozenset({"admin"}), ())


def file_batch(index: int, rows: int, files: int, interleaved: bool = False) -> WriteBatch:
    rng = random.Random(index)
    step = HOUR_US // (rows * files)
    if interleaved:
        times = [START_US + (i * files + index) * step for i in range(rows)]
    else:
        times = [START_US + (index * rows + i) * step for i in range(rows)]
    table = pa.table(
        {
            "time": pa.array(times, pa.int64()).cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),  # µs in
            "host": [HOSTS[rng.randrange(len(HOSTS))] for _ in range(rows)],
            "region": [REGIONS[rng.randrange(len(REGIONS))] for _ in range(rows)],
            "usage_user": [rng.random() * 100 for _ in range(rows)],
            "usage_system": [rng.random() * 100 for _ in range(rows)],
            "requests": pa.array([rng.randrange(10_000) for _ in range(rows)], pa.int64()),
        }
    )
    return WriteBatch(f"bench-{index}", "bench", (MeasurementRows("cpu", table, ("host", "region")),))


def at(offset_us: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((START_US + offset_us) / 1e6))


QUERIES = [
    ("count, avg", "SELECT count(*), round(avg(usage_user), 6) FROM cpu"),
    ("max per host", "SELECT host, max(usage_system) FROM cpu GROUP BY host ORDER BY host"),
    (
        "10 minutes per region",
        f"SELECT region, count(*), max(requests) FROM cpu WHERE time BETWEEN '{at(600_000_000)}' "
        f"AND '{at(1_200_000_000)}' GROUP BY region ORDER BY region",
    ),
    ("one host's latest", "SELECT time, usage_user FROM cpu WHERE host = 'server07' ORDER BY time DESC LIMIT 100"),
    ("first rows in time", "SELECT time, host, usage_user FROM cpu ORDER BY time LIMIT 10"),
]


def runtime_at(data_dir: Path, sort: CompactionSort = "time") -> LocalRuntime:
    settings = Settings(backend="local", data_dir=data_dir)
    compaction = replace(settings.compaction, min_age_s=0, grace_s=0, threads=1, sort=sort)
    return local_runtime(settings.with_(compaction=compaction))


def run_queries(runtime: LocalRuntime, repeat: int) -> list[tuple[pa.Table, float]]:
    results = []
    for _label, sql in QUERIES:
        best = float("inf")
        table = pa.table({})
        for _ in range(repeat):
            started = time.perf_counter()
            table = runtime.queries.run(sql, "bench", ADMIN).table
            best = min(best, time.perf_counter() - started)
        results.append((table, best))
    return results


def partition_files(runtime: LocalRuntime) -> tuple[int, int]:
    files = runtime.catalog.list_files("bench", "cpu")
    return len(files), sum(f.size for f in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--interleaved", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arcs-bench-compaction-") as tmp:
        source = Path(tmp) / "source"
        runtime = runtime_at(source)
        ingestor = runtime.ingestor()
        started = time.perf_counter()
        for index in range(args.files):
            batch = file_batch(index, args.rows, args.files, args.interleaved)
            data = batch.to_bytes()
            ingestor.ingest([QueuedWrite(batch.write_id, batch.write_id, lambda data=data: data)])
        files, size = partition_files(runtime)
        print(
            f"compaction benchmark: {files:,} files, {files * args.rows:,} rows, {size / 1e6:.1f} MB in one hour "
            f"partition (ingested in {time.perf_counter() - started:.1f} s); one DuckDB thread; "
            f"queries best of {args.repeat}\n"
        )
        before = run_queries(runtime, args.repeat)
        runtime.sqlite.close()
        for sort in ("time", "tags"):
            copy = Path(tmp) / f"sorted-by-{sort}"
            shutil.copytree(source, copy)
            compacted = runtime_at(copy, sort)  # type: ignore[arg-type]
            cpu0, wall0 = time.process_time(), time.perf_counter()
            report = compacted.compactor.run()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            after_files, after_size = partition_files(compacted)
            (job,) = report.jobs
            print(f"sorted by {sort}:")
            print(
                f"  files {files:,} -> {after_files:,} ({files / after_files:,.0f}x fewer); "
                f"bytes {size / 1e6:.1f} MB -> {after_size / 1e6:.1f} MB ({size / after_size:.2f}x smaller)"
            )
            print(
                f"  compaction: {wall:.2f} s wall, {cpu:.2f} s CPU -> {size / 1e6 / cpu:.1f} MB/s per core "
                f"({job.input_rows / cpu / 1e6:.2f} M rows/s per core); {job.output_rows:,} rows out"
            )
            after = run_queries(compacted, args.repeat)
            print(f"  {'query':24} {'before ms':>10} {'after ms':>10} {'speedup':>8}  same result")
            for (label, _sql), (old, old_s), (new, new_s) in zip(QUERIES, before, after, strict=True):
                same = old.equals(new)
                print(f"  {label:24} {old_s * 1e3:10.1f} {new_s * 1e3:10.1f} {old_s / new_s:7.1f}x  {same}")
            compacted.sqlite.close()
            print()


if __name__ == "__main__":
    main()
