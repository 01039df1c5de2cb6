"""The compact function and its EventBridge schedules. Mirrors ``functions/compact``.

One function serves three schedules; each rule sends it a constant event naming its task:

=======================  =========================================  ===============================
task                     what it does                               default schedule
=======================  =========================================  ===============================
``compaction``           merge an hour partition's small files      hourly, at minute 10
``retention``            delete data older than the policies allow  daily, 03:17 UTC
``continuous_queries``   run the continuous queries that are due    every 5 minutes
=======================  =========================================  ===============================

The event is exactly ``{"task": "<task>"}``; the handler is ``functions/compact/handler.py``'s
``handler``. Compaction merges in DuckDB and spills to ``/tmp``, hence the DuckDB layer and the
larger ephemeral storage.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from layers.build import FUNCTION_LAYERS

from infra.function import ArcsFunction, FunctionDefaults
from infra.nag import acknowledge
from infra.storage import ArcsStorage

HANDLER = "handler.handler"
TASKS = ("compaction", "retention", "continuous_queries")
DEFAULT_SCHEDULES = {
    "compaction": events.Schedule.cron(minute="10"),
    "retention": events.Schedule.cron(hour="3", minute="17"),
    "continuous_queries": events.Schedule.rate(Duration.minutes(5)),
}
TIMEOUT = Duration.minutes(15)  # Lambda's longest: a job that runs out resumes on the next run


def handler_exists(defaults: FunctionDefaults) -> bool:
    return (defaults.functions_dir / "compact" / "handler.py").is_file()


class ArcsCompact(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        memory_size_mb: int = 4096,
        timeout: Duration = TIMEOUT,
        ephemeral_storage_mb: int = 10240,
        schedules: dict[str, events.Schedule] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.compact = ArcsFunction(
            self,
            "Compact",
            folder="compact",
            handler=HANDLER,
            description="Scheduled storage work: compaction, retention, continuous queries",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
            layers=FUNCTION_LAYERS["compact"],
            ephemeral_storage_mb=ephemeral_storage_mb,
        )
        # Reads partitions, writes merged files, deletes the files it replaced and expired data.
        storage.grant_data_access(
            self.compact.role,
            ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Compaction and retention rewrite and delete Parquet files under any database/measurement/hour "
            "prefix of the data bucket (and quarantine corrupt ones): the keys are data, not known at deploy time.",
        )
        storage.table.grant_read_write_data(self.compact.role)

        # A schedule whose invocation failed twice leaves its event here rather than vanishing.
        self.dead_letter_queue = sqs.Queue(
            self,
            "FailedSchedules",
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        acknowledge(
            self.dead_letter_queue,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter queue: EventBridge's, for schedule events the compact function "
            "failed to take (target DeadLetterConfig), which cdk-nag only recognizes for SQS redrive policies.",
        )
        self.rules: dict[str, events.Rule] = {}
        chosen = {**DEFAULT_SCHEDULES, **(schedules or {})}
        unknown = sorted(set(chosen) - set(TASKS))
        if unknown:
            raise ValueError(f"unknown scheduled tasks {unknown}; known: {list(TASKS)}")
        for task in TASKS:
            rule = events.Rule(
                self,
                "".join(part.capitalize() for part in task.split("_")),
                description=f"Arc Serverless: {task.replace('_', ' ')}",
                schedule=chosen[task],
            )
            rule.add_target(
                targets.LambdaFunction(
                    self.compact.function,
                    event=events.RuleTargetInput.from_object({"task": task}),
                    retry_attempts=2,
                    max_event_age=Duration.hours(1),
                    dead_letter_queue=self.dead_letter_queue,
                )
            )
            self.rules[task] = rule
