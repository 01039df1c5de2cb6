"""The cost benchmark's measuring core on a tiny input, so the script keeps running: a real
``arcs local`` on a metered moto, every phase, and a table whose figures come from what ran.

The script runs as a user runs it, in its own process: its moto lives in that process's memory
(moto keeps one set of backends per process) and must not leave tables behind for other tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import cost

pytestmark = pytest.mark.e2e


def test_the_cost_table_is_measured_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "cost.md"
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.cost",
            "--rows=2000",
            "--rows-per-request=1000",
            "--clickbench-rows=2000",
            "--clickbench-queries=2",
            "--dashboard-days=1",
            "--idle-seconds=3",
            "--no-compact",
            f"--out={out}",
        ],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    table = out.read_text().removesuffix("\n")
    assert table in finished.stdout
    rows = {line.split("|")[1].strip(): line.split("|") for line in table.splitlines() if line.startswith("| ")}
    for fmt in cost.WRITE_PATHS:
        row = rows[fmt]
        edge_cpu, ingest_cpu = float(row[2]), float(row[3])
        assert edge_cpu > 0 and ingest_cpu > 0, row
        # Two requests of 1,000 rows: at least an authorizer, edge and ingest invocation each, per million rows.
        assert int(row[7].strip().replace(",", "")) >= 3000, row
        assert row[8].strip() != "0", row  # the ingest function put Parquet files
    for query in ("last hour", "last day", "last 30 days", "Q0", "Q1"):
        assert float(rows[query][3]) > 0, rows[query]  # the query function's wall time
    assert "per month idle" in table and "Firehose" in table
