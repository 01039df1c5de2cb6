"""The API's OpenAPI 3.1 document, made from the routes themselves (docs/api.md).

Each route declares its own documentation where it is registered, with Powertools' route
arguments (``summary``, ``description``, ``tags``, ``responses``; parameters and request body in
``openapi_extensions``): ``arcs.http.route_docs.doc`` makes them. The JSON Schema of each answer sits next to the
code that builds that answer, registered once under a name with ``route_docs.component``. The document is
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from arcs.http.route_docs import (
    COMPONENTS,
    OPENAPI_VERSION,
    SPEC_FILE,
    STRING,
    JsonSchema,
    error_answers,
    path_param,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Route

    from arcs.http.api import ApiPart
    from arcs.http.resolver import RequestScopedResolver

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
    {"name": "writes", "description": 'docs/usage.md "Writing"; docs/ingest.md'},
    {"name": "imports", "description": "docs/import.md"},
    {"name": "queries", "description": 'docs/usage.md "Querying"'},
    {"name": "databases", "description": "databases and measurements"},
    {"name": "tokens", "description": 'docs/usage.md "Tokens"'},
    {"name": "compaction", "description": "docs/compaction.md"},
    {"name": "continuous queries", "description": "docs/continuous-queries.md"},
    {"name": "retention", "description": "docs/retention-and-delete.md"},
    {"name": "delete", "description": "docs/retention-and-delete.md"},
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
        raise ValueError(f"{route.method} {route.openapi_path} has no OpenAPI entry (arcs.http.route_docs.doc)")
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
    """``/metrics``: answered by the standalone server before its routes (arcs.http.gateway), no token."""
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
    parts = {"edge": operations("edge"), "query": operations("query")}
    paths: dict[str, JsonSchema] = {}
    for route in sorted(routes(app), key=lambda r: (r.openapi_path, _METHOD_ORDER.index(r.method.lower()))):
        method = route.method.lower()
        operation = _operation(route, _function(method, route.openapi_path, parts))
        paths.setdefault(route.openapi_path, {})[method] = operation
    from arcs.http.gateway import METRICS_PATH

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
            "schemas": dict(sorted(COMPONENTS.items())),
            "responses": error_answers(),
            "securitySchemes": _SECURITY_SCHEMES,
        },
    }


_METHOD_ORDER = ["get", "head", "post", "put", "patch", "delete", "options"]


def render(spec: JsonSchema) -> str:
    return json.dumps(spec, indent=1, sort_keys=False) + "\n"


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
    raise SystemExit(main())
