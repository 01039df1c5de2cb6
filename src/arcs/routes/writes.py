"""The write routes: Arc's MessagePack and JSON, InfluxDB line protocol (v1 and v2 paths)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.decoders import WireFormat
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.writes import WriteRequest


def writes_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def write(kind: WireFormat, database: str) -> Response[Any]:
        caller = request.caller("write")
        caller.require_database(database)
        runtime.writes.accept(
            WriteRequest(kind, request.body(), database, request.header("Content-Encoding"), request.param("precision"))
        )
        return Response(204)

    @router.post("/api/v1/write/msgpack")
    def write_msgpack() -> Response[Any]:
        return write(WireFormat.MSGPACK, request.database())

    @router.post("/api/v1/write/json")
    def write_json() -> Response[Any]:
        return write(WireFormat.JSON, request.database())

    @router.post("/api/v1/write/line-protocol")
    def write_line_protocol() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, request.database(request.param("db")))

    @router.post("/write")
    def write_influx_v1() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, request.param("db") or request.database())

    @router.post("/api/v2/write")
    def write_influx_v2() -> Response[Any]:
        bucket = request.param("bucket")
        # InfluxDB 1.x compatibility buckets are "database/retention-policy".
        return write(WireFormat.LINE_PROTOCOL, bucket.split("/", 1)[0] if bucket else request.database())

    return router
