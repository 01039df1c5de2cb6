"""Grafana's Arc datasource over HTTP: its three transports (JSON, Arrow, MessagePack) give the same
columns, values and types, and the document answers are compressed when it asks (Go's client asks
for gzip by itself), against both runtimes.

The requests are shaped as the datasource sends them: ``POST`` of ``{"sql": ...}`` as JSON, the
token as a Bearer, the database in ``X-Arc-Database``.
"""

from __future__ import annotations

import gzip
import math
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import msgpack
import pyarrow as pa
import pytest
import zstandard

from tests.e2e.servers import TOKEN, Client, ServerProcess

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000
#: Every type a measurement holds, and nulls in each (the second row lacks every field but ``v``).
LINES = (
    f'm,host=a v=1.5,n=3i,ok=true,s="x \\"q\\" é" {T0}000000123\n'
    f"m,host=b v=-2 {T0 + 1}000000000\n"
    f'm,host=a v=1e300,n=-9223372036854775807i,ok=false,s="" {T0 + 2}000000000\n'
)
SQL = "SELECT time, host, v, n, ok, s FROM m ORDER BY time"


def grafana(server: ServerProcess, database: str, encoding: str = "gzip") -> httpx.Client:
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "X-Arc-Database": database,
        "Content-Type": "application/json",
        "Accept-Encoding": encoding,
    }
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


@pytest.fixture
def database(client: Client) -> str:
    name = f"g{uuid.uuid4().hex[:10]}"
    response = client.write(f"/api/v1/write/line-protocol?db={name}", LINES.encode())
    assert response.status_code == 204, response.text
    assert client.wait_count("m", 3, name) == 3
    return name


def raw(http: httpx.Client, path: str) -> tuple[httpx.Response, bytes]:
    """The answer and its body as sent (not decoded)."""
    with http.stream("POST", path, json={"sql": SQL}) as response:
        body = b"".join(response.iter_raw())
    return response, body


def decoded(response: httpx.Response, body: bytes) -> bytes:
    coding = response.headers.get("content-encoding")
    if coding == "gzip":
        return gzip.decompress(body)
    if coding == "zstd":
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    assert coding is None
    return body


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


@pytest.mark.parametrize("encoding", ["gzip", "zstd", "gzip, zstd;q=0", "identity"])
def test_three_transports_agree(server: ServerProcess, database: str, encoding: str) -> None:
    with grafana(server, database, encoding) as http:
        answers = {path: raw(http, path) for path in ("/api/v1/query", "/api/v1/query/arrow", "/api/v1/query/msgpack")}
    for path, (response, _) in answers.items():
        assert response.status_code == 200, (path, response.text)
    expected = {"gzip": "gzip", "zstd": "zstd", "gzip, zstd;q=0": "gzip", "identity": None}[encoding]
    for path in ("/api/v1/query", "/api/v1/query/msgpack"):
        response = answers[path][0]
        assert response.headers.get("content-encoding") == expected, path
        assert response.headers["vary"] == "Accept-Encoding"
    arrow_response, arrow_body = answers["/api/v1/query/arrow"]
    assert "content-encoding" not in arrow_response.headers  # as Arc: the Arrow stream is never compressed
    table = pa.ipc.open_stream(arrow_body).read_all()

    document = msgpack.unpackb(decoded(*answers["/api/v1/query/msgpack"]))
    assert answers["/api/v1/query/msgpack"][0].headers["content-type"] == "application/msgpack"
    assert list(document) == ["success", "columns", "types", "data", "row_count", "execution_time_ms", "timestamp"]
    assert document["success"] is True and document["row_count"] == 3
    assert document["columns"] == table.column_names == ["time", "host", "v", "n", "ok", "s"]
    assert document["types"] == ["timestamp[ns]", "utf8", "float64", "int64", "bool", "utf8"]
    arrow_types = ["timestamp[ns, tz=UTC]", "string", "double", "int64", "bool", "string"]
    assert [str(field.type) for field in table.schema] == arrow_types
    times = document["data"][0]
    assert times[0] == msgpack.Timestamp(T0, 123) and times[1] == msgpack.Timestamp(T0 + 1, 0)
    assert document["data"][1:] == [
        ["a", "b", "a"],
        [1.5, -2.0, 1e300],
        [3, None, -9223372036854775807],
        [True, None, False],
        ['x "q" é', None, ""],
    ]
    arrow_columns = table.to_pydict()
    for name, values in zip(document["columns"][1:], document["data"][1:], strict=True):
        assert all(same(a, b) for a, b in zip(values, arrow_columns[name], strict=True)), name

    with grafana(server, database, encoding) as http, http.stream("GET", "/api/v1/query/m?limit=5") as latest:
        latest_body = b"".join(latest.iter_raw())
    assert latest.status_code == 200 and latest.headers.get("content-encoding") == expected
    assert httpx.Response(200, content=decoded(latest, latest_body)).json()["row_count"] == 3

    json_document = httpx.Response(200, content=decoded(*answers["/api/v1/query"])).json()
    assert json_document["columns"] == document["columns"]
    assert [row[1:] for row in json_document["data"]] == [list(row) for row in zip(*document["data"][1:], strict=True)]
    assert json_document["data"][0][0] == "2023-11-14T22:13:20.000000123Z"
    assert datetime.fromtimestamp(T0, UTC) == times[0].to_datetime().replace(microsecond=0)


