"""EventBridge schedule (or the trigger route's asynchronous invoke) -> one compaction run.

A scheduled event runs over every candidate partition; the trigger route's payload may name a
database and measurement. The run stops starting jobs after ``ARCS_COMPACTION_TIME_BUDGET_S``
(the stack sets it below the function's timeout); what is left waits for the next run, and a run
cut short by the timeout is finished by the next one (docs/compaction.md).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.runtime import lambda_runtime

logger = Logger(service="arcs-compact")
TRIGGER_SOURCE = "arcs.trigger"


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
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
