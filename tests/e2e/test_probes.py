"""The probes over HTTP, without a token, as InfluxDB clients and load balancers call them.

On AWS API Gateway answers them itself (tests/infra/test_api_front.py holds it to this shape).
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from arcs.http.routes.health import PING_BUILD, PING_VERSION
from tests.e2e.servers import Client, ServerProcess


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
        assert got.json()["status"] == ("pass" if path == "/health" else "ready")


def test_influxdb_clients_ping_and_health_pass_without_a_token(server: ServerProcess) -> None:
    """InfluxDB's own Python client, as a user points it at the server: no token at all for the probes."""
    from influxdb_client import InfluxDBClient

    with InfluxDBClient(url=server.url, token="", org="-", timeout=10_000) as influx:
        assert influx.ping() is True
        assert influx.version() == PING_VERSION and influx.build() == PING_BUILD
        with pytest.warns(DeprecationWarning, match="ping"):  # the client deprecates health() for ping()
            health = influx.health()
        assert (health.status, health.name, health.version) == ("pass", "arcs", PING_VERSION), health.message
        assert influx.ready().status == "ready"


def test_no_anonymous_path_reaches_data(server: ServerProcess, client: Client) -> None:
    """The probes are public, nothing near them is: their names with other methods, suffixes, case,
    dot segments or query strings, and InfluxDB's query paths, all refuse a caller without a token."""
    from influxdb_client import InfluxDBClient
    from influxdb_client.client.exceptions import InfluxDBError
    from influxdb_client.rest import ApiException

    secret = f"secret{uuid.uuid4().hex[:8]}"
    assert (
        client.write(f"/write?db={secret}", f"{secret},host=a v=42.125 1700000000000000000".encode()).status_code == 204
    )
    assert client.wait_count(secret, 1, secret) == 1
    sql = f"SELECT * FROM {secret}.{secret}"
    anonymous = httpx.Client(base_url=server.url, timeout=10)
    probes = [
        anonymous.get(f"/ping?db={secret}&q=SELECT+*+FROM+{secret}"),
        anonymous.get(f"/health?sql={sql}"),
        anonymous.head(f"/health?db={secret}&q=SELECT+*+FROM+{secret}"),
    ]
    attempts = [
        anonymous.post("/ping", json={"sql": sql}),
        anonymous.post("/health", json={"sql": sql}),
        anonymous.get(f"/ping/../api/v1/query/{secret}?database={secret}"),
        anonymous.get(f"/health/%2e%2e/api/v1/query/{secret}?database={secret}"),
        anonymous.get("/ping/"),
        anonymous.get("/PING"),
        anonymous.get(f"//api/v1/query/{secret}?database={secret}"),
        anonymous.get(f"/query?db={secret}&q=SELECT+*+FROM+{secret}"),
        anonymous.post(f"/api/v2/query?org=-&bucket={secret}", json={"query": f'from(bucket:"{secret}")'}),
        anonymous.post("/api/v1/query", json={"sql": sql}),
        anonymous.post("/api/v1/query/arrow", json={"sql": sql}),
        anonymous.post("/api/v1/query/msgpack", json={"sql": sql}, headers={"Accept-Encoding": "gzip"}),
        anonymous.post("/api/v1/query", json={"sql": sql}, headers={"Authorization": "Bearer not-a-token"}),
    ]
    anonymous.close()
    for response in probes:  # a probe answers as a probe, whatever it is asked
        assert response.status_code in (200, 204) and secret.encode() not in response.content
    for response in attempts:
        where = f"{response.request.method} {response.request.url}"
        assert 400 <= response.status_code < 500, (where, response.status_code, response.text)
        assert b"42.125" not in response.content, where
    with InfluxDBClient(url=server.url, token="not-a-token", org="-", timeout=10_000) as influx:
        with pytest.raises((ApiException, InfluxDBError)):
            influx.query_api().query(f'from(bucket:"{secret}") |> range(start: 0)')
        assert influx.ping() is True  # the probe still answers
