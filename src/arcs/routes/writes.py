"""The write routes: Arc's MessagePack and JSON, InfluxDB line protocol (v1 and v2 paths)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs import metrics
from arcs.decoders import WireFormat
from arcs.names import DEFAULT_DATABASE
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.write_paths import is_import_path
from arcs.write_paths import is_write_path as is_write_path  # the HTTP fronts import it from here
from arcs.writes import WriteRequest

Lookup = Callable[[str], "str | None"]


def write_database(path: str, header: Lookup, param: Lookup) -> str:
    """The database a write names, read from its head alone (the front checks it before the body)."""
    named = header("x-arc-database")
    if path == "/write":
        return param("db") or named or DEFAULT_DATABASE
    if path == "/api/v2/write":
        bucket = param("bucket")
        # InfluxDB 1.x compatibility buckets are "database/retention-policy".
        return bucket.split("/", 1)[0] if bucket else named or DEFAULT_DATABASE
    if path == "/api/v1/write/line-protocol" or is_import_path(path):
        return named or param("db") or DEFAULT_DATABASE
    return named or DEFAULT_DATABASE


def record_write(kind: WireFormat, status: str, body_bytes: int, rows: int) -> None:
    metrics.record({metrics.WRITE_REQUESTS: 1, metrics.WRITE_BYTES: body_bytes}, format=kind.value, status=status)
    if rows:
        metrics.record({metrics.WRITE_ROWS: rows}, format=kind.value)


def writes_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def database() -> str:
        return write_database(router.current_event.path, request.header, request.param)

    def write(kind: WireFormat, database: str) -> Response[Any]:
        body = b""
        try:
            body = request.body()
            caller = request.caller("write")
            caller.require_database(database)
            batch = runtime.writes.accept(
                WriteRequest(kind, body, database, request.header("Content-Encoding"), request.param("precision"))
            )
        except Exception as exc:
            record_write(kind, metrics.status_of(exc), len(body), 0)
            raise
        record_write(kind, "204", len(body), batch.row_count)
        return Response(204)

    @router.post("/api/v1/write/msgpack")
    def write_msgpack() -> Response[Any]:
        return write(WireFormat.MSGPACK, database())

    @router.post("/api/v1/write/json")
    def write_json() -> Response[Any]:
        return write(WireFormat.JSON, database())

    @router.post("/api/v1/write/line-protocol")
    def write_line_protocol() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, database())

    @router.post("/write")
    def write_influx_v1() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, database())

    @router.post("/api/v2/write")
    def write_influx_v2() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, database())

    return router
