"""The AWS adapters wired: the boto3 clients they use, idempotent resource creation, and the parts
of a Lambda function's runtime built from settings.

``create_resources`` builds what the CDK app builds for real (bucket, queue with its dead-letter
queue, the tokens, catalog and leases tables): ``arcs local`` and the tests call it against a moto
server.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from arcs.adapters.aws.catalog import DynamoCatalog
from arcs.adapters.aws.dynamo_table import TTL_ATTRIBUTE
from arcs.adapters.aws.express import ExpressStore, duckdb_endpoint
from arcs.adapters.aws.objects import S3Store, error_code
from arcs.adapters.aws.queue import SqsWriteQueue
from arcs.adapters.aws.tokens import DynamoTokenStore
from arcs.errors import StorageFault

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.literals import BucketLocationConstraintType
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

    from arcs.query.engine import S3Access
    from arcs.settings import Settings

__all__ = [
    "AwsClients",
    "AwsParts",
    "AwsResources",
    "aws_runtime_parts",
    "create_resources",
    "lambda_invoker",
    "s3_access",
    "table_names",
]

# SQS keeps messages 4 days unless told otherwise; an accepted write must outlive any outage.
MAX_RETENTION_S = 14 * 24 * 3600
SQS_MAX_MESSAGE_BYTES = 1024 * 1024


class _LazyClient:
    """Stands for a boto3 client and makes it on first use.

    Each function uses some of the three clients (the query function never SQS, a ``SELECT 1``
    none), and the first client made costs 50-70 ms of a cold start (service model, endpoint
    rules). The clients of one session share a lock: botocore sessions are not thread-safe.
    """

    def __init__(self, make: Callable[[], Any], lock: threading.Lock) -> None:
        self._make = make
        self._lock = lock
        self._client: Any = None

    def _get(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


@dataclass(frozen=True, slots=True)
class AwsClients:
    s3: S3Client
    sqs: SQSClient
    dynamodb: DynamoDBClient
    #: For an S3 Express directory bucket (docs/express.md); ``s3`` itself on an emulator.
    s3_express: S3Client

    @classmethod
    def create(
        cls,
        session: boto3.Session | None = None,
        *,
        endpoint_url: str | None = None,
        dynamodb_endpoint_url: str | None = None,
        region: str = "us-east-1",
    ) -> AwsClients:
        """``dynamodb_endpoint_url``: DynamoDB on another emulator than S3 and SQS (default: ``endpoint_url``)."""
        session = session or boto3.Session(region_name=region)
        config = Config(retries={"mode": "standard"})
        # Emulators serve every bucket on one host, so S3 must address buckets by path there. On AWS,
        # virtual hosts: presigned URLs then name the bucket's regional endpoint, not the global one
        # (which redirects for other regions); and they are signed with SigV4, not botocore's SigV2.
        s3_config = config.merge(
            Config(signature_version="s3v4", s3={"addressing_style": "path" if endpoint_url else "virtual"})
        )
        lock = threading.Lock()

        def lazy(service: str, config: Config, endpoint: str | None = endpoint_url) -> Any:
            return _LazyClient(
                lambda: session.client(service, endpoint_url=endpoint, region_name=region, config=config),  # type: ignore[call-overload]
                lock,
            )

        s3 = lazy("s3", s3_config)
        # Directory buckets authorize with CreateSession, which botocore does only with the signer
        # it picks itself (a forced s3v4 signs plain S3 requests). Emulators have no sessions and
        # take directory bucket names as plain buckets: the path-style client serves them there.
        express = s3 if endpoint_url else lazy("s3", config.merge(Config(s3={"addressing_style": "virtual"})))
        return cls(
            s3=s3,
            sqs=lazy("sqs", config),
            dynamodb=lazy("dynamodb", config, dynamodb_endpoint_url or endpoint_url),
            s3_express=express,
        )

    @classmethod
    def from_settings(cls, settings: Settings, session: boto3.Session | None = None) -> AwsClients:
        return cls.create(
            session,
            endpoint_url=settings.aws_endpoint_url,
            dynamodb_endpoint_url=settings.aws_dynamodb_endpoint_url,
            region=settings.aws_region,
        )

    def close(self) -> None:
        for client in (self.s3, self.sqs, self.dynamodb):
            client.close()
        if self.s3_express is not self.s3:
            self.s3_express.close()


class AwsResources(TypedDict):
    bucket: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str
    tokens_table: str
    catalog_table: str
    leases_table: str


def table_names(prefix: str) -> tuple[str, str, str]:
    """The tokens, catalog and leases tables ``create_resources`` makes for one name prefix."""
    return f"{prefix}-tokens", f"{prefix}-catalog", f"{prefix}-leases"


def _create_bucket(s3: S3Client, bucket: str) -> None:
    region = s3.meta.region_name
    try:
        if region in (None, "us-east-1"):
            s3.create_bucket(Bucket=bucket)
        else:
            location = cast("BucketLocationConstraintType", region)
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": location})
    except ClientError as exc:
        if error_code(exc) != "BucketAlreadyOwnedByYou":
            raise


def _ensure_queue(sqs: SQSClient, name: str, attributes: dict[QueueAttributeNameType, str]) -> tuple[str, str]:
    try:
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    except ClientError as exc:
        # An existing queue with other attributes: keep it and bring its attributes up to date.
        if error_code(exc) not in ("QueueAlreadyExists", "QueueNameExists", "AWS.SimpleQueueService.QueueNameExists"):
            raise
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _ensure_table(dynamodb: DynamoDBClient, table: str, *, ttl: bool) -> None:
    try:
        dynamodb.create_table(
            TableName=table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
        )
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
    dynamodb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    if not ttl:
        return
    status = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    # Enabling TTL twice is an error on AWS, so look first.
    if status.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        dynamodb.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )


def create_resources(
    clients: AwsClients | boto3.Session,
    bucket: str,
    queue_name: str,
    dlq_name: str,
    table_prefix: str,
    max_receive_count: int = 5,
    visibility_timeout_s: int = 30,
    express_bucket: str | None = None,
) -> AwsResources:
    """Create (or bring up to date) the bucket, queues and tables (``table_names``); safe to call again.

    ``express_bucket``: an emulator's stand-in for the directory bucket (a plain bucket there).
    """
    if isinstance(clients, boto3.Session):
        clients = AwsClients.create(clients, region=clients.region_name or "us-east-1")
    try:
        _create_bucket(clients.s3, bucket)
        if express_bucket:
            _create_bucket(clients.s3, express_bucket)
        dlq_url, dlq_arn = _ensure_queue(clients.sqs, dlq_name, {"MessageRetentionPeriod": str(MAX_RETENTION_S)})
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}
        attributes: dict[QueueAttributeNameType, str] = {
            "MaximumMessageSize": str(SQS_MAX_MESSAGE_BYTES),
            "VisibilityTimeout": str(visibility_timeout_s),
            "MessageRetentionPeriod": str(MAX_RETENTION_S),
            "RedrivePolicy": json.dumps(redrive),
        }
        queue_url, queue_arn = _ensure_queue(clients.sqs, queue_name, attributes)
        tokens, catalog, leases = table_names(table_prefix)
        # Tokens never expire by TTL (an expired token stays listed); markers, runs and leases do.
        _ensure_table(clients.dynamodb, tokens, ttl=False)
        _ensure_table(clients.dynamodb, catalog, ttl=True)
        _ensure_table(clients.dynamodb, leases, ttl=True)
    except (ClientError, BotoCoreError) as exc:
        raise StorageFault(f"cannot create the AWS resources: {exc}") from exc
    return AwsResources(
        bucket=bucket,
        queue_url=queue_url,
        queue_arn=queue_arn,
        dlq_url=dlq_url,
        dlq_arn=dlq_arn,
        tokens_table=tokens,
        catalog_table=catalog,
        leases_table=leases,
    )


def s3_access(session: boto3.Session, settings: Settings) -> S3Access:
    """What DuckDB's httpfs needs to read the bucket with this process's credentials."""
    from arcs.query.engine import S3Access  # lazy: the engine module loads DuckDB, which only queries need

    credentials = session.get_credentials()
    if credentials is None:
        raise StorageFault("no AWS credentials available to read the data bucket")
    frozen = credentials.get_frozen_credentials()
    if not frozen.access_key or not frozen.secret_key:
        raise StorageFault("incomplete AWS credentials: the data bucket cannot be read")
    endpoint = settings.aws_endpoint_url
    parsed = urlparse(endpoint) if endpoint else None
    return S3Access(
        region=settings.aws_region,
        endpoint=parsed.netloc if parsed else None,
        use_ssl=parsed.scheme == "https" if parsed else True,
        url_style="path" if parsed else "vhost",
        key_id=frozen.access_key,
        secret=frozen.secret_key,
        session_token=frozen.token,
        express=duckdb_endpoint(settings.express_bucket, settings.aws_region, endpoint)
        if settings.express_bucket
        else None,
    )


def lambda_invoker(session: boto3.Session, settings: Settings) -> Callable[[str, bytes], None]:
    """Invoke a Lambda function asynchronously (the client is made on first use)."""
    lock = threading.Lock()
    client = _LazyClient(
        lambda: session.client("lambda", endpoint_url=settings.aws_endpoint_url, region_name=settings.aws_region),
        lock,
    )

    def invoke(function_name: str, payload: bytes) -> None:
        try:
            client.invoke(FunctionName=function_name, InvocationType="Event", Payload=payload)
        except (ClientError, BotoCoreError) as exc:
            raise StorageFault(f"invoking {function_name} failed: {exc}") from exc

    return invoke


@dataclass(frozen=True, slots=True)
class AwsParts:
    """What a Lambda function's runtime is built on (``arcs.runtime.Runtime``)."""

    #: The data files' store: the directory bucket's when there is one, else the bucket's.
    store: S3Store | ExpressStore
    catalog: DynamoCatalog
    tokens: DynamoTokenStore
    queue: SqsWriteQueue
    #: The only roots DuckDB may open (the data files).
    allowed_roots: list[str]
    s3_access: Callable[[], S3Access]
    invoke: Callable[[str, bytes], None]

    @property
    def uploads(self) -> S3Store:
        """Where import files go: system keys, so the general-purpose bucket with S3 Express."""
        return self.store.general if isinstance(self.store, ExpressStore) else self.store


