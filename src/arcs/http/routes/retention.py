"""Retention policy routes (``/api/v1/retention``); the behaviour is docs/retention-and-delete.md.

Permissions: listing, reading a policy and its executions need ``read``; creating, changing,
deleting and executing need ``admin`` (which no scope limits). A reader's scopes apply: a policy of
a database outside them is never listed and its id answers 404. Executing for real (not a dry run)
needs ``"confirm": true``: it removes data for good.

``POST /api/v1/retention/run`` (ours) runs what the schedule runs, now: every active policy and the
rules derived from continuous queries, of every database (or the one named); a dry run
answers what each would remove.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.auth.numeric_ids import numeric_id
from arcs.auth.tokens import Principal
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
from arcs.ports import Catalog, RetentionExecution, RetentionPolicy

if TYPE_CHECKING:
    from arcs.lifecycle.retention import Retention
    from arcs.runtime import Runtime

BASE = "/api/v1/retention"
MAX_EXECUTIONS = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- what the retention routes take and answer (built below, and by arcs.lifecycle.retention.RetentionRun) -----

_POLICY_FIELDS = {
    "name": {**STRING, "minLength": 1, "maxLength": 128},
    "database": STRING,
    "measurement": nullable({**STRING, "description": "null: the whole database"}),
    "retention_days": {**INTEGER, "minimum": 1},
    "buffer_days": {**INTEGER, "minimum": 0},
    "is_active": BOOLEAN,
}
POLICY_CREATE = component(
    "RetentionPolicyCreate", obj(_POLICY_FIELDS, optional=("measurement", "buffer_days", "is_active"))
)
POLICY_UPDATE = component("RetentionPolicyUpdate", obj(_POLICY_FIELDS, optional=tuple(_POLICY_FIELDS)))
POLICY = component(
    "RetentionPolicy",
    obj(
        {
            "id": INTEGER,
            **_POLICY_FIELDS,
            "measurement": nullable(STRING),
            # The latest execution (Arc's fields); null before the first.
            "last_execution_time": nullable(STRING),
            "last_execution_status": nullable(STRING),
            "last_deleted_count": nullable(INTEGER),
            "created_at": STRING,
            "updated_at": STRING,
        }
    ),
)
_REMOVED = {
    "cutoff_time": STRING,
    "partitions_deleted": INTEGER,
    "files_deleted": INTEGER,
    "deleted_count": INTEGER,
    "bytes_deleted": INTEGER,
    "skipped_partitions": array(STRING),
    "error_message": nullable(STRING),
}
_EXECUTION_FIELDS = {
    "id": {**INTEGER, "description": "Arc's integer id, derived from `execution_id`"},
    "execution_id": STRING,
    "policy_id": INTEGER,
    "kind": STRING,
    "dry_run": BOOLEAN,
    "status": STRING,
    **_REMOVED,
    "cutoff_date": {**STRING, "description": "Arc's name for `cutoff_time`"},
    "execution_time": STRING,
    "execution_duration_ms": NUMBER,
}
RETENTION_EXECUTION = component("RetentionExecution", obj(_EXECUTION_FIELDS))
_POLICY_ANSWER = component("RetentionPolicyAnswer", obj({"success": TRUE, "policy": POLICY}))
_POLICY_LIST = component("RetentionPolicyList", obj({"success": TRUE, "policies": array(POLICY), "count": INTEGER}))
_POLICY_DELETED = component("RetentionPolicyDeleted", obj({"success": TRUE, "message": STRING, "id": INTEGER}))
_EXECUTIONS = component(
    "RetentionExecutions",
    obj(
        {
            "success": TRUE,
            "policy_id": INTEGER,
            "policy_name": STRING,
            "executions": array(RETENTION_EXECUTION),
            "count": INTEGER,
        }
    ),
)
_EXECUTED = component(
    "RetentionExecuted",
    obj(
        {
            "success": BOOLEAN,
            "policy_name": STRING,
            **_EXECUTION_FIELDS,
            "execution_time_ms": {**NUMBER, "description": "Arc's name for `execution_duration_ms`"},
        }
    ),
)
_RULE = obj(
    {
        "rule": STRING,
        "policy_id": INTEGER,
        "execution_id": STRING,
        "status": STRING,
        "continuous_query_ids": array(INTEGER),
        "database": STRING,
        "measurement": nullable(STRING),
        "limited_by": {},
        **_REMOVED,
    },
    # A policy's execution, or a rule derived from continuous queries (arcs.lifecycle.retention.DerivedRemoval).
    optional=("policy_id", "execution_id", "status", "continuous_query_ids", "database", "measurement", "limited_by"),
)
_RUN = component(
    "RetentionRun",
    obj(
        {
            "success": BOOLEAN,
            "dry_run": BOOLEAN,
            "policies": INTEGER,
            "derived_rules": INTEGER,
            "partitions_deleted": INTEGER,
            "rows_deleted": INTEGER,
            "skipped": INTEGER,
            "rules": array(_RULE),
        }
    ),
)
_CONFIRM = {"dry_run": BOOLEAN, "confirm": {**BOOLEAN, "description": "true: delete for good"}}
_EXECUTE = component("RetentionExecute", obj(_CONFIRM, optional=tuple(_CONFIRM), closed=False))
_RUN_REQUEST = component(
    "RetentionRunRequest",
    obj({**_CONFIRM, "database": nullable(STRING)}, optional=(*_CONFIRM, "database"), closed=False),
)
_ID = path_param("policy_id", "the policy's id", example="1")
_CHANGE_ERRORS = (400, 401, 403, 404, 408, 409, 413, 429, 503)


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def policy_json(catalog: Catalog, policy: RetentionPolicy) -> dict[str, Any]:
    """The policy and its latest execution (Arc's ``last_*`` fields)."""
    latest = catalog.list_retention_executions(policy.policy_id, limit=1)
    last = latest[0] if latest else None
    return {
        "id": policy.policy_id,
        "name": policy.name,
        "database": policy.database,
        "measurement": policy.measurement,
        "retention_days": policy.retention_days,
        "buffer_days": policy.buffer_days,
        "is_active": policy.is_active,
        "last_execution_time": None if last is None else _time(last.started_at),
        "last_execution_status": None if last is None else last.status,
        "last_deleted_count": None if last is None else last.rows,
        "created_at": _time(policy.created_at),
        "updated_at": _time(policy.updated_at),
    }


def execution_json(execution: RetentionExecution) -> dict[str, Any]:
    cutoff = _time(_EPOCH + timedelta(microseconds=execution.cutoff_us))
    return {
        # Arc's integer id (its clients require one), derived from the execution's own id.
        "id": numeric_id(f"{execution.policy_id}/{execution.execution_id}"),
        "execution_id": execution.execution_id,
        "policy_id": execution.policy_id,
        "kind": execution.kind,
        "dry_run": execution.dry_run,
        "status": execution.status,
        "cutoff_time": cutoff,
        "cutoff_date": cutoff,  # Arc's name
        "partitions_deleted": execution.partitions,
        "files_deleted": execution.files,
        "deleted_count": execution.rows,
        "bytes_deleted": execution.bytes,
        "skipped_partitions": list(execution.skipped),
        "execution_time": _time(execution.started_at),
        "execution_duration_ms": round(execution.duration_ms, 3),
        "error_message": execution.error or None,
    }


def _json(status: int, document: object) -> Response[Any]:
    return Response(status, "application/json", json.dumps(document, separators=(",", ":")))


def _policy_id(text: str) -> int:
    if not text.isdigit() or len(text) > 12:
        raise NotFound(f"retention policy {text[:40]!r} not found")
    return int(text)


def retention_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def service() -> Retention:
        return runtime.retention

    def caller_with(permission: str) -> Principal:
        caller = request.principal()
        caller.require(permission)
        return caller

    def visible(caller: Principal, policy_id: str) -> RetentionPolicy:
        return _visible_policy(runtime, caller, policy_id)

    @router.get(
        BASE,
        **doc(
            "The retention policies the token may read",
            "retention",
            {200: json_answer(_POLICY_LIST, "the policies")},
            parameters=[query_param("database", "only this database's")],
        ),
    )
    def list_policies() -> dict[str, Any]:
        caller = caller_with("read")
        database = request.param("database") or None
        if database is not None:
            check_database(database)
            caller.require_database(database)
        policies = [
            policy_json(runtime.catalog, policy)
            for policy in runtime.catalog.list_retention_policies(database)
            if caller.may_use(policy.database)
        ]
        return {"success": True, "policies": policies, "count": len(policies)}

    @router.post(
        BASE,
        **doc(
            "Create a retention policy (admin)",
            "retention",
            {201: json_answer(_POLICY_ANSWER, "created")},
            body=json_body(
                POLICY_CREATE,
                example={"name": "old_cpu", "database": "metrics", "measurement": "cpu", "retention_days": 36500},
            ),
            errors=_CHANGE_ERRORS,
        ),
    )
    def create_policy() -> Response[Any]:
        caller = caller_with("admin")
        stored = service().create_policy(request.json(), caller)
        return _json(201, {"success": True, "policy": policy_json(runtime.catalog, stored)})

    @router.get(
        f"{BASE}/<policy_id>",
        **doc("A retention policy", "retention", {200: json_answer(_POLICY_ANSWER, "the policy")}, parameters=[_ID]),
    )
    def get_policy(policy_id: str) -> dict[str, Any]:
        return {"success": True, "policy": policy_json(runtime.catalog, visible(caller_with("read"), policy_id))}

    def update(policy_id: str) -> dict[str, Any]:
        caller = caller_with("admin")
        policy = service().update_policy(visible(caller, policy_id), request.json(), caller)
        return {"success": True, "policy": policy_json(runtime.catalog, policy)}

    for verb in (router.put, router.patch):
        verb(
            f"{BASE}/<policy_id>",
            **doc(
                "Change a retention policy (admin): the fields given",
                "retention",
                {200: json_answer(_POLICY_ANSWER, "changed")},
                parameters=[_ID],
                body=json_body(POLICY_UPDATE, required=False, example={"buffer_days": 2}),
                errors=_CHANGE_ERRORS,
            ),
        )(update)

    @router.delete(
        f"{BASE}/<policy_id>",
        **doc(
            "Delete a retention policy (admin)",
            "retention",
            {200: json_answer(_POLICY_DELETED, "deleted")},
            parameters=[path_param("policy_id", "the policy's id", example="2")],
        ),
    )
    def delete_policy(policy_id: str) -> dict[str, Any]:
        policy = visible(caller_with("admin"), policy_id)
        service().delete_policy(policy)
        return {"success": True, "message": f"retention policy {policy.name!r} deleted", "id": policy.policy_id}

    @router.post(
        f"{BASE}/<policy_id>/execute",
        **doc(
            "Apply a policy now (admin): a dry run, or for real with confirm",
            "retention",
            {200: json_answer(_EXECUTED, "done (success false: some partitions were skipped)")},
            parameters=[_ID],
            body=json_body(_EXECUTE, required=False, example={"dry_run": True}),
            errors=_CHANGE_ERRORS,
        ),
    )
    def execute_policy(policy_id: str) -> dict[str, Any]:
        policy = visible(caller_with("admin"), policy_id)
        dry_run = _dry_run_unless_confirmed(request.json(), "executing a retention policy")
        execution = service().execute(policy, dry_run=dry_run)
        return {
            "success": execution.status in ("succeeded", "dry_run"),
            "policy_name": policy.name,
            **execution_json(execution),
            "execution_time_ms": round(execution.duration_ms, 3),  # Arc's name for the execute answer
        }

    @router.post(
        f"{BASE}/run",
        **doc(
            "Run every active policy and continuous-query rule now (admin)",
            "retention",
            {200: json_answer(_RUN, "done (success false: something was skipped or failed)")},
            body=json_body(_RUN_REQUEST, required=False, example={"dry_run": True}),
            errors=_CHANGE_ERRORS,
        ),
    )
    def run_schedule() -> dict[str, Any]:
        caller_with("admin")
        document = request.json()
        dry_run = _dry_run_unless_confirmed(document, "a retention run")
        database = _run_database(document)
        run = service().run_due(dry_run=dry_run, kind="manual", scope=lambda name: database is None or name == database)
        return {"success": run.complete, **run.to_json()}

    @router.get(
        f"{BASE}/<policy_id>/executions",
        **doc(
            "A policy's executions, newest first",
            "retention",
            {200: json_answer(_EXECUTIONS, "the executions")},
            parameters=[_ID, LIMIT],
        ),
    )
    def list_executions(policy_id: str) -> dict[str, Any]:
        policy = visible(caller_with("read"), policy_id)
        executions = runtime.catalog.list_retention_executions(
            policy.policy_id, limit_param(request.param("limit"), 100, MAX_EXECUTIONS)
        )
        return {
            "success": True,
            "policy_id": policy.policy_id,
            "policy_name": policy.name,
            "executions": [execution_json(execution) for execution in executions],
            "count": len(executions),
        }

    return router


def _visible_policy(runtime: Runtime, caller: Principal, policy_id: str) -> RetentionPolicy:
    """The policy, or a 404 when there is none or it is of a database the caller may not use."""
    policy = runtime.catalog.get_retention_policy(_policy_id(policy_id))
    if policy is None or not caller.may_use(policy.database):
        raise NotFound(f"retention policy {policy_id} not found")
    return policy


def _dry_run_unless_confirmed(document: dict[str, Any], what: str) -> bool:
    """Whether the body asks for a dry run; a 400 when it asks for neither that nor ``confirm``."""
    dry_run, confirm = flag(document, "dry_run"), flag(document, "confirm")
    if not dry_run and not confirm:
        raise BadRequest(f'{what} deletes data for good: send "confirm": true (or "dry_run": true)')
    return dry_run


def _run_database(document: dict[str, Any]) -> str | None:
    """The one database a run is limited to (None: every database)."""
    database = document.get("database")
    if database is not None:
        if not isinstance(database, str):
            raise BadRequest("'database' must be a database name (or absent: every database)")
        check_database(database)
    return database
