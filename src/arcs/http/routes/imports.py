"""Bulk import routes, at Arc's paths: ``POST /api/v1/import/{lp,msgpack,csv,parquet}``, the
progress of one import, and Arc's counters (docs/import.md)."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.errors import BadRequest, Conflict, NotFound, PayloadTooLarge
from arcs.http.route_docs import (
    DATABASE_HEADER,
    INTEGER,
    STRING,
    JsonSchema,
    array,
    component,
    doc,
    header_param,
    json_answer,
    map_of,
    nullable,
    obj,
    path_param,
    query_param,
)
from arcs.http.routes.request import RequestView
from arcs.ports import UploadStore
from arcs.write.import_status import ImportStatus, check_import_id
from arcs.write.paths import IMPORT_PREFIX

if TYPE_CHECKING:
    from arcs.runtime import Runtime

#: Where the standalone server's HTTP front tells the route it streamed the file to disk; API
#: Gateway builds ``requestContext`` itself, so no client can set it.
UPLOAD_CONTEXT = "arcsUpload"

# --- what the import routes take and answer (ImportStatus.result / .public, ImportLedger.totals) ---

_DB_PARAM = query_param("db", "the database, if no x-arc-database header (one of them is required)", example="metrics")
_ID_PARAMS = [
    query_param("import_id", "the client's id for the import: a retry with it imports nothing twice"),
    header_param("Idempotency-Key", "the same as import_id"),
]
_OPTION_PARAMS = [
    query_param("measurement", "the measurement (required for csv and parquet)"),
    query_param(
        "precision", "line protocol's time unit (default ns)", {"enum": ["ns", "us", "ms", "s", "n", "u", "m", "h"]}
    ),
    query_param("time_column", "CSV/Parquet: the time column (default `time`)"),
    query_param("time_format", "CSV: how times are written", {"enum": ["epoch_s", "epoch_ms", "epoch_us", "epoch_ns"]}),
    query_param("tag_columns", "CSV/Parquet: the tag columns, comma separated"),
    query_param("delimiter", "CSV: the one-character delimiter (default `,`)"),
    query_param("skip_rows", "CSV: rows to skip before the header", {"type": "integer", "minimum": 0}),
]
_TIME_TEXT = nullable(STRING)
IMPORT_RESULT = component(
    "ImportResult",
    obj(
        {
            "database": STRING,
            "measurements": array(STRING),
            "measurement": nullable(STRING),
            "rows_imported": INTEGER,
            "precision": STRING,
            "partitions_created": INTEGER,
            "time_range_min": _TIME_TEXT,
            "time_range_max": _TIME_TEXT,
            "columns": array(STRING),
            "duration_ms": INTEGER,
            "import_id": STRING,
        },
        # Line protocol and MessagePack answer the first set, CSV and Parquet the second (Arc's).
        optional=(
            "measurements",
            "precision",
            "measurement",
            "partitions_created",
            "time_range_min",
            "time_range_max",
            "columns",
        ),
    ),
)
IMPORT_STATUS = component(
    "ImportStatus",
    {
        "type": "object",
        "required": ["import_id", "database", "format", "state", "options"],
        "properties": {
            "import_id": STRING,
            "database": STRING,
            "format": {"enum": ["lp", "msgpack", "csv", "parquet"]},
            "state": STRING,
            "options": map_of({}),
            "time_range_min": _TIME_TEXT,
            "time_range_max": _TIME_TEXT,
        },
        "description": "an import's progress record (arcs.write.import_status.ImportStatus.public)",
    },
)
_FILE_BODY: JsonSchema = {
    "required": True,
    "description": "the file: the body itself, or the `file` field of a multipart/form-data form",
    "content": {
        "application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}},
        "text/plain": {
            "schema": {**STRING, "description": "line protocol, or CSV"},
            "example": "imported,host=a v=1 1700000000000000000",
        },
        "multipart/form-data": {
            "schema": obj({"file": {"type": "string", "contentMediaType": "application/octet-stream"}})
        },
    },
}
_IMPORTED = json_answer(obj({"status": {"const": "ok"}, "result": IMPORT_RESULT}), "imported: every row is durable")
_STATUS = json_answer(obj({"status": {"const": "ok"}, "import": IMPORT_STATUS}), "the import's progress")
_STATS = json_answer(
    obj({"status": {"const": "success"}, "stats": map_of(INTEGER)}),
    "Arc's import counters (this process's, since it started)",
)
_PUT: JsonSchema = obj({"method": {"const": "PUT"}, "url": STRING})
_UPLOAD = json_answer(
    obj(
        {
            "status": {"const": "ok"},
            "import_id": STRING,
            "expires_in": INTEGER,
            "complete": STRING,
            "upload": _PUT,
            "parts": array(obj({"part_number": INTEGER, "method": {"const": "PUT"}, "url": STRING})),
        },
        optional=("upload", "parts"),
    ),
    "where to PUT the file (one URL, or one per part), then POST `complete`",
)
_COMPLETE_BODY: JsonSchema = {
    "required": False,
    "description": "for a multipart upload: the ETag S3 answered for each part",
    "content": {
        "application/json": {
            "schema": obj({"parts": array(obj({"part_number": INTEGER, "etag": STRING}))}, optional=("parts",))
        }
    },
}
_ACCEPTED = json_answer(
    obj({"status": {"const": "accepted"}, "import": IMPORT_STATUS, "status_url": STRING}),
    "queued: follow it at status_url",
)


def import_database(header: Callable[[str], str | None], param: Callable[[str], str | None]) -> str | None:
    """The database an import names: Arc's ``x-arc-database`` header, else its ``db`` parameter."""
    return header("x-arc-database") or param("db") or None


