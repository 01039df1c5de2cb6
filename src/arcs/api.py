"""HTTP routes of API.md, shared by every runtime.

One Powertools resolver answers API Gateway proxy events: Lambda hands them over directly; the
standalone server and the local emulation turn HTTP requests into the same events. The caller's
identity arrives as API Gateway passes it, in ``requestContext.authorizer``, put there by the
authorizer (``arcs.auth``) that runs before the route. Domain errors become HTTP here, once.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from arcs.decoders import WireFormat
from arcs.errors import ArcsError, BadRequest, ServiceUnavailable, Unauthorized
from arcs.names import DEFAULT_DATABASE
from arcs.query import to_arrow_stream, to_json_document
from arcs.runtime import Runtime
from arcs.tokens import Principal
from arcs.writes import WriteRequest

logger = logging.getLogger(__name__)
ARROW_STREAM = "application/vnd.apache.arrow.stream"
PUBLIC_PATHS = frozenset({"/health", "/ready"})
_STARTED = time.time()


def error_response(exc: ArcsError) -> Response[Any]:
    headers = {}
    if isinstance(exc, ServiceUnavailable):
        headers["Retry-After"] = str(exc.retry_after_s)
    return Response(
        exc.status,
        "application/json",
        json.dumps({"success": False, "error": exc.message}, separators=(",", ":")),
        headers,
    )


def build_app(runtime: Runtime) -> APIGatewayRestResolver:
    app = APIGatewayRestResolver()

    def header(name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in (app.current_event.headers or {}).items() if k.lower() == wanted), None)

    def param(name: str) -> str | None:
        return (app.current_event.query_string_parameters or {}).get(name)

    def principal() -> Principal:
        context = app.current_event.request_context.authorizer.raw_event if app.current_event.request_context else {}
        if not context or "token_id" not in context:
            raise Unauthorized("missing token")
        return Principal.from_context(context)

    def body_bytes() -> bytes:
        body = app.current_event.body or ""
        if app.current_event.is_base64_encoded:
            try:
                return base64.b64decode(body, validate=True)
            except binascii.Error as exc:
                raise BadRequest("request body is not valid base64") from exc
        return body.encode("utf-8", "surrogateescape")

    def json_body() -> dict[str, Any]:
        try:
            document = json.loads(body_bytes() or b"{}")
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"request body is not valid JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise BadRequest("request body must be a JSON object")
        return document

    def write(kind: WireFormat, database: str | None, precision: str | None) -> Response[Any]:
        caller = principal()
        caller.require("write")
        database = database or DEFAULT_DATABASE
        caller.require_database(database)
        runtime.writes.accept(WriteRequest(kind, body_bytes(), database, header("Content-Encoding"), precision))
        return Response(204)

    @app.exception_handler(ArcsError)
    def handle_domain_error(exc: ArcsError) -> Response[Any]:
        if exc.client_error:
            logger.warning(
                "%s %s -> %d: %s", app.current_event.http_method, app.current_event.path, exc.status, exc.message
            )
        else:
            logger.error(
                "%s %s -> %d: %s", app.current_event.http_method, app.current_event.path, exc.status, exc.message
            )
        return error_response(exc)

    @app.exception_handler(NotFoundError)
    def handle_unknown_route(_exc: NotFoundError) -> Response[Any]:
        return Response(404, "application/json", json.dumps({"success": False, "error": "no such route"}))

    @app.exception_handler(Exception)
    def handle_fault(exc: Exception) -> Response[Any]:
        logger.exception("unhandled error on %s %s", app.current_event.http_method, app.current_event.path)
        return Response(500, "application/json", json.dumps({"success": False, "error": "internal error"}))

    # --- health ------------------------------------------------------------------------------------
    @app.get("/health")
    def health() -> dict[str, Any]:
        uptime = time.time() - _STARTED
        return {
            "status": "ok",
            "time": datetime.now(UTC).isoformat(),
            "uptime": f"{uptime:.0f}s",
            "uptime_sec": round(uptime, 3),
        }

    @app.get("/ready")
    def ready() -> Response[Any]:
        if runtime.ready():
            return Response(200, "application/json", json.dumps({"status": "ready"}))
        return Response(503, "application/json", json.dumps({"status": "not ready"}))

    # --- writes --------------------------------------------------------------------------------
    @app.post("/api/v1/write/msgpack")
    def write_msgpack() -> Response[Any]:
        return write(WireFormat.MSGPACK, header("x-arc-database"), param("precision"))

    @app.post("/api/v1/write/json")
    def write_json() -> Response[Any]:
        return write(WireFormat.JSON, header("x-arc-database"), param("precision"))

    @app.post("/api/v1/write/line-protocol")
    def write_line_protocol() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, header("x-arc-database") or param("db"), param("precision"))

    @app.post("/write")
    def write_influx_v1() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, param("db") or header("x-arc-database"), param("precision"))

    @app.post("/api/v2/write")
    def write_influx_v2() -> Response[Any]:
        bucket = param("bucket")
        # InfluxDB 1.x compatibility buckets are "database/retention-policy".
        database = bucket.split("/", 1)[0] if bucket else header("x-arc-database")
        return write(WireFormat.LINE_PROTOCOL, database, param("precision"))

    # --- queries -------------------------------------------------------------------------------
    def run_query() -> Any:
        caller = principal()
        caller.require("read")
        document = json_body()
        database = header("x-arc-database") or document.get("database") or DEFAULT_DATABASE
        return runtime.queries.run(document.get("sql"), str(database), caller)

    @app.post("/api/v1/query")
    def query_json() -> dict[str, Any]:
        return to_json_document(run_query())

    @app.post("/api/v1/query/arrow")
    def query_arrow() -> Response[Any]:
        result = run_query()
        return Response(
            200,
            ARROW_STREAM,
            to_arrow_stream(result.table),
            {"X-Arc-Execution-Time-Ms": f"{result.execution_time_ms:.3f}"},
        )

    # --- tokens --------------------------------------------------------------------------------
    @app.get("/api/v1/auth/verify")
    def verify() -> dict[str, Any]:
        caller = principal()
        return {
            "success": True,
            "valid": True,
            "token_id": caller.token_id,
            "name": caller.name,
            "permissions": sorted(caller.permissions),
            "databases": list(caller.databases) or ["*"],
        }

    return app
