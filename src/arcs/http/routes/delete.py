"""Delete routes (``/api/v1/delete``); the behaviour is docs/retention-and-delete.md.

``POST /api/v1/delete`` needs ``admin`` and the database in the caller's scopes. ``where`` is one
boolean expression over the measurement's columns, checked as ``GET /api/v1/query/{measurement}``
checks its ``where`` (DuckDB's parser, then the sandbox); its conditions on ``time`` limit the
partitions read. ``GET /api/v1/delete/config`` says the rules (``read``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.errors import BadRequest, NotFound
from arcs.http.route_docs import (
    BOOLEAN,
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
)
from arcs.http.routes.request import RequestView, flag
from arcs.names import check_database, check_measurement
from arcs.query.measurement_query import (
    MAX_WHERE_CHARS,
    WHERE_RULE,
    check_single_measurement_query,
    measurement_query_sql,
)
from arcs.query.pruning import time_range
from arcs.query.sandbox import check_read_only

if TYPE_CHECKING:
    from arcs.runtime import Runtime

BASE = "/api/v1/delete"

# --- what the delete routes take and answer (arcs.lifecycle.deletion.DeleteResult.to_json builds the result) ---

DELETE_REQUEST = component(
    "DeleteRequest",
    obj(
        {
            "database": STRING,
            "measurement": STRING,
            "where": {**STRING, "minLength": 1, "description": "one boolean SQL expression over the columns"},
            "dry_run": BOOLEAN,
            "confirm": {**BOOLEAN, "description": "needed past confirmation_threshold rows"},
        },
        optional=("dry_run", "confirm"),
        closed=False,
    ),
)
DELETE_RESULT = component(
    "DeleteResult",
    obj(
        {
            "success": BOOLEAN,
            "deleted_count": INTEGER,
            "affected_files": INTEGER,
            "rewritten_files": INTEGER,
            "execution_time_ms": NUMBER,
            "dry_run": BOOLEAN,
            "files_processed": {**array(STRING), "description": "the keys of the files holding matching rows"},
            "files_read": {**INTEGER, "description": "how many files were read to find them"},
            "failed_files": array(STRING),
            "affected_file_keys": array(STRING),
        }
    ),
)
DELETE_CONFIG = component(
    "DeleteConfig",
    obj(
        {
            "success": TRUE,
            "enabled": BOOLEAN,
            "confirmation_threshold": INTEGER,
            "max_where_chars": INTEGER,
            "where_rule": STRING,
            "permission": STRING,
            "grace_period_s": NUMBER,
            "implementation": STRING,
            "performance_impact": obj({"writes": STRING, "queries": STRING, "deletes": STRING}),
        }
    ),
)


def delete_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    @router.post(
        BASE,
        **doc(
            "Delete the rows matching a condition (admin)",
            "delete",
            {200: json_answer(DELETE_RESULT, "done, or what would be (dry run)")},
            body=json_body(
                DELETE_REQUEST,
                example={"database": "metrics", "measurement": "cpu", "where": "host = 'b'", "dry_run": True},
            ),
            errors=(400, 401, 403, 404, 408, 409, 413, 429, 503, 504),
        ),
    )
    def delete() -> dict[str, Any]:
        caller = request.principal()
        caller.require("admin")
        document = request.json()
        database = check_database(document.get("database"))
        measurement = check_measurement(document.get("measurement"))
        caller.require_database(database)
        where = document.get("where")
        if not isinstance(where, str) or not where.strip():
            raise BadRequest("'where' is required: " + WHERE_RULE)
        dry_run, confirm = flag(document, "dry_run"), flag(document, "confirm")
        schema = runtime.catalog.get_schema(database, measurement)
        if schema is None:
            raise NotFound(f"measurement {measurement!r} not found in database {database!r}")
        sql = measurement_query_sql(
            database, measurement, schema.columns, limit=1, offset=0, order_by="time", where=where
        )
        check_single_measurement_query(sql, database, measurement)
        [ref] = check_read_only(sql).references
        bounds = time_range(ref.where, ref.qualifiers, runtime.queries.evaluate_time)
        result = runtime.deleter.delete(database, measurement, where, bounds, dry_run=dry_run, confirm=confirm)
        return result.to_json()

    @router.get(
        f"{BASE}/config", **doc("The delete route's rules", "delete", {200: json_answer(DELETE_CONFIG, "the rules")})
    )
    def config() -> dict[str, Any]:
        from arcs.lifecycle.deletion import CONFIRM_ROWS

        request.principal().require("read")
        return {
            "success": True,
            "enabled": True,
            "confirmation_threshold": CONFIRM_ROWS,
            # Arc's description of the method; Arc's ``max_rows_per_delete`` is not answered, as
            # no such cap applies here (a delete goes one partition at a time).
            "implementation": "rewrite-based",
            "performance_impact": {
                "writes": "none",
                "queries": "none",
                "deletes": "reads the candidate files and rewrites those holding matching rows",
            },
            "max_where_chars": MAX_WHERE_CHARS,
            "where_rule": WHERE_RULE,
            "permission": "admin",
            "grace_period_s": runtime.settings.compaction.grace_s,
        }

    return router
