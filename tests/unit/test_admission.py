"""The standalone server's bounded worker pool: excess requests wait, then get a 503 with Retry-After."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from arcs.http.asgi import AsgiApp
from arcs.http.limits import HttpLimits
from arcs.http.proxy import Admission, HttpResponse


def _slow_handler(release: threading.Event) -> Any:
    def handle(
        method: str, path: str, query: str, headers: dict[str, str], body: bytes, client: str | None
    ) -> HttpResponse:
        release.wait(5)
        return HttpResponse(200, {"Content-Type": "text/plain"}, b"done")

    return handle


async def _request(app: AsgiApp) -> tuple[int, dict[str, str], bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/x", "query_string": b"", "headers": []}
    await app(scope, receive, send)
    headers = {k.decode(): v.decode() for k, v in sent[0]["headers"]}
    return sent[0]["status"], headers, sent[1]["body"]


async def _finished(tasks: list[asyncio.Task[Any]], count: int) -> None:
    while sum(task.done() for task in tasks) < count:
        await asyncio.sleep(0.01)


def test_requests_beyond_the_pool_wait_then_get_503() -> None:
    release = threading.Event()
    app = AsgiApp(_slow_handler(release), HttpLimits(1024, workers=2, queue_timeout_s=0.3))

    async def scenario() -> list[tuple[int, dict[str, str], bytes]]:
        tasks = [asyncio.create_task(_request(app)) for _ in range(4)]
        # Two run and hold their workers; the other two time out waiting for one.
        await asyncio.wait_for(_finished(tasks, 2), timeout=5)
        release.set()
        return await asyncio.gather(*tasks)

    try:
        results = asyncio.run(scenario())
    finally:
        app.close()
    statuses = sorted(status for status, _headers, _body in results)
    assert statuses == [200, 200, 503, 503]
    for status, headers, body in results:
        if status == 503:
            assert headers["retry-after"] == "1"
            assert "busy" in json.loads(body)["error"]


def test_waiting_requests_run_when_a_worker_frees_up() -> None:
    release = threading.Event()
    app = AsgiApp(_slow_handler(release), HttpLimits(1024, workers=1, queue_timeout_s=5))

    async def scenario() -> list[tuple[int, dict[str, str], bytes]]:
        tasks = [asyncio.create_task(_request(app)) for _ in range(3)]
        await asyncio.sleep(0.2)
        release.set()
        return await asyncio.gather(*tasks)

    try:
        results = asyncio.run(scenario())
    finally:
        app.close()
    assert [status for status, _h, _b in results] == [200, 200, 200]


def test_a_request_cut_by_the_stop_while_its_token_is_checked_is_answered_504() -> None:
    checking, release = threading.Event(), threading.Event()

    def screen(method: str, path: str, query: str, headers: dict[str, str], client: str | None) -> Admission:
        checking.set()
        release.wait(5)  # the token check (in arcs local, the authorizer function) still running
        return Admission()

    app = AsgiApp(_slow_handler(release), HttpLimits(1024), screen=screen)
    sent: list[dict[str, Any]] = []

    async def scenario() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/x", "query_string": b"", "headers": []}
        task = asyncio.create_task(app(scope, receive, send))
        while not checking.is_set():
            await asyncio.sleep(0.01)
        task.cancel()  # what the server does to requests still running when its stop's grace ends
        await asyncio.gather(task, return_exceptions=True)

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        app.close()
    assert sent and sent[0]["status"] == 504, sent
    assert b"stopped before this request finished" in sent[1]["body"]
