"""The write routes: Arc's MessagePack and JSON, InfluxDB line protocol (v1 and v2 paths)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.decoders import WireFormat
from arcs.names import DEFAULT_DATABASE
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.writes import WriteRequest

#: The write routes: InfluxDB's two, and Arc's under the prefix.
WRITE_PATHS = frozenset({"/write", "/api/v2/write"})
WRITE_PREFIX = "/api/v1/write/"
Lookup = Callable[[str], "str | None"]


def is_write_path(path: str) -> bool:
    return path in WRITE_PATHS or path.startswith(WRITE_PREFIX)


def declared_too_large(method: str, path: str, headers: Mapping[str, str], limit: int) -> str | None:
    """Why a write is refused on its head alone: its declared ``Content-Length`` is over ``limit``.

    None for anything else (other routes, no declared length): the write path still checks the
    body it gets."""
    if method.upper() != "POST" or not is_write_path(path):
        return None
    declared = next((value.strip() for key, value in headers.items() if key.lower() == "content-length"), "")
    if declared.isdigit() and int(declared) > limit:
        return f"body is {declared} bytes; the limit is {limit}"
    return None


def write_database(path: str, header: Lookup, param: Lookup) -> str:
    """The database a write names, read from its head alone (the front checks it before the body)."""
    named = header("x-arc-database")
    if path == "/write":
        return param("db") or named or DEFAULT_DATABASE
    if path == "/api/v2/write":
        bucket = param("bucket")
        # InfluxDB 1.x compatibility buckets are "database/retention-policy".
        return bucket.split("/", 1)[0] if bucket else named or DEFAULT_DATABASE
    if path == "/api/v1/write/line-protocol":
        return named or param("db") or DEFAULT_DATABASE
    return named or DEFAULT_DATABASE


def writes_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def database() -> str:
        return write_database(router.current_event.path, request.header, request.param)

    def write(kind: WireFormat, database: str) -> Response[Any]:
        caller = request.caller("write")
        caller.require_database(database)
        runtime.writes.accept(
            WriteRequest(kind, request.body(), database, request.header("Content-Encoding"), request.param("precision"))
        )
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
