"""Bulk import routes, at Arc's paths: ``POST /api/v1/import/{lp,msgpack,csv,parquet}``, the
progress of one import, and Arc's counters (docs/import.md)."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable
from typing import IO, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.errors import BadRequest, NotFound
from arcs.import_status import check_import_id
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.write_paths import IMPORT_PREFIX

#: Where the standalone server's HTTP front tells the route it streamed the file to disk; API
#: Gateway builds ``requestContext`` itself, so no client can set it.
UPLOAD_CONTEXT = "arcsUpload"


def import_database(header: Callable[[str], str | None], param: Callable[[str], str | None]) -> str | None:
    """The database an import names: Arc's ``x-arc-database`` header, else its ``db`` parameter."""
    return header("x-arc-database") or param("db") or None


def imports_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def import_id() -> str:
        given = request.param("import_id") or request.header("Idempotency-Key")
        return check_import_id(given) if given else os.urandom(12).hex()

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
        ident = import_id()
        opener, sha256, size, path = upload()
        started = time.monotonic()
        importer = runtime.importer
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
        request.principal()
        return {"status": "success", "stats": runtime.import_ledger.totals()}

    return router
