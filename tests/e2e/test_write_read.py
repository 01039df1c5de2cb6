"""Every write format round-trips exactly through a query, over HTTP."""

from __future__ import annotations

import gzip
import json
import time
import uuid
from typing import Any

import msgpack
import pytest
import zstandard

from tests.e2e.servers import Client, ServerProcess

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
T0_ISO = "2023-11-14T22:13:20"


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_msgpack_columnar_round_trip(client: Client) -> None:
    m = name("cpu")
    body = msgpack.packb(
        {
            "m": m,
            "tags": ["host"],
            "columns": {
                "time": [T0 * 1000, T0 * 1000 + 1, T0 * 1000 + 2],
                "host": ["a", "b", None],
                "usage": [1.5, None, -2.25],
                "count": [1, 2, 3],
                "ok": [True, False, None],
                "note": ["x", "", None],
            },
        }
    )
    response = client.write("/api/v1/write/msgpack", body, headers={"Content-Type": "application/msgpack"})
    assert response.status_code == 204, response.text
    assert client.wait_count(m, 3) == 3
    result = client.query(f"SELECT * FROM {m} ORDER BY time").json()
    assert result["columns"] == ["time", "host", "usage", "count", "ok", "note"]
    assert result["data"] == [
        [f"{T0_ISO}.000000000Z", "a", 1.5, 1, True, "x"],
        [f"{T0_ISO}.001000000Z", "b", None, 2, False, ""],
        [f"{T0_ISO}.002000000Z", None, -2.25, 3, None, None],
    ]
    types = client.rows(f"SELECT typeof(time), typeof(usage), typeof(count), typeof(ok), typeof(note) FROM {m} LIMIT 1")
    assert types == [["TIMESTAMP_NS", "DOUBLE", "BIGINT", "BOOLEAN", "VARCHAR"]]


def test_msgpack_timestamp_values_round_trip_as_timestamps(client: Client) -> None:
    m = name("visits")
    body = msgpack.packb(
        {
            "m": m,
            "columns": {
                "time": [msgpack.Timestamp(T0, 0), msgpack.Timestamp(T0 + 1, 0)],
                "first_seen": [msgpack.Timestamp(T0 - 86_400, 250_000_000), None],
            },
        }
    )
    assert client.write("/api/v1/write/msgpack", body).status_code == 204
    assert client.wait_count(m, 2) == 2
    assert client.rows(f"SELECT time, first_seen, typeof(first_seen) FROM {m} ORDER BY time") == [
        [f"{T0_ISO}.000000000Z", "2023-11-13T22:13:20.250000000Z", "TIMESTAMP_NS"],
        ["2023-11-14T22:13:21.000000000Z", None, "TIMESTAMP_NS"],
    ]
    mixed = msgpack.packb({"m": m, "columns": {"time": [T0], "first_seen": [5]}}, use_bin_type=True)
    refused = client.write("/api/v1/write/msgpack", mixed)
    assert refused.status_code == 400
    assert "first_seen" in refused.text and "timestamp" in refused.text and "int64" in refused.text


def test_msgpack_rows_and_batch_round_trip(client: Client) -> None:
    m = name("mem")
    body = msgpack.packb(
        {
            "batch": [
                {"m": m, "t": T0 * 1_000_000, "tags": {"host": "a"}, "fields": {"free": 10, "ratio": 0.5}},
                {"m": m, "t": T0 * 1_000_000 + 7, "tags": {"host": "b"}, "fields": {"free": 11}},
            ]
        }
    )
    assert client.write("/api/v1/write/msgpack", body).status_code == 204
    assert client.wait_count(m, 2) == 2
    assert client.rows(f"SELECT time, host, free, ratio FROM {m} ORDER BY time") == [
        [f"{T0_ISO}.000000000Z", "a", 10, 0.5],
        [f"{T0_ISO}.000007000Z", "b", 11, None],
    ]


def test_json_round_trip_with_bare_array(client: Client) -> None:
    m = name("disk")
    body = json.dumps(
        [
            {"m": m, "columns": {"time": [T0, T0 + 1], "path": ["/", "/home"], "used": [1, 2.5]}, "tags": ["path"]},
        ]
    ).encode()
    assert client.write("/api/v1/write/json", body).status_code == 204
    assert client.wait_count(m, 2) == 2
    assert client.rows(f"SELECT * FROM {m} ORDER BY time") == [
        [f"{T0_ISO}.000000000Z", "/", 1.0],
        [f"{T0_ISO[:-2]}21.000000000Z", "/home", 2.5],
    ]


