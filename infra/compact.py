"""Compaction: the compact function and the EventBridge rule that runs it. Mirrors ``functions/compact``.

Grants: it reads and writes data objects and deletes them (the inputs a committed job replaced,
the outputs of a job that never committed, a corrupt file once it is in the quarantine); which
keys it deletes is the core's rule (docs/compaction.md), since IAM cannot name objects that exist
only after deployment. What IAM can say, it says: no write or delete of the write path's
claim-check objects.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from arcs import envvars
from infra.function import ArcsFunction, FunctionDefaults
from infra.nag import acknowledge, logical_ref
from infra.storage import ArcsStorage

COMPACT_TIMEOUT = Duration.minutes(15)  # Lambda's longest
#: A run starts no job this close to the timeout, so the last one has time to finish.
LAST_JOB_MARGIN = Duration.minutes(5)
SCHEDULE = Duration.minutes(15)
#: Local disk for a job: its inputs, DuckDB's spill and one output at a time (Lambda's largest).
EPHEMERAL_STORAGE_MB = 10_240


class ArcsCompact(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        memory_size_mb: int = 4096,
        timeout: Duration = COMPACT_TIMEOUT,
        schedule: Duration = SCHEDULE,
    ) -> None:
        super().__init__(scope, construct_id)
        vcpus = max(1, min(6, round(memory_size_mb / 1769)))
        self.compact = ArcsFunction(
            self,
            "Compact",
            folder="compact",
            handler="handler.handler",
            description="Scheduled compaction: an hour partition's small files become a few large ones",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
            environment={
                # Half: while DuckDB holds its sort, an output file (up to the target size) is read
                # into memory to be uploaded.
                envvars.COMPACTION_MEMORY_LIMIT: f"{memory_size_mb // 2}MB",
                envvars.COMPACTION_THREADS: str(vcpus),
                envvars.COMPACTION_TIME_BUDGET_S: str(
                    max(60, int(timeout.to_seconds() - LAST_JOB_MARGIN.to_seconds()))
                ),
                # Held past the function's own timeout: no second compactor while this one may live.
                envvars.COMPACTION_LEASE_S: str(int(timeout.to_seconds()) + 60),
            },
        )
        function = self.compact.function.node.default_child
        assert isinstance(function, lambda_.CfnFunction)
        function.ephemeral_storage = lambda_.CfnFunction.EphemeralStorageProperty(size=EPHEMERAL_STORAGE_MB)

        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runs Arc Serverless compaction",
            schedule=events.Schedule.rate(schedule),
            # A failed run is not retried: the next one recovers whatever it left.
            targets=[targets.LambdaFunction(self.compact.function, retry_attempts=0)],
        )

        bucket = storage.bucket
        self.compact.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources=[bucket.arn_for_objects("*")]
            )
        )
        self.compact.role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])
        )
        # The write path's claim-check objects are none of compaction's business.
        self.compact.role.add_to_principal_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["s3:PutObject", "s3:DeleteObject"],
                resources=[bucket.arn_for_objects(f"{storage.claims_prefix}*")],
            )
        )
        acknowledge(
            self.compact.role,
            f"AwsSolutions-IAM5[Resource::<{logical_ref(bucket)}.Arn>/*]",
            "Compaction reads, writes and deletes Parquet files under every database/measurement/hour prefix "
            "and writes the quarantine; keys are data, not known at deploy time. Claim checks are denied.",
        )
        storage.table.grant_read_write_data(self.compact.role)

    def allow_trigger(self, role: iam.IRole) -> None:
        """Let ``role`` start a run (the trigger route invokes the function asynchronously)."""
        # The function itself only (grant_invoke would add every version and alias, ":*").
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[self.compact.function.function_arn])
        )
