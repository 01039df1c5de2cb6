"""The OpenAPI document (docs/api.md): made from the routes, committed, served, and valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.event_handler.api_gateway import Router
from openapi_spec_validator import validate

from arcs.auth.tokens import _FIELDS as TOKEN_FIELDS
from arcs.auth.tokens import Principal
from arcs.continuous_queries.definitions import FIELDS as CQ_FIELDS
from arcs.continuous_queries.definitions import REQUIRED_FIELDS as CQ_REQUIRED
from arcs.http import openapi, route_docs
from arcs.http.api import build_app
from arcs.http.gateway import METRICS_PATH, _LambdaContext
from arcs.http.proxy import http_response, proxy_event
from arcs.http.resolver import RequestScopedResolver
from arcs.lifecycle.retention import POLICY_FIELDS
from arcs.runtime import local_runtime
from arcs.settings import Settings
from arcs.write.paths import WRITE_ROUTES, is_write_path, takes_cached_authorizer


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return openapi.document()


def _operations(spec: dict[str, Any], function: str | None = None) -> set[tuple[str, str]]:
    return {
        (method, path)
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
        if function is None or operation["x-arcs-function"] == function
    }


def test_the_document_is_valid_openapi_3_1(spec: dict[str, Any]) -> None:
    validate(spec)
    assert spec["openapi"] == "3.1.0"


def test_the_committed_document_and_reference_are_what_the_routes_say(spec: dict[str, Any]) -> None:
    assert json.loads(openapi.SOURCE_FILE.read_text()) == spec, "run python -m arcs.http.openapi"
    assert route_docs.served() == openapi.SOURCE_FILE.read_bytes()
    page = openapi.REFERENCE_PAGE.read_text()
    assert openapi.with_reference(page, spec) == page, "run python -m arcs.http.openapi"
    assert openapi.main(["--check"]) == 0


def test_every_route_of_each_function_has_its_entry_and_no_entry_lacks_its_route(spec: dict[str, Any]) -> None:
    everything = openapi.operations("all")
    standalone = _operations(spec, openapi.STANDALONE)
    assert everything == _operations(spec) - standalone
    # What only the standalone server answers, before its routes: no function serves it.
    assert standalone == {("get", METRICS_PATH), ("head", METRICS_PATH)}
    assert all(spec["paths"][METRICS_PATH][method]["security"] == [] for method, _ in standalone)
    assert len(everything) >= 60
    # What API Gateway sends each function is exactly what that function's app serves.
    assert openapi.operations("edge") == _operations(spec, "edge")
    assert openapi.operations("query") == _operations(spec, "query") | _operations(spec, "api-gateway")
    assert ("post", "/api/v1/write/msgpack") in _operations(spec, "edge")
    assert ("get", route_docs.SPEC_PATH) in _operations(spec, "query")


def test_a_route_without_an_entry_fails_the_document() -> None:
    app = RequestScopedResolver()
    router = Router()

    @router.get("/api/v1/undocumented")
    def undocumented() -> dict[str, Any]:
        return {}

    app.include_router(router)
    with pytest.raises(ValueError, match="undocumented has no OpenAPI entry"):
        openapi._operation(openapi.routes(app)[0], "query")


def test_every_operation_documents_its_errors_and_path_parameters(spec: dict[str, Any]) -> None:
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            statuses = set(operation["responses"])
            assert any(status.startswith("2") or status == "303" for status in statuses), (method, path)
            if operation.get("security") != []:
                assert {"401", "429"} <= statuses, (method, path)
            named = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert named == set(openapi._PATH_NAME.findall(path)), (method, path)


def _properties(spec: dict[str, Any], name: str) -> tuple[set[str], set[str]]:
    schema = spec["components"]["schemas"][name]
    return set(schema["properties"]), set(schema.get("required", []))


def test_the_request_schemas_name_exactly_the_fields_the_routes_read(spec: dict[str, Any]) -> None:
    """The routes parse these bodies by hand, refusing unknown fields: the schemas must agree."""
    assert _properties(spec, "TokenCreate") == (set(TOKEN_FIELDS), {"name"})
    assert _properties(spec, "TokenUpdate") == (set(TOKEN_FIELDS), set())
    assert _properties(spec, "ContinuousQueryCreate") == (set(CQ_FIELDS), set(CQ_REQUIRED))
    assert _properties(spec, "ContinuousQueryUpdate")[0] == set(CQ_FIELDS)
    assert _properties(spec, "RetentionPolicyCreate")[0] == set(POLICY_FIELDS)
    assert _properties(spec, "RetentionPolicyUpdate") == (set(POLICY_FIELDS), set())


def test_every_runtime_app_serves_the_document_to_any_valid_token(tmp_path: Path) -> None:
    runtime = local_runtime(Settings(data_dir=tmp_path, bootstrap_token="bootstrap-token-0123456789"))
    app = build_app(runtime, "query")
    nobody = Principal("t-nobody", "nobody", frozenset(), ())
    event = proxy_event("GET", route_docs.SPEC_PATH, "", {}, b"", nobody.to_context())
    answer = http_response(app.resolve(event, _LambdaContext()))
    assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
    assert json.loads(answer.body) == json.loads(openapi.SOURCE_FILE.read_text())
    anonymous = http_response(app.resolve(proxy_event("GET", route_docs.SPEC_PATH, "", {}, b""), _LambdaContext()))
    assert anonymous.status == 401


def test_the_write_routes_are_listed_once_and_the_gateways_read_that_list(spec: dict[str, Any]) -> None:
    """The routes the app serves as writes are exactly ``WRITE_ROUTES``, which the CDK app declares
    and the emulated gateway routes to the write function; every other path under Arc's API takes
    the cached authorizer."""
    # The imports are one route with the format as its parameter; the gateways declare each.
    kinds = spec["paths"]["/api/v1/import/{kind}"]["post"]["parameters"][0]["schema"]["enum"]
    paths = [path for path in spec["paths"] if path != "/api/v1/import/{kind}"]
    paths += [f"/api/v1/import/{kind}" for kind in kinds]
    served = {path for path in paths if is_write_path(path)}
    assert served == set(WRITE_ROUTES)
    for path in paths:
        assert takes_cached_authorizer(path) == (path.startswith("/api/v1/") and path not in WRITE_ROUTES), path
