"""A standalone server whose disk fills up: writes are refused with 503 and Retry-After, and
``/ready`` says 503, until there is room again. On a real small filesystem (tmpfs), so the
test needs the right to mount one (root on Linux); elsewhere it is skipped."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import Client, standalone

pytestmark = pytest.mark.e2e

T0_NS = 1_700_000_000_000_000_000


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount_point)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory: Path) -> Path:
    """A file that takes every free byte of ``directory``'s filesystem."""
    filler = directory / "filler"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb") as out:
        try:
            while True:
                out.write(chunk)
                out.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_refuses_writes_with_retry_after_and_is_not_ready(small_disk: Path) -> None:
    server = standalone(small_disk / "data").start()
    client = Client(server.url)
    try:
        m = f"disk_{uuid.uuid4().hex[:8]}"
        assert httpx.get(f"{server.url}/ready").status_code == 200
        filler = fill(small_disk)
        for line in (f"{m} v=1 {T0_NS}", f"{m},host=a v=2 {T0_NS + 1}"):
            response = client.write("/api/v1/write/line-protocol", line.encode())
            assert response.status_code == 503, response.text
            assert int(response.headers["Retry-After"]) >= 1
        ready = httpx.get(f"{server.url}/ready")
        assert ready.status_code == 503, ready.text
        filler.unlink()
        deadline = time.monotonic() + 10
        while httpx.get(f"{server.url}/ready").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert httpx.get(f"{server.url}/ready").status_code == 200
        assert client.write("/api/v1/write/line-protocol", f"{m} v=3 {T0_NS + 2}".encode()).status_code == 204
        assert client.wait_count(m, 1) == 1
        assert client.rows(f"SELECT v FROM {m}") == [[3.0]]
    finally:
        client.http.close()
        server.stop()


def test_an_import_whose_file_does_not_fit_on_the_disk_is_a_503_that_stores_nothing(small_disk: Path) -> None:
    server = standalone(small_disk / "data").start()
    client = Client(server.url)
    try:
        body = b"".join(f"imp,host=h{i % 7} v={i}i {T0_NS + i}\n".encode() for i in range(1_500_000))  # ~60 MB
        response = client.http.post("/api/v1/import/lp", content=body, headers={"x-arc-database": "full"}, timeout=120)
        assert response.status_code == 503, response.text
        assert int(response.headers["Retry-After"]) >= 1
        assert not any((small_disk / "data" / "imports").iterdir())  # the partial file is gone
        assert client.query("SELECT count(*) FROM imp", "full").status_code != 200  # nothing stored
        small = client.http.post(
            "/api/v1/import/lp", content=body[:100_000], headers={"x-arc-database": "full"}, timeout=120
        )
        assert small.status_code == 200, small.text  # room again once the file is gone
    finally:
        client.http.close()
        server.stop()
