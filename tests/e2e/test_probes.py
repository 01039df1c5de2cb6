"""The probes over HTTP, without a token, as InfluxDB clients and load balancers call them.

On AWS API Gateway answers them itself (tests/infra/test_api_front.py holds it to this shape).
"""

from __future__ import annotations

import httpx
import pytest

from arcs.routes.health import PING_BUILD, PING_VERSION
from tests.e2e.servers import ServerProcess


@pytest.mark.parametrize("path", ["/health", "/ready", "/ping"])
def test_probes_answer_get_and_head_without_a_token(server: ServerProcess, path: str) -> None:
    got = httpx.get(f"{server.url}{path}", timeout=10)
    head = httpx.head(f"{server.url}{path}", timeout=10)
    assert got.status_code == head.status_code == (204 if path == "/ping" else 200), (got.text, head.status_code)
    assert head.content == b""
    if path == "/ping":
        assert got.content == b""
        for response in (got, head):
            assert response.headers["X-Influxdb-Version"] == PING_VERSION
            assert response.headers["X-Influxdb-Build"] == PING_BUILD
    else:
        assert got.json()["status"] == ("ok" if path == "/health" else "ready")
