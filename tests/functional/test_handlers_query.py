"""The query handler: JSON and Arrow answers, and results larger than a Lambda response handed off
whole, measured as they travel, or refused clearly.

The world each test gets (``fn``): tests/functional/conftest.py and lambdas.py.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import httpx
import msgpack
import pyarrow as pa
import pytest
import zstandard

from arcs.emulation.functions import LAMBDA_PAYLOAD_LIMIT
from arcs.http.api import lambda_app
from arcs.runtime import lambda_runtime
from tests.functional.lambdas import PREFIX, T0_NS, Lambda, context, name

pytestmark = [
    pytest.mark.functional,
]


def test_query_handler_answers_json_and_arrow(fn: Lambda) -> None:
    m = name("mem")
    fn.write(f"{m},host=a free=10i,ratio=0.5 {T0_NS}\n{m},host=b free=11i {T0_NS + 7000}")
    assert fn.ingest(fn.receive(1)) == []
    assert fn.rows(f"SELECT time, host, free, ratio FROM {m} ORDER BY time") == [
        ["2023-11-14T22:13:20.000000000Z", "a", 10, 0.5],
        ["2023-11-14T22:13:20.000007000Z", "b", 11, None],
    ]
    response = fn.query(f"SELECT host, free FROM {m} ORDER BY time", arrow=True)
    assert response["statusCode"] == 200 and response["isBase64Encoded"] is True
    # Powertools' REST resolver answers with multiValueHeaders only.
    assert response["multiValueHeaders"]["Content-Type"] == ["application/vnd.apache.arrow.stream"]
    table = pa.ipc.open_stream(base64.b64decode(response["body"])).read_all()
    assert table.to_pydict() == {"host": ["a", "b"], "free": [10, 11]}


# --- results larger than a Lambda response ------------------------------------------------------
def reload_with(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    """A fresh container with ``env`` added to the function's environment."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()


def header(response: dict[str, Any], name: str) -> str:
    (value,) = response["multiValueHeaders"][name]
    return str(value)


def follow(response: dict[str, Any]) -> httpx.Response:
    """What a client does with a 303: GET the Location (here a presigned URL on the moto server)."""
    assert response["statusCode"] == 303, response
    fetched = httpx.get(header(response, "Location"))
    assert fetched.status_code == 200, fetched.text
    return fetched


