"""A route reads the same body bytes whether its event came from API Gateway (base64) or from the
standalone server's gateway, which hands them over as they came."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.http import proxy
from arcs.http.gateway import Gateway
from arcs.http.proxy import BODY_BYTES_CONTEXT, proxy_event
from arcs.http.routes.request import RequestView
from arcs.runtime import local_runtime
from arcs.settings import Settings

TOKEN = "bootstrap-token-0123456789abcdef"

BODIES = [
    b"",
    bytes(range(256)) * 3,  # every byte value, invalid UTF-8 among them
    "cpu,host=h\u00e9 v=1 1".encode(),
    gzip.compress(b"cpu,host=a v=1 1\n" * 100),
    b"\xff\xfe{not json",
]


def _echo_app() -> APIGatewayRestResolver:
    router = Router()
    request = RequestView(router)

    @router.post("/echo")
    def echo() -> dict[str, Any]:
        return {"body": request.body().hex()}

    app = APIGatewayRestResolver()
    app.include_router(router)
    return app


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_a_body_reads_the_same_in_both_event_forms(body: bytes) -> None:
    app = _echo_app()
    answers = []
    for as_bytes in (False, True):
        event = proxy_event("POST", "/echo", "", {}, body, body_as_bytes=as_bytes)
        if as_bytes:
            assert event["body"] is None and not event["isBase64Encoded"]
            assert event["requestContext"][BODY_BYTES_CONTEXT] == body
        answers.append(json.loads(app.resolve(event, None)["body"])["body"])  # type: ignore[arg-type]
    assert answers == [body.hex(), body.hex()]


def test_the_standalone_gateway_does_not_base64_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write's body reaches the route without a base64 copy each way (3 ms of CPU under the
    interpreter's lock for a 500 KB body): the write is stored all the same."""
    runtime = local_runtime(Settings(data_dir=tmp_path, bootstrap_token=TOKEN))
    runtime.tokens.bootstrap(TOKEN)
    gateway = Gateway(runtime)

    def refused(_data: bytes) -> bytes:
        raise AssertionError("the body was base64-encoded")

    monkeypatch.setattr(proxy.base64, "b64encode", refused)
    headers = {"authorization": f"Bearer {TOKEN}", "content-encoding": "gzip"}
    body = gzip.compress(b"".join(b"cpu,host=h%d v=%d %d\n" % (i, i, 1_700_000_000 + i) for i in range(50)))
    answer = gateway.handle("POST", "/api/v1/write/line-protocol", "db=bodies&precision=s", headers, body)
    assert answer.status == 204, answer.body
    entries = runtime.spool.take(10)
    assert len(entries) == 1
    runtime.sqlite.close()
