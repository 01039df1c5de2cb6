"""Retention policy routes (``/api/v1/retention``); the behaviour is docs/retention_and_delete.md.

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

from arcs.errors import BadRequest, Conflict, NotFound
from arcs.names import check_database
from arcs.numeric_ids import numeric_id
from arcs.ports import Catalog, RetentionExecution, RetentionPolicy
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.tokens import Principal

if TYPE_CHECKING:
    from arcs.retention import Retention

BASE = "/api/v1/retention"
MAX_EXECUTIONS = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def _flag(document: dict[str, Any], name: str) -> bool:
    value = document.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name!r} must be true or false")
    return value


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
        policy = runtime.catalog.get_retention_policy(_policy_id(policy_id))
        if policy is None or not caller.may_use(policy.database):
            raise NotFound(f"retention policy {policy_id} not found")
        return policy

    @router.get(BASE)
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

    @router.post(BASE)
    def create_policy() -> Response[Any]:
        from arcs.retention import policy_from_document

        caller = caller_with("admin")
        policy = policy_from_document(request.json(), datetime.now(UTC))
        caller.require_database(policy.database)
        stored = runtime.catalog.create_retention_policy(policy)
        if stored is None:
            raise Conflict(f"a retention policy named {policy.name!r} exists in database {policy.database!r}")
        return _json(201, {"success": True, "policy": policy_json(runtime.catalog, stored)})

    @router.get(f"{BASE}/<policy_id>")
    def get_policy(policy_id: str) -> dict[str, Any]:
        return {"success": True, "policy": policy_json(runtime.catalog, visible(caller_with("read"), policy_id))}

    def update(policy_id: str) -> dict[str, Any]:
        from arcs.retention import policy_from_document

        caller = caller_with("admin")
        current = visible(caller, policy_id)
        policy = policy_from_document(request.json(), datetime.now(UTC), current)
        caller.require_database(policy.database)
        if not runtime.catalog.update_retention_policy(policy):
            raise Conflict(f"a retention policy named {policy.name!r} exists in database {policy.database!r}")
        return {"success": True, "policy": policy_json(runtime.catalog, policy)}

    router.put(f"{BASE}/<policy_id>")(update)
    router.patch(f"{BASE}/<policy_id>")(update)

    @router.delete(f"{BASE}/<policy_id>")
    def delete_policy(policy_id: str) -> dict[str, Any]:
        policy = visible(caller_with("admin"), policy_id)
        runtime.catalog.delete_retention_policy(policy.policy_id)
        return {"success": True, "message": f"retention policy {policy.name!r} deleted", "id": policy.policy_id}

    @router.post(f"{BASE}/<policy_id>/execute")
    def execute_policy(policy_id: str) -> dict[str, Any]:
        policy = visible(caller_with("admin"), policy_id)
        document = request.json()
        dry_run, confirm = _flag(document, "dry_run"), _flag(document, "confirm")
        if not dry_run and not confirm:
            raise BadRequest(
                'executing a retention policy deletes data for good: send "confirm": true (or "dry_run": true)'
            )
        execution = service().execute(policy, dry_run=dry_run)
        return {
            "success": execution.status in ("succeeded", "dry_run"),
            "policy_name": policy.name,
            **execution_json(execution),
            "execution_time_ms": round(execution.duration_ms, 3),  # Arc's name for the execute answer
        }

    @router.post(f"{BASE}/run")
    def run_schedule() -> dict[str, Any]:
        caller_with("admin")
        document = request.json()
        dry_run, confirm = _flag(document, "dry_run"), _flag(document, "confirm")
        if not dry_run and not confirm:
            raise BadRequest('a retention run deletes data for good: send "confirm": true (or "dry_run": true)')
        database = document.get("database")
        if database is not None:
            if not isinstance(database, str):
                raise BadRequest("'database' must be a database name (or absent: every database)")
            check_database(database)
        run = service().run_due(dry_run=dry_run, kind="manual", scope=lambda name: database is None or name == database)
        return {"success": run.complete, **run.to_json()}

    @router.get(f"{BASE}/<policy_id>/executions")
    def list_executions(policy_id: str) -> dict[str, Any]:
        policy = visible(caller_with("read"), policy_id)
        raw = request.param("limit") or "100"
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_EXECUTIONS:
            raise BadRequest(f"'limit' must be a whole number from 1 to {MAX_EXECUTIONS}")
        executions = runtime.catalog.list_retention_executions(policy.policy_id, int(raw))
        return {
            "success": True,
            "policy_id": policy.policy_id,
            "policy_name": policy.name,
            "executions": [execution_json(execution) for execution in executions],
            "count": len(executions),
        }

    return router