def requested_import_id(request: RequestView) -> str:
    """The client's idempotency key (``import_id``, or the ``Idempotency-Key`` header), or a new id."""
    given = request.param("import_id") or request.header("Idempotency-Key")
    return check_import_id(given) if given else os.urandom(12).hex()


def imports_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def upload() -> tuple[Callable[[], IO[bytes]], str, int, str | None]:
        """Opens the file (the one streamed to disk, or the request's body); its SHA-256, size, path."""
        from arcs.write.imports.chunks import file_opener
        from arcs.write.uploads import FileBody

        context = (router.current_event.raw_event.get("requestContext") or {}).get(UPLOAD_CONTEXT)
        if context:
            path = str(context["path"])
            return file_opener(path), context["sha256"], int(context["bytes"]), path
        parts: list[bytes] = []
        body = FileBody(request.header("Content-Type"), parts.append, runtime.settings.import_max_bytes)
        body.write(request.body())
        body.finish()
        data = b"".join(parts)
        return (lambda: io.BytesIO(data)), body.sha256, len(data), None

    @router.post(
        f"{IMPORT_PREFIX}<kind>",
        **doc(
            "Import a file whole (line protocol, MessagePack, CSV or Parquet)",
            "imports",
            {200: _IMPORTED},
            parameters=[
                path_param("kind", "the file's format", {"enum": ["lp", "msgpack", "csv", "parquet"]}, example="lp"),
                DATABASE_HEADER,
                _DB_PARAM,
                *_ID_PARAMS,
                *_OPTION_PARAMS,
            ],
            body=_FILE_BODY,
            errors=(400, 401, 403, 404, 408, 409, 413, 415, 429, 503),
        ),
    )
    def import_file(kind: str) -> dict[str, Any]:
        from arcs.write.imports.options import ImportOptions  # lazy: the decoders, for the functions that import

        caller = request.caller("write")
        database = import_database(request.header, request.param)
        options = ImportOptions.parse(kind, database, request.param)
        caller.require_database(options.database)
        ident = requested_import_id(request)
        opener, sha256, size, path = upload()
        started = time.monotonic()
        importer = runtime.edge_importer
        status = importer.begin(ident, options, sha256, size, path)
        status = importer.run(status, opener)
        took = int((time.monotonic() - started) * 1000)
        return {"status": "ok", "result": status.result(took)}

    return router


