"""The tasks function and its EventBridge schedules. Mirrors ``functions/compact`` (its folder).

One function, ``Tasks``, runs the stack's background tasks; each rule sends it a constant event
naming its task (``functions/compact/handler.py`` dispatches on it):

=======================  ============================================  ==================
task                     what it does                                  default schedule
=======================  ============================================  ==================
``compaction``           merge an hour partition's small files         every 15 minutes
``continuous_queries``   run the continuous queries' closed windows    every minute
``retention``            remove partitions the policies let expire     hourly, at minute 17
=======================  ============================================  ==================

The event is exactly ``{"task": "<task>"}``. The trigger
route (``POST /api/v1/compaction/trigger``) invokes the same function asynchronously with no task:
a compaction run (``allow_trigger``); an upload's completion invokes it with ``{"task": "import"}``.

Failures: EventBridge invokes the function asynchronously, so a run that raises is Lambda's to
retry (``ASYNC_RETRIES``, while the event is younger than ``MAX_EVENT_AGE``), and then it goes to
the stack's failure queue (``infra/failures.py``) with the trigger route's failed runs. The rule
targets' own retry policy and dead-letter queue only see events Lambda did not accept.

Grants: compaction reads, writes and deletes data objects (the inputs a committed job replaced,
the outputs of a job that never committed, a corrupt file once it is quarantined); which keys it
deletes is the core's rule (docs/compaction.md), since IAM cannot name objects that exist only
after deployment. Continuous queries write their results through the write path: the write queue
and, for bodies above the claim-check threshold, claim-check objects. Claim checks are only ever
deleted by the ingest function once their write is committed; this function is denied that.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from layers.build import FUNCTION_LAYERS

from arcs import envvars
from infra.failures import AsyncFailures
from infra.function import ArcsFunction, FunctionDefaults
from infra.params import DEFAULT_MEMORY_MB
from infra.query import duckdb_threads
from infra.storage import ArcsStorage

HANDLER = "handler.handler"
#: One rule per entry, each sending ``{"task": <key>}``. Compaction: a run that stops at its time
#: budget leaves the rest to the next one, a quarter of an hour later; overlapping runs are safe
#: (a partition's lease keeps a second compactor off it). Continuous queries: a window runs once it
#: closed ``ARCS_CQ_DELAY_S`` ago, so a minute's rate keeps one-minute queries timely; a missed run
#: is caught up by the next (docs/continuous-queries.md).
DEFAULT_SCHEDULES: dict[str, events.Schedule] = {
    "compaction": events.Schedule.rate(Duration.minutes(15)),
    "continuous_queries": events.Schedule.rate(Duration.minutes(1)),
    # Policies count in days; an hourly run removes an hour partition within the hour it expires.
    "retention": events.Schedule.cron(minute="17"),
}
TASKS = tuple(DEFAULT_SCHEDULES)
TIMEOUT = Duration.minutes(15)  # Lambda's longest: a job that runs out is finished by the next run
#: A run starts no compaction job this close to the timeout, so the last one has time to finish.
LAST_JOB_MARGIN = Duration.minutes(5)
#: Held past the function's timeout: no second compactor takes a partition while this one may live.
LEASE_MARGIN = Duration.minutes(1)
#: Local disk for a job: its inputs, DuckDB's spill and one output at a time (Lambda's largest).
EPHEMERAL_STORAGE_MB = 10_240
#: A failed run is run again twice (Lambda's own default, written out) ...
ASYNC_RETRIES = 2
#: ... while its event is under an hour old: the schedules start a fresh one long before that.
MAX_EVENT_AGE = Duration.hours(1)
#: EventBridge's retries of an event Lambda did not accept, within the same hour.
DELIVERY_RETRIES = 2


def tasks_environment(memory_size_mb: int, timeout: Duration) -> dict[str, str]:
    """The tasks function's own variables, derived from its memory and timeout."""
    vcpus = max(1, min(6, round(memory_size_mb / 1769)))  # Lambda: 1,769 MB buys one vCPU
    budget_s = max(60, int(timeout.to_seconds() - LAST_JOB_MARGIN.to_seconds()))
    half = f"{memory_size_mb // 2}MB"
    return {
        # Half: while DuckDB holds its sort, an output file (up to the target size) is read into
        # memory to be uploaded.
        envvars.COMPACTION_MEMORY_LIMIT: half,
        envvars.COMPACTION_THREADS: str(vcpus),
        envvars.COMPACTION_TIME_BUDGET_S: str(budget_s),
        envvars.COMPACTION_LEASE_S: str(int(timeout.to_seconds() + LEASE_MARGIN.to_seconds())),
        # Continuous queries run in the same (warm) environments: their engine gets the same half,
        # the query function's threads for S3 reads, and as long as a compaction job may start.
        envvars.DUCKDB_MEMORY_LIMIT: half,
        envvars.DUCKDB_THREADS: str(duckdb_threads(memory_size_mb)),
        envvars.QUERY_TIMEOUT_S: str(budget_s),
    }


