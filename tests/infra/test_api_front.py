"""The API's front door as the synthesized template builds it: what answers without a token, which
authorizer sees which route and whether every documented token form gets through it, what a write
too large for Lambda is answered, and which objects the query function may touch.

Each is read from the template API Gateway and IAM would be given (one synthesis per module).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template
from infra.api import PROBES, PUBLIC_PATHS
from infra.app import build
from infra.authorizer import FUNCTION_TOKEN_CACHE_TTL_S, GATEWAY_CACHE_TTL
from infra.stack import TOKEN_CACHE_TTL_S, ArcsStack

from arcs import layout
from arcs.adapters.aws.queue import claim_key
from arcs.settings import AWS_MAX_REQUEST_BYTES, AWS_TOO_LARGE_MESSAGE
from arcs.write.import_status import ImportLedger
from arcs.write.paths import WRITE_ROUTES, declared_too_large, is_write_path

pytestmark = pytest.mark.infra

Json = dict[str, Any]
README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class Synth:
    stack: ArcsStack
    resources: dict[str, Json]

    def of_type(self, cfn_type: str) -> dict[str, Json]:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def logical_id(self, construct: Any) -> str:
        return Stack.of(construct).get_logical_id(construct.node.default_child)

    def props(self, construct: Any) -> Json:
        return self.resources[self.logical_id(construct)]["Properties"]  # type: ignore[no-any-return]


def _synth(layers_dir: Path, **context: str) -> Synth:
    _, stack = build(App(context={"layers_dir": str(layers_dir), **context}))
    return Synth(stack, Template.from_stack(stack).to_json()["Resources"])


@pytest.fixture(scope="module")
def synth(layers_dir: Path) -> Synth:
    return _synth(layers_dir)


def _methods(synth: Synth) -> dict[tuple[str, str], Json]:
    """(resource path, HTTP method) -> the method's properties, for every method of the API."""
    resources = synth.of_type("AWS::ApiGateway::Resource")

    def path_of(ref: Json) -> str:
        if "Fn::GetAtt" in ref:
            return ""
        props = resources[ref["Ref"]]["Properties"]
        return path_of(props["ParentId"]) + "/" + props["PathPart"]

    return {
        (path_of(m["Properties"]["ResourceId"]) or "/", m["Properties"]["HttpMethod"]): m["Properties"]
        for m in synth.of_type("AWS::ApiGateway::Method").values()
    }


def _resolve(methods: dict[tuple[str, str], Json], verb: str, path: str) -> Json:
    """The method API Gateway picks: the deepest static resource, else the ``{proxy+}`` under the
    deepest that matched (the API declares one under each static resource)."""
    paths = {p for p, _ in methods}
    node = ""
    for part in path.strip("/").split("/"):
        if f"{node}/{part}" not in paths and not any(p.startswith(f"{node}/{part}/") for p in paths):
            node = f"{node}/{{proxy+}}"
            break
        node = f"{node}/{part}"
    node = node or "/"
    return methods.get((node, verb)) or methods[(node, "ANY")]


# --- probes: no token, no function ------------------------------------------------------------------


def test_no_method_without_a_token_reaches_a_function(synth: Synth) -> None:
    methods = _methods(synth)
    public = {(path, verb): m for (path, verb), m in methods.items() if m["AuthorizationType"] == "NONE"}
    assert set(public) == {(path, verb) for path in PUBLIC_PATHS for verb in ("GET", "HEAD")}
    for route, method in public.items():
        assert method["Integration"]["Type"] == "MOCK", route
        assert "Uri" not in method["Integration"], route


