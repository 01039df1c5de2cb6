"""Where the data lives: the data bucket (Parquet, claim-check objects, handed-off results) and the
tokens, catalog and leases tables (docs/deploy.md says what each holds).

Backup is one window for both: the tables keep point-in-time recovery for ``RECOVERY_WINDOW``,
and the bucket is versioned and keeps a deleted or replaced object's versions exactly as long,
so a catalog restored to any moment of the window finds every file it lists (docs/deploy.md,
"Backup and restore").
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from arcs import envvars
from infra.function import ArcsFunction
from infra.nag import acknowledge, logical_ref

# These mirror the core (infra imports only arcs.envvars); tests/infra checks they agree with
# arcs.adapters.aws.queue.claim_key, arcs.layout.result_key and arcs.adapters.aws.dynamo_table.TTL_ATTRIBUTE.
SYSTEM_DIR = "_arcs"
CLAIMS_DIR = "claims"
RESULTS_DIR = "results"
TTL_ATTRIBUTE = "expires_at"
#: A claim-check object outlives its message: SQS keeps messages 14 days at most.
CLAIM_EXPIRY = Duration.days(15)
#: A handed-off result is fetched right after the query (its URL expires in minutes); the day is
#: S3's shortest lifecycle expiry.
RESULT_EXPIRY = Duration.days(1)
#: Corrupt data files compaction moved aside (``arcs.layout.quarantine_key``): kept for a person to look at.
QUARANTINE_DIR = "quarantine"
IMPORTS_DIR = "imports"
#: Bulk imports' status records and uploaded files: kept a day longer than a write marker (15 days),
#: so an import id is remembered as long as its chunks' markers are.
IMPORT_EXPIRY = Duration.days(16)
QUARANTINE_EXPIRY = Duration.days(90)
#: DynamoDB's longest point-in-time recovery period; the bucket keeps old versions as long.
RECOVERY_WINDOW = Duration.days(35)
#: Old versions of staging objects (claim checks, handed-off results) are no backup: a day.
STAGING_NONCURRENT_EXPIRY = Duration.days(1)


def system_prefix(prefix: str, folder: str) -> str:
    """The key prefix of one system folder (``{prefix}/_arcs/{folder}/``)."""
    head = prefix.strip("/")
    return f"{head}/{SYSTEM_DIR}/{folder}/" if head else f"{SYSTEM_DIR}/{folder}/"


def claims_prefix(prefix: str) -> str:
    """The key prefix of claim-check objects (``{prefix}/_arcs/claims/``)."""
    return system_prefix(prefix, CLAIMS_DIR)


def results_prefix(prefix: str) -> str:
    """The key prefix of query results too big for a Lambda response (``{prefix}/_arcs/results/``)."""
    return system_prefix(prefix, RESULTS_DIR)


class ArcsStorage(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, prefix: str = "") -> None:
        super().__init__(scope, construct_id)
        self.prefix = prefix.strip("/")
        self.claims_prefix = claims_prefix(self.prefix)
        self.results_prefix = results_prefix(self.prefix)
        self.imports_prefix = system_prefix(self.prefix, IMPORTS_DIR)

        self.bucket = s3.Bucket(
            self,
            "Data",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            # Compaction, retention and deletes remove files the catalog listed until then: their
            # versions stay for the recovery window, so a restored catalog finds its files.
            versioned=True,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=RECOVERY_WINDOW,
                    expired_object_delete_marker=True,
                ),
                s3.LifecycleRule(
                    id="expire-claim-checks",
                    prefix=self.claims_prefix,
                    expiration=CLAIM_EXPIRY,
                    noncurrent_version_expiration=STAGING_NONCURRENT_EXPIRY,
                ),
                s3.LifecycleRule(
                    id="expire-handed-off-results",
                    prefix=self.results_prefix,
                    expiration=RESULT_EXPIRY,
                    noncurrent_version_expiration=STAGING_NONCURRENT_EXPIRY,
                ),
                s3.LifecycleRule(
                    id="expire-imports",
                    prefix=self.imports_prefix,
                    expiration=IMPORT_EXPIRY,
                    noncurrent_version_expiration=STAGING_NONCURRENT_EXPIRY,
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
            ],
        )
        self.quarantine_prefix = system_prefix(self.prefix, QUARANTINE_DIR)
        self.bucket.add_lifecycle_rule(
            id="expire-quarantine", prefix=self.quarantine_prefix, expiration=QUARANTINE_EXPIRY
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Server access logs are not enabled by default: ingest and compaction create and delete many "
            "objects, and the log volume would rival the data. Use CloudTrail S3 data events for audits.",
        )

        # Tokens never expire by TTL (an expired token stays listed until deleted); write markers,
        # commit records, run histories, leases and finished jobs do. "Catalog" keeps the logical id
        # the one table of earlier versions had, so an update keeps the catalog's data in place.
        self.tokens_table = self._table("Tokens", ttl=False)
        self.catalog_table = self._table("Catalog", ttl=True)
        self.leases_table = self._table("Leases", ttl=True)
        self._env_names = {
            "Tokens": envvars.TOKENS_TABLE,
            "Catalog": envvars.CATALOG_TABLE,
            "Leases": envvars.LEASES_TABLE,
        }

    def _table(self, construct_id: str, *, ttl: bool) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            construct_id,
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TTL_ATTRIBUTE if ttl else None,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True, recovery_period_in_days=int(RECOVERY_WINDOW.to_days())
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )

    def use_table(self, function: ArcsFunction, table: dynamodb.Table, *, write: bool) -> None:
        """Give ``function`` one table: its name in the environment, and reads (and writes) on it alone.

        The only way a function gets a table, so its environment names exactly what IAM lets it use.
        """
        function.function.add_environment(self._env_names[table.node.id], table.table_name)
        if write:
            table.grant_read_write_data(function.role)
        else:
            table.grant_read_data(function.role)

    def grant_data_access(self, role: iam.IRole, actions: list[str], reason: str) -> None:
        """Object ``actions`` on every data key, plus listing the bucket; data keys are not known at deploy time."""
        role.add_to_principal_policy(iam.PolicyStatement(actions=actions, resources=[self.bucket.arn_for_objects("*")]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn]))
        acknowledge(role, f"AwsSolutions-IAM5[Resource::<{logical_ref(self.bucket)}.Arn>/*]", reason)