def aws_runtime_parts(settings: Settings, session: boto3.Session | None = None) -> AwsParts:
    """The adapters of the Lambda functions (and of ``arcs local``), from settings.

    A table the settings leave empty (the function was not given it) fails on first use.
    """
    session = session or boto3.Session(region_name=settings.aws_region)
    clients = AwsClients.from_settings(settings, session)
    general = S3Store(clients.s3, settings.bucket)
    store: S3Store | ExpressStore = general
    if settings.express_bucket:
        store = ExpressStore(S3Store(clients.s3_express, settings.express_bucket), general, settings.prefix)
    queue = SqsWriteQueue(clients.sqs, settings.queue_url, general, settings.prefix, settings.claim_check_bytes)
    # DuckDB may open the data files only: in the directory bucket when there is one.
    root = f"s3://{settings.data_bucket}/{settings.prefix + '/' if settings.prefix else ''}"
    return AwsParts(
        store=store,
        catalog=DynamoCatalog(clients.dynamodb, settings.catalog_table, settings.leases_table),
        tokens=DynamoTokenStore(clients.dynamodb, settings.tokens_table),
        queue=queue,
        allowed_roots=[root],
        s3_access=functools.partial(s3_access, session, settings),
        invoke=lambda_invoker(session, settings),
    )
