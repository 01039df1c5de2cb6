"""Compaction routes (docs/compaction.md "Running it"): status, stats, candidates, jobs, history, trigger.

Permissions: the reads need ``read`` and show only databases in the caller's scopes (jobs and
candidates of other databases are never listed); the trigger needs ``admin``, because a run
rewrites data of every database it reaches. A trigger answers 202 at once: the run happens in
the background (the server's timer thread, or the tasks function in AWS).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.auth.tokens import Principal
from arcs.errors import BadRequest
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
    map_of,
    nullable,
    obj,
    query_param,
)
from arcs.http.routes.request import RequestView, limit_param
from arcs.lifecycle.compaction.report import job_json
from arcs.names import check_database, check_measurement
from arcs.ports import CompactionJob

if TYPE_CHECKING:
    from arcs.runtime import Runtime

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
#: How many recent jobs the stats add up.
STATS_WINDOW = 1000


# --- what the compaction routes answer (arcs.lifecycle.compaction.report builds jobs and candidates) -----------

_PARTITION = {"database": STRING, "measurement": STRING, "hour": STRING, "tier": {"enum": ["hour", "day"]}}
COMPACTION_JOB = component(
    "CompactionJob",
    obj(
        {
            "job_id": STRING,
            "kind": STRING,
            **_PARTITION,
            "status": STRING,
            "started_at": STRING,
            "updated_at": STRING,
            "duration_s": NUMBER,
            "files_compacted": INTEGER,
            "files_written": INTEGER,
            "bytes_before": INTEGER,
            "bytes_after": INTEGER,
            "rows_before": INTEGER,
            "rows_after": INTEGER,
            "quarantined": array(STRING),
            "delete_inputs_after": nullable(STRING),
            "error": STRING,
        }
    ),
)
CANDIDATE = component(
    "CompactionCandidate", obj({**_PARTITION, "file_count": INTEGER, "total_bytes": INTEGER, "rows": INTEGER})
)
_SETTINGS = obj(
    {
        "min_age_s": NUMBER,
        "min_files": INTEGER,
        "target_file_mb": NUMBER,
        "max_files_per_job": INTEGER,
        "sort": {},
        "compression": STRING,
        "row_group_rows": INTEGER,
        "grace_s": NUMBER,
        "tiers": array(STRING),
        "day_min_age_s": NUMBER,
        "day_min_files": INTEGER,
        "month_min_age_s": NUMBER,
        "month_min_files": INTEGER,
        "sort_keys": {**map_of(array(STRING)), "description": "a measurement's sort columns, time last"},
    }
)
COMPACTION_STATUS = component(
    "CompactionStatus",
    # The scheduler's own fields (arcs.lifecycle.schedule) vary by runtime: the timer thread's or EventBridge's.
    obj({"success": TRUE, "active_jobs": INTEGER, "settings": _SETTINGS}, closed=False),
)
COMPACTION_STATS = component(
    "CompactionStats",
    obj(
        {
            "success": TRUE,
            "jobs": INTEGER,
            "jobs_by_status": map_of(INTEGER),
            "files_compacted": INTEGER,
            "files_written": INTEGER,
            "bytes_before": INTEGER,
            "bytes_after": INTEGER,
            "bytes_saved": INTEGER,
            "rows_before": INTEGER,
            "rows_after": INTEGER,
            "files_quarantined": INTEGER,
            "window_jobs": INTEGER,
        }
    ),
)
_JOBS = component("CompactionJobs", obj({"success": TRUE, "jobs": array(COMPACTION_JOB), "count": INTEGER}))
_CANDIDATES = component(
    "CompactionCandidates", obj({"success": TRUE, "candidates": array(CANDIDATE), "count": INTEGER})
)
_TRIGGERED = component(
    "CompactionTriggered",
    obj(
        {"success": TRUE, "triggered": BOOLEAN, "database": nullable(STRING), "measurement": nullable(STRING)},
        closed=False,
    ),
)
#: null or absent: every database (measurement: every one of the database).
_SCOPE = obj(
    {"database": nullable(STRING), "measurement": nullable(STRING)}, optional=("database", "measurement"), closed=False
)


def _settings_json(runtime: Runtime) -> dict[str, Any]:
    config = runtime.settings.compaction
    return {
        "min_age_s": config.min_age_s,
        "min_files": config.min_files,
        "target_file_mb": round(config.target_file_bytes / (1024 * 1024), 3),
        "max_files_per_job": config.max_files,
        "sort": config.sort,
        "compression": f"zstd({config.zstd_level})",
        "row_group_rows": runtime.settings.row_group_rows,
        "grace_s": config.grace_s,
        "tiers": list(config.tiers),
        "day_min_age_s": config.day_min_age_s,
        "day_min_files": config.day_min_files,
        "month_min_age_s": config.month_min_age_s,
        "month_min_files": config.month_min_files,
        "sort_keys": {measurement: [*keys] for measurement, keys in config.sort_keys},
    }


def compaction_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def reader() -> Principal:
        return request.caller("read")

    def limit() -> int:
        return limit_param(request.param("limit"), DEFAULT_LIMIT, MAX_LIMIT)

    def visible(caller: Principal, jobs: list[CompactionJob]) -> list[CompactionJob]:
        return [job for job in jobs if caller.may_use(job.partition.database)]

    @router.get(
        "/api/v1/compaction/status",
        **doc("The scheduler and compaction's settings", "compaction", {200: json_answer(COMPACTION_STATUS, "status")}),
    )
    def status() -> dict[str, Any]:
        caller = reader()
        active = visible(caller, runtime.catalog.list_compaction_jobs(active=True, limit=MAX_LIMIT))
        return {
            "success": True,
            **runtime.compaction_trigger.status(),
            "active_jobs": len(active),
            "settings": _settings_json(runtime),
        }

    @router.get(
        "/api/v1/compaction/stats",
        **doc("Totals of recent compaction jobs", "compaction", {200: json_answer(COMPACTION_STATS, "totals")}),
    )
    def stats() -> dict[str, Any]:
        caller = reader()
        jobs = visible(caller, runtime.catalog.list_compaction_jobs(limit=STATS_WINDOW))
        by_status: dict[str, int] = {}
        for job in jobs:
            by_status[job.status] = by_status.get(job.status, 0) + 1
        # Retention and delete journal their rewrites as jobs too; these totals are compaction's.
        swapped = [job for job in jobs if job.status in ("committed", "settled", "done") and job.kind == "compaction"]
        before = sum(job.input_bytes for job in swapped)
        after = sum(job.output_bytes for job in swapped)
        return {
            "success": True,
            "jobs": len(jobs),
            "jobs_by_status": by_status,
            "files_compacted": sum(len(job.input_keys) for job in swapped),
            "files_written": sum(len(job.output_keys) for job in swapped),
            "bytes_before": before,
            "bytes_after": after,
            "bytes_saved": before - after,
            "rows_before": sum(job.input_rows for job in swapped),
            "rows_after": sum(job.output_rows for job in swapped),
            "files_quarantined": sum(len(job.quarantined) for job in jobs),
            "window_jobs": STATS_WINDOW,
        }

    @router.get(
        "/api/v1/compaction/candidates",
        **doc(
            "Partitions the next run would compact",
            "compaction",
            {200: json_answer(_CANDIDATES, "the candidates")},
            parameters=[
                query_param("database", "only this database's"),
                query_param("measurement", "only this measurement's (needs database)"),
            ],
        ),
    )
    def candidates() -> dict[str, Any]:
        caller = reader()
        database, measurement = request.param("database"), request.param("measurement")
        _check_scope(caller, database, measurement)
        compactor = runtime.compactor
        upper = [c for tier in compactor.upper_tiers() for c in tier.candidates(database, measurement)]
        every = [*compactor.candidates(database, measurement), *upper]
        found = [c for c in every if caller.may_use(c.partition.database)]
        return {"success": True, "candidates": [c.to_json() for c in found], "count": len(found)}

    @router.get(
        "/api/v1/compaction/jobs",
        **doc("Jobs running now", "compaction", {200: json_answer(_JOBS, "the jobs")}, parameters=[LIMIT]),
    )
    def jobs() -> dict[str, Any]:
        caller = reader()
        active = visible(caller, runtime.catalog.list_compaction_jobs(active=True, limit=limit()))
        return {"success": True, "jobs": [job_json(job) for job in active], "count": len(active)}

    @router.get(
        "/api/v1/compaction/history",
        **doc("Recent jobs, newest first", "compaction", {200: json_answer(_JOBS, "the jobs")}, parameters=[LIMIT]),
    )
    def history() -> dict[str, Any]:
        caller = reader()
        recent = visible(caller, runtime.catalog.list_compaction_jobs(limit=limit()))
        return {"success": True, "jobs": [job_json(job) for job in recent], "count": len(recent)}

    @router.post(
        "/api/v1/compaction/trigger",
        **doc(
            "Start a compaction run now (admin), in the background",
            "compaction",
            {202: json_answer(_TRIGGERED, "started")},
            body=json_body(_SCOPE, required=False, example={"database": "metrics"}),
        ),
    )
    def trigger() -> Response[Any]:
        caller = request.caller("admin")
        body = request.json()
        database, measurement = body.get("database"), body.get("measurement")
        _check_scope(caller, database, measurement)
        started = runtime.compaction_trigger.trigger(database, measurement)
        return Response(202, "application/json", json.dumps({"success": True, **started}, separators=(",", ":")))

    return router


def _check_scope(caller: Principal, database: str | None, measurement: str | None) -> None:
    """A run or listing limited to a database (which the caller may use) or one of its measurements."""
    if database is not None:
        check_database(database)
        caller.require_database(database)
    if measurement is not None:
        check_measurement(measurement)
        if database is None:
            raise BadRequest("'measurement' needs 'database'")
