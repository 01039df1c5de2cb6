"""Compaction routes (docs/compaction.md "Running it"): status, stats, candidates, jobs, history, trigger.

Permissions: the reads need ``read`` and show only databases in the caller's scopes (jobs and
candidates of other databases are never listed); the trigger needs ``admin``, because a run
rewrites data of every database it reaches. A trigger answers 202 at once: the run happens in
the background (the server's timer thread, or the compact function in AWS).
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.compaction.report import job_json
from arcs.errors import BadRequest
from arcs.names import check_database, check_measurement
from arcs.ports import CompactionJob
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.tokens import Principal

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
#: How many recent jobs the stats add up.
STATS_WINDOW = 1000


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
        raw = request.param("limit") or str(DEFAULT_LIMIT)
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            raise BadRequest(f"'limit' must be a whole number from 1 to {MAX_LIMIT}")
        return int(raw)

    def visible(caller: Principal, jobs: list[CompactionJob]) -> list[CompactionJob]:
        return [job for job in jobs if caller.may_use(job.partition.database)]

    def scope(caller: Principal, database: str | None, measurement: str | None) -> None:
        if database is not None:
            check_database(database)
            caller.require_database(database)
        if measurement is not None:
            check_measurement(measurement)
            if database is None:
                raise BadRequest("'measurement' needs 'database'")

    @router.get("/api/v1/compaction/status")
    def status() -> dict[str, Any]:
        caller = reader()
        active = visible(caller, runtime.catalog.list_compaction_jobs(active=True, limit=MAX_LIMIT))
        return {
            "success": True,
            **runtime.compaction_trigger.status(),
            "active_jobs": len(active),
            "settings": _settings_json(runtime),
        }

    @router.get("/api/v1/compaction/stats")
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

    @router.get("/api/v1/compaction/candidates")
    def candidates() -> dict[str, Any]:
        caller = reader()
        database, measurement = request.param("database"), request.param("measurement")
        scope(caller, database, measurement)
        compactor = runtime.compactor
        upper = [c for tier in compactor.upper_tiers() for c in tier.candidates(database, measurement)]
        every = [*compactor.candidates(database, measurement), *upper]
        found = [c for c in every if caller.may_use(c.partition.database)]
        return {"success": True, "candidates": [c.to_json() for c in found], "count": len(found)}

    @router.get("/api/v1/compaction/jobs")
    def jobs() -> dict[str, Any]:
        caller = reader()
        active = visible(caller, runtime.catalog.list_compaction_jobs(active=True, limit=limit()))
        return {"success": True, "jobs": [job_json(job) for job in active], "count": len(active)}

    @router.get("/api/v1/compaction/history")
    def history() -> dict[str, Any]:
        caller = reader()
        recent = visible(caller, runtime.catalog.list_compaction_jobs(limit=limit()))
        return {"success": True, "jobs": [job_json(job) for job in recent], "count": len(recent)}

    @router.post("/api/v1/compaction/trigger")
    def trigger() -> Response[Any]:
        caller = request.caller("admin")
        body = request.json()
        database, measurement = body.get("database"), body.get("measurement")
        scope(caller, database, measurement)
        started = runtime.compaction_trigger.trigger(database, measurement)
        return Response(202, "application/json", json.dumps({"success": True, **started}, separators=(",", ":")))

    return router
