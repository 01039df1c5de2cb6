"""The tasks function: EventBridge schedules (or an asynchronous invoke) -> one run of a background task.

The stack's rules send ``{"task": "compaction"}``, ``{"task": "continuous_queries"}`` or
``{"task": "retention"}``; an event without a task (the trigger route's) is a compaction run.

A compaction run covers every candidate partition; the trigger route's payload may name a
database and measurement. The run stops starting jobs after ``ARCS_COMPACTION_TIME_BUDGET_S``
(the stack sets it below the function's timeout); what is left waits for the next run, and a run
cut short by the timeout is finished by the next one (docs/compaction.md). A continuous-queries
run executes every active query's closed windows (docs/continuous-queries.md); a retention run
applies every active retention policy and the rules derived from the continuous queries'
``retention_days`` and ``delete_source_after_days`` (docs/retention-and-delete.md);
``{"task": "retention", "dry_run": true}`` only counts what it would remove. ``{"task": "import",
"database": ..., "import_id": ...}`` (the import route's completion) imports a file uploaded to
the bucket (docs/import.md).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.runtime import lambda_runtime

logger = Logger(service="arcs-tasks")
TRIGGER_SOURCE = "arcs.trigger"
COMPACTION = "compaction"
CONTINUOUS_QUERIES = "continuous_queries"
RETENTION = "retention"
IMPORT = "import"


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    task = event.get("task", COMPACTION)
    if task == CONTINUOUS_QUERIES:
        summary = lambda_runtime().continuous_queries.run_due(datetime.now(UTC))
        logger.info("continuous queries ran", extra=summary.to_json())
        return {"task": CONTINUOUS_QUERIES, **summary.to_json()}
    if task == RETENTION:
        ran = lambda_runtime().retention.run_due(dry_run=event.get("dry_run") is True).to_json()
        logger.info("retention ran", extra=ran)
        return {"task": RETENTION, **ran}
    if task == IMPORT:
        from arcs.write.imports.store import run_uploaded  # lazy: the decoders, for this task only

        status = run_uploaded(lambda_runtime(), str(event.get("database")), str(event.get("import_id")))
        shown = status.public() if status is not None else {"state": "unknown"}
        logger.info("import ran", extra={"import_id": event.get("import_id"), "state": shown["state"]})
        return {"task": IMPORT, "state": shown["state"], "rows_imported": shown.get("rows_imported", 0)}
    if task != COMPACTION:
        raise ValueError(
            f"unknown task {task!r}; this function runs {COMPACTION!r}, {CONTINUOUS_QUERIES!r}, {RETENTION!r}, "
            f"{IMPORT!r}"
        )
    scope = event if event.get("source") == TRIGGER_SOURCE else {}
    report = lambda_runtime().compactor.run(scope.get("database"), scope.get("measurement"))
    logger.info(
        "compaction run",
        extra={
            "source": event.get("source"),
            "jobs": len(report.jobs),
            "recovered": len(report.recovered),
            "inputs_deleted": report.inputs_deleted,
            "skipped": len(report.skipped),
        },
    )
    return report.to_json()
