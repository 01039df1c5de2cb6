"""``arcs.http.runtime_api``, the query function's runtime, against a Runtime API over real HTTP: what it
posts is Lambda's streaming mode (chunked, its headers, error trailers), API Gateway's streamed
proxy format inside, and errors where the Runtime API takes them."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arcs.emulation.runtime_api import RuntimeApiServer
from arcs.http.runtime_api import HTTP_INTEGRATION_RESPONSE, RuntimeApi, load_handler, serve
from arcs.http.streaming import DELIMITER, StreamedResponse, read_prelude

HANDLER = """
from arcs.http.streaming import StreamedResponse

def pieces(n):
    for i in range(n):
        yield b"piece %d;" % i
    raise RuntimeError("disk gone")

def stream_handler(event, context):
    if event.get("fail") == "before":
        raise ValueError("bad event")
    if event.get("fail") == "midway":
        return StreamedResponse(200, {"Content-Type": "text/plain"}, pieces(3))
    if event.get("proxy"):
        return {"statusCode": 404, "headers": {"Content-Type": "application/json"}, "body": '{"no": 1}'}
    body = [b"x" * 100_000 for _ in range(5)]
    return StreamedResponse(200, {"Content-Type": "application/json", "X-Request": context.aws_request_id}, body)
"""


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[tuple[RuntimeApiServer, Any]]:
    (tmp_path / "streaming_handler_module.py").write_text(HANDLER)
    handler = load_handler("streaming_handler_module.stream_handler", str(tmp_path))
    with RuntimeApiServer() as server:
        yield server, handler


def run(server: RuntimeApiServer, handler: Any, *events: dict[str, Any]) -> list[Any]:
    ids = [server.invoke(event) for event in events]
    worker = threading.Thread(target=serve, args=(RuntimeApi(server.address), handler, len(events)), daemon=True)
    worker.start()
    answers = [server.wait(request_id, timeout_s=30) for request_id in ids]
    worker.join(30)
    return answers


def test_a_response_is_posted_in_lambdas_streaming_mode_in_api_gateways_format(
    runtime: tuple[RuntimeApiServer, Any],
) -> None:
    server, handler = runtime
    (posted,) = run(server, handler, {"path": "/api/v1/query"})
    assert posted.kind == "response"
    assert posted.headers["Lambda-Runtime-Function-Response-Mode"] == "streaming"
    assert posted.headers["Transfer-Encoding"] == "chunked"
    assert posted.headers["Content-Type"] == HTTP_INTEGRATION_RESPONSE
    assert posted.headers["Trailer"] == "Lambda-Runtime-Function-Error-Type, Lambda-Runtime-Function-Error-Body"
    assert posted.chunks == 6 and posted.trailers == {}  # the metadata, then each piece as written
    status, headers, rest = read_prelude(iter([posted.body]))
    assert status == 200 and headers["Content-Type"] == "application/json" and headers["X-Request"]
    assert rest == b"x" * 500_000
    metadata, delimiter, _ = posted.body.partition(DELIMITER)
    assert delimiter == b"\0" * 8 and json.loads(metadata)["statusCode"] == 200


def test_a_proxy_response_goes_in_one_piece(runtime: tuple[RuntimeApiServer, Any]) -> None:
    server, handler = runtime
    (posted,) = run(server, handler, {"proxy": True})
    assert read_prelude(iter([posted.body])) == (404, {"Content-Type": "application/json"}, b'{"no": 1}')


def test_a_failure_before_the_answer_is_the_invocations_error_and_one_midway_its_trailers(
    runtime: tuple[RuntimeApiServer, Any],
) -> None:
    server, handler = runtime
    before, midway, after = run(server, handler, {"fail": "before"}, {"fail": "midway"}, {})
    assert before.kind == "error" and before.headers["Lambda-Runtime-Function-Error-Type"] == "Unhandled"
    assert json.loads(before.body)["errorType"] == "ValueError"
    assert midway.kind == "response"
    assert midway.body.endswith(b"piece 0;piece 1;piece 2;")
    assert midway.trailers["Lambda-Runtime-Function-Error-Type"] == "Function.RuntimeError"
    assert json.loads(base64.b64decode(midway.trailers["Lambda-Runtime-Function-Error-Body"])) == {
        "errorMessage": "disk gone",
        "errorType": "RuntimeError",
    }
    assert after.kind == "response" and after.trailers == {}  # the runtime goes on with the next event


def test_metadata_past_16_kb_is_refused() -> None:
    with pytest.raises(ValueError, match="16384"):
        StreamedResponse(200, {"X-Big": "x" * 16_384}, []).prelude()


def test_a_response_whose_connection_breaks_loses_that_answer_only(runtime: tuple[RuntimeApiServer, Any]) -> None:
    server, handler = runtime

    class Breaking(RuntimeApi):
        """Posts its first response to a port where nothing listens."""

        posts = 0

        def post_stream(self, request_id: str, pieces: Iterator[bytes]) -> None:
            self.posts += 1
            if self.posts == 1:
                dead = RuntimeApi(f"127.0.0.1:{_closed_port()}")
                dead.post_stream(request_id, pieces)
            else:
                super().post_stream(request_id, pieces)

    lost, kept = server.invoke({}), server.invoke({"proxy": True})
    worker = threading.Thread(target=serve, args=(Breaking(server.address), handler, 2), daemon=True)
    worker.start()
    assert server.wait(kept, timeout_s=30).kind == "response"
    worker.join(30)
    assert not worker.is_alive() and lost not in server.posted


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