@pytest.mark.parametrize("path", PUBLIC_PATHS)
@pytest.mark.parametrize("verb", ["GET", "HEAD"])
def test_probes_answer_from_the_gateway_in_the_standalone_servers_shape(synth: Synth, path: str, verb: str) -> None:
    method = _methods(synth)[(path, verb)]
    integration = method["Integration"]
    probe = PROBES[path]
    # The request is read as text whatever its type (binary media types are */*), so the template
    # that picks the status applies; a type without a template is refused (415), never passed on.
    assert integration["ContentHandling"] == "CONVERT_TO_TEXT"
    assert integration["PassthroughBehavior"] == "NEVER"
    assert {json.loads(t)["statusCode"] for t in integration["RequestTemplates"].values()} == {probe.status}
    assert "application/json" in integration["RequestTemplates"]
    [response] = integration["IntegrationResponses"]
    assert response["StatusCode"] == str(probe.status)
    assert [r["StatusCode"] for r in method["MethodResponses"]] == [str(probe.status)]
    declared = set(method["MethodResponses"][0].get("ResponseParameters", {}))
    assert declared == set(response.get("ResponseParameters", {}))
    headers = {
        k.removeprefix("method.response.header."): v.strip("'")
        for k, v in response.get("ResponseParameters", {}).items()
    }
    standalone = _standalone_probe(path, verb)
    assert standalone["status"] == probe.status
    for name, value in headers.items():
        if name != "Content-Type":
            assert standalone["headers"][name] == value, name
    if probe.body:
        assert headers["Content-Type"] == "application/json"
        # $context variables become strings; the keys and the status are the standalone server's.
        body = json.loads(re.sub(r"\$context\.\w+", "x", response["ResponseTemplates"]["application/json"]))
        assert set(body) <= set(standalone["json"]) and body["status"] == standalone["json"]["status"]
    else:
        assert "ResponseTemplates" not in response
        assert standalone["json"] is None


def _standalone_probe(path: str, verb: str) -> Json:
    """What the standalone server's route answers (``arcs.http.routes.health``), without a token; the
    body is the GET's (the HTTP front sends none for HEAD)."""
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver

    from arcs.http.proxy import http_response, proxy_event
    from arcs.http.routes.health import health_router

    class Ready:
        def ready(self) -> bool:
            return True

    app = APIGatewayRestResolver()
    app.include_router(health_router(Ready()))  # type: ignore[arg-type]  # the probes read nothing else

    def answer(method: str) -> Any:
        return http_response(app.resolve(proxy_event(method, path, "", {}, b""), {}))

    head, get = answer(verb), answer("GET")
    return {"status": head.status, "headers": head.headers, "json": json.loads(get.body) if get.body else None}


# --- authorizers ------------------------------------------------------------------------------------


def test_arc_api_is_cached_on_the_authorization_header_and_the_rest_is_not(synth: Synth) -> None:
    authorizers = synth.stack.authorizer
    cached = synth.props(authorizers.token_authorizer)
    uncached = synth.props(authorizers.request_authorizer)
    function = {"Fn::GetAtt": [synth.logical_id(authorizers.authorizer_function.function), "Arn"]}
    for props in (cached, uncached):
        assert props["Type"] == "REQUEST"
        assert json.dumps(function) in json.dumps(props["AuthorizerUri"])
    # API Gateway refuses (401) any request lacking one of the identity sources: one, the header
    # all of Bearer, Token and Basic are sent in.
    assert cached["IdentitySource"] == "method.request.header.Authorization"
    assert cached["AuthorizerResultTtlInSeconds"] == GATEWAY_CACHE_TTL.to_seconds() > 0
    # Uncached and without identity sources: every request reaches the function, wherever its token is.
    assert uncached["AuthorizerResultTtlInSeconds"] == 0
    assert "IdentitySource" not in uncached
    # A revocation is seen within the gateway's cache plus the function's, as for any function.
    env = synth.props(authorizers.authorizer_function.function)["Environment"]["Variables"]
    assert int(env["ARCS_TOKEN_CACHE_TTL_S"]) == FUNCTION_TOKEN_CACHE_TTL_S
    assert GATEWAY_CACHE_TTL.to_seconds() + FUNCTION_TOKEN_CACHE_TTL_S <= TOKEN_CACHE_TTL_S