def test_msgpack_errors_and_empty_results_are_msgpack(server: ServerProcess, database: str) -> None:
    with grafana(server, database) as http:
        missing = http.post("/api/v1/query/msgpack", json={"sql": "SELECT * FROM nowhere_at_all"})
        empty = http.post("/api/v1/query/msgpack", json={"sql": "SELECT v FROM m WHERE v > 1e308"})
        anonymous = httpx.post(f"{server.url}/api/v1/query/msgpack", json={"sql": SQL}, timeout=30)
    assert missing.status_code in (400, 404)
    assert missing.headers["content-type"] == "application/msgpack"
    error = msgpack.unpackb(missing.content)
    assert (
        error["success"] is False
        and error["error"]
        and set(error)
        == {
            "success",
            "error",
            "execution_time_ms",
            "timestamp",
        }
    )
    assert empty.status_code == 200
    document = msgpack.unpackb(empty.content)
    assert document["columns"] == ["v"] and document["types"] == ["float64"] and document["data"] == [[]]
    assert anonymous.status_code == 401


def test_large_answers_compress_through_the_runtime(server: ServerProcess, client: Client) -> None:
    """Thousands of rows, streamed where the runtime streams: the compressed stream decodes to the
    same document as the plain one."""
    name = f"g{uuid.uuid4().hex[:10]}"
    lines = "\n".join(f'big,host=h{n % 7} v={n}i,s="row {n}" {T0 + n}' for n in range(20_000))
    assert client.write(f"/api/v1/write/line-protocol?db={name}", lines.encode()).status_code == 204
    assert client.wait_count("big", 20_000, name) == 20_000
    sql = {"sql": "SELECT * FROM big ORDER BY time"}
    for path in ("/api/v1/query", "/api/v1/query/msgpack"):
        with grafana(server, name, "identity") as http:
            plain = http.post(path, json=sql)
        for coding in ("gzip", "zstd"):
            with grafana(server, name, coding) as http, http.stream("POST", path, json=sql) as response:
                body = b"".join(response.iter_raw())
            assert response.headers["content-encoding"] == coding
            assert len(body) < len(plain.content) / 3
            document = decoded(response, body)
            if path.endswith("msgpack"):
                assert msgpack.unpackb(document)["data"] == msgpack.unpackb(plain.content)["data"]
            else:
                assert httpx.Response(200, content=document).json()["data"] == plain.json()["data"]
