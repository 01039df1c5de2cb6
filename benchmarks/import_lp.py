"""Bulk import of a generated line-protocol file through a standalone server, over HTTP.

Prints, for each file size: rows, wall time, the server's CPU seconds during the import, rows/s
per core (rows over CPU seconds, all threads), and the server's peak resident memory (VmHWM)
before and after, so it shows the memory does not grow with the file.

    python -m benchmarks.import_lp                  # 250 MB and 1 GB
    python -m benchmarks.import_lp --sizes-mb 200   # one size
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.launch import ArcsProcess

TOKEN = "bench-import-token-0123456789abcdef"
HOSTS = 100
START_S = 1_700_000_000


def generate(path: Path, target_bytes: int) -> int:
    """cpu-shaped lines (2 tags, 5 fields), 100 hosts each second, until ``target_bytes``; the rows."""
    rows = 0
    written = 0
    second = START_S
    with open(path, "wb") as out:
        while written < target_bytes:
            lines = []
            for block in range(100):  # 100 seconds x 100 hosts per write call
                ts = (second + block) * 1_000_000_000
                for host in range(HOSTS):
                    v = (host * 7 + block) % 100
                    lines.append(
                        f"cpu,host=host{host:03d},region=r{host % 4} usage_user={v}.25,usage_system={v / 3:.3f},"
                        f"usage_idle={100 - v}.5,procs={v}i,load={v * 0.01:.2f} {ts}\n"
                    )
            second += 100
            chunk = "".join(lines).encode()
            out.write(chunk)
            written += len(chunk)
            rows += len(lines)
    return rows


def proc_status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def run(size_mb: int, work: Path) -> dict[str, float]:
    path = work / f"import-{size_mb}.lp"
    rows = generate(path, size_mb * 1_000_000)
    data_dir = work / f"data-{size_mb}"
    settings = {"ARCS_COMPACTION_INTERVAL_S": "0", "ARCS_IMPORT_MAX_BYTES": str(8 << 30)}
    server = ArcsProcess.serve(data_dir, settings, TOKEN).start()
    process = server.process
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=3600) as client:
            client.post("/api/v1/write/line-protocol", content=b"warm,host=a v=1 1700000000000000000")
            idle_rss = proc_status(process.pid, "VmRSS")
            cpu0, wall0 = cpu_seconds(process.pid), time.monotonic()
            with open(path, "rb") as body:
                response = client.post(
                    "/api/v1/import/lp", content=body, headers={"x-arc-database": "bench", "Content-Type": "text/plain"}
                )
            wall = time.monotonic() - wall0
            cpu = cpu_seconds(process.pid) - cpu0
            assert response.status_code == 200, response.text
            imported = response.json()["result"]["rows_imported"]
            assert imported == rows, (imported, rows)
            peak = proc_status(process.pid, "VmHWM")
            counted = client.post(
                "/api/v1/query", json={"sql": "SELECT count(*) FROM cpu"}, headers={"x-arc-database": "bench"}
            ).json()["data"][0][0]
            assert counted == rows, (counted, rows)
    finally:
        server.stop()
    return {
        "file_mb": path.stat().st_size / 1e6,
        "rows": rows,
        "wall_s": wall,
        "cpu_s": cpu,
        "rows_per_cpu_s": rows / cpu,
        "idle_rss_mb": idle_rss / 2**20,
        "peak_rss_mb": peak / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[250, 1000])
    parser.add_argument("--work-dir", type=Path, default=None, help="where the files and data go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        results = [run(size, Path(tmp)) for size in args.sizes_mb]
    print("line-protocol import over HTTP into a standalone server (cpu-shaped rows: 2 tags, 5 fields)")
    header = ("file MB", 8), ("rows", 12), ("wall s", 8), ("CPU s", 8), ("rows/s per core", 16), ("idle RSS MB", 12)
    print(" ".join(f"{name:>{width}}" for name, width in header), f"{'peak RSS MB':>12}")
    for r in results:
        print(
            f"{r['file_mb']:>8.0f} {r['rows']:>12,.0f} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} "
            f"{r['rows_per_cpu_s']:>16,.0f} {r['idle_rss_mb']:>12.0f} {r['peak_rss_mb']:>12.0f}"
        )
    print(
        "rows/s per core: rows over the server's CPU seconds (all its threads) during the import; "
        "peak RSS: the server's VmHWM after the import"
    )


if __name__ == "__main__":
    main()
