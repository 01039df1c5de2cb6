"""README.md's shell examples and the start banner's, run as pasted with bash and curl against real
servers: every block against ``arcs serve``, the writes and queries against ``arcs local`` too with
every result handed off (303 to a presigned URL), which the examples' ``curl -L`` must follow.

Only the URL changes (the servers listen on a free port). Each curl answers a 2xx or the block
fails (``--fail-with-body``, ``set -euo pipefail``). ``uv run python`` is the checkout's
interpreter, as ``uv run`` gives it in the repository; ``TOKEN_ID`` is set to the id of the
token the block just created.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from tests.e2e.servers import TOKEN, Client, ServerProcess, local, standalone

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"
DOC_URL = "http://127.0.0.1:8000"

# A curl that fails on an HTTP error and keeps each answer, for the token's id.
PRELUDE = r"""
set -euo pipefail
n=0
curl() {
  n=$((n + 1))
  command curl --fail-with-body "$@" | tee "$ANSWERS/$n"
  echo
}
created_id() {
  python -c 'import json, sys, pathlib
for path in sorted(pathlib.Path(sys.argv[1]).iterdir(), key=lambda p: -int(p.name)):
    text = path.read_text().strip()
    if text.startswith("{") and "token" in json.loads(text):
        print(json.loads(text)["id"]); break' "$ANSWERS"
}
"""


def shell_blocks() -> list[str]:
    """The README's ``sh`` blocks that talk to a server (not the ``make`` ones)."""
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), flags=re.MULTILINE | re.DOTALL)
    return [block for block in blocks if "curl" in block]


def block_with(blocks: list[str], marker: str) -> str:
    (block,) = [block for block in blocks if marker in block]
    return block


@pytest.fixture
def shell(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(f'#!/bin/sh\n[ "$1 $2" = "run python" ] && shift 2 && exec {sys.executable} "$@"\nexit 2\n')
    uv.chmod(uv.stat().st_mode | stat.S_IEXEC)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    answers = tmp_path / "answers"
    answers.mkdir()
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "ARCS_TOKEN": TOKEN,
        "ANSWERS": str(answers),
        "WORK": str(tmp_path),
    }


def run(block: str, url: str, env: dict[str, str]) -> str:
    script = PRELUDE + block.replace(DOC_URL, url).replace("TOKEN_ID=3571424023780510", "TOKEN_ID=$(created_id)")
    done = subprocess.run(
        ["bash", "-c", script], env=env, cwd=env["WORK"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{block}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


def wait_for_writes(url: str) -> None:
    """Ingest follows a write within about a second."""
    client = Client(url)
    client.http.follow_redirects = True  # arcs local hands every result off here
    try:
        for measurement, rows in (("cpu", 2), ("mem", 2), ("disk", 2), ("net", 2)):
            assert client.wait_count(measurement, rows, database="metrics", timeout=30) == rows
    finally:
        client.http.close()


def banner_commands(server: ServerProcess) -> list[str]:
    return [line.strip() for line in server.output if line.startswith("  curl ")]


def test_every_readme_example_works_as_pasted_on_the_standalone_server(tmp_path: Path, shell: dict[str, str]) -> None:
    blocks = shell_blocks()
    assert len(blocks) >= 9
    server = standalone(tmp_path / "data").start()
    try:
        writes = [block for block in blocks if "/write" in block and "query" not in block]
        for block in writes:
            run(block, server.url, shell)
        wait_for_writes(server.url)
        answers = run(block_with(blocks, "/api/v1/query -H"), server.url, shell)
        assert '"data":[["server01",64.2],["server02",12.5]]' in answers
        table = pa.ipc.open_stream((tmp_path / "result.arrows").read_bytes()).read_all()
        assert table.num_rows == 2
        for block in blocks:
            if block not in writes and "/api/v1/query -H" not in block:
                run(block, server.url, shell)
        banner = banner_commands(server)
        assert len(banner) == 2
        run(banner[0], server.url, shell)
        client = Client(server.url)
        assert client.wait_count("cpu", 1, timeout=30) == 1
        client.http.close()
        assert '"server01"' in run(banner[1], server.url, shell)
    finally:
        server.stop()


def test_the_write_and_query_examples_follow_handed_off_results_on_arcs_local(shell: dict[str, str]) -> None:
    blocks = shell_blocks()
    # Every result goes through the bucket, buffered or streamed.
    server = local(ARCS_QUERY_INLINE_MAX_BYTES="1", ARCS_QUERY_STREAM_MAX_BYTES="1").start()
    try:
        for block in blocks:
            if "/write" in block and "query" not in block:
                run(block, server.url, shell)
        wait_for_writes(server.url)
        query = block_with(blocks, "/api/v1/query -H")
        handed_off = httpx.post(
            f"{server.url}/api/v1/query",
            headers={"Authorization": f"Bearer {TOKEN}"},
            json={"sql": "SELECT * FROM metrics.cpu"},
        )
        assert handed_off.status_code == 303 and handed_off.headers["location"]
        answers = run(query, server.url, shell)
        assert '"data":[["server01",64.2],["server02",12.5]]' in answers
        table = pa.ipc.open_stream((Path(shell["WORK"]) / "result.arrows").read_bytes()).read_all()
        assert table.num_rows == 2
        assert '"server01"' in run(block_with(blocks, "/api/v1/query/cpu?"), server.url, shell)
        # The banner's pair, against the emulated stack.
        first, second = banner_commands(server)
        run(first, server.url, shell)
        deadline = time.monotonic() + 30
        answer = ""
        while '"server01"' not in answer and time.monotonic() < deadline:
            answer = run(second, server.url, shell) if _has_cpu(server.url) else ""
            time.sleep(0.2)
        assert '"server01"' in answer and json.loads(answer.strip().splitlines()[0])["success"] is True
    finally:
        server.stop()


def _has_cpu(url: str) -> bool:
    client = Client(url)
    client.http.follow_redirects = True
    try:
        return client.query("SELECT count(*) FROM cpu").status_code == 200
    finally:
        client.http.close()