def import_status_router(runtime: Runtime) -> Router:
    """The progress of imports, read from their status records (the query function's on AWS)."""
    router = Router()
    request = RequestView(router)

    @router.get(
        f"{IMPORT_PREFIX}status/<ident>",
        **doc(
            "An import's progress",
            "imports",
            {200: _STATUS},
            parameters=[path_param("ident", "the import's id", example="seeded-1"), DATABASE_HEADER, _DB_PARAM],
        ),
    )
    def import_status(ident: str) -> dict[str, Any]:
        caller = request.caller("write")
        database = import_database(request.header, request.param)
        if not database:
            raise BadRequest("database is required (set the x-arc-database header or the db query parameter)")
        caller.require_database(database)
        status = runtime.import_ledger.get(database, check_import_id(ident))
        if status is None:
            raise NotFound(f"no import {ident!r} in database {database!r}")
        return {"status": "ok", "import": status.public()}

    @router.get(f"{IMPORT_PREFIX}stats", **doc("Import counters", "imports", {200: _STATS}))
    def import_stats() -> dict[str, Any]:
        caller = request.principal()
        if not {"read", "write", "admin"} & set(caller.permissions):
            caller.require("read")  # the 403 that says what is missing
        return {"status": "success", "stats": runtime.import_ledger.totals()}

    return router


#: How long an upload's presigned URLs work.
UPLOAD_URL_EXPIRY_S = 3600
#: S3's limits: one PUT takes at most 5 GB; a multipart upload at most 10,000 parts.
S3_MAX_PUT_BYTES = 5 * 1024**3
S3_MAX_PARTS = 10_000


def import_uploads_router(runtime: Runtime) -> Router:
    """AWS: the file goes to the bucket through presigned URLs, never through Lambda's payload; the
    client then says it is complete, and the tasks function imports it (docs/import.md)."""
    router = Router()
    request = RequestView(router)

    def uploads() -> UploadStore:
        if runtime.uploads is None:
            raise BadRequest(
                "this server takes the file in the request: POST it to /api/v1/import/{lp,msgpack,csv,parquet}"
            )
        return runtime.uploads

    def database() -> str:
        name = import_database(request.header, request.param)
        if not name:
            raise BadRequest("database is required (set the x-arc-database header or the db query parameter)")
        return name

    @router.post(
        f"{IMPORT_PREFIX}uploads",
        **doc(
            "AWS: start an import uploaded to S3 by presigned URLs (the standalone server answers 400)",
            "imports",
            {200: _UPLOAD},
            parameters=[
                query_param(
                    "format", "the file's format", {"enum": ["lp", "msgpack", "csv", "parquet"]}, required=True
                ),
                query_param("parts", "upload in this many parts (1 to 10000)", {"type": "integer", "minimum": 1}),
                query_param("size", "the file's size in bytes", {"type": "integer", "minimum": 0}),
                DATABASE_HEADER,
                _DB_PARAM,
                *_ID_PARAMS,
                *_OPTION_PARAMS,
            ],
            errors=(400, 401, 403, 404, 408, 409, 413, 415, 429, 503),
        ),
    )
    def create_upload() -> dict[str, Any]:
        from arcs.write.imports.options import ImportOptions  # lazy: the decoders' checks, for this route only

        caller = request.caller("write")
        options = ImportOptions.parse(request.param("format") or "", database(), request.param)
        caller.require_database(options.database)
        store = uploads()
        ident = requested_import_id(request)
        parts = _upload_parts(request.param("parts"), request.param("size"), runtime.settings.import_max_bytes)
        ledger = runtime.import_ledger
        previous = ledger.get(options.database, ident)
        if previous is not None and previous.state != "awaiting_upload":
            raise Conflict(f"import {ident!r} was uploaded already; see {IMPORT_PREFIX}status/{ident}")
        key = ledger.upload_key(options.database, ident)
        upload_id = store.start_multipart(key) if parts is not None else None
        now = time.time()
        ledger.put(
            ImportStatus(
                ident,
                options.database,
                options.format.value,
                options.to_json(),
                state="awaiting_upload",
                upload=key,
                upload_id=upload_id,
                started_at=now,
                now_micros=time.time_ns() // 1000,
            )
        )
        answer: dict[str, Any] = {
            "status": "ok",
            "import_id": ident,
            "expires_in": UPLOAD_URL_EXPIRY_S,
            "complete": f"{IMPORT_PREFIX}uploads/{ident}/complete",
        }
        if upload_id is None:
            answer["upload"] = {"method": "PUT", "url": store.upload_url(key, UPLOAD_URL_EXPIRY_S)}
        else:
            answer["parts"] = [
                {"part_number": n, "method": "PUT", "url": store.part_url(key, upload_id, n, UPLOAD_URL_EXPIRY_S)}
                for n in range(1, (parts or 0) + 1)
            ]
        return answer

    @router.post(
        f"{IMPORT_PREFIX}uploads/<ident>/complete",
        **doc(
            "AWS: the upload is complete; import it",
            "imports",
            {202: _ACCEPTED},
            parameters=[path_param("ident", "the import's id"), DATABASE_HEADER, _DB_PARAM],
            body=_COMPLETE_BODY,
        ),
    )
    def complete_upload(ident: str) -> Response[str]:
        caller = request.caller("write")
        name = database()
        caller.require_database(name)
        ledger = runtime.import_ledger
        status = ledger.get(name, check_import_id(ident))
        if status is None:
            raise NotFound(f"no import {ident!r} in database {name!r}")
        if status.state == "awaiting_upload":
            _queue_upload(runtime, uploads(), name, status, request.json)
        body = {"status": "accepted", "import": status.public(), "status_url": f"{IMPORT_PREFIX}status/{ident}"}
        return Response(202, "application/json", json.dumps(body))

    return router


