"""Every route checks the caller's permission itself.

On AWS the authorizer's policy allows the whole stage, and API Gateway reuses a cached policy for
the caller's other routes (``infra/authorizer.py``): a valid token reaches every route, so each
route, not the gateway, must refuse what the token may not do. Each route of the app (read from
the app, so a new one is covered the day it is added) is called as a token without permissions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgpack
import pytest

from arcs.auth.tokens import Principal
from arcs.http.api import PUBLIC_PATHS, build_app
from arcs.http.gateway import _LambdaContext
from arcs.http.proxy import HttpResponse, http_response, proxy_event
from arcs.http.resolver import RequestScopedResolver
from arcs.http.route_docs import SPEC_PATH
from arcs.runtime import LocalRuntime, local_runtime
from arcs.settings import Settings

NOBODY = Principal("t-nobody", "nobody", frozenset(), ())
#: A body each route could act on, were it allowed to: the refusal must not depend on a bad body.
PLAUSIBLE = json.dumps(
    {"sql": "SELECT 1", "name": "metrics", "database": "metrics", "measurement": "cpu", "where": "time > 0"}
).encode()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> RequestScopedResolver:
    runtime: LocalRuntime = local_runtime(
        Settings(data_dir=Path(tmp_path_factory.mktemp("data")), bootstrap_token="bootstrap-token-0123456789")
    )
    return build_app(runtime)


def _all_routes(app: RequestScopedResolver) -> list[tuple[str, str]]:
    routes: list[Any] = [*app._static_routes, *app._dynamic_routes]
    return [(route.method, route.path) for route in routes]


def _call(app: RequestScopedResolver, method: str, path: str, principal: Principal) -> HttpResponse:
    concrete = re.sub(r"<[^>]+>", "1", path)
    body = b"cpu v=1" if "write" in concrete else PLAUSIBLE if method in ("POST", "PUT", "PATCH") else b""
    event = proxy_event(method, concrete, "", {"content-type": "application/json"}, body, principal.to_context())
    return http_response(app.resolve(event, _LambdaContext()))


def test_a_token_without_permissions_is_refused_by_every_route_but_verify_and_the_spec(
    app: RequestScopedResolver,
) -> None:
    routes = _all_routes(app)
    assert len(routes) > 40
    refused = []
    for method, path in routes:
        if path in PUBLIC_PATHS:
            continue
        answer = _call(app, method, path, NOBODY)
        if path == "/api/v1/auth/verify":
            # Identity only: the token may learn what it is, nothing more.
            assert answer.status == 200 and json.loads(answer.body)["permissions"] == []
            continue
        if path == SPEC_PATH:
            assert answer.status == 200  # the API's description: no data
            continue
        assert answer.status == 403, (method, path, answer.status, answer.body[:200])
        # The MessagePack route answers its errors in MessagePack, as Arc's does.
        error = msgpack.unpackb(answer.body) if path.endswith("/msgpack") and "write" not in path else None
        assert "lacks" in (error or json.loads(answer.body))["error"], (method, path)
        refused.append((method, path))
    assert ("DELETE", "/api/v1/databases/<name>") in refused
    assert ("POST", "/api/v1/write/msgpack") in refused


def test_a_read_token_cannot_write_or_administer(app: RequestScopedResolver) -> None:
    reader = Principal("t-reader", "reader", frozenset({"read"}), ())
    for method, path in _all_routes(app):
        if path in PUBLIC_PATHS or (method == "GET" and path != "/api/v1/auth/tokens" and "<token_id>" not in path):
            continue
        if path in ("/api/v1/query", "/api/v1/query/arrow", "/api/v1/query/msgpack", "/api/v1/query/estimate"):
            continue  # reads, by POST
        answer = _call(app, method, path, reader)
        assert answer.status == 403, (method, path, answer.status, answer.body[:200])
