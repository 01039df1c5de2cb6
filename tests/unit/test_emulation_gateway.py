"""The emulated API Gateway with stand-in functions: routing, authorizer policy, errors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from arcs.emulation import ApiGateway, FakeLambdaContext, LambdaFunction
from arcs.emulation.gateway import policy_allows
from arcs.http.proxy import HttpResponse
from arcs.settings import AWS_TOO_LARGE_MESSAGE

METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:arcslocal/local/POST/api/v1/query"


def policy(effect: str, resource: str | list[str], action: str = "execute-api:Invoke") -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{"Action": action, "Effect": effect, "Resource": resource}]}


@pytest.mark.parametrize(
    ("document", "allowed"),
    [
        (policy("Allow", "arn:aws:execute-api:us-east-1:123456789012:arcslocal/local/*"), True),
        (policy("Allow", METHOD_ARN), True),
        (policy("Allow", "arn:aws:execute-api:us-east-1:123456789012:arcslocal/local/GET/*"), False),
        (policy("Allow", "arn:aws:execute-api:*:*:arcslocal/?ocal/POST/*"), True),
        (policy("Allow", "*", action="execute-api:*"), True),
        (policy("Allow", "*", action="s3:GetObject"), False),
        (policy("Deny", "*"), False),
        ({"Statement": [*policy("Allow", "*")["Statement"], *policy("Deny", METHOD_ARN)["Statement"]]}, False),
        ({"Statement": {"Action": ["execute-api:Invoke"], "Effect": "Allow", "Resource": [METHOD_ARN]}}, True),
        ({"Statement": []}, False),
    ],
)
def test_policy_evaluation(document: dict[str, Any], allowed: bool) -> None:
    assert policy_allows(document, METHOD_ARN) is allowed


class Stub:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.events: list[dict[str, Any]] = []
        self.contexts: list[FakeLambdaContext] = []

    def __call__(self, event: dict[str, Any], context: FakeLambdaContext) -> Any:
        self.events.append(event)
        self.contexts.append(context)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def allow(context: dict[str, str] | None = None, effect: str = "Allow") -> dict[str, Any]:
    return {
        "principalId": "tok1",
        "policyDocument": policy(effect, "arn:aws:execute-api:us-east-1:123456789012:arcslocal/local/*"),
        "context": context or {"token_id": "tok1", "permissions": "read"},
    }


OK = {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": "ok", "isBase64Encoded": False}


def gateway(
    authorizer: Any,
    edge: Any = None,
    queries: Any = None,
    ttl: float = 0,
    sources: tuple[str, ...] = (),
    stream_queries: bool = True,
) -> ApiGateway:
    return ApiGateway(
        LambdaFunction("auth", authorizer, timeout_s=10),
        LambdaFunction("edge", edge or Stub(OK), timeout_s=29),
        LambdaFunction("queries", queries or Stub(OK), timeout_s=29),
        cache_ttl_s=ttl,
        identity_sources=sources,
        stream_queries=stream_queries,
    )


def whole(response: HttpResponse) -> bytes:
    """The body as the client reads it, streamed or not."""
    return response.body + b"".join(response.stream or [])


@pytest.mark.parametrize(
    ("path", "function"),
    [
        ("/api/v1/write/msgpack", "edge"),
        ("/api/v1/write/line-protocol", "edge"),
        ("/write", "edge"),
        ("/api/v2/write", "edge"),
        ("/api/v1/query", "queries"),
        ("/api/v1/writes", "queries"),
        ("/api/v1/auth/verify", "queries"),
    ],
)
def test_routes_writes_to_the_edge_and_the_rest_to_query(path: str, function: str) -> None:
    edge, queries = Stub(OK), Stub(OK)
    response = gateway(Stub(allow()), edge, queries).handle("POST", path, "", {"authorization": "Bearer t"}, b"x")
    assert response.status == 200 and whole(response) == b"ok"
    # The stack's transfer modes: the query function's integration streams, the edge's buffers.
    assert (response.stream is not None) is (function == "queries")
    called = edge if function == "edge" else queries
    (event,) = called.events
    assert event["path"] == path and base64.b64decode(event["body"]) == b"x"
    assert not (queries if function == "edge" else edge).events


def test_authorizer_gets_a_request_event_and_its_context_reaches_the_function() -> None:
    authorizer, queries = Stub(allow({"token_id": "tok1", "permissions": "read,write"})), Stub(OK)
    gateway(authorizer, queries=queries).handle("GET", "/api/v1/auth/verify", "p=tok&x=1", {"x-api-key": "k"}, b"")
    (request,) = authorizer.events
    assert request["type"] == "REQUEST"
    assert request["methodArn"] == "arn:aws:execute-api:us-east-1:123456789012:arcslocal/local/GET/api/v1/auth/verify"
    assert request["queryStringParameters"] == {"p": "tok", "x": "1"}
    assert request["headers"] == {"x-api-key": "k"}
    (event,) = queries.events
    assert event["requestContext"]["authorizer"] == {
        "token_id": "tok1",
        "permissions": "read,write",
        "principalId": "tok1",
    }
    context = queries.contexts[0]
    assert context.function_name == "queries" and context.invoked_function_arn.endswith(":function:queries")
    assert 0 < context.get_remaining_time_in_millis() <= 29_000


def test_public_paths_skip_the_authorizer() -> None:
    authorizer = Stub(Exception("Unauthorized"))
    api = gateway(authorizer)
    assert api.handle("GET", "/health", "", {}, b"").status == 200
    assert api.handle("GET", "/ready", "", {}, b"").status == 200
    assert not authorizer.events


def test_unauthorized_is_401_deny_is_413_and_a_broken_authorizer_500() -> None:
    refused = gateway(Stub(Exception("Unauthorized"))).handle("GET", "/api/v1/auth/verify", "", {}, b"")
    assert refused.status == 401 and json.loads(refused.body) == {"success": False, "error": "Unauthorized"}
    assert refused.headers["Content-Type"] == "application/json"
    denied = gateway(Stub(allow(effect="Deny"))).handle("GET", "/x", "", {"authorization": "a"}, b"")
    # The stack's ACCESS_DENIED gateway response: the authorizer denies only writes too large for AWS.
    assert denied.status == 413 and json.loads(denied.body) == {"success": False, "error": AWS_TOO_LARGE_MESSAGE}
    broken = gateway(Stub(KeyError("boom"))).handle("GET", "/x", "", {"authorization": "a"}, b"")
    assert broken.status == 500
    no_policy = gateway(Stub({"principalId": "x"})).handle("GET", "/x", "", {"authorization": "a"}, b"")
    assert no_policy.status == 500


def test_without_a_cache_ttl_every_request_calls_the_authorizer() -> None:
    authorizer = Stub(allow())
    api = gateway(authorizer)
    for headers, query in [({"authorization": "Bearer one"}, ""), ({"authorization": "Bearer one"}, ""), ({}, "p=x")]:
        assert api.handle("GET", "/x", query, headers, b"").status == 200
    assert len(authorizer.events) == 3


def test_cache_is_per_identity_keeps_denials_and_requires_every_source() -> None:
    authorizer = Stub(allow(effect="Deny"))
    api = gateway(authorizer, ttl=60, sources=("header:Authorization",))
    for _ in range(3):
        assert api.handle("GET", "/api/v1/x", "", {"authorization": "Bearer one"}, b"").status == 413
    assert api.handle("GET", "/api/v1/x", "", {"authorization": "Bearer two"}, b"").status == 413
    assert api.handle("GET", "/api/v1/x", "p=one", {"authorization": "Bearer one"}, b"").status == 413
    assert len(authorizer.events) == 2
    # A request without an identity source is refused before the authorizer runs.
    missing = api.handle("GET", "/api/v1/x", "p=one", {"x-api-key": "one"}, b"")
    assert missing.status == 401 and json.loads(missing.body) == {"success": False, "error": "Unauthorized"}
    assert len(authorizer.events) == 2


def test_arc_api_takes_the_token_in_its_identity_sources_only_cached_or_not() -> None:
    """As the stack attaches its authorizers: under /api/v1 but the writes a request without the
    Authorization header is a 401 before any function runs, even uncached; writes and InfluxDB's
    paths take the token anywhere and are never cached."""
    authorizer = Stub(allow())
    api = gateway(authorizer, sources=("header:Authorization",))
    assert api.handle("GET", "/api/v1/databases", "p=one", {"x-api-key": "one"}, b"").status == 401
    assert authorizer.events == []
    assert api.handle("POST", "/api/v1/write/line-protocol", "", {"x-api-key": "one"}, b"").status == 200
    assert api.handle("POST", "/write", "p=one", {}, b"").status == 200
    assert api.handle("GET", "/query", "p=one", {}, b"").status == 200
    assert api.handle("GET", "/api/v1/databases", "", {"authorization": "Bearer one"}, b"").status == 200
    assert len(authorizer.events) == 4  # uncached: every request that got through asked
    asked = Stub(allow())
    cached = gateway(asked, ttl=60, sources=("header:Authorization",))
    for _ in range(2):
        assert cached.handle("POST", "/write", "", {"authorization": "Bearer one"}, b"").status == 200
    assert len(asked.events) == 2


@pytest.mark.parametrize("sources", [(), ("cookie:x",), ("header:",)])
def test_caching_needs_valid_identity_sources(sources: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="identity source"):
        gateway(Stub(allow()), ttl=60, sources=sources)


def test_a_failing_or_malformed_integration_is_502() -> None:
    crashed = gateway(Stub(allow()), queries=Stub(RuntimeError("boom"))).handle(
        "GET", "/x", "", {"authorization": "a"}, b""
    )
    assert crashed.status == 502
    garbage = gateway(Stub(allow()), queries=Stub({"body": "no status"})).handle(
        "GET", "/x", "", {"authorization": "a"}, b""
    )
    assert garbage.status == 502
    buffered = gateway(Stub(allow()), queries=Stub({"statusCode": 200, "body": b"bytes"}), stream_queries=False)
    assert buffered.handle("GET", "/x", "", {"authorization": "a"}, b"").status == 502


@pytest.mark.parametrize("path", ["/health", "/ready", "/ping"])
def test_probes_are_answered_as_the_stacks_mock_integrations_answer_them(path: str) -> None:
    from infra.api import PROBES

    queries = Stub(OK)
    api = gateway(Stub(allow()), queries=queries)
    probe = PROBES[path]
    got = api.handle("GET", path, "", {}, b"")
    assert got.status == probe.status
    assert {k: v for k, v in got.headers.items() if k != "Content-Type"} == dict(probe.headers)
    if probe.body:
        assert json.loads(got.body).keys() == json.loads(probe.body.replace("$context.requestTime", "t")).keys()
    head = api.handle("HEAD", path, "", {}, b"")
    assert (head.status, head.body) == (probe.status, b"")
    assert api.handle("POST", path, "", {}, b"").status == 403  # a method the API does not have
    assert queries.events == []  # no function ran