def _upload_parts(parts_param: str | None, size_param: str | None, max_bytes: int) -> int | None:
    """The parts an upload asks for (None: one PUT), checked against the size it declares, if any."""
    parts = _count(parts_param, "parts", 1, S3_MAX_PARTS)
    declared = _count(size_param, "size", 0, 1 << 62)
    if declared is not None and declared > max_bytes:
        raise PayloadTooLarge(f"the file is {declared} bytes; the import limit is {max_bytes}")
    if parts is None and declared is not None and declared > S3_MAX_PUT_BYTES:
        raise BadRequest(f"S3 takes at most {S3_MAX_PUT_BYTES} bytes in one PUT: ask for parts (parts=N)")
    return parts


def _queue_upload(
    runtime: Runtime, store: UploadStore, database: str, status: ImportStatus, body: Callable[[], dict[str, Any]]
) -> None:
    """Finish an upload (its multipart upload, with the parts ``body`` names), check the file is
    there and within the limit, and start its import; a file over the limit is deleted."""
    key = str(status.upload)
    if status.upload_id is not None:
        store.finish_multipart(key, status.upload_id, _parts(body()))
    uploaded = store.uploaded(key)
    if uploaded is None:
        raise BadRequest("nothing was uploaded yet: PUT the file to the upload URL first")
    size = uploaded.size
    if size == 0:  # refused here, as a file posted whole is, rather than failed by the import
        raise BadRequest("the uploaded file is empty: PUT the file to the upload URL again")
    limit = runtime.settings.import_max_bytes
    if size > limit:
        runtime.store.delete(key)
        status.state, status.error, status.error_status = "failed", "the file exceeds the import limit", 413
        runtime.import_ledger.put(status)
        raise PayloadTooLarge(f"the file is {size} bytes; the import limit is {limit}")
    status.state, status.bytes_total, status.upload_id, status.upload_etag = "queued", size, None, uploaded.etag
    runtime.import_ledger.put(status)
    runtime.start_import(database, status.import_id)


def _count(text: str | None, name: str, low: int, high: int) -> int | None:
    if text is None or text == "":
        return None
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}")
    return int(text)


def _parts(document: dict[str, Any]) -> list[tuple[int, str]]:
    """The parts a multipart upload's completion names: ``{"parts": [{"part_number", "etag"}]}``."""
    parts = document.get("parts")
    if not isinstance(parts, list) or not parts:
        raise BadRequest('completing a multipart upload needs {"parts": [{"part_number": 1, "etag": "..."}, ...]}')
    named: list[tuple[int, str]] = []
    for part in parts:
        number, etag = (part.get("part_number"), part.get("etag")) if isinstance(part, dict) else (None, None)
        if not isinstance(number, int) or isinstance(number, bool) or not isinstance(etag, str):
            raise BadRequest("each part needs an integer part_number and a string etag")
        named.append((number, etag))
    return sorted(named)
