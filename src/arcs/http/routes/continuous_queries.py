"""Continuous query routes (``/api/v1/continuous_queries``); the behaviour is docs/continuous-queries.md.

Permissions: listing, reading a definition and its executions need ``read``; creating, changing,
deleting and executing need ``admin`` (a continuous query keeps writing with its own authority
long after the request). Scopes apply to all of them: a query of a database outside the caller's
scopes is never listed and its id answers 404, so a scoped token never learns it exists.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.auth.numeric_ids import numeric_id
from arcs.auth.tokens import Principal
from arcs.continuous_queries.definitions import OPTIONAL_FIELDS, definition_fields, parse_time, rfc3339
from arcs.errors import BadRequest, NotFound
from arcs.http.route_docs import (
    BOOLEAN,
    INTEGER,
    LIMIT,
    NUMBER,
    STRING,
    TRUE,
    array,
    component,
    doc,
    json_answer,
    json_body,
    nullable,
    obj,
    path_param,
    query_param,
)
from arcs.http.routes.request import RequestView, flag, limit_param
from arcs.names import check_database
from arcs.ports import ContinuousQuery, CQExecution
from arcs.query.service import QueryResult

if TYPE_CHECKING:
    # The service loads the write path; the query function imports it only when a route needs it.
    from arcs.continuous_queries.service import ContinuousQueries, WindowResult
    from arcs.runtime import Runtime

BASE = "/api/v1/continuous_queries"
MAX_EXECUTIONS = 1000
#: A client's own id for a manual execute (ours): retrying with it never adds the rows twice.
EXECUTION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


# --- what the continuous query routes take and answer (built below) --------------------------------

_DEFINITION = {
    "name": {**STRING, "pattern": "^[a-zA-Z][a-zA-Z0-9_-]{0,127}$"},
    "description": nullable(STRING),
    "database": STRING,
    "source_measurement": STRING,
    "destination_measurement": STRING,
    "query": {**STRING, "description": "SELECT with {start_time} and {end_time} placeholders"},
    "interval": {**STRING, "description": "a whole number and a unit (s, m, h, d), like `5m`"},
    "tag_columns": array(STRING),
    "retention_days": nullable(INTEGER),
    "delete_source_after_days": nullable(INTEGER),
    "is_active": BOOLEAN,
}
CQ_CREATE = component("ContinuousQueryCreate", obj(_DEFINITION, optional=OPTIONAL_FIELDS))
CQ_UPDATE = component("ContinuousQueryUpdate", obj(_DEFINITION, optional=tuple(_DEFINITION)))
CONTINUOUS_QUERY = component(
    "ContinuousQuery",
    obj(
        {
            "id": INTEGER,
            **_DEFINITION,
            "last_processed_time": nullable(STRING),
            "last_execution_time": nullable(STRING),
            "last_execution_status": nullable(STRING),
            "last_records_written": nullable(INTEGER),
            "created_at": STRING,
            "updated_at": STRING,
        }
    ),
)
CQ_EXECUTION = component(
    "ContinuousQueryExecution",
    obj(
        {
            "id": {**INTEGER, "description": "Arc's integer id, derived from `execution_id`"},
            "execution_id": STRING,
            "query_id": INTEGER,
            "kind": STRING,
            "status": STRING,
            "start_time": STRING,
            "end_time": STRING,
            "records_written": INTEGER,
            "write_id": nullable(STRING),
            "execution_time": STRING,
            "execution_duration_seconds": NUMBER,
            "error_message": nullable(STRING),
        }
    ),
)
#: The same definition under both keys: ``query`` (Arc's clients) and ``continuous_query``.
_CQ_ANSWER = component(
    "ContinuousQueryAnswer", obj({"success": TRUE, "query": CONTINUOUS_QUERY, "continuous_query": CONTINUOUS_QUERY})
)
_CQ_LIST = component(
    "ContinuousQueryList",
    obj(
        {
            "success": TRUE,
            "queries": array(CONTINUOUS_QUERY),
            "continuous_queries": array(CONTINUOUS_QUERY),
            "count": INTEGER,
        }
    ),
)
_CQ_DELETED = component("ContinuousQueryDeleted", obj({"success": TRUE, "message": STRING, "id": INTEGER}))
_CQ_EXECUTIONS = component(
    "ContinuousQueryExecutions",
    obj(
        {
            "success": TRUE,
            "query_id": INTEGER,
            "query_name": STRING,
            "executions": array(CQ_EXECUTION),
            "count": INTEGER,
        }
    ),
)
_CQ_EXECUTE = component(
    "ContinuousQueryExecute",
    obj(
        {
            "start_time": {**STRING, "description": "RFC 3339"},
            "end_time": {**STRING, "description": "RFC 3339"},
            "dry_run": BOOLEAN,
            "execution_id": nullable(
                {**STRING, "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "a retry with it writes once"}
            ),
        },
        optional=("dry_run", "execution_id"),
        closed=False,
    ),
)
_CQ_EXECUTED = component(
    "ContinuousQueryExecuted",
    obj(
        {
            "success": TRUE,
            "query_id": INTEGER,
            "query_name": STRING,
            "execution_id": STRING,
            "status": {"enum": ["succeeded", "dry_run"]},
            "dry_run": BOOLEAN,
            "start_time": STRING,
            "end_time": STRING,
            "destination_measurement": STRING,
            "records_written": INTEGER,
            "write_id": nullable(STRING),
            "execution_time_seconds": NUMBER,
            "executed_at": STRING,
            "executed_query": STRING,
            "columns": array(STRING),
            "data": array(array({})),
            "row_count": INTEGER,
        },
        # A dry run answers the rows it would write, as a query answers them.
        optional=("columns", "data", "row_count"),
    ),
)
_ID = path_param("query_id", "the continuous query's id", example="1")
_CQ_EXAMPLE = {
    "name": "cpu_hourly",
    "database": "metrics",
    "source_measurement": "cpu",
    "destination_measurement": "cpu_1h",
    "query": "SELECT time_bucket(INTERVAL '1 hour', time) AS time, host, avg(usage) AS usage FROM cpu "
    "WHERE time >= {start_time} AND time < {end_time} GROUP BY ALL",
    "interval": "1h",
    "tag_columns": ["host"],
}
_CHANGE_ERRORS = (400, 401, 403, 404, 408, 409, 413, 429, 503)


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def execution_json(execution: CQExecution) -> dict[str, Any]:
    return {
        # Arc's integer id (its clients require one), derived from the execution's own id.
        "id": numeric_id(f"{execution.query_id}/{execution.execution_id}"),
        "execution_id": execution.execution_id,
        "query_id": execution.query_id,
        "kind": execution.kind,
        "status": execution.status,
        "start_time": rfc3339(execution.start_us),
        "end_time": rfc3339(execution.end_us),
        "records_written": execution.rows,
        "write_id": execution.write_id,
        "execution_time": _time(execution.started_at),
        "execution_duration_seconds": round(execution.duration_ms / 1000, 6),
        "error_message": execution.error or None,
    }


def definition_json(runtime: Runtime, query: ContinuousQuery) -> dict[str, Any]:
    """The definition, its progress mark and its latest execution (Arc's ``last_*`` fields)."""
    mark = runtime.catalog.get_cq_progress(query.query_id)
    latest = runtime.catalog.list_cq_executions(query.query_id, limit=1)
    last = latest[0] if latest else None
    return {
        "id": query.query_id,
        **definition_fields(query),
        "description": query.description or None,
        "last_processed_time": None if mark is None else rfc3339(mark),
        "last_execution_time": None if last is None else _time(last.started_at),
        "last_execution_status": None if last is None else last.status,
        "last_records_written": None if last is None else last.rows,
        "created_at": _time(query.created_at),
        "updated_at": _time(query.updated_at),
    }


def _definition_answer(definition: dict[str, Any]) -> dict[str, Any]:
    """One definition as answered: under ``query``, where Arc's Python client reads it (Arc
    answers the definition's fields at the top level, where ``query`` is its SQL, so one key
    cannot serve both), and under ``continuous_query``, our earlier name."""
    return {"success": True, "query": definition, "continuous_query": definition}


def _json(status: int, document: object) -> Response[Any]:
    return Response(status, "application/json", json.dumps(document, separators=(",", ":")))


def _query_id(text: str) -> int:
    if not text.isdigit() or len(text) > 12:
        raise NotFound(f"continuous query {text[:40]!r} not found")
    return int(text)


def execute_json(result: WindowResult, dry_run: bool) -> dict[str, Any]:
    document: dict[str, Any] = {
        "success": True,
        "query_id": result.query.query_id,
        "query_name": result.query.name,
        "execution_id": result.execution_id,
        "status": "dry_run" if dry_run else "succeeded",
        "dry_run": dry_run,
        "start_time": rfc3339(result.start_us),
        "end_time": rfc3339(result.end_us),
        "destination_measurement": result.query.destination_measurement,
        "records_written": 0 if dry_run else result.rows.num_rows,
        "write_id": result.write_id,
        "execution_time_seconds": round(result.duration_ms / 1000, 6),
        "executed_at": _time(datetime.now(UTC)),
        "executed_query": result.sql,
    }
    if dry_run:
        # The rows it would write, in the shape of a query's answer.
        from arcs.query.results import to_json_document  # lazy: only dry runs shape rows

        rows = json.loads(to_json_document(QueryResult(result.rows, result.duration_ms)))
        document.update(columns=rows["columns"], data=rows["data"], row_count=rows["row_count"])
    return document


def continuous_queries_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def service() -> ContinuousQueries:
        return runtime.continuous_queries

    def visible(caller: Principal, query_id: str) -> ContinuousQuery:
        return _visible_query(runtime, caller, query_id)

    @router.get(
        BASE,
        **doc(
            "The continuous queries the token may read",
            "continuous queries",
            {200: json_answer(_CQ_LIST, "the definitions")},
            parameters=[query_param("database", "only this database's")],
        ),
    )
    def list_queries() -> dict[str, Any]:
        caller = request.caller("read")
        database = request.param("database") or None
        if database is not None:
            check_database(database)
            caller.require_database(database)
        queries = [
            definition_json(runtime, query)
            for query in runtime.catalog.list_continuous_queries(database)
            if caller.may_use(query.database)
        ]
        # ``queries`` is what Arc's Python client reads; ``continuous_queries`` our earlier name.
        return {"success": True, "queries": queries, "continuous_queries": queries, "count": len(queries)}

    @router.post(
        BASE,
        **doc(
            "Create a continuous query (admin)",
            "continuous queries",
            {201: json_answer(_CQ_ANSWER, "created")},
            body=json_body(CQ_CREATE, example=_CQ_EXAMPLE),
            errors=_CHANGE_ERRORS,
        ),
    )
    def create_query() -> Response[Any]:
        caller = request.caller("admin")
        document = request.json()
        database = document.get("database")
        if isinstance(database, str):
            caller.require_database(check_database(database))
        query = service().create(document, datetime.now(UTC))
        return _json(201, _definition_answer(definition_json(runtime, query)))

    @router.get(
        f"{BASE}/<query_id>",
        **doc(
            "A continuous query",
            "continuous queries",
            {200: json_answer(_CQ_ANSWER, "the definition")},
            parameters=[_ID],
        ),
    )
    def get_query(query_id: str) -> dict[str, Any]:
        query = visible(request.caller("read"), query_id)
        return _definition_answer(definition_json(runtime, query))

    def update(query_id: str) -> dict[str, Any]:
        query = visible(request.caller("admin"), query_id)
        updated = service().update(query.query_id, request.json(), datetime.now(UTC))
        return _definition_answer(definition_json(runtime, updated))

    for verb in (router.put, router.patch):
        verb(
            f"{BASE}/<query_id>",
            **doc(
                "Change a continuous query (admin): the fields given",
                "continuous queries",
                {200: json_answer(_CQ_ANSWER, "changed")},
                parameters=[_ID],
                body=json_body(CQ_UPDATE, required=False, example={"description": "hourly means of cpu"}),
                errors=_CHANGE_ERRORS,
            ),
        )(update)

    @router.delete(
        f"{BASE}/<query_id>",
        **doc(
            "Delete a continuous query (admin)",
            "continuous queries",
            {200: json_answer(_CQ_DELETED, "deleted")},
            parameters=[path_param("query_id", "the continuous query's id", example="2")],
        ),
    )
    def delete_query(query_id: str) -> dict[str, Any]:
        query = visible(request.caller("admin"), query_id)
        service().delete(query.query_id)
        return {"success": True, "message": f"continuous query {query.name!r} deleted", "id": query.query_id}

    @router.post(
        f"{BASE}/<query_id>/execute",
        **doc(
            "Run a continuous query over a window now (admin)",
            "continuous queries",
            {200: json_answer(_CQ_EXECUTED, "done")},
            parameters=[_ID],
            body=json_body(
                _CQ_EXECUTE,
                example={"start_time": "2023-11-14T22:00:00Z", "end_time": "2023-11-14T23:00:00Z", "dry_run": True},
            ),
            errors=(*_CHANGE_ERRORS, 504),
        ),
    )
    def execute_query(query_id: str) -> dict[str, Any]:
        query = visible(request.caller("admin"), query_id)
        document = request.json()
        dry_run = flag(document, "dry_run")
        start_us = parse_time(document.get("start_time"), "start_time")
        end_us = parse_time(document.get("end_time"), "end_time")
        execution_id = _execution_id(document)
        result = service().execute(query.query_id, start_us, end_us, dry_run, execution_id)
        return execute_json(result, dry_run)

    @router.get(
        f"{BASE}/<query_id>/executions",
        **doc(
            "A continuous query's executions, newest first",
            "continuous queries",
            {200: json_answer(_CQ_EXECUTIONS, "the executions")},
            parameters=[_ID, LIMIT],
        ),
    )
    def list_executions(query_id: str) -> dict[str, Any]:
        query = visible(request.caller("read"), query_id)
        limit = limit_param(request.param("limit"), 100, MAX_EXECUTIONS)
        executions = runtime.catalog.list_cq_executions(query.query_id, limit)
        return {
            "success": True,
            "query_id": query.query_id,
            "query_name": query.name,
            "executions": [execution_json(execution) for execution in executions],
            "count": len(executions),
        }

    return router


def _visible_query(runtime: Runtime, caller: Principal, query_id: str) -> ContinuousQuery:
    """The continuous query, or a 404 when there is none or it is of a database the caller may not use."""
    query = runtime.catalog.get_continuous_query(_query_id(query_id))
    if query is None or not caller.may_use(query.database):
        raise NotFound(f"continuous query {query_id} not found")
    return query


def _execution_id(document: dict[str, Any]) -> str | None:
    """The body's optional ``execution_id``: a retried execution names the one it repeats."""
    execution_id = document.get("execution_id")
    if execution_id is not None and (not isinstance(execution_id, str) or not EXECUTION_ID.fullmatch(execution_id)):
        raise BadRequest("'execution_id' must be 1 to 64 letters, digits, '_' or '-' (or absent)")
    return execution_id
