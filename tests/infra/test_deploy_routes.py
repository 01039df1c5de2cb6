"""Every route of the HTTP API reaches its function, behind its authorizer."""

from __future__ import annotations

import json

import pytest
from infra.api import PUBLIC_PATHS

from tests.infra.synth import Json, Synth

pytestmark = pytest.mark.infra


# --- every route of the HTTP API reaches its function -------------------------------------------------

WRITE = "edge"
QUERY = "query"
PROBE = "probe"  # answered by API Gateway itself
#: (method, path, function) for every route of the HTTP API (path parameters filled in).
API_ROUTES = [
    ("POST", "/api/v1/write/msgpack", WRITE),
    ("POST", "/api/v1/write/line-protocol", WRITE),
    ("POST", "/write", WRITE),
    ("POST", "/api/v2/write", WRITE),
    ("POST", "/api/v1/write/json", WRITE),
    ("POST", "/api/v1/query", QUERY),
    ("POST", "/api/v1/query/arrow", QUERY),
    ("POST", "/api/v1/query/msgpack", QUERY),
    ("POST", "/api/v1/query/estimate", QUERY),
    ("GET", "/api/v1/query/cpu", QUERY),
    ("GET", "/api/v1/measurements", QUERY),
    ("GET", "/api/v1/databases", QUERY),
    ("POST", "/api/v1/databases", QUERY),
    ("GET", "/api/v1/databases/metrics", QUERY),
    ("GET", "/api/v1/databases/metrics/measurements", QUERY),
    ("DELETE", "/api/v1/databases/metrics", QUERY),
    ("GET", "/api/v1/auth/verify", QUERY),
    ("POST", "/api/v1/auth/tokens", QUERY),
    ("GET", "/api/v1/auth/tokens", QUERY),
    ("GET", "/api/v1/auth/tokens/abc", QUERY),
    ("PATCH", "/api/v1/auth/tokens/abc", QUERY),
    ("DELETE", "/api/v1/auth/tokens/abc", QUERY),
    ("POST", "/api/v1/auth/tokens/abc/rotate", QUERY),
    ("POST", "/api/v1/auth/tokens/abc/revoke", QUERY),
    ("GET", "/api/v1/retention", QUERY),
    ("POST", "/api/v1/retention", QUERY),
    ("GET", "/api/v1/retention/1", QUERY),
    ("PUT", "/api/v1/retention/1", QUERY),
    ("DELETE", "/api/v1/retention/1", QUERY),
    ("POST", "/api/v1/retention/1/execute", QUERY),
    ("GET", "/api/v1/retention/1/executions", QUERY),
    ("POST", "/api/v1/retention/run", QUERY),
    ("GET", "/api/v1/continuous_queries", QUERY),
    ("POST", "/api/v1/continuous_queries", QUERY),
    ("GET", "/api/v1/continuous_queries/1", QUERY),
    ("PUT", "/api/v1/continuous_queries/1", QUERY),
    ("DELETE", "/api/v1/continuous_queries/1", QUERY),
    ("POST", "/api/v1/continuous_queries/1/execute", QUERY),
    ("GET", "/api/v1/continuous_queries/1/executions", QUERY),
    ("POST", "/api/v1/delete", QUERY),
    ("GET", "/api/v1/delete/config", QUERY),
    ("GET", "/api/v1/compaction/status", QUERY),
    ("GET", "/api/v1/compaction/stats", QUERY),
    ("GET", "/api/v1/compaction/candidates", QUERY),
    ("GET", "/api/v1/compaction/jobs", QUERY),
    ("GET", "/api/v1/compaction/history", QUERY),
    ("POST", "/api/v1/compaction/trigger", QUERY),
    ("GET", "/health", PROBE),
    ("HEAD", "/health", PROBE),
    ("GET", "/ready", PROBE),
    ("HEAD", "/ready", PROBE),
    ("GET", "/ping", PROBE),
    ("HEAD", "/ping", PROBE),
]


def _resolve(athena_synth: Synth, method: str, path: str) -> Json:
    """The method API Gateway picks for a request: the deepest static resource matching the path,
    else the greedy ``{proxy+}`` under the deepest one that matched (the API declares one under
    every static resource, so this is what happens whatever API Gateway's backtracking)."""
    resources = athena_synth.of_type("AWS::ApiGateway::Resource")
    api_id = athena_synth.logical_id(athena_synth.stack.api.api)
    children: dict[str, dict[str, str]] = {}
    for logical, resource in resources.items():
        parent = resource["Properties"]["ParentId"]
        parent_key = "root" if "Fn::GetAtt" in parent else parent["Ref"]
        children.setdefault(parent_key, {})[resource["Properties"]["PathPart"]] = logical
    methods: dict[tuple[str, str], Json] = {}
    for m in athena_synth.of_type("AWS::ApiGateway::Method").values():
        ref = m["Properties"]["ResourceId"]
        key = "root" if "Fn::GetAtt" in ref and ref["Fn::GetAtt"][0] == api_id else ref["Ref"]
        methods[(key, m["Properties"]["HttpMethod"])] = m["Properties"]

    node = "root"
    parts = path.strip("/").split("/")
    for i, part in enumerate(parts):
        nxt = children.get(node, {}).get(part)
        if nxt is None:
            node = children[node]["{proxy+}"]
            break
        node = nxt
        if i == len(parts) - 1:
            break
    return methods.get((node, method)) or methods[(node, "ANY")]


@pytest.mark.parametrize(("method", "path", "function"), API_ROUTES)
def test_every_api_route_reaches_its_function_behind_the_authorizer(
    athena_synth: Synth, method: str, path: str, function: str
) -> None:
    targets = {
        WRITE: athena_synth.logical_id(athena_synth.stack.edge.edge.function),
        QUERY: athena_synth.logical_id(athena_synth.stack.query.query.function),
    }
    resolved = _resolve(athena_synth, method, path)
    if function == PROBE:
        assert path in PUBLIC_PATHS
        assert resolved["Integration"]["Type"] == "MOCK"
        assert resolved["AuthorizationType"] == "NONE"
        return
    uri = json.dumps(resolved["Integration"]["Uri"])
    assert resolved["Integration"]["Type"] == "AWS_PROXY"
    assert [name for name, logical in targets.items() if f'"{logical}"' in uri] == [function]
    assert resolved["AuthorizationType"] == "CUSTOM"
    # Arc's API takes the token in the Authorization header and is cached; writes and InfluxDB's
    # paths take it anywhere, uncached (tests/infra/test_api_front.py).
    authorizers = athena_synth.stack.authorizer
    cached = path.startswith("/api/v1/") and function != WRITE
    expected = authorizers.token_authorizer if cached else authorizers.request_authorizer
    assert resolved["AuthorizerId"] == {"Ref": athena_synth.logical_id(expected)}