def test_results_over_the_inline_limit_are_handed_off_whole_through_the_results_prefix(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = name("wide")
    fn.write("\n".join(f'{m},host=h{i % 7} v={i}i,s="row \\"{i}\\" é" {T0_NS + i * 1000}' for i in range(2000)))
    assert fn.ingest(fn.receive(1)) == []
    sql = f"SELECT time, host, v, s FROM {m} ORDER BY time"
    inline = json.loads(fn.query(sql)["body"])
    inline_table = pa.ipc.open_stream(base64.b64decode(fn.query(sql, arrow=True)["body"])).read_all()
    assert inline["row_count"] == 2000 and inline_table.num_rows == 2000

    reload_with(monkeypatch, ARCS_QUERY_INLINE_MAX_BYTES="20000")
    response = fn.query(sql)
    assert header(response, "Content-Type") == "application/json"
    assert header(response, "X-Arc-Result-Content-Type") == "application/json"
    explanation = json.loads(response["body"])
    assert explanation["success"] is True and explanation["result_url"] == header(response, "Location")
    assert "larger than a Lambda response holds" in explanation["message"] and explanation["expires_in_s"] == 300
    fetched = follow(response)
    assert fetched.headers["content-type"] == "application/json"
    document = fetched.json()
    assert len(fetched.content) == explanation["size_bytes"]
    assert (document["columns"], document["data"]) == (inline["columns"], inline["data"])

    response = fn.query(sql, arrow=True)
    assert header(response, "X-Arc-Result-Content-Type") == "application/vnd.apache.arrow.stream"
    assert float(header(response, "X-Arc-Execution-Time-Ms")) >= 0
    fetched = follow(response)
    assert fetched.headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert pa.ipc.open_stream(fetched.content).read_all().equals(inline_table)

    stored = fn.aws.s3.list_objects_v2(Bucket=fn.aws.bucket, Prefix=f"{PREFIX}/_arcs/results/")["Contents"]
    assert sorted(key["Key"].rsplit(".", 1)[1] for key in stored) == ["arrows", "json"]
    # Small results still come inline.
    small = fn.query(f"SELECT count(*) AS n FROM {m}")
    assert small["statusCode"] == 200 and json.loads(small["body"])["data"] == [[2000]]


def test_what_a_body_costs_in_the_proxy_response_decides_not_its_length(fn: Lambda) -> None:
    """Under the default limit the whole Lambda response fits in 6 MiB; escaping can push a body over."""
    limit = fn.runtime.settings.query_inline_max_bytes
    # Each '"' is 2 characters in the JSON document and 4 once that document is a JSON string.
    quotes = fn.query(f"SELECT repeat('\"', {limit // 3}) AS s")
    assert quotes["statusCode"] == 303
    assert len(follow(quotes).content) < limit
    for arrow, text_bytes in ((False, limit - 1000), (True, limit * 3 // 4 - 1000)):
        fits = fn.query(f"SELECT repeat('x', {text_bytes}) AS s", arrow=arrow)
        assert fits["statusCode"] == 200
        assert len(json.dumps(fits)) <= LAMBDA_PAYLOAD_LIMIT
        over = fn.query(f"SELECT repeat('x', {text_bytes + 2000}) AS s", arrow=arrow)
        assert over["statusCode"] == 303


def test_a_compressed_answer_is_measured_against_the_limit_compressed(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda's limit holds the body as sent: a result too big plain fits once gzip or zstd shrinks it,
    base64 in the proxy response; one still too big compressed is handed off plain."""
    m = name("wide")
    fn.write("\n".join(f'{m},host=h{i % 7} v={i}i,s="row {i}" {T0_NS + i * 1000}' for i in range(2000)))
    assert fn.ingest(fn.receive(1)) == []
    sql = json.dumps({"sql": f"SELECT time, host, v, s FROM {m} ORDER BY time"}).encode()
    plain = json.loads(fn.query(f"SELECT time, host, v, s FROM {m} ORDER BY time")["body"])
    reload_with(monkeypatch, ARCS_QUERY_INLINE_MAX_BYTES="40000")

    def post(path: str, encoding: str) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept-Encoding": encoding}
        response: dict[str, Any] = fn.handlers.query(fn.api_event("POST", path, sql, headers), context("arcs-query"))
        return response

    assert post("/api/v1/query", "identity")["statusCode"] == 303
    unzstd = zstandard.ZstdDecompressor().decompressobj
    for encoding, decode in (("gzip", gzip.decompress), ("zstd", lambda data: unzstd().decompress(data))):
        response = post("/api/v1/query", encoding)
        assert response["statusCode"] == 200 and response["isBase64Encoded"] is True
        assert header(response, "Content-Encoding") == encoding and header(response, "Vary") == "Accept-Encoding"
        assert json.loads(decode(base64.b64decode(response["body"])))["data"] == plain["data"]
        document = msgpack.unpackb(decode(base64.b64decode(post("/api/v1/query/msgpack", encoding)["body"])))
        assert document["row_count"] == 2000 and document["data"][2] == [row[2] for row in plain["data"]]

    reload_with(monkeypatch, ARCS_QUERY_INLINE_MAX_BYTES="2000")
    response = post("/api/v1/query/msgpack", "gzip")
    assert header(response, "X-Arc-Result-Content-Type") == "application/msgpack"
    assert "Content-Encoding" not in response["multiValueHeaders"]
    fetched = follow(response)
    assert msgpack.unpackb(fetched.content)["data"][2] == [row[2] for row in plain["data"]]


def test_a_result_over_the_row_cap_is_a_clear_400_never_a_truncation(
    fn: Lambda, monkeypatch: pytest.MonkeyPatch
) -> None:
    reload_with(monkeypatch, ARCS_QUERY_MAX_ROWS="1000")
    assert fn.rows("SELECT count(*) FROM range(1000)") == [[1000]]
    assert len(fn.rows("SELECT * FROM range(1000)")) == 1000
    for arrow in (False, True):
        response = fn.query("SELECT * FROM range(1001)", arrow=arrow)
        assert response["statusCode"] == 400
        error = json.loads(response["body"])["error"]
        assert error == "the result has more than 1000 rows; add a LIMIT or narrow the query"
