"""The write path: the edge function behind API Gateway (``ArcsEdge``), and the queue with the SQS
consumer that writes Parquet (``ArcsIngest``).

Mirrors ``functions/ingest`` (``edge.py`` and ``handler.py``).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from arcs import envvars
from arcs.settings import Settings
from arcs.write.import_status import RECORD_SUFFIX as IMPORT_RECORD_SUFFIX
from infra.alarms import queue_not_empty_alarm
from infra.function import API_TIMEOUT, ArcsFunction, FunctionDefaults
from infra.nag import acknowledge, logical_ref
from infra.params import DEFAULT_BATCH_SIZE, DEFAULT_BATCH_WINDOW_S, DEFAULT_INGEST_TIMEOUT_S, DEFAULT_MEMORY_MB
from infra.storage import ArcsStorage

#: SQS's largest message (1 MiB); bigger writes travel as claim-check objects in the bucket.
MAX_MESSAGE_BYTES = 1024 * 1024
RETENTION = Duration.days(14)  # SQS's maximum: an accepted write must outlive any outage
VISIBILITY_FACTOR = 6  # AWS: queue visibility timeout >= 6 x the consumer's timeout
INGEST_TIMEOUT = Duration.seconds(DEFAULT_INGEST_TIMEOUT_S)
#: How long Lambda gathers messages before invoking: bigger batches make fewer, larger files.
BATCHING_WINDOW = Duration.seconds(DEFAULT_BATCH_WINDOW_S)


#: A dense write decoded in memory takes about nine times its decompressed size (measured: a 99 MB
#: line-protocol body raised the write path's memory by 830 MiB), so a function may accept a body
#: of at most this share of its memory: more could end in an out-of-memory error after the edge
#: acknowledged it (the ingest function would then fail it until the dead-letter queue). Sparse
#: bodies grow far more per byte; the per-request cell limits bound them, and the minimum memory
#: of the two functions (infra/params.py) fits those.
WRITE_MEMORY_SHARE = 16


def max_decompressed_bytes(edge_memory_mb: int, ingest_memory_mb: int) -> int:
    """The decompressed size of one write that both the edge and ingest can hold, at most the
    runtime's own default (100 MiB). The edge applies it, on ingest's behalf too."""
    fits = min(edge_memory_mb, ingest_memory_mb) * 1024 * 1024 // WRITE_MEMORY_SHARE
    return min(Settings().max_decompressed_bytes, fits)


class ArcsIngest(Construct):
    """The write queue, its dead-letter queue and the ingest function that consumes it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        ingest_memory_mb: int = DEFAULT_MEMORY_MB["ingest"],
        ingest_timeout: Duration = INGEST_TIMEOUT,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_batching_window: Duration = BATCHING_WINDOW,
        max_receive_count: int = 5,
    ) -> None:
        super().__init__(scope, construct_id)
        # AWS's rule for an SQS event source: 6 x the function timeout, plus the batching window.
        visibility = Duration.seconds(
            VISIBILITY_FACTOR * ingest_timeout.to_seconds() + max_batching_window.to_seconds()
        )

        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetters",
            retention_period=RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.queue = sqs.Queue(
            self,
            "Writes",
            max_message_size_bytes=MAX_MESSAGE_BYTES,
            retention_period=RETENTION,
            visibility_timeout=visibility,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=max_receive_count),
        )
        # Messages here were acknowledged to a client and not ingested: someone must look.
        self.dead_letter_alarm = queue_not_empty_alarm(
            self,
            "DeadLettersAlarm",
            self.dead_letter_queue,
            "Acknowledged writes reached the dead-letter queue (poison or repeated failures).",
        )

        self.ingest = ArcsFunction(
            self,
            "Ingest",
            folder="ingest",
            handler="handler.handler",
            description="SQS consumer: queued writes become hour-partitioned Parquet files",
            defaults=defaults,
            memory_size_mb=ingest_memory_mb,
            timeout=ingest_timeout,
            environment={
                envvars.QUEUE_URL: self.queue.queue_url,
                envvars.INGEST_BATCH_MESSAGES: str(batch_size),
                envvars.INGEST_BATCH_WINDOW_S: str(int(max_batching_window.to_seconds())),
            },
        )
        self.ingest.function.add_event_source(
            event_sources.SqsEventSource(
                self.queue,
                batch_size=batch_size,
                max_batching_window=max_batching_window,
                report_batch_item_failures=True,
            )
        )
        # Data files, markers and claim objects (read, then deleted once committed).
        storage.grant_data_access(
            self.ingest.role,
            ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "The ingest function writes Parquet files under every database/measurement/hour prefix of the "
            "data bucket and deletes claim objects: object keys are data, not known at deploy time.",
        )
        storage.use_table(self.ingest, storage.catalog_table, write=True)


class ArcsEdge(Construct):
    """The edge function: the write routes' target, which validates a write and queues it."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        write_queue: sqs.IQueue,
        memory_size_mb: int = DEFAULT_MEMORY_MB["edge"],
        timeout: Duration = API_TIMEOUT,
        ingest_memory_mb: int = DEFAULT_MEMORY_MB["ingest"],
    ) -> None:
        super().__init__(scope, construct_id)
        self.edge = ArcsFunction(
            self,
            "Edge",
            folder="ingest",
            handler="edge.handler",
            description="HTTP writes: validate, then queue durably before answering 204",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
            environment={
                envvars.QUEUE_URL: write_queue.queue_url,
                envvars.MAX_DECOMPRESSED_BYTES: str(max_decompressed_bytes(memory_size_mb, ingest_memory_mb)),
            },
        )
        write_queue.grant_send_messages(self.edge.role)
        # Writes too big for a message go to the bucket first, only under the claims prefix.
        self.edge.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"],
                resources=[storage.bucket.arn_for_objects(f"{storage.claims_prefix}*")],
            )
        )
        # Schemas (and the databases they register) are checked and extended at the edge.
        storage.use_table(self.edge, storage.catalog_table, write=True)
        # A bulk import posted to the edge queues its chunks as writes (the ingest function stores
        # them); the edge reads (a retry's first run) and writes the import's status record, and
        # nothing else under the imports prefix: not the files uploaded beside the records.
        self.edge.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[storage.bucket.arn_for_objects(f"{storage.imports_prefix}*{IMPORT_RECORD_SUFFIX}")],
            )
        )
        acknowledge(
            self.edge.role,
            f"AwsSolutions-IAM5[Resource::<{logical_ref(storage.bucket)}.Arn>/{storage.claims_prefix}*]",
            "Claim-check objects have one key per write, all under the claims prefix: the prefix is the "
            "narrowest resource there is.",
        )
        acknowledge(
            self.edge.role,
            f"AwsSolutions-IAM5[Resource::<{logical_ref(storage.bucket)}.Arn>/{storage.imports_prefix}*"
            f"{IMPORT_RECORD_SUFFIX}]",
            "Import status records have one key per import id, all under the imports prefix: the prefix is "
            "the narrowest resource there is.",
        )
