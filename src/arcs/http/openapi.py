"""The API's OpenAPI 3.1 document, made from the routes themselves (docs/api.md).

Each route declares its own documentation where it is registered, with Powertools' route
arguments (``summary``, ``description``, ``tags``, ``responses``; parameters and request body in
``openapi_extensions``): :func:`doc` makes them. The JSON Schema of each answer sits next to the
code that builds that answer, registered once under a name with :func:`component`. The document is
then read off the resolver's route table (:func:`document`), so a route cannot exist without its
entry nor an entry without its route, and which function serves each route (``x-arcs-function``)
is read from the parts ``arcs.http.api`` gives each function.

Lambda has no pydantic, so this builds the document itself instead of Powertools'
``get_openapi_schema``; the runtimes serve the document committed as ``arcs/http/openapi.json``
(``python -m arcs.http.openapi`` writes it and the reference in docs/api.md; a test fails when either
differs from what the routes say).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Route

    from arcs.http.api import ApiPart, RequestScopedResolver

JsonSchema = dict[str, Any]

#: Where the runtimes serve the document (beside Arc's API; it answers any valid token).
SPEC_PATH = "/api/v1/openapi.json"
SPEC_FILE = "openapi.json"
OPENAPI_VERSION = "3.1.0"
_REF = "#/components/schemas/"

#: Every named schema, registered by the modules that build the answers they describe.
_COMPONENTS: dict[str, JsonSchema] = {}


def component(name: str, schema: JsonSchema) -> JsonSchema:
    """Registers ``schema`` under ``name`` and answers a reference to it."""
    if name in _COMPONENTS and _COMPONENTS[name] != schema:
        raise ValueError(f"two schemas are named {name!r}")
    _COMPONENTS[name] = schema
    return ref(name)


def ref(name: str) -> JsonSchema:
    return {"$ref": _REF + name}


# --- JSON Schema shorthands ------------------------------------------------------------------------

STRING: JsonSchema = {"type": "string"}
INTEGER: JsonSchema = {"type": "integer"}
NUMBER: JsonSchema = {"type": "number"}
BOOLEAN: JsonSchema = {"type": "boolean"}
TIME: JsonSchema = {"type": "string", "format": "date-time"}
ANY: JsonSchema = {}
TRUE: JsonSchema = {"const": True}


def nullable(schema: JsonSchema) -> JsonSchema:
    kind = schema.get("type")
    if isinstance(kind, str) and set(schema) <= {"type", "format", "description"}:
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: JsonSchema) -> JsonSchema:
    return {"type": "array", "items": items}


def obj(properties: Mapping[str, JsonSchema], optional: Iterable[str] = (), *, closed: bool = True) -> JsonSchema:
    """An object with these properties, all required but ``optional``; ``closed``: no others."""
    left_out = set(optional)
    schema: JsonSchema = {"type": "object", "properties": dict(properties)}
    required = [name for name in properties if name not in left_out]
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema


def map_of(values: JsonSchema) -> JsonSchema:
    return {"type": "object", "additionalProperties": values}


#: Every error the API answers, whoever answers it (a route, the HTTP front, API Gateway).
ERROR = component(
    "Error", obj({"success": {"const": False}, "error": {**STRING, "description": "what is wrong, for a human"}})
)


# --- parameters ------------------------------------------------------------------------------------


def _param(
    where: str, name: str, description: str, schema: JsonSchema | None, required: bool, example: object
) -> JsonSchema:
    parameter = {
        "name": name,
        "in": where,
        "required": required,
        "description": description,
        "schema": schema or STRING,
    }
    if example is not None:
        parameter["example"] = example
    return parameter


def query_param(
    name: str, description: str, schema: JsonSchema | None = None, *, required: bool = False, example: object = None
) -> JsonSchema:
    return _param("query", name, description, schema, required, example)


def header_param(
    name: str, description: str, schema: JsonSchema | None = None, *, example: object = None
) -> JsonSchema:
    return _param("header", name, description, schema, False, example)


def path_param(name: str, description: str, schema: JsonSchema | None = None, *, example: object = None) -> JsonSchema:
    return _param("path", name, description, schema, True, example)


DATABASE_HEADER = header_param("x-arc-database", "the database (default `default`)", example="metrics")
LIMIT = query_param("limit", "how many, at most (1 to 1000; default 100)", {"type": "integer", "minimum": 1})


# --- answers ---------------------------------------------------------------------------------------


def json_answer(schema: JsonSchema, description: str, headers: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    answer: JsonSchema = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        answer["headers"] = {name: {"schema": value} for name, value in headers.items()}
    return answer


def binary_answer(media_type: str, description: str, headers: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    answer: JsonSchema = {"description": description, "content": {media_type: {"schema": {}}}}
    if headers:
        answer["headers"] = {name: {"schema": value} for name, value in headers.items()}
    return answer


def empty_answer(description: str, headers: Mapping[str, JsonSchema] | None = None) -> JsonSchema:
    answer: JsonSchema = {"description": description}
    if headers:
        answer["headers"] = {name: {"schema": value} for name, value in headers.items()}
    return answer


_ERRORS = {
    400: "the request is malformed or breaks a rule; the message says which (nothing changed)",
    401: "no token, or not a valid one",
    403: "the token lacks the permission or the database scope",
    404: "no such thing (or outside the token's scopes)",
    408: "the body stopped arriving",
    409: "it exists already, or conflicts with what does",
    413: "the body exceeds the route's limit",
    415: "an unsupported Content-Encoding (gzip, zstd or none)",
    429: "too many refused tokens from this address: wait `Retry-After` seconds",
    503: "cannot be done now (storage or queue unavailable, disk full): retry after `Retry-After` seconds",
    504: "the query ran past its time limit, or the server stopped before answering",
}
#: What any route behind a token may answer besides its own answers.
COMMON_ERRORS = (400, 401, 403, 404, 408, 413, 429, 503)


def error_answer(status: int) -> JsonSchema:
    """A reference to the error answer of ``status``, described once in the document."""
    return {"$ref": f"#/components/responses/Error{status}"}


def binary_errors(media_type: str, statuses: Iterable[int]) -> dict[int, JsonSchema]:
    """Error answers of a route that answers its errors in ``media_type`` rather than JSON."""
    return {
        status: binary_answer(media_type, _ERRORS[status], {"Retry-After": INTEGER} if status in (429, 503) else None)
        for status in statuses
    }


def _error_answers() -> dict[str, JsonSchema]:
    return {
        f"Error{status}": json_answer(ERROR, text, {"Retry-After": INTEGER} if status in (429, 503) else None)
        for status, text in _ERRORS.items()
    }


def json_body(
    schema: JsonSchema, description: str = "", *, required: bool = True, example: object = None
) -> JsonSchema:
    media: JsonSchema = {"schema": schema}
    if example is not None:
        media["example"] = example
    body: JsonSchema = {"required": required, "content": {"application/json": media}}
    if description:
        body["description"] = description
    return body


def doc(
    summary: str,
    tag: str,
    answers: Mapping[int, JsonSchema],
    *,
    description: str | None = None,
    parameters: Sequence[JsonSchema] = (),
    body: JsonSchema | None = None,
    errors: Iterable[int] = COMMON_ERRORS,
    public: bool = False,
) -> dict[str, Any]:
    """A route's OpenAPI entry, as keyword arguments of Powertools' route decorators."""
    responses = {**{status: error_answer(status) for status in errors}, **answers}
    extra: dict[str, Any] = {}
    if parameters:
        extra["parameters"] = list(parameters)
    if body is not None:
        extra["requestBody"] = body
    if public:
        extra["security"] = []
    return {
        "summary": summary,
        "description": description,
        "tags": [tag],
        "responses": dict(sorted(responses.items())),
        "openapi_extensions": extra or None,
    }


# --- the document ----------------------------------------------------------------------------------

_SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "`Authorization: Bearer <token>` (also `Token <token>`, as InfluxDB 2.x clients send)",
    },
    "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
    "basic": {"type": "http", "scheme": "basic", "description": "the token as the password (InfluxDB 1.x clients)"},
    "influxQuery": {
        "type": "apiKey",
        "in": "query",
        "name": "p",
        "description": "the token as `?p=` (InfluxDB 1.x write clients: `/write` and `/api/v2/write` only)",
    },
}
_TAGS = [
    {"name": "probes", "description": "health, readiness and ping: the only routes without a token"},
    {"name": "writes", "description": 'README.md "Writing"; docs/ingest.md'},
    {"name": "imports", "description": "docs/import.md"},
    {"name": "queries", "description": 'README.md "Querying"'},
    {"name": "databases", "description": "databases and measurements"},
    {"name": "tokens", "description": 'README.md "Tokens"'},
    {"name": "compaction", "description": "docs/compaction.md"},
    {"name": "continuous queries", "description": "docs/continuous_queries.md"},
    {"name": "retention", "description": "docs/retention_and_delete.md"},
    {"name": "delete", "description": "docs/retention_and_delete.md"},
    {"name": "spec", "description": "this document"},
]
_INFLUX_PATHS = frozenset({"/write", "/api/v2/write"})


class _NoRuntime:
    """Stands in for the runtime while routes are registered: they only use it when they answer."""

    def __getattr__(self, name: str) -> None:
        return None


def resolver(part: ApiPart = "all") -> RequestScopedResolver:
    """The routes of ``part``, registered but serving nothing (no runtime is built)."""
    from arcs.http.api import build_app

    return build_app(_NoRuntime(), part)  # type: ignore[arg-type]


def routes(app: RequestScopedResolver) -> list[Route]:
    # Powertools keeps its routes here; its own get_openapi_schema reads them the same way.
    return [*app._static_routes, *app._dynamic_routes]


def operations(part: ApiPart = "all") -> set[tuple[str, str]]:
    """(method, OpenAPI path) of every route of ``part``."""
    return {(route.method.lower(), route.openapi_path) for route in routes(resolver(part))}


def _function(method: str, path: str, parts: Mapping[str, set[tuple[str, str]]]) -> str:
    """Which function serves the route on AWS; API Gateway answers the probes itself (infra/api.py)."""
    from arcs.http.routes.health import PUBLIC_PATHS

    if path in PUBLIC_PATHS:
        return "api-gateway"
    return next(name for name, found in parts.items() if (method, path) in found)


def _operation(route: Route, function: str) -> JsonSchema:
    if not route.responses:
        raise ValueError(f"{route.method} {route.openapi_path} has no OpenAPI entry (arcs.http.openapi.doc)")
    extra = dict(route.openapi_extensions or {})
    operation: JsonSchema = {
        "operationId": f"{route.method.lower()}{_IDENTIFIER.sub('_', route.openapi_path)}".rstrip("_"),
        "summary": route.summary,
    }
    if route.description:
        operation["description"] = route.description
    operation["tags"] = sorted(route.tags)  # Powertools keeps them as a frozenset
    if "parameters" in extra:
        operation["parameters"] = extra.pop("parameters")
    named = {p["name"] for p in operation.get("parameters", ()) if p["in"] == "path"}
    for name in _PATH_NAME.findall(route.openapi_path):
        if name not in named:
            operation.setdefault("parameters", []).append(path_param(name, name.replace("_", " ")))
    if "requestBody" in extra:
        operation["requestBody"] = extra.pop("requestBody")
    operation["responses"] = {str(status): answer for status, answer in route.responses.items()}
    if route.method == "HEAD":  # the GET's answers, without their bodies
        operation["responses"] = {
            status: {key: value for key, value in answer.items() if key != "content"}
            for status, answer in operation["responses"].items()
        }
    if route.openapi_path in _INFLUX_PATHS:
        operation["security"] = [{"bearer": []}, {"apiKey": []}, {"basic": []}, {"influxQuery": []}]
    operation.update(extra)
    operation["x-arcs-function"] = function
    return operation


#: The function name of what only the standalone server answers (``arcs serve``): no Lambda function
#: and no API Gateway route serve it, and ``arcs local`` neither.
STANDALONE = "standalone"


def _metrics_operations() -> dict[str, JsonSchema]:
    """``/metrics``: answered by the standalone server before its routes (arcs.http.server), no token."""
    answer = {
        "description": "every metric in Prometheus' text exposition format (docs/operations.md)",
        "content": {"text/plain": {"schema": STRING}},
    }
    operations: dict[str, JsonSchema] = {}
    for method in ("get", "head"):
        operations[method] = {
            "operationId": f"{method}_metrics",
            "summary": "The server's metrics, for Prometheus (standalone server only)",
            "tags": ["probes"],
            "responses": {"200": answer if method == "get" else {"description": answer["description"]}},
            "security": [],
            "x-arcs-function": STANDALONE,
        }
    return operations


_IDENTIFIER = re.compile(r"[^A-Za-z0-9]+")
_PATH_NAME = re.compile(r"{([^}]+)}")


def document() -> JsonSchema:
    """The OpenAPI document of the whole API, read off the routes."""
    from importlib.metadata import version

    app = resolver("all")
    # On AWS, API Gateway sends the writes to the edge function and the rest to the query function.
    parts = {"writes": operations("writes"), "query": operations("query")}
    paths: dict[str, JsonSchema] = {}
    for route in sorted(routes(app), key=lambda r: (r.openapi_path, _METHOD_ORDER.index(r.method.lower()))):
        method = route.method.lower()
        operation = _operation(route, _function(method, route.openapi_path, parts))
        paths.setdefault(route.openapi_path, {})[method] = operation
    from arcs.http.server import METRICS_PATH

    paths[METRICS_PATH] = _metrics_operations()
    paths = dict(sorted(paths.items()))
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Arc Serverless",
            "version": version("arc-serverless"),
            "summary": "Arc's HTTP API (and InfluxDB's write paths) over Parquet: AWS Lambda or one server",
            "license": {"name": "AGPL-3.0-or-later", "identifier": "AGPL-3.0-or-later"},
        },
        "jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
        "servers": [{"url": "/", "description": "the server, `arcs local`, or the stack's API stage URL"}],
        "security": [{"bearer": []}, {"apiKey": []}, {"basic": []}],
        "tags": _TAGS,
        "paths": paths,
        "components": {
            "schemas": dict(sorted(_COMPONENTS.items())),
            "responses": _error_answers(),
            "securitySchemes": _SECURITY_SCHEMES,
        },
    }


_METHOD_ORDER = ["get", "head", "post", "put", "patch", "delete", "options"]


def render(spec: JsonSchema) -> str:
    return json.dumps(spec, indent=1, sort_keys=False) + "\n"


def served() -> bytes:
    """The committed document, as the runtimes serve it."""
    return resources.files("arcs.http").joinpath(SPEC_FILE).read_bytes()


# --- the human reference (docs/api.md) -------------------------------------------------------------

REFERENCE_BEGIN = "<!-- routes: generated by `python -m arcs.http.openapi` from the OpenAPI document; do not edit -->"
REFERENCE_END = "<!-- end of routes -->"


def reference(spec: JsonSchema) -> str:
    """The routes table of docs/api.md: every operation of ``spec``, one line each."""
    lines = [REFERENCE_BEGIN, "", "| Method | Path | Function | Summary |", "|---|---|---|---|"]
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            summary = operation["summary"].replace("|", "\\|")
            auth = " (no token)" if operation.get("security") == [] else ""
            lines.append(f"| {method.upper()} | `{path}` | {operation['x-arcs-function']} | {summary}{auth} |")
    return "\n".join([*lines, "", REFERENCE_END])


def with_reference(page: str, spec: JsonSchema) -> str:
    """``page`` with its generated routes table replaced by ``spec``'s."""
    start, end = page.find(REFERENCE_BEGIN), page.find(REFERENCE_END)
    if start < 0 or end < start:
        raise ValueError("the page has no generated routes section")
    return page[:start] + reference(spec) + page[end + len(REFERENCE_END) :]


SOURCE_FILE = Path(__file__).with_name(SPEC_FILE)
REFERENCE_PAGE = Path(__file__).resolve().parents[3] / "docs" / "api.md"


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write (or check) the OpenAPI document and docs/api.md's routes.")
    parser.add_argument("--check", action="store_true", help="fail if either differs from what the routes say")
    args = parser.parse_args(argv)
    spec = document()
    text = render(spec)
    page = REFERENCE_PAGE.read_text()
    updated = with_reference(page, spec)
    if args.check:
        stale = [
            str(p)
            for p, ok in ((SOURCE_FILE, SOURCE_FILE.read_text() == text), (REFERENCE_PAGE, updated == page))
            if not ok
        ]
        if stale:
            print("out of date (run python -m arcs.http.openapi): " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    SOURCE_FILE.write_text(text)
    REFERENCE_PAGE.write_text(updated)
    return 0


if __name__ == "__main__":
    # The routes register their schemas with arcs.http.openapi, not with this copy run as __main__.
    from arcs.http.openapi import main as _main

    raise SystemExit(_main())
