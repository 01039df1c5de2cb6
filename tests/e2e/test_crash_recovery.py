"""``kill -9`` of the standalone server right after 204s loses nothing and duplicates nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.servers import Client, standalone

pytestmark = pytest.mark.e2e


def test_kill_9_after_acknowledged_writes_loses_nothing(tmp_path: Path) -> None:
    server = standalone(tmp_path / "data").start()
    client = Client(server.url)
    try:
        accepted = 0
        for batch in range(40):
            lines = "\n".join(
                f"crash,host=h{batch} v={i}i {1_700_000_000_000_000_000 + batch * 1000 + i}" for i in range(250)
            )
            response = client.write("/api/v1/write/line-protocol", lines.encode())
            assert response.status_code == 204, response.text
            accepted += 250
    finally:
        client.http.close()
        server.kill()  # no shutdown hook runs: whatever was acknowledged must already be on disk
    restarted = standalone(tmp_path / "data").start()
    client = Client(restarted.url)
    try:
        assert client.wait_count("crash", accepted) == accepted
        assert client.rows("SELECT count(DISTINCT (host, v)) FROM crash") == [[accepted]]
    finally:
        client.http.close()
        restarted.stop()


def test_kill_9_during_ingest_then_restart_keeps_exact_counts(tmp_path: Path) -> None:
    """Kill while the ingest loop is busy; the spool and markers make the replay exact."""
    server = standalone(tmp_path / "data").start()
    client = Client(server.url)
    accepted = 0
    try:
        for batch in range(20):
            body = "\n".join(
                f"busy v={i}i {1_700_000_000_000_000_000 + batch * 10_000_000 + i * 1000}" for i in range(2000)
            )
            assert client.write("/api/v1/write/line-protocol", body.encode()).status_code == 204
            accepted += 2000
            if batch == 10:
                # let ingest start on what is there, then keep writing and kill mid-flight
                client.wait_count("busy", 1)
    finally:
        client.http.close()
        server.kill()
    restarted = standalone(tmp_path / "data").start()
    client = Client(restarted.url)
    try:
        assert client.wait_count("busy", accepted) == accepted
        assert client.rows("SELECT count(DISTINCT time) FROM busy") == [[accepted]]
    finally:
        client.http.close()
        restarted.stop()
