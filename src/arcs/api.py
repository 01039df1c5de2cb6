"""The HTTP API of API.md, shared by every runtime.

One Powertools resolver answers API Gateway proxy events: Lambda hands them over directly; the
standalone server and the local emulation turn HTTP requests into the same events. The caller's
identity arrives as API Gateway passes it, in ``requestContext.authorizer``, put there by the
authorizer that runs before the route. The routes live in ``arcs.routes``, one router per
concept; domain errors become HTTP here, once. API Gateway sends writes to the edge function and
everything else to the query function, so each builds its app from its own part of the routers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from arcs.errors import ArcsError, ServiceUnavailable
from arcs.routes.health import PUBLIC_PATHS, health_router

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Router

    from arcs.runtime import Runtime

__all__ = ["PUBLIC_PATHS", "ApiPart", "build_app", "error_response", "routers"]

logger = logging.getLogger(__name__)
RouterFactory = Callable[["Runtime"], "Router"]
#: The whole API (the standalone server), or what one Lambda function is sent of it.
ApiPart = Literal["all", "query", "writes"]


def routers(part: ApiPart = "all") -> list[RouterFactory]:
    """The routers of ``part``, imported here so that a function loads only its own routes: the
    edge function never loads DuckDB, the query function never loads the write decoders."""
    found: list[RouterFactory] = [health_router] if part != "writes" else []
    if part != "query":
        from arcs.routes.writes import writes_router

        found.append(writes_router)
    if part != "writes":
        from arcs.routes.auth import auth_router
        from arcs.routes.compaction import compaction_router
        from arcs.routes.continuous_queries import continuous_queries_router
        from arcs.routes.databases import databases_router
        from arcs.routes.delete import delete_router
        from arcs.routes.queries import queries_router
        from arcs.routes.retention import retention_router

        found += [
            queries_router,
            auth_router,
            databases_router,
            compaction_router,
            continuous_queries_router,
            retention_router,
            delete_router,
        ]
    return found


def _json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    body = json.dumps({"success": False, "error": message}, separators=(",", ":"))
    return Response(status, "application/json", body, headers)


def error_response(exc: ArcsError) -> Response[Any]:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, ServiceUnavailable) else {}
    return _json_error(exc.status, exc.message, headers)


def build_app(runtime: Runtime, part: ApiPart = "all") -> APIGatewayRestResolver:
    app = APIGatewayRestResolver()
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
        return _json_error(404, "no such route")

    @app.exception_handler(Exception)
    def handle_fault(_exc: Exception) -> Response[Any]:
        logger.exception("unhandled error on %s %s", app.current_event.http_method, app.current_event.path)
        return _json_error(500, "internal error")

    return app