def _readme_requests() -> list[tuple[str, str, dict[str, str], dict[str, str]]]:
    """Every curl example of the README as (method, path, headers, query parameters)."""
    text = README.read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    found = []
    for block in blocks:
        lexer = shlex.shlex(block.replace("\\\n", " "), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        commands: list[list[str]] = []
        for word in lexer:
            if word == "curl":
                commands.append([word])
            elif word in ("|", ";", "&&"):
                commands.append([])
            elif commands:
                commands[-1].append(word)
        for words in filter(None, commands):
            verb, headers, url, has_body = "GET", {}, "", False
            for i, word in enumerate(words):
                following = words[i + 1] if i + 1 < len(words) else ""
                if word == "-X":
                    verb = following
                elif word == "-H":
                    name, _, value = following.partition(":")
                    headers[name.strip().lower()] = value.strip()
                elif word == "-u":
                    headers["authorization"] = "Basic " + following
                elif word in ("-d", "--data-binary", "-F", "--form"):
                    has_body = True
                elif word.startswith("http://127.0.0.1:8000"):
                    url = word
            if url:
                parts = urlsplit(url)
                verb = "POST" if has_body and verb == "GET" else verb
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                found.append((verb, parts.path, headers, query))
    return found


def _passes_identity_sources(synth: Synth, method: Json, headers: dict[str, str], query: dict[str, str]) -> bool:
    """Whether API Gateway calls the method's authorizer for this request (all identity sources present)."""
    authorizer = synth.resources[method["AuthorizerId"]["Ref"]]["Properties"]
    for source in filter(None, (s.strip() for s in authorizer.get("IdentitySource", "").split(","))):
        kind, _, name = source.removeprefix("method.request.").partition(".")
        if kind == "header" and name.lower() not in headers:
            return False
        if kind == "querystring" and name not in query:
            return False
    return True


def test_every_documented_token_form_gets_through_to_the_authorizer(synth: Synth) -> None:
    requests = _readme_requests()
    assert len(requests) >= 20
    forms = {h.get("authorization", "").split(" ")[0] for _, _, h, _ in requests}
    assert forms >= {"Bearer", "Token", "Basic"}
    methods = _methods(synth)
    for verb, path, headers, query in requests:
        method = _resolve(methods, verb, path)
        assert method["AuthorizationType"] in ("CUSTOM", "NONE"), path
        if method["AuthorizationType"] == "CUSTOM":
            assert _passes_identity_sources(synth, method, headers, query), (verb, path, headers)


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({"authorization": "Bearer t"}, {}),
        ({"authorization": "Token t"}, {}),
        ({"authorization": "Basic dTp0"}, {}),
        ({"x-api-key": "t"}, {}),
        ({}, {"u": "any", "p": "t"}),
    ],
)
def test_writes_and_influxdb_paths_take_the_token_anywhere(
    synth: Synth, headers: dict[str, str], query: dict[str, str]
) -> None:
    methods = _methods(synth)
    for path in WRITE_ROUTES:
        assert _passes_identity_sources(synth, _resolve(methods, "POST", path), headers, query), path
    for verb, path in (("POST", "/query"), ("GET", "/api/v2/query"), ("GET", "/anything")):
        assert _passes_identity_sources(synth, _resolve(methods, verb, path), headers, query), path
    # Arc's API is cached on the header: there x-api-key and ?p= are refused at the gateway (401).
    arc = _resolve(methods, "POST", "/api/v1/query")
    assert _passes_identity_sources(synth, arc, headers, query) == ("authorization" in headers)


# --- writes too large for one Lambda invoke -------------------------------------------------------


