"""Database routes (``/api/v1/databases``) and ``GET /api/v1/measurements``.

Permissions, as for Arc: listing and describing need ``read``; creating and deleting need
``admin``, because both change what exists for every token and a delete cannot be undone (a
``write`` token still creates a database implicitly by writing into it). Scopes apply to every
route: a database outside the caller's scopes is a 403 when named and is never listed, so a
scoped token never learns it exists. The scope is checked before existence (403 before 404).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.auth.tokens import Principal
from arcs.errors import BadRequest, Conflict, NotFound
from arcs.http.route_docs import (
    INTEGER,
    NUMBER,
    STRING,
    TRUE,
    array,
    component,
    doc,
    json_answer,
    json_body,
    obj,
    path_param,
    query_param,
)
from arcs.http.routes.request import RequestView
from arcs.lifecycle.drop_database import drop_database
from arcs.names import check_database
from arcs.query.show import MeasurementInfo, database_measurements, measurement_infos, visible_databases

if TYPE_CHECKING:
    from arcs.runtime import Runtime

logger = logging.getLogger(__name__)

# --- what the database routes answer (built below and by arcs.query.show.MeasurementInfo.to_json) --------

_TOTALS = {"measurement_count": INTEGER, "file_count": INTEGER, "total_size_mb": NUMBER}
_INFO = {
    "database": STRING,
    "measurement": STRING,
    "file_count": INTEGER,
    "total_size_mb": NUMBER,
    "storage_path": STRING,
}
DATABASE = component("Database", obj({"success": TRUE, "name": STRING, **_TOTALS}))
DATABASE_LIST = component(
    "DatabaseList", obj({"success": TRUE, "databases": array(obj({"name": STRING, **_TOTALS})), "count": INTEGER})
)
DATABASE_MEASUREMENTS = component(
    "DatabaseMeasurements",
    obj({"success": TRUE, "database": STRING, "measurements": array(obj({"name": STRING, **_INFO})), "count": INTEGER}),
)
DATABASE_DELETED = component(
    "DatabaseDeleted", obj({"success": TRUE, "message": STRING, "database": STRING, "files_deleted": INTEGER})
)
#: ``GET /api/v1/measurements``: every measurement the caller may read (of one database, if named).
MEASUREMENT_LIST = component(
    "MeasurementList",
    obj({"success": TRUE, "measurements": array(obj(_INFO)), "count": INTEGER, "execution_time_ms": NUMBER}),
)
_NAME = path_param("name", "the database", example="metrics")


def _json(status: int, document: object) -> Response[Any]:
    return Response(status, "application/json", json.dumps(document, separators=(",", ":")))


def _totals(infos: list[MeasurementInfo]) -> dict[str, Any]:
    return {
        "measurement_count": len(infos),
        "file_count": sum(i.file_count for i in infos),
        "total_size_mb": round(sum(i.total_bytes for i in infos) / (1024 * 1024), 6),
    }


def _measurement_json(info: MeasurementInfo) -> dict[str, Any]:
    return {"name": info.measurement, **info.to_json()}


def databases_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def reader() -> Principal:
        return request.caller("read")

    def existing(caller: Principal, name: str) -> str:
        check_database(name)
        caller.require_database(name)
        if name not in runtime.catalog.list_databases():
            raise NotFound(f"database {name!r} not found")
        return name

    @router.get(
        "/api/v1/databases",
        **doc("The databases the token may read", "databases", {200: json_answer(DATABASE_LIST, "the databases")}),
    )
    def list_databases() -> dict[str, Any]:
        caller = reader()
        databases = [
            {"name": name, **_totals(measurement_infos(runtime.catalog, runtime.store, name, runtime.settings.prefix))}
            for name in visible_databases(caller, runtime.catalog)
        ]
        return {"success": True, "databases": databases, "count": len(databases)}

    @router.post(
        "/api/v1/databases",
        **doc(
            "Create a database (admin)",
            "databases",
            {201: json_answer(DATABASE, "created")},
            body=json_body(obj({"name": STRING}, closed=False), example={"name": "scratch"}),
            errors=(400, 401, 403, 408, 409, 413, 429, 503),
        ),
    )
    def create_database() -> Response[Any]:
        caller = request.caller("admin")
        name = request.json().get("name")
        if name is None:
            raise BadRequest("'name' is required")
        check_database(name)
        caller.require_database(name)
        if not runtime.catalog.create_database(name):
            raise Conflict(f"database {name!r} already exists")
        return _json(
            201, {"success": True, "name": name, "measurement_count": 0, "file_count": 0, "total_size_mb": 0.0}
        )

    @router.get(
        "/api/v1/databases/<name>",
        **doc("A database's totals", "databases", {200: json_answer(DATABASE, "the database")}, parameters=[_NAME]),
    )
    def get_database(name: str) -> dict[str, Any]:
        name = existing(reader(), name)
        infos = measurement_infos(runtime.catalog, runtime.store, name, runtime.settings.prefix)
        return {"success": True, "name": name, **_totals(infos)}

    @router.get(
        "/api/v1/databases/<name>/measurements",
        **doc(
            "A database's measurements",
            "databases",
            {200: json_answer(DATABASE_MEASUREMENTS, "its measurements")},
            parameters=[_NAME],
        ),
    )
    def list_database_measurements(name: str) -> dict[str, Any]:
        name = existing(reader(), name)
        infos = measurement_infos(runtime.catalog, runtime.store, name, runtime.settings.prefix)
        return {
            "success": True,
            "database": name,
            "measurements": [_measurement_json(info) for info in infos],
            "count": len(infos),
        }

    @router.delete(
        "/api/v1/databases/<name>",
        **doc(
            "Delete a database and all its data (admin; needs ?confirm=true)",
            "databases",
            {200: json_answer(DATABASE_DELETED, "deleted")},
            parameters=[
                path_param("name", "the database", example="scratch"),
                query_param("confirm", "must be `true`: the data is gone for good", {"enum": ["true"]}, example="true"),
            ],
        ),
    )
    def delete_database(name: str) -> dict[str, Any]:
        caller = request.caller("admin")
        check_database(name)
        caller.require_database(name)
        if (request.param("confirm") or "").lower() != "true":
            raise BadRequest(f"deleting database {name!r} removes all its data: add ?confirm=true to do it")
        result = drop_database(runtime.catalog, runtime.store, runtime.settings.prefix, name)
        if not result.existed and not result.objects_deleted:
            raise NotFound(f"database {name!r} not found")
        logger.warning(
            "database %s deleted by token %s: %d objects deleted, %d kept",
            name,
            caller.token_id,
            result.objects_deleted,
            result.objects_kept,
        )
        return {
            "success": True,
            "message": f"database {name!r} deleted",
            "database": name,
            "files_deleted": result.objects_deleted,
        }

    @router.get(
        "/api/v1/measurements",
        **doc(
            "The measurements the token may read",
            "databases",
            {200: json_answer(MEASUREMENT_LIST, "the measurements")},
            parameters=[query_param("database", "only this database's", example="metrics")],
        ),
    )
    def list_measurements() -> dict[str, Any]:
        started = time.perf_counter()
        caller = reader()
        database = request.param("database") or None
        infos = database_measurements(caller, runtime.catalog, runtime.store, database, runtime.settings.prefix)
        # Arc's shape (its clients read ``measurements``), sorted by database, then measurement.
        return {
            "success": True,
            "measurements": [info.to_json() for info in infos],
            "count": len(infos),
            "execution_time_ms": round((time.perf_counter() - started) * 1000, 3),
        }

    return router
