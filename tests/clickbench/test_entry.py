"""The EC2 entry's scripts that run without Docker: load, query, check, data-size, the JSON maker."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from clickbench.dataset import Dataset
from clickbench.generate import generate_hits, to_parquet_layout
from clickbench.server import TOKEN
from clickbench.systems import Arcs

ENTRY = Path(__file__).resolve().parents[2] / "clickbench" / "entry"
ROWS = 3_000

pytestmark = pytest.mark.clickbench


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Arcs, dict[str, str]]]:
    root = tmp_path_factory.mktemp("entry")
    pq.write_table(to_parquet_layout(generate_hits(ROWS, seed=3)), root / "hits.parquet")
    env = {
        **os.environ,
        "ARCS_CLICKBENCH_DATA": str(root / "arcs"),
        "ARCS_CLICKBENCH_SOURCE": str(root / "hits.parquet"),
    }
    subprocess.run([str(ENTRY / "load")], env=env, check=True, capture_output=True)
    server = Arcs(Dataset(ROWS, root))
    server.start()
    try:
        yield server, {**env, "ARCS_CLICKBENCH_URL": server.url, "ARCS_CLICKBENCH_TOKEN": TOKEN}
    finally:
        server.stop()


def test_query_prints_the_result_and_the_seconds_last_on_stderr(served: tuple[Arcs, dict[str, str]]) -> None:
    _server, env = served
    done = subprocess.run(
        [str(ENTRY / "query")], input="SELECT COUNT(*) FROM hits;", env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout)["data"] == [[ROWS]]
    assert float(done.stderr.strip().splitlines()[-1]) > 0


def test_a_failing_query_exits_non_zero(served: tuple[Arcs, dict[str, str]]) -> None:
    _server, env = served
    done = subprocess.run(
        [str(ENTRY / "query")], input="SELECT nope FROM hits", env=env, capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "nope" in done.stderr


def test_check_and_data_size(served: tuple[Arcs, dict[str, str]]) -> None:
    _server, env = served
    assert subprocess.run([str(ENTRY / "check")], env=env, check=False).returncode == 0
    down = {**env, "ARCS_CLICKBENCH_URL": "http://127.0.0.1:9"}
    assert subprocess.run([str(ENTRY / "check")], env=down, check=False).returncode != 0
    size = int(subprocess.run([str(ENTRY / "data-size")], env=env, capture_output=True, text=True).stdout)
    stored = sum(p.stat().st_size for p in Path(env["ARCS_CLICKBENCH_DATA"], "storage").rglob("*.parquet"))
    assert size >= stored > 0


def test_make_json_writes_clickbench_format(tmp_path: Path) -> None:
    lines = tmp_path / "result.csv"
    lines.write_text("[0.5, 0.1, 0.12],\n[null, null, null],\n")
    done = subprocess.run(
        ["python3", str(ENTRY / "make_json.py"), str(lines), "c6a.4xlarge", "2026-11-22", "12.5", "1000"],
        capture_output=True,
        text=True,
        check=True,
    )
    document = json.loads(done.stdout)
    assert document["machine"] == "c6a.4xlarge"
    assert document["result"] == [[0.5, 0.1, 0.12], [None, None, None]]
    assert document["load_time"] == 12.5 and document["data_size"] == 1000
