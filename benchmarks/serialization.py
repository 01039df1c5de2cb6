r"""Result serialization benchmark: rows per second per core, JSON and Arrow IPC stream.

    uv run python -m benchmarks.serialization [--rows 100000 1000000] [--repeat 3]

Builds results of ``--rows`` rows and five columns (a UTC microsecond timestamp, a host name, a
message of which ``--escapes`` (default 1 %) hold a quote, a backslash, a newline or non-ASCII
text, a full-precision double with some NaN and NULLs, a bigint), then
times on one thread, in CPU time, best of ``--repeat``:
  * JSON: ``to_json_document`` (UTF-8 bytes), and as the route sends it (decoded to its str body);
  * the former value-by-value JSON (``tests/unit/test_results.py``), with Powertools' json.dumps;
  * the Arrow IPC stream (``to_arrow_stream``), and as the route sends it: Powertools base64-encodes
    a bytes body into the proxy response, which costs several times the stream itself.
Figures are printed, never asserted: tests check correctness, this checks speed.

At 1 M rows the bytes objects returned (87 MB of Arrow, 124 MB of JSON) are large blocks: the
query function and the server keep such blocks on the heap between queries (``arcs.allocator``,
``ARCS_MMAP_THRESHOLD_MB``), as this script does with the same default; ``--mmap-threshold-mb 0``
measures glibc's default, where every result faults its pages in anew (system time, counted here).
"""

from __future__ import annotations

import argparse
import base64
import random
import time
from collections.abc import Callable

import pyarrow as pa
from tests.unit.test_results import legacy_json_document, legacy_serialize

from arcs.allocator import keep_large_blocks_on_heap
from arcs.query.results import to_arrow_stream, to_json_document
from arcs.query.service import QueryResult
from arcs.settings import Settings

T0_US = 1_700_000_000_000_000


def make_table(rows: int, seed: int = 0, escapes: float = 0.01) -> pa.Table:
    """Five columns; a share ``escapes`` of the messages holds a quote, a backslash or a newline (or is non-ASCII)."""
    rng = random.Random(seed)
    hosts = [f"server-{i:04d}.eu-west-1" for i in range(500)]
    plain = [f"GET /api/v1/query/{name} 200 in {ms} ms" for name in ("cpu", "mem", "disk", "net") for ms in range(50)]
    special = ['said "hello" twice', "C:\\temp\\file.log", "line one\nline two", "ünïcödé ✓ 😀"]
    values = [rng.random() * 100 for _ in range(rows)]
    for i in range(0, rows, 1000):
        values[i] = float("nan")
    return pa.table(
        {
            "time": pa.array(range(T0_US, T0_US + rows * 10_000, 10_000), pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "host": pa.array([hosts[rng.randrange(500)] for _ in range(rows)]),
            "message": pa.array(
                [rng.choice(special) if rng.random() < escapes else rng.choice(plain) for _ in range(rows)]
            ),
            "value": pa.array([None if i % 997 == 0 else v for i, v in enumerate(values)], pa.float64()),
            "count": pa.array([rng.randrange(-(10**12), 10**12) for _ in range(rows)], pa.int64()),
        }
    )


def best_cpu_seconds(run: Callable[[], object], repeat: int) -> tuple[float, int]:
    best, size = float("inf"), 0
    for _ in range(repeat):
        started = time.process_time()
        out = run()
        best = min(best, time.process_time() - started)
        size = len(out) if isinstance(out, bytes | str) else 0
        del out  # answered: a server frees the body before its next query
    return best, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--escapes", type=float, default=0.01, help="share of messages that need escaping")
    parser.add_argument("--skip-old", action="store_true", help="leave out the former JSON implementation")
    parser.add_argument(
        "--mmap-threshold-mb",
        type=int,
        default=Settings().mmap_threshold_mb,
        help="the allocator setting of the query function and the server (0: glibc's default)",
    )
    args = parser.parse_args()
    tuned = keep_large_blocks_on_heap(args.mmap_threshold_mb * 1024 * 1024)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    print("rows/s per core (CPU time, one thread, best of", args.repeat, "); targets: JSON >= 5 M, Arrow >= 30 M")
    allocator = f"blocks up to {args.mmap_threshold_mb} MiB kept on the heap" if tuned else "the C library's default"
    print(f"allocator: {allocator}; Arrow's pool: {pa.default_memory_pool().backend_name}")
    for rows in args.rows:
        table = make_table(rows, escapes=args.escapes)
        result = QueryResult(table, 1.0)
        cases: list[tuple[str, Callable[..., object]]] = [
            ("json", lambda result=result: to_json_document(result)),
            ("json, as str", lambda result=result: to_json_document(result).decode()),
            ("arrow", lambda table=table: to_arrow_stream(table)),
            ("arrow, as sent", lambda table=table: base64.b64encode(to_arrow_stream(table)).decode()),
        ]
        if not args.skip_old:
            cases.append(("json (former)", lambda result=result: legacy_serialize(legacy_json_document(result))))
        to_json_document(result)  # warm: constant arrays are made once per process
        for label, run in cases:
            seconds, size = best_cpu_seconds(run, args.repeat)
            print(
                f"{rows:>9,} rows  {label:<14} {rows / seconds / 1e6:8.2f} M rows/s"
                f"  ({seconds * 1000:8.1f} ms, {size / 1e6:7.1f} MB)"
            )


if __name__ == "__main__":
    main()
