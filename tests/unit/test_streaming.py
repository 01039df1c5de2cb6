"""Answers streamed through API Gateway: the format both sides read, the bodies written batch by
batch (the same bytes as the buffered answers), and the query's time within the stream's limits."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from arcs import native
from arcs.http.streaming import (
    API_GATEWAY_STREAM_IDLE_S,
    DELIMITER,
    LAMBDA_MAX_TIMEOUT_S,
    QUERY_BUDGET_S,
    MalformedStream,
    StreamedResponse,
    from_proxy_result,
    query_function_timeout_s,
    read_prelude,
    stream_seconds,
)
from arcs.query.results import arrow_stream_body, json_document_body, to_arrow_stream, to_json_document
from arcs.query.service import QueryResult
from arcs.settings import CompactionSettings


def test_the_metadata_then_8_nul_bytes_then_the_body() -> None:
    answer = StreamedResponse(201, {"Content-Type": "text/plain"}, [b"ab", b"", b"c"])
    pieces = list(answer.encoded())
    assert pieces[0] == b'{"statusCode":201,"headers":{"Content-Type":"text/plain"}}' + DELIMITER
    assert pieces[1:] == [b"ab", b"c"]
    # Read back as the gateway reads it, whatever the pieces' boundaries.
    whole = b"".join(pieces)
    split = iter([whole[:5], whole[5:61], whole[61:]])
    status, headers, rest = read_prelude(split)
    assert (status, headers) == (201, {"Content-Type": "text/plain"})
    assert rest + b"".join(split) == b"abc"


def test_a_proxy_response_is_one_piece() -> None:
    base64 = {"statusCode": 200, "headers": {"a": "1"}, "multiValueHeaders": {"b": ["2", "3"]}}
    answer = from_proxy_result({**base64, "body": "eA==", "isBase64Encoded": True})
    assert (answer.status, dict(answer.headers), list(answer.body)) == (200, {"a": "1", "b": "2, 3"}, [b"x"])


@pytest.mark.parametrize(
    "stream",
    [
        [b"no delimiter at all"],
        [b"x" * 20_000 + DELIMITER],
        [b"[1, 2]" + DELIMITER],
        [b'{"headers": {}}' + DELIMITER],
        [],
    ],
)
def test_what_is_not_the_format_is_refused(stream: list[bytes]) -> None:
    with pytest.raises(MalformedStream):
        read_prelude(iter(stream))


def test_cookies_and_multi_value_headers_reach_the_client() -> None:
    prelude = {"statusCode": 200, "multiValueHeaders": {"X": ["1", "2"]}, "cookies": ["a=b"]}
    _, headers, _ = read_prelude(iter([json.dumps(prelude).encode() + DELIMITER]))
    assert headers == {"X": "1, 2", "Set-Cookie": "a=b"}


def test_a_query_gets_the_streams_idle_timeout_less_a_margin_and_the_function_the_time_to_stream() -> None:
    assert QUERY_BUDGET_S == 295 < API_GATEWAY_STREAM_IDLE_S
    # Inputs compaction replaced are deleted after a grace period longer than any query's reading.
    assert CompactionSettings().grace_s > QUERY_BUDGET_S
    assert stream_seconds(6 * 1024 * 1024) == 0 and stream_seconds(8 * 1024 * 1024) == 1
    mib = 1024 * 1024
    assert query_function_timeout_s(94 * mib) == 295 + 4 + 44
    assert query_function_timeout_s(256 * mib) == 295 + 4 + 97  # larger results are handed off
    assert query_function_timeout_s(None) == 396
    assert query_function_timeout_s(94 * mib, budget_s=0) == LAMBDA_MAX_TIMEOUT_S
    assert query_function_timeout_s(94 * mib, budget_s=860) == LAMBDA_MAX_TIMEOUT_S


@pytest.fixture(params=["native", "arrow"])
def json_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "arrow":
        monkeypatch.setattr("arcs.query.results.library", lambda: None)
    elif native.library() is None:
        pytest.skip("arcs.native is not built (make setup)")
    return str(request.param)


def test_a_streamed_body_is_the_buffered_answer_byte_for_byte(json_path: str) -> None:
    rows = 200_000  # four batches of rows
    table = pa.table(
        {
            "time": pa.array(range(rows), pa.timestamp("ns")),
            "s": [f'r"{i}"\n' if i % 3 else None for i in range(rows)],
            "v": [i * 0.5 for i in range(rows)],
        }
    )
    result = QueryResult(table, 1.25)
    body = json_document_body(result)
    pieces = list(body.pieces)
    whole = b"".join(pieces)
    # The head, a piece per batch of rows, the tail: never the document whole.
    assert len(pieces) >= 6 and max(len(piece) for piece in pieces) < len(whole) / 3
    assert len(whole) == body.size
    buffered = to_json_document(result)
    cut = whole.index(b'"timestamp"')  # the moment each was written differs
    assert whole[:cut] == buffered[:cut]
    assert json.loads(whole)["data"] == json.loads(buffered)["data"]
    arrow = arrow_stream_body(table)
    streamed = list(arrow.pieces)
    assert len(streamed) > 4 and b"".join(streamed) == to_arrow_stream(table)
    assert arrow.size == len(to_arrow_stream(table))


def test_empty_results_stream_too() -> None:
    table = pa.table({"a": pa.array([], pa.int64())})
    body = json_document_body(QueryResult(table, 0))
    whole = b"".join(body.pieces)
    assert len(whole) == body.size and json.loads(whole)["data"] == []
    assert b"".join(arrow_stream_body(table).pieces) == to_arrow_stream(table)
