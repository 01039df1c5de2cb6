"""API Gateway: the writes to the edge and the rest to query, binary bodies, the stage's
throttling and logs, and the gateway's errors in the API's shape.

The template is conftest's ``synth``: the stack as deployed by default, synthesized once per session.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match
from infra.api import PUBLIC_PATHS

from arcs.write.paths import WRITE_ROUTES
from tests.infra.synth import Json, Synth

pytestmark = pytest.mark.infra


# --- API Gateway -----------------------------------------------------------------------------------


def _routes(synth: Synth) -> dict[tuple[str, str], Json]:
    """(path, method) -> the method's properties."""
    api_id = synth.logical_id(synth.stack.api.api)
    paths = {f"ROOT:{api_id}": "/"}
    resources = synth.of_type("AWS::ApiGateway::Resource")

    def path_of(ref: Json) -> str:
        if "Fn::GetAtt" in ref:
            return "/"
        logical = ref["Ref"]
        if logical not in paths:
            props = resources[logical]["Properties"]
            parent = path_of(props["ParentId"])
            paths[logical] = parent.rstrip("/") + "/" + props["PathPart"]
        return paths[logical]

    return {
        (path_of(m["Properties"]["ResourceId"]), m["Properties"]["HttpMethod"]): m["Properties"]
        for m in synth.of_type("AWS::ApiGateway::Method").values()
    }


def _target(method: Json, functions: list[str]) -> str:
    """Which of ``functions`` (logical ids) the method's Lambda proxy integration invokes."""
    assert method["Integration"]["Type"] == "AWS_PROXY"
    uri = json.dumps(method["Integration"]["Uri"])
    found = [logical for logical in functions if f'"{logical}"' in uri]
    assert len(found) == 1, uri
    return found[0]


def test_routes_writes_to_the_edge_and_the_rest_to_query(synth: Synth) -> None:
    edge = synth.logical_id(synth.stack.edge.edge.function)
    query = synth.logical_id(synth.stack.query.query.function)
    cached = {"Ref": synth.logical_id(synth.stack.authorizer.token_authorizer)}
    uncached = {"Ref": synth.logical_id(synth.stack.authorizer.request_authorizer)}
    routes = _routes(synth)

    def target(method: Json) -> str:
        return _target(method, [edge, query])

    for path in WRITE_ROUTES:
        method = routes[(path, "POST")]
        assert target(method) == edge, path
        assert method["AuthorizationType"] == "CUSTOM"
        assert method["AuthorizerId"] == uncached
    for path in PUBLIC_PATHS:
        for verb in ("GET", "HEAD"):
            method = routes[(path, verb)]
            assert method["Integration"]["Type"] == "MOCK", path
            assert method["AuthorizationType"] == "NONE"
    assert target(routes[("/", "ANY")]) == query
    assert target(routes[("/{proxy+}", "ANY")]) == query
    # The resources above write paths must not swallow the rest of their subtree.
    for prefix in ("/api", "/api/v1", "/api/v1/write", "/api/v2"):
        assert target(routes[(prefix + "/{proxy+}", "ANY")]) == query, prefix

    for (path, verb), method in routes.items():
        if path in PUBLIC_PATHS:
            continue
        assert method["AuthorizationType"] == "CUSTOM", (path, verb)
        if (path, verb) not in {(p, "POST") for p in WRITE_ROUTES}:
            assert target(method) == query, (path, verb)
            arc_api = (path == "/api/v1" or path.startswith("/api/v1/")) and not path.startswith("/api/v1/write")
            assert method["AuthorizerId"] == (cached if arc_api else uncached), (path, verb)


def test_api_passes_every_body_as_binary(synth: Synth) -> None:
    api = synth.props(synth.stack.api.api)
    assert api["BinaryMediaTypes"] == ["*/*"]
    assert api["EndpointConfiguration"] == {"Types": ["REGIONAL"]}


def test_stage_throttles_logs_access_and_never_logs_bodies(synth: Synth) -> None:
    [stage] = synth.of_type("AWS::ApiGateway::Stage").values()
    props = stage["Properties"]
    # The log group's ARN without the ':*' suffix (the logGroupDestinationArnWithoutWildcard flag).
    assert synth.logical_id(synth.stack.api.access_logs) in json.dumps(props["AccessLogSetting"]["DestinationArn"])
    assert not json.dumps(props["AccessLogSetting"]["DestinationArn"]).endswith(':*"]]}')
    assert "$context.requestId" in props["AccessLogSetting"]["Format"]
    [settings] = props["MethodSettings"]
    assert settings["HttpMethod"] == "*"
    assert settings["ResourcePath"] == "/*"
    assert settings["ThrottlingRateLimit"] > 0
    assert settings["ThrottlingBurstLimit"] > 0
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["DataTraceEnabled"] is False
    assert props["TracingEnabled"] is True


def test_gateway_errors_use_the_api_error_shape(synth: Synth) -> None:
    for response_type in ("DEFAULT_4XX", "DEFAULT_5XX"):
        synth.assertions.has_resource_properties(
            "AWS::ApiGateway::GatewayResponse",
            {
                "ResponseType": response_type,
                "ResponseTemplates": {"application/json": Match.string_like_regexp(r'"success": false')},
            },
        )