def test_a_write_the_authorizer_denies_for_its_size_is_a_413_in_the_api_error_shape(synth: Synth) -> None:
    responses = {
        r["Properties"]["ResponseType"]: r["Properties"]
        for r in synth.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    denied = responses["ACCESS_DENIED"]
    assert denied["StatusCode"] == "413"
    body = json.loads(denied["ResponseTemplates"]["application/json"])
    assert body == {"success": False, "error": AWS_TOO_LARGE_MESSAGE}
    assert str(AWS_MAX_REQUEST_BYTES) in body["error"]
    # Every body reaches Lambda base64-encoded, hence the limit (arcs.settings.AWS_MAX_REQUEST_BYTES).
    assert synth.props(synth.stack.api.api)["BinaryMediaTypes"] == ["*/*"]
    # The writes see the uncached authorizer, which checks each one's declared length.
    methods = _methods(synth)
    request_authorizer = {"Ref": synth.logical_id(synth.stack.authorizer.request_authorizer)}
    for path in WRITE_ROUTES:
        assert methods[(path, "POST")]["AuthorizerId"] == request_authorizer, path


def test_the_gateway_passes_compressed_answers_through_as_they_are(synth: Synth) -> None:
    """The query function compresses what the caller accepts (arcs.query.response_encoding) and says so in
    Content-Encoding: every body is binary to API Gateway (*/*), so the base64 of a buffered answer
    becomes its bytes again, and without minimumCompressionSize the gateway compresses nothing itself
    (docs/aws-limits.md)."""
    props = synth.props(synth.stack.api.api)
    assert props["BinaryMediaTypes"] == ["*/*"]
    assert props.get("MinimumCompressionSize") is None


def test_no_route_where_the_authorizer_may_deny_is_cached(synth: Synth) -> None:
    """A cached Deny would refuse the caller's every route for the TTL: the cached authorizer
    never sees a path the authorizer treats as a write (``arcs.write.paths``)."""
    cached = {"Ref": synth.logical_id(synth.stack.authorizer.token_authorizer)}
    on_cached = [path for (path, _), m in _methods(synth).items() if m.get("AuthorizerId") == cached]
    assert "/api/v1/{proxy+}" in on_cached
    for path in on_cached:
        for concrete in (path, path.replace("{proxy+}", "anything")):
            assert not is_write_path(concrete), path
            assert declared_too_large("POST", concrete, {"Content-Length": str(10**9)}, AWS_MAX_REQUEST_BYTES) is None


# --- the query function's objects -----------------------------------------------------------------


def _iam_match(pattern: str, value: str) -> bool:
    return (
        re.fullmatch("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), value)
        is not None
    )


def _object_access(synth: Synth, role: Any, action: str, key: str) -> bool:
    """IAM's answer for ``action`` on object ``key`` of the data bucket (explicit deny wins)."""
    bucket = synth.logical_id(synth.stack.storage.bucket)
    allowed = False
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": synth.logical_id(role)} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if action not in actions:
                continue
            for resource in resources:
                if resource == "*":
                    pattern = "*"
                elif "Fn::Join" in resource and resource["Fn::Join"][1][0] == {"Fn::GetAtt": [bucket, "Arn"]}:
                    pattern = resource["Fn::Join"][1][1].removeprefix("/")
                else:
                    continue
                if _iam_match(pattern, key):
                    if statement["Effect"] == "Deny":
                        return False
                    allowed = True
    return allowed


@pytest.mark.parametrize("prefix", ["", "tenant"])
def test_the_query_function_touches_only_data_its_results_and_new_claim_checks(layers_dir: Path, prefix: str) -> None:
    synth = _synth(layers_dir, prefix=prefix) if prefix else _synth(layers_dir)
    role = synth.stack.query.query.role
    hour = datetime(2026, 1, 2, 3, tzinfo=UTC)
    data = layout.data_key(prefix, "metrics", "cpu", hour, f"{layout.sequence_id()}-0000.parquet")
    rewritten = layout.data_key(prefix, "Z9", "m", hour, layout.compacted_filename(data, "ab12", 0, merged=False))
    claim = claim_key(prefix, "0123abcd")
    result = layout.result_key(prefix, "0123abcd", "arrows")
    quarantined = layout.quarantine_key(prefix, data)
    other_tenant = layout.data_key("elsewhere", "metrics", "cpu", hour, "x.parquet")

    def can(action: str, key: str) -> bool:
        return _object_access(synth, role, f"s3:{action}", key)

    for key in (data, rewritten):  # queries read them; an admin's delete rewrites, a drop removes them
        assert can("GetObject", key) and can("PutObject", key) and can("DeleteObject", key), key
    assert can("GetObject", result) and can("PutObject", result) and not can("DeleteObject", result)
    # A claim check stands for an acknowledged write until ingest commits it: written, never deleted.
    assert can("PutObject", claim) and not can("DeleteObject", claim) and not can("GetObject", claim)
    for key in (quarantined, quarantined + ".json"):
        assert not can("PutObject", key) and not can("DeleteObject", key), key
    if prefix:  # another prefix of the bucket is out of reach
        assert not any(can(action, other_tenant) for action in ("GetObject", "PutObject", "DeleteObject"))


@pytest.mark.parametrize("prefix", ["", "tenant"])
def test_an_imports_record_and_its_uploaded_file_are_reached_by_the_functions_that_use_them(
    layers_dir: Path, prefix: str
) -> None:
    """The edge keeps the status record of a file posted whole; the query function signs the
    upload, reads the record and the upload's size, and deletes a file refused for its size; the
    tasks function reads the file, stores it, keeps the record and deletes the file once done."""
    synth = _synth(layers_dir, prefix=prefix) if prefix else _synth(layers_dir)
    ledger = ImportLedger(None, prefix)  # type: ignore[arg-type]  # only its keys are asked for
    record, upload = ledger.key("metrics", "backfill-1"), ledger.upload_key("metrics", "backfill-1")
    roles = {
        "edge": synth.stack.edge.edge.role,
        "query": synth.stack.query.query.role,
        "tasks": synth.stack.tasks.tasks.role,
    }
    reach = {
        (name, key_name, action)
        for name, role in roles.items()
        for key_name, key in (("record", record), ("upload", upload))
        for action in ("GetObject", "PutObject", "DeleteObject")
        if _object_access(synth, role, f"s3:{action}", key)
    }
    assert reach == {
        ("edge", "record", "GetObject"),
        ("edge", "record", "PutObject"),
        ("query", "record", "GetObject"),
        ("query", "record", "PutObject"),
        ("query", "upload", "GetObject"),  # its size, when the client completes the upload
        ("query", "upload", "PutObject"),  # what the presigned PUT and a multipart upload run as
        ("query", "upload", "DeleteObject"),  # a file refused for its size
        ("tasks", "record", "GetObject"),
        ("tasks", "record", "PutObject"),
        ("tasks", "record", "DeleteObject"),  # the tasks function's grant is the bucket's
        ("tasks", "upload", "GetObject"),
        ("tasks", "upload", "PutObject"),
        ("tasks", "upload", "DeleteObject"),
    }


def test_every_path_the_app_serves_without_a_token_has_its_gateway_answer() -> None:
    from arcs.http.routes.health import PUBLIC_PATHS as RUNTIME_PUBLIC_PATHS

    assert set(PUBLIC_PATHS) == RUNTIME_PUBLIC_PATHS


def test_the_query_function_streams_its_answers_and_the_edge_buffers(synth: Synth) -> None:
    """Every method sent to the query function streams (InvokeWithResponseStream, for up to its
    timeout), the writes stay buffered; the function runs the handler that streams, started by the
    wrapper that runs the streaming runtime, its query budget inside the stream's idle timeout."""
    from infra.query import STREAMING_WRAPPER

    from arcs.http.streaming import API_GATEWAY_STREAM_IDLE_S, QUERY_BUDGET_S, query_function_timeout_s

    query = synth.props(synth.stack.query.query.function)
    edge_id = synth.logical_id(synth.stack.edge.edge.function)
    query_id = synth.logical_id(synth.stack.query.query.function)
    modes: dict[str, set[Any]] = {"query": set(), "edge": set()}
    for method in synth.of_type("AWS::ApiGateway::Method").values():
        integration = method["Properties"]["Integration"]
        if integration["Type"] != "AWS_PROXY":
            continue
        uri = json.dumps(integration["Uri"])
        target = "query" if query_id in uri else "edge" if edge_id in uri else "other"
        mode = integration.get("ResponseTransferMode", "BUFFERED")
        streaming_uri = uri.endswith('"/response-streaming-invocations"]]}')
        modes[target].add((mode, integration.get("TimeoutInMillis"), streaming_uri))
    assert modes == {"query": {("STREAM", query["Timeout"] * 1000, True)}, "edge": {("BUFFERED", None, False)}}
    assert query["Handler"] == "handler.stream_handler"
    env = query["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == STREAMING_WRAPPER
    assert float(env["ARCS_QUERY_TIMEOUT_S"]) == QUERY_BUDGET_S < API_GATEWAY_STREAM_IDLE_S
    # The rest of the timeout streams the largest result at Lambda's 2 MB/s: 343 s at 3,008 MB.
    assert query["Timeout"] == query_function_timeout_s(int(env["ARCS_QUERY_MAX_RESULT_BYTES"])) == 343


# --- the OpenAPI document ---------------------------------------------------------------------------


def test_every_operation_of_the_openapi_document_reaches_the_function_it_names(synth: Synth) -> None:
    """What the document says of each route (docs/api.md) is how the stack routes it: the edge
    function, the query function (the document's own URL among them), or API Gateway itself."""
    from arcs.http.openapi import STANDALONE, document
    from arcs.http.openapi import operations as served_by
    from arcs.http.route_docs import SPEC_PATH

    methods = _methods(synth)
    targets = {
        "edge": synth.logical_id(synth.stack.edge.edge.function),
        "query": synth.logical_id(synth.stack.query.query.function),
    }
    spec = document()
    assert SPEC_PATH in spec["paths"]
    for path, operations in spec["paths"].items():
        for verb, operation in operations.items():
            if operation["x-arcs-function"] == STANDALONE:
                # The standalone server's alone: the stack sends it to no function of its own.
                assert (verb, path) not in served_by("all"), (verb, path)
                continue
            concrete = path
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    concrete = concrete.replace(f"{{{parameter['name']}}}", str(parameter.get("example", "1")))
            method = _resolve(methods, verb.upper(), concrete)
            integration = method["Integration"]
            function = operation["x-arcs-function"]
            if function == "api-gateway":
                assert integration["Type"] == "MOCK" and method["AuthorizationType"] == "NONE", (verb, path)
                continue
            assert method["AuthorizationType"] == "CUSTOM", (verb, path)
            assert targets[function] in json.dumps(integration["Uri"]), (verb, path, function)