@pytest.mark.parametrize(
    ("precision", "stamp", "expected"),
    [
        (None, T0 * 10**9 + 123_456_789, f"{T0_ISO}.123456789Z"),
        ("ns", T0 * 10**9 + 5_000, f"{T0_ISO}.000005000Z"),
        ("us", T0 * 10**6 + 5, f"{T0_ISO}.000005000Z"),
        ("ms", T0 * 10**3 + 5, f"{T0_ISO}.005000000Z"),
        ("s", T0, f"{T0_ISO}.000000000Z"),
        ("n", T0 * 10**9, f"{T0_ISO}.000000000Z"),
        ("u", T0 * 10**6 + 1, f"{T0_ISO}.000001000Z"),
        ("m", T0 // 60, "2023-11-14T22:13:00.000000000Z"),
        ("h", T0 // 3600, "2023-11-14T22:00:00.000000000Z"),
    ],
)
def test_line_protocol_every_precision(client: Client, precision: str | None, stamp: int, expected: str) -> None:
    m = name("lp")
    query = f"?precision={precision}" if precision else ""
    line = f'{m},host=h\\ 1,dc=eu v=1.5,n=-3i,u=7u,s="a \\"q\\", b",b=t {stamp}'
    assert client.write(f"/api/v1/write/line-protocol{query}", line.encode()).status_code == 204
    assert client.wait_count(m, 1) == 1
    assert client.rows(f"SELECT time, host, dc, v, n, u, s, b FROM {m}") == [
        [expected, "h 1", "eu", 1.5, -3, 7, 'a "q", b', True]
    ]


def test_influx_v1_and_v2_endpoints_and_compression(client: Client) -> None:
    m = name("influx")
    body = f"{m},host=a value=1 {T0}\n{m},host=b value=2 {T0 + 1}\n".encode()
    v1 = client.write(
        "/write?db=influxdb&rp=autogen&precision=s", gzip.compress(body), headers={"Content-Encoding": "gzip"}
    )
    assert v1.status_code == 204, v1.text
    # The same points again, other values: each point is stored once, the later value winning.
    again = body.replace(b"value=1", b"value=3").replace(b"value=2", b"value=4")
    v2 = client.write("/api/v2/write?bucket=influxdb/autogen&org=x&precision=s", zstandard.compress(again))
    assert v2.status_code == 204, v2.text
    sql = f"SELECT host, value FROM influxdb.{m} ORDER BY host"
    deadline = time.monotonic() + 30
    while client.query(sql).status_code != 200 or client.rows(sql) != [["a", 3.0], ["b", 4.0]]:
        assert time.monotonic() < deadline, client.query(sql).text
        time.sleep(0.05)
    assert client.rows(f"SELECT count(*) FROM influxdb.{m}") == [[2]]


def test_arrow_endpoint_returns_an_ipc_stream(client: Client) -> None:
    import pyarrow as pa

    m = name("arrow")
    assert client.write("/api/v1/write/line-protocol", f"{m} v=1i {T0}000000000".encode()).status_code == 204
    assert client.wait_count(m, 1) == 1
    response = client.http.post("/api/v1/query/arrow", json={"sql": f"SELECT * FROM {m}"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(response.content).read_all()
    assert table.column("v").to_pylist() == [1]
    # DuckDB holds the UTC wall clock; the answer carries the instant
    assert str(table.schema.field("time").type) == "timestamp[ns, tz=UTC]"
    assert table.column("time")[0].value == T0 * 1_000_000_000


HOSTILE: list[tuple[str, str, bytes, dict[str, str], int, str]] = [
    (
        "truncated msgpack",
        "/api/v1/write/msgpack",
        msgpack.packb({"m": "x", "columns": {"v": [1, 2]}})[:-3],
        {},
        400,
        "MessagePack",
    ),
    ("bad line escape", "/api/v1/write/line-protocol", b"m,t=a\\ v=1 x", {}, 400, "line 1"),
    ("bad field type", "/api/v1/write/line-protocol", b'm v=1i\nm v="s"', {}, 400, "line 2"),
    ("invalid measurement", "/api/v1/write/line-protocol", b"1m v=1", {}, 400, "measurement"),
    (
        "control char in tag",
        "/api/v1/write/json",
        json.dumps({"m": "m", "columns": {"t": ["a\u0001"], "v": [1]}, "tags": ["t"]}).encode(),
        {},
        400,
        "control",
    ),
    ("non-utf8", "/api/v1/write/line-protocol", b'm s="\xff"', {}, 400, "UTF-8"),
    ("time out of range", "/api/v1/write/line-protocol", b"m v=1 99999999999", {"precision": "s"}, 400, "range"),
    ("gzip bomb", "/api/v1/write/line-protocol", gzip.compress(b"0" * 150_000_000), {}, 413, "exceeds"),
    ("reserved database", "/api/v1/write/line-protocol", b"m v=1", {"x-arc-database": "system"}, 403, "reserved"),
    ("bad database name", "/api/v1/write/line-protocol", b"m v=1", {"x-arc-database": "../etc"}, 400, "database"),
    ("bad precision", "/api/v1/write/line-protocol?precision=xs", b"m v=1", {}, 400, "precision"),
    ("unknown encoding", "/api/v1/write/line-protocol", b"m v=1", {"Content-Encoding": "br"}, 415, "Content-Encoding"),
]


@pytest.mark.parametrize(("case", "path", "body", "headers", "status", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_writes_get_4xx_and_store_nothing(
    client: Client, case: str, path: str, body: bytes, headers: dict[str, Any], status: int, message: str
) -> None:
    m = name("hostile")
    body = body.replace(b"m,", f"{m},".encode()).replace(b"m v", f"{m} v".encode()).replace(b"m s", f"{m} s".encode())
    query_headers = dict(headers)
    if "precision" in query_headers:
        path += f"?precision={query_headers.pop('precision')}"
    response = client.write(path, body, headers=query_headers)
    assert response.status_code == status, response.text
    error = response.json()
    assert error["success"] is False and message in error["error"]
    assert client.query(f"SELECT count(*) FROM {m}").status_code == 404


def test_a_conflicting_type_names_column_and_both_types_and_stores_nothing(client: Client) -> None:
    m = name("typed")
    assert client.write("/api/v1/write/line-protocol", f"{m} v=1.5 {T0}000000000".encode()).status_code == 204
    response = client.write("/api/v1/write/line-protocol", f'{m} ok=1i {T0}000000001\n{m} v="s"'.encode())
    assert response.status_code == 400
    assert "'v'" in response.json()["error"] and "float64" in response.json()["error"]
    assert "string" in response.json()["error"]
    # int into float widens
    assert client.write("/api/v1/write/line-protocol", f"{m} v=2i {T0}000002000".encode()).status_code == 204
    assert client.wait_count(m, 2) == 2
    assert client.rows(f"SELECT v FROM {m} ORDER BY time") == [[1.5], [2.0]]
    # the refused request added nothing, not even its new column
    assert client.query(f"SELECT * FROM {m}").json()["columns"] == ["time", "v"]


@pytest.mark.parametrize("scheme", ["Bearer", "Token", "Basic", "x-api-key", "p"])
def test_every_token_form_is_accepted(client: Client, server: ServerProcess, scheme: str) -> None:
    import base64

    import httpx

    from tests.e2e.servers import TOKEN

    headers: dict[str, str] = {}
    params: dict[str, str] = {}
    if scheme == "Basic":
        headers["Authorization"] = "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode()
    elif scheme == "x-api-key":
        headers["x-api-key"] = TOKEN
    elif scheme == "p":
        params["p"] = TOKEN
    else:
        headers["Authorization"] = f"{scheme} {TOKEN}"
    # InfluxDB's write path takes every form in every runtime; Arc's API does too, but on AWS (and so
    # in arcs local) only in Authorization, where API Gateway caches the authorizer's answer.
    influx = httpx.post(f"{client.url}/write", headers=headers, params={**params, "db": "forms"}, content=b"m v=1 1")
    assert influx.status_code == 204, influx.text
    response = httpx.get(f"{client.url}/api/v1/auth/verify", headers=headers, params=params)
    if scheme in ("x-api-key", "p") and server.args[0] == "local":
        assert response.status_code == 401, response.text
        return
    assert response.status_code == 200, response.text
    assert "admin" in response.json()["permissions"]


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic !!!", "Bearer"])
def test_missing_or_wrong_token_is_401(client: Client, authorization: str | None) -> None:
    import httpx

    headers = {"Authorization": authorization} if authorization else {}
    for method, path in [
        ("POST", "/api/v1/query"),
        ("POST", "/api/v1/write/line-protocol"),
        ("GET", "/api/v1/auth/verify"),
    ]:
        response = httpx.request(method, f"{client.url}{path}", headers=headers, content=b"x v=1")
        assert response.status_code == 401, (path, response.text)
    assert httpx.get(f"{client.url}/health").status_code == 200
    assert httpx.get(f"{client.url}/ready").status_code == 200