class ArcsTasks(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        write_queue: sqs.IQueue,
        failures: AsyncFailures,
        memory_size_mb: int = DEFAULT_MEMORY_MB["tasks"],
        timeout: Duration = TIMEOUT,
        ephemeral_storage_mb: int = EPHEMERAL_STORAGE_MB,
        schedules: dict[str, events.Schedule] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        chosen = {**DEFAULT_SCHEDULES, **(schedules or {})}
        unknown = sorted(set(chosen) - set(TASKS))
        if unknown:
            raise ValueError(f"unknown scheduled tasks {unknown}; known: {list(TASKS)}")

        self.tasks = ArcsFunction(
            self,
            "Tasks",
            folder="compact",
            handler=HANDLER,
            description="Background tasks: compaction, retention, continuous queries and imports",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
            layers=FUNCTION_LAYERS["tasks"],
            ephemeral_storage_mb=ephemeral_storage_mb,
            environment={
                **tasks_environment(memory_size_mb, timeout),
                # Continuous queries' results go through the write path, as any write does.
                envvars.QUEUE_URL: write_queue.queue_url,
            },
        )
        role = self.tasks.role
        # Reads partitions, writes merged files (and claim-check objects for big results), deletes
        # the files it replaced.
        storage.grant_data_access(
            role,
            ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Compaction reads, rewrites and deletes Parquet files under any database/measurement/hour prefix "
            "of the data bucket (and quarantines corrupt ones): the keys are data, not known at deploy time. "
            "Deleting claim checks is denied.",
        )
        # A claim check stands for an acknowledged write until the ingest function commits it.
        role.add_to_principal_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["s3:DeleteObject"],
                resources=[storage.bucket.arn_for_objects(f"{storage.claims_prefix}*")],
            )
        )
        write_queue.grant_send_messages(role)
        # Compaction, retention and continuous queries: the catalog, and the partitions' leases.
        storage.use_table(self.tasks, storage.catalog_table, write=True)
        storage.use_table(self.tasks, storage.leases_table, write=True)

        # Schedules and the trigger route alike: a run that keeps failing is kept, not dropped.
        failures.keep(self.tasks.function, retry_attempts=ASYNC_RETRIES, max_event_age=MAX_EVENT_AGE)
        self.rules: dict[str, events.Rule] = {}
        for task in TASKS:
            rule = events.Rule(
                self,
                "".join(part.capitalize() for part in task.split("_")),
                description=f"Arc Serverless: {task.replace('_', ' ')}",
                schedule=chosen[task],
            )
            rule.add_target(
                targets.LambdaFunction(
                    self.tasks.function,
                    event=events.RuleTargetInput.from_object({"task": task}),
                    # Delivery only: once Lambda accepted the event, these never see the run.
                    retry_attempts=DELIVERY_RETRIES,
                    max_event_age=MAX_EVENT_AGE,
                    dead_letter_queue=failures.queue,
                )
            )
            self.rules[task] = rule

    def allow_trigger(self, role: iam.IRole) -> None:
        """Let ``role`` start a compaction run (the trigger route invokes the function asynchronously)."""
        # The function itself only (grant_invoke would add every version and alias, ":*").
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.tasks.function.function_arn])
        )
