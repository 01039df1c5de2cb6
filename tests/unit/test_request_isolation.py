"""Each request a resolver answers sees only its own event, whatever other threads resolve meanwhile."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayRestResolver
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.http.proxy import proxy_event
from arcs.http.resolver import RequestScopedResolver
from arcs.http.routes.request import RequestView


def _echo_app(resolver_class: type[APIGatewayRestResolver], inside: threading.Barrier) -> APIGatewayRestResolver:
    """An app whose route reads the request, waits until every thread is inside, and reads it again."""
    router = Router()
    request = RequestView(router)

    @router.post("/echo/<name>")
    def echo(name: str) -> dict[str, Any]:
        before = (request.body().decode(), request.header("x-caller"), request.param("p"))
        inside.wait(timeout=10)  # every other request has now been handed to the resolver
        after = (request.body().decode(), request.header("x-caller"), request.param("p"))
        return {"name": name, "before": before, "after": after, "route": router.context.get("_path")}

    app = resolver_class()
    app.include_router(router)
    return app


def _resolve_concurrently(app: APIGatewayRestResolver, callers: int, inside: threading.Barrier) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = [{} for _ in range(callers)]

    def call(index: int) -> None:
        event = proxy_event(
            "POST", f"/echo/n{index}", f"p=q{index}", {"x-caller": f"c{index}"}, f"body-{index}".encode()
        )
        answers[index] = json.loads(app.resolve(event, None)["body"])  # type: ignore[arg-type]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    inside.reset()
    return answers


def test_concurrent_requests_each_read_their_own_event() -> None:
    callers = 4
    inside = threading.Barrier(callers)
    answers = _resolve_concurrently(_echo_app(RequestScopedResolver, inside), callers, inside)
    for index, answer in enumerate(answers):
        own = [f"body-{index}", f"c{index}", f"q{index}"]
        assert answer == {"name": f"n{index}", "before": own, "after": own, "route": f"/echo/n{index}"}


def test_a_request_outside_resolve_has_no_event() -> None:
    app = RequestScopedResolver()
    with pytest.raises(RuntimeError, match="no request"):
        _ = app.current_event


def test_powertools_own_resolver_still_shares_the_event_between_threads() -> None:
    """Why ``RequestScopedResolver`` exists: Powertools keeps the event on the router class.

    Should a Powertools release keep it per request, this fails, and the subclass can go.
    """
    callers = 2
    inside = threading.Barrier(callers)
    answers = _resolve_concurrently(_echo_app(APIGatewayRestResolver, inside), callers, inside)
    mixed = [answer for index, answer in enumerate(answers) if answer["after"][0] != f"body-{index}"]
    assert mixed, "every request read its own event through Powertools' own resolver"
