"""The write routes: Arc's MessagePack and JSON, InfluxDB line protocol (v1 and v2 paths)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs import metrics
from arcs.http.route_docs import (
    DATABASE_HEADER,
    NUMBER,
    STRING,
    JsonSchema,
    array,
    component,
    doc,
    empty_answer,
    header_param,
    map_of,
    obj,
    query_param,
)
from arcs.http.routes.request import RequestView
from arcs.names import DEFAULT_DATABASE
from arcs.write.decoders import WireFormat
from arcs.write.edge import WriteRequest
from arcs.write.paths import is_import_path
from arcs.write.paths import is_write_path as is_write_path  # the HTTP fronts import it from here

if TYPE_CHECKING:
    from arcs.runtime import Runtime

Lookup = Callable[[str], "str | None"]

# --- the write bodies (arcs.write.decoders.shapes reads them; README.md "Writing") -------------------------

_PRECISION: JsonSchema = {"enum": ["ns", "us", "ms", "s", "n", "u", "m", "h"]}
_INT64: JsonSchema = {"type": "integer", "format": "int64"}
_VALUE: JsonSchema = {"anyOf": [_INT64, {"type": ["number", "string", "boolean", "null"]}]}
_TIME: JsonSchema = {"anyOf": [_INT64, NUMBER]}
_COLUMNAR = component(
    "ColumnarWrite",
    {
        **obj(
            {
                "m": {**STRING, "description": "the measurement"},
                "columns": {
                    **map_of(array(_VALUE)),
                    "minProperties": 1,
                    "description": "column name -> its values, all of one length; `time` (optional): the times",
                },
                "tags": {**array(STRING), "description": "the columns that are tags"},
                "precision": _PRECISION,
            },
            optional=("tags", "precision"),
        ),
        "description": "columnar: one measurement, its columns side by side",
    },
)
_ROW = component(
    "RowWrite",
    {
        **obj(
            {
                "m": {**STRING, "description": "the measurement"},
                "fields": {**map_of(_VALUE), "minProperties": 1},
                "tags": map_of(STRING),
                "t": {**_TIME, "description": "the time (unit by magnitude, or precision)"},
                "time": _TIME,
                "precision": _PRECISION,
            },
            optional=("tags", "t", "time", "precision"),
        ),
        "description": "a row: one point",
    },
)
_ITEM: JsonSchema = {"oneOf": [_COLUMNAR, _ROW]}
#: The MessagePack and JSON write bodies: one object, ``{"batch": [...]}``, or a bare array of them.
OBJECT_WRITE = component(
    "ObjectWrite",
    {
        "description": 'columnar or row objects: one, an array of them, or `{"batch": [...]}`',
        "oneOf": [_ITEM, {**array(_ITEM), "minItems": 1}, obj({"batch": {**array(_ITEM), "minItems": 1}})],
    },
)
LINE_PROTOCOL = component(
    "LineProtocol",
    {
        **STRING,
        "description": "InfluxDB line protocol: `measurement[,tag=v...] field=v[,field=v...] [time]`, one point a line",
    },
)
_BINARY: JsonSchema = {"type": "string", "contentMediaType": "application/octet-stream"}
_ENCODING = header_param(
    "Content-Encoding", "gzip or zstd (also detected by the body's magic bytes)", {"enum": ["gzip", "zstd", "identity"]}
)
_PRECISION_PARAM = query_param(
    "precision", "the time unit of times without one (default: ns; by magnitude in JSON)", _PRECISION
)
_WRITTEN = {204: empty_answer("durable: a crash from now on loses nothing")}
_WRITE_ERRORS = (400, 401, 403, 408, 413, 415, 429, 503)


def _write_doc(summary: str, body: JsonSchema, *parameters: JsonSchema) -> dict[str, Any]:
    return doc(
        summary,
        "writes",
        _WRITTEN,
        parameters=[*parameters, _PRECISION_PARAM, _ENCODING],
        body=body,
        errors=_WRITE_ERRORS,
    )


_COLUMNS_EXAMPLE = {
    "m": "net",
    "tags": ["host"],
    "columns": {"time": [1700000000000, 1700000001000], "host": ["a", "b"], "rx": [10, 12]},
}
_MSGPACK_BODY: JsonSchema = {
    "required": True,
    "description": "MessagePack of the shapes of `ObjectWrite`; its timestamp extension also makes times",
    "content": {
        "application/msgpack": {"schema": OBJECT_WRITE, "example": _COLUMNS_EXAMPLE},
        "application/octet-stream": {"schema": _BINARY},
    },
}
_JSON_BODY: JsonSchema = {
    "required": True,
    "content": {"application/json": {"schema": OBJECT_WRITE, "example": {**_COLUMNS_EXAMPLE, "m": "disk"}}},
}


def _line_body(example: str) -> JsonSchema:
    return {"required": True, "content": {"text/plain": {"schema": LINE_PROTOCOL, "example": example}}}


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

    @router.post(
        "/api/v1/write/msgpack", **_write_doc("Write MessagePack (Arc's fast path)", _MSGPACK_BODY, DATABASE_HEADER)
    )
    def write_msgpack() -> Response[Any]:
        return write(WireFormat.MSGPACK, database())

    @router.post(
        "/api/v1/write/json", **_write_doc("Write JSON, in the MessagePack shapes", _JSON_BODY, DATABASE_HEADER)
    )
    def write_json() -> Response[Any]:
        return write(WireFormat.JSON, database())

    @router.post(
        "/api/v1/write/line-protocol",
        **_write_doc(
            "Write line protocol",
            _line_body("cpu,host=a usage=12.5 1700000002000000000\ncpu,host=b usage=7.25 1700000002000000000"),
            DATABASE_HEADER,
            query_param("db", "the database, if no header"),
        ),
    )
    def write_line_protocol() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, database())

    @router.post(
        "/write",
        **_write_doc(
            "InfluxDB 1.x write (line protocol)",
            _line_body("mem,host=a free=1024i 1700000001000000000"),
            query_param("db", "the database (before the header; default `default`)", example="metrics"),
            query_param("rp", "InfluxDB's retention policy: accepted, not used"),
            query_param("u", "InfluxDB 1.x user: accepted, not used"),
            DATABASE_HEADER,
        ),
    )
    def write_influx_v1() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, database())

    @router.post(
        "/api/v2/write",
        **_write_doc(
            "InfluxDB 2.x write (line protocol)",
            _line_body("mem,host=b free=2048i 1700000001000000000"),
            query_param(
                "bucket", "the database (`database/retention-policy` for 1.x compatibility buckets)", example="metrics"
            ),
            query_param("org", "InfluxDB's organisation: accepted, not used"),
            DATABASE_HEADER,
        ),
    )
    def write_influx_v2() -> Response[Any]:
        return write(WireFormat.LINE_PROTOCOL, database())

    return router
