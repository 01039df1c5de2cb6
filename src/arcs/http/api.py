"""The HTTP API (Arc's, with InfluxDB's write paths; README.md), shared by every runtime.

One Powertools resolver answers API Gateway proxy events: Lambda hands them over directly; the
standalone server and the local emulation turn HTTP requests into the same events. The caller's
identity arrives as API Gateway passes it, in ``requestContext.authorizer``, put there by the
authorizer that runs before the route. The routes live in ``arcs.http.routes``, one router per
concept; domain errors become HTTP here, once. API Gateway sends writes to the edge function and
everything else to the query function, so each builds its app from its own part of the routers.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from arcs.errors import ArcsError
from arcs.http.resolver import RequestScopedResolver, error_response, json_error
from arcs.http.routes.health import PUBLIC_PATHS, health_router
from arcs.http.routes.spec import spec_router
from arcs.runtime import lambda_runtime

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Router

    from arcs.runtime import Runtime

__all__ = [
    "PUBLIC_PATHS",
    "ApiPart",
    "build_app",
    "lambda_app",
    "routers",
]

logger = logging.getLogger(__name__)
RouterFactory = Callable[["Runtime"], "Router"]
#: The whole API (the standalone server), or what one Lambda function is sent of it.
ApiPart = Literal["all", "query", "edge"]


def routers(part: ApiPart = "all") -> list[RouterFactory]:
    """The routers of ``part``, imported here so that a function loads only its own routes: the
    edge function never loads DuckDB, the query function never loads the write decoders."""
    found: list[RouterFactory] = [health_router, spec_router] if part != "edge" else []
    if part != "query":
        from arcs.http.routes.imports import imports_router
        from arcs.http.routes.writes import writes_router

        found += [writes_router, imports_router]
    if part != "edge":
        from arcs.http.routes.auth import auth_router
        from arcs.http.routes.compaction import compaction_router
        from arcs.http.routes.continuous_queries import continuous_queries_router
        from arcs.http.routes.databases import databases_router
        from arcs.http.routes.delete import delete_router
        from arcs.http.routes.imports import import_status_router, import_uploads_router
        from arcs.http.routes.queries import queries_router
        from arcs.http.routes.retention import retention_router

        found += [
            queries_router,
            auth_router,
            databases_router,
            compaction_router,
            continuous_queries_router,
            retention_router,
            delete_router,
            import_status_router,
            import_uploads_router,
        ]
    return found


def build_app(runtime: Runtime, part: ApiPart = "all") -> RequestScopedResolver:
    app = RequestScopedResolver()
    for router in routers(part):
        app.include_router(router(runtime))

    @app.exception_handler(ArcsError)
    def handle_domain_error(exc: ArcsError) -> Response[Any]:
        event = app.current_event
        log = logger.warning if exc.client_error else logger.error
        log("%s %s -> %d: %s", event.http_method, event.path, exc.status, exc.message)
        return error_response(exc)

    @app.exception_handler(NotFoundError)
    def handle_unknown_route(_exc: NotFoundError) -> Response[Any]:
        return json_error(404, "no such route")

    @app.exception_handler(Exception)
    def handle_fault(_exc: Exception) -> Response[Any]:
        logger.exception("unhandled error on %s %s", app.current_event.http_method, app.current_event.path)
        return json_error(500, "internal error")

    return app


@functools.cache
def lambda_app(part: ApiPart) -> RequestScopedResolver:
    """The part of the HTTP API one Lambda function serves: ``"edge"`` for the edge function,
    ``"query"`` (everything else) for the query function; each loads only its own routes."""
    runtime = lambda_runtime()
    if part == "query":
        # DuckDB opens (and loads httpfs) on its own thread while the routes are imported here.
        runtime.engine.open_in_background()
    return build_app(runtime, part)
