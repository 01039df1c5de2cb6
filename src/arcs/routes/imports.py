"""Bulk import routes, at Arc's paths: ``POST /api/v1/import/{lp,msgpack,csv,parquet}``, the
progress of one import, and Arc's counters (docs/import.md)."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable
from typing import IO, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.errors import BadRequest, Conflict, NotFound, PayloadTooLarge
from arcs.import_status import ImportStatus, check_import_id
from arcs.ports import UploadStore
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.write_paths import IMPORT_PREFIX

#: Where the standalone server's HTTP front tells the route it streamed the file to disk; API
#: Gateway builds ``requestContext`` itself, so no client can set it.
UPLOAD_CONTEXT = "arcsUpload"


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
        from arcs.imports import file_opener
        from arcs.uploads import FileBody

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

    @router.post(f"{IMPORT_PREFIX}<kind>")
    def import_file(kind: str) -> dict[str, Any]:
        from arcs.imports import ImportOptions  # lazy: the decoders, for the functions that import

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

    @router.get(f"{IMPORT_PREFIX}status/<ident>")
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

    @router.get(f"{IMPORT_PREFIX}stats")
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
    client then says it is complete, and the compact function imports it (docs/import.md)."""
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

    @router.post(f"{IMPORT_PREFIX}uploads")
    def create_upload() -> dict[str, Any]:
        from arcs.imports import ImportOptions  # lazy: the decoders' checks, for this route only

        caller = request.caller("write")
        options = ImportOptions.parse(request.param("format") or "", database(), request.param)
        caller.require_database(options.database)
        store = uploads()
        ident = requested_import_id(request)
        parts = _count(request.param("parts"), "parts", 1, S3_MAX_PARTS)
        declared = _count(request.param("size"), "size", 0, 1 << 62)
        if declared is not None and declared > runtime.settings.import_max_bytes:
            raise PayloadTooLarge(
                f"the file is {declared} bytes; the import limit is {runtime.settings.import_max_bytes}"
            )
        if parts is None and declared is not None and declared > S3_MAX_PUT_BYTES:
            raise BadRequest(f"S3 takes at most {S3_MAX_PUT_BYTES} bytes in one PUT: ask for parts (parts=N)")
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

    @router.post(f"{IMPORT_PREFIX}uploads/<ident>/complete")
    def complete_upload(ident: str) -> Response[str]:
        caller = request.caller("write")
        name = database()
        caller.require_database(name)
        ledger = runtime.import_ledger
        status = ledger.get(name, check_import_id(ident))
        if status is None:
            raise NotFound(f"no import {ident!r} in database {name!r}")
        if status.state == "awaiting_upload":
            store = uploads()
            key = str(status.upload)
            if status.upload_id is not None:
                store.finish_multipart(key, status.upload_id, _parts(request.json()))
            size = store.size(key)
            if size is None:
                raise BadRequest("nothing was uploaded yet: PUT the file to the upload URL first")
            if size == 0:  # refused here, as a file posted whole is, rather than failed by the import
                raise BadRequest("the uploaded file is empty: PUT the file to the upload URL again")
            limit = runtime.settings.import_max_bytes
            if size > limit:
                runtime.store.delete(key)
                status.state, status.error, status.error_status = "failed", "the file exceeds the import limit", 413
                ledger.put(status)
                raise PayloadTooLarge(f"the file is {size} bytes; the import limit is {limit}")
            status.state, status.bytes_total, status.upload_id = "queued", size, None
            ledger.put(status)
            runtime.start_import(name, status.import_id)
        body = {"status": "accepted", "import": status.public(), "status_url": f"{IMPORT_PREFIX}status/{ident}"}
        return Response(202, "application/json", json.dumps(body))

    return router


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
