"""The HTTP API of API.md, shared by every runtime.

One Powertools resolver answers API Gateway proxy events: Lambda hands them over directly; the
standalone server and the local emulation turn HTTP requests into the same events. The caller's
identity arrives as API Gateway passes it, in ``requestContext.authorizer``, put there by the
authorizer that runs before the route. The routes live in ``arcs.routes``, one router per
concept; domain errors become HTTP here, once.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from arcs.errors import ArcsError, ServiceUnavailable
from arcs.routes.auth import auth_router
from arcs.routes.databases import databases_router
from arcs.routes.health import PUBLIC_PATHS, health_router
from arcs.routes.queries import ARROW_STREAM, queries_router
from arcs.routes.writes import writes_router
from arcs.runtime import Runtime

__all__ = ["ARROW_STREAM", "PUBLIC_PATHS", "build_app", "error_response"]

logger = logging.getLogger(__name__)
ROUTERS = (health_router, writes_router, queries_router, auth_router, databases_router)


def _json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    body = json.dumps({"success": False, "error": message}, separators=(",", ":"))
    return Response(status, "application/json", body, headers)


def error_response(exc: ArcsError) -> Response[Any]:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, ServiceUnavailable) else {}
    return _json_error(exc.status, exc.message, headers)


def build_app(runtime: Runtime) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver()
    for router in ROUTERS:
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
