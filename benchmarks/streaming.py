"""Long and large queries through ``arcs local``, as they run on AWS: streamed answers.

    uv run python -m benchmarks.streaming [--sizes-mb 1,6,20,50,100] [--long-s 60]

Starts ``arcs local`` and, through its emulated API Gateway (the query function's integration
streams, within Lambda's and API Gateway's limits for a stream), times answers of growing size
(JSON and Arrow: first byte and last) with a client that follows no redirect, then a query that
computes for about ``--long-s`` seconds. Past 6 MiB Lambda streams at 2 MiB/s, so the last byte
comes at about 3 s + (size - 6 MiB) / 2 MiB/s whatever the machine. Figures are printed, never
asserted (``tests/e2e/test_query_streaming.py`` asserts).
"""

from __future__ import annotations

import argparse
import time

import httpx
from tests.e2e.servers import TOKEN, local

#: Bytes of JSON per row of the size query (``[i,"row i of the answer"],``), about.
_JSON_ROW_BYTES = 36
_ARROW_ROW_BYTES = 16


def timed(client: httpx.Client, path: str, sql: str) -> tuple[int, int, float, float]:
    """Status, bytes, seconds to the first byte and to the last."""
    started = time.monotonic()
    with client.stream("POST", path, json={"sql": sql}) as response:
        pieces = response.iter_bytes()
        first = next(pieces, b"")
        first_s = time.monotonic() - started
        size = len(first) + sum(len(piece) for piece in pieces)
    return response.status_code, size, first_s, time.monotonic() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-mb", default="1,6,20,50,100")
    parser.add_argument("--long-s", type=float, default=60)
    args = parser.parse_args(argv)
    server = local(ARCS_QUERY_MAX_RESULT_BYTES=str(256 * 1024 * 1024)).start()
    client = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx.Timeout(30, read=600)
    )
    try:
        print(f"{'answer':<14}{'status':>7}{'bytes':>14}{'first byte':>12}{'last byte':>11}")
        for mb in (float(size) for size in args.sizes_mb.split(",")):
            rows = int(mb * 1e6 / _JSON_ROW_BYTES)
            sql = f"SELECT i, 'row ' || i || ' of the answer' AS s FROM range({rows}) t(i)"
            status, size, first, last = timed(client, "/api/v1/query", sql)
            print(f"{f'JSON {mb:g} MB':<14}{status:>7}{size:>14,}{first:>11.1f}s{last:>10.1f}s", flush=True)
            arrow = f"SELECT i, i * 2 AS j FROM range({int(mb * 1e6 / _ARROW_ROW_BYTES)}) t(i)"
            status, size, first, last = timed(client, "/api/v1/query/arrow", arrow)
            print(f"{f'Arrow {mb:g} MB':<14}{status:>7}{size:>14,}{first:>11.1f}s{last:>10.1f}s", flush=True)
        n, elapsed = 50_000_000, 0.0
        while elapsed < args.long_s:  # sized on this machine, again if it came out short
            if elapsed:
                n = n * 4 if elapsed < 2 else int(n * args.long_s * 1.25 / elapsed)
            status, size, first, elapsed = timed(client, "/api/v1/query", f"SELECT sum(i % 7) FROM range({n}) t(i)")
        print(f"a query computing {elapsed:.1f} s (sum over {n:,} numbers): {status}, {size} bytes")
    finally:
        client.close()
        server.stop()


if __name__ == "__main__":
    main()
