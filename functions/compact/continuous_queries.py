"""EventBridge (a schedule, ``{"task": "continuous_queries"}``) -> every active continuous query's
closed windows (docs/continuous_queries.md). The compact function routes that task here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.runtime import lambda_runtime

TASK = "continuous_queries"
logger = Logger(service="arcs-continuous-queries")


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    task = event.get("task", TASK)
    if task != TASK:
        raise ValueError(f"this handler runs the {TASK!r} task, not {task!r}")
    summary = lambda_runtime().continuous_queries.run_due(datetime.now(UTC))
    logger.info("continuous queries ran", extra=summary.to_json())
    return {"task": TASK, **summary.to_json()}
