"""One writer's many new measurements against another database's writes, on a standalone server.

    uv run python -m benchmarks.many_measurements [--writers 3] [--measurements 9999] [--per-request N]

Starts ``arcs serve`` on a fresh data directory; ``--writers`` concurrent writers each send
``--measurements`` new measurements (a line each) to one database, in requests of
``--per-request`` measurements (default: all in one). While they are under way (until their rows
are visible) one line at a time goes to another database, each write timed to its answer and to
when a query sees it. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.launch import ArcsProcess

TOKEN = "bench-admin-token-0123456789abcdef"
T0_NS = 1_700_000_000_000_000_000


def bulk_bodies(writer: int, measurements: int, per_request: int) -> list[bytes]:
    lines = [f"m{writer}_{i},host=a v={i}i {T0_NS + i}" for i in range(measurements)]
    return ["\n".join(lines[start : start + per_request]).encode() for start in range(0, measurements, per_request)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.many_measurements", description=__doc__.split("\n")[0])
    parser.add_argument("--measurements", type=int, default=9_999)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--per-request", type=int, default=0, help="measurements per request (0: all in one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server = ArcsProcess.serve(Path(tmp) / "data", {"ARCS_COMPACTION_INTERVAL_S": "0"}, TOKEN).start()
        url = server.url
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            with httpx.Client(base_url=url, headers=headers, timeout=600) as client:
                per_request = args.per_request or args.measurements
                bodies = [bulk_bodies(w, args.measurements, per_request) for w in range(args.writers)]
                bulk: list[tuple[int, float, str]] = []
                finished: list[float] = []

                def send(requests: list[bytes]) -> None:
                    for body in requests:
                        started = time.perf_counter()
                        response = client.post(
                            "/api/v1/write/line-protocol", content=body, headers={"x-arc-database": "bulk"}
                        )
                        bulk.append((response.status_code, time.perf_counter() - started, response.text[:120]))
                    finished.append(time.perf_counter())

                senders = [threading.Thread(target=send, args=(requests,)) for requests in bodies]
                bulk_started = time.perf_counter()
                for sender in senders:
                    sender.start()
                time.sleep(0.2)
                answered, visible = [], []
                last = f"bulk.m{args.writers - 1}_{args.measurements - 1}"
                bulk_visible_s = None
                probe = 0
                # Probes go on until the bulk's rows are visible too (its ingest is where they wait).
                while bulk_visible_s is None:
                    started = time.perf_counter()
                    response = client.post(
                        "/api/v1/write/line-protocol",
                        content=f"probe v={probe}i {T0_NS + probe}".encode(),
                        headers={"x-arc-database": "other"},
                    )
                    assert response.status_code == 204, response.text
                    answered.append(time.perf_counter() - started)
                    while True:
                        seen = client.post("/api/v1/query", json={"sql": "SELECT count(*) FROM other.probe"})
                        if seen.status_code == 200 and seen.json()["data"][0][0] > probe:
                            break
                        time.sleep(0.01)
                    visible.append(time.perf_counter() - started)
                    probe += 1
                    if not any(sender.is_alive() for sender in senders):
                        done = client.post("/api/v1/query", json={"sql": f"SELECT count(*) FROM {last}"})
                        refused = any(status != 204 for status, _s, _t in bulk)
                        if refused or (done.status_code == 200 and done.json()["data"][0][0] == 1):
                            bulk_visible_s = time.perf_counter() - bulk_started
                    time.sleep(0.1)
                for sender in senders:
                    sender.join()
                writers_s = max(finished) - bulk_started
        finally:
            server.stop()
    requests = len(bulk)
    print(f"{args.writers} writers x {args.measurements} new measurements, {per_request} a request (database 'bulk'):")
    for status in sorted({status for status, _s, _t in bulk}):
        answers = [(s, t) for code, s, t in bulk if code == status]
        slowest = max(s for s, _t in answers)
        said = answers[0][1] if status != 204 else ""
        print(f"  {len(answers)} of {requests} requests: {status}, the slowest after {slowest:.2f} s {said}")
    print(f"  the writers done after {writers_s:.2f} s; what they stored all visible after {bulk_visible_s:.2f} s")
    print(f"meanwhile {len(answered)} single-line writes to database 'other', one after another:")
    print(f"  answered (204): median {statistics.median(answered) * 1000:.0f} ms, max {max(answered) * 1000:.0f} ms")
    print(f"  visible to a query: median {statistics.median(visible):.2f} s, max {max(visible):.2f} s")


if __name__ == "__main__":
    main()
