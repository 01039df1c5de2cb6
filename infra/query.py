"""Queries and the rest of the HTTP API (everything but writes). Mirrors ``functions/query``.

API Gateway invokes the function with a response stream (``infra/api.py``): its handler is
``stream_handler`` and Lambda starts it through ``arcs.http.runtime_api``, a runtime that streams
(``AWS_LAMBDA_EXEC_WRAPPER``), since Lambda's own Python runtime answers buffered only.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from layers.build import FUNCTION_LAYERS

from arcs import envvars
from arcs.http.streaming import QUERY_BUDGET_S, TIMEOUT_MARGIN_S, query_function_timeout_s
from arcs.settings import default_duckdb_memory_limit, default_max_result_bytes
from arcs.write.import_status import UPLOAD_SUFFIX as IMPORT_UPLOAD_SUFFIX
from infra.function import ArcsFunction, FunctionDefaults
from infra.nag import acknowledge, logical_ref
from infra.params import DEFAULT_MEMORY_MB, DEFAULT_QUERY_EPHEMERAL_MB
from infra.storage import SYSTEM_DIR, ArcsStorage

#: DuckDB may fill this share of /tmp with its spill; the rest keeps its home, extensions and
#: the files a request writes there.
SPILL_SHARE = 0.75


def query_memory_environment(memory_size_mb: int) -> dict[str, str]:
    """DuckDB's memory limit and the largest result, from the function's memory as the code derives
    them by default (half for DuckDB; a 32nd, at most 256 MiB, for a result), written out so the
    console shows them."""
    memory = memory_size_mb * 1024 * 1024
    return {
        envvars.DUCKDB_MEMORY_LIMIT: default_duckdb_memory_limit(memory),
        envvars.QUERY_MAX_RESULT_BYTES: str(default_max_result_bytes(memory)),
    }


def spill_environment(ephemeral_storage_mb: int) -> dict[str, str]:
    """DuckDB's spill limit from the function's /tmp (its temp directory is under ``ARCS_WORK_DIR``,
    in /tmp): without one, a spill that outgrows /tmp fails on a full disk instead of DuckDB's error."""
    return {envvars.DUCKDB_MAX_TEMP_SIZE: f"{int(ephemeral_storage_mb * SPILL_SHARE)}MiB"}


def duckdb_threads(memory_size_mb: int) -> int:
    """Threads for remote Parquet reads: 4 x the vCPUs the memory buys (DuckDB 1.5 reads S3 synchronously)."""
    vcpus = max(1, min(6, round(memory_size_mb / 1769)))
    return 4 * vcpus


#: The wrapper Lambda runs the Python runtime's command through: the core layer's copy of
#: ``src/arcs/lambda_streaming_runtime`` (layers land under /opt; a layer's ``python/`` is /opt/python).
STREAMING_WRAPPER = "/opt/python/arcs/lambda_streaming_runtime"


def query_timeout(memory_size_mb: int, budget_s: float = QUERY_BUDGET_S) -> Duration:
    """The function's timeout: a query's budget, then time to stream the largest result it may answer."""
    return Duration.seconds(query_function_timeout_s(default_max_result_bytes(memory_size_mb * 1024 * 1024), budget_s))


class ArcsQuery(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        write_queue: sqs.IQueue,
        memory_size_mb: int = DEFAULT_MEMORY_MB["query"],
        ephemeral_storage_mb: int = DEFAULT_QUERY_EPHEMERAL_MB,
        query_budget_s: int = QUERY_BUDGET_S,
        timeout: Duration | None = None,
        from_image: bool = False,
        tasks_function_name: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        timeout = timeout or query_timeout(memory_size_mb, query_budget_s)
        self.query = ArcsFunction(
            self,
            "Query",
            folder="query",
            handler="handler.stream_handler",
            description="HTTP queries (DuckDB over Parquet) and the rest of the API but writes",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
            layers=FUNCTION_LAYERS["query"],
            ephemeral_storage_mb=ephemeral_storage_mb,
            # The container image: 10 GB instead of layers' 250 MB, for builds with more in them.
            image=from_image,
            environment={
                **query_memory_environment(memory_size_mb),
                **spill_environment(ephemeral_storage_mb),
                envvars.DUCKDB_THREADS: str(duckdb_threads(memory_size_mb)),
                # Interrupt a query before its stream idles out or the function is killed: the
                # caller gets a clear error (the rest of the timeout streams a large result).
                envvars.QUERY_TIMEOUT_S: str(min(query_budget_s, max(timeout.to_seconds() - TIMEOUT_MARGIN_S, 1))),
                # Lambda starts the runtime through it: arcs.http.runtime_api, which streams (the image's
                # entry point starts that runtime itself: container/entrypoint.sh).
                **({} if from_image else {envvars.AWS_LAMBDA_EXEC_WRAPPER: STREAMING_WRAPPER}),
                # POST /api/v1/compaction/trigger invokes it asynchronously.
                **({envvars.TASKS_FUNCTION: tasks_function_name} if tasks_function_name else {}),
                # A continuous query's manual execute writes its results through the write path.
                envvars.QUEUE_URL: write_queue.queue_url,
            },
        )
        self._grant_objects(storage)
        write_queue.grant_send_messages(self.query.role)
        # The token routes manage tokens; databases, retention policies and continuous queries live in
        # the catalog; a delete rewrites partitions under their leases and lists compaction jobs.
        for table in (storage.tokens_table, storage.catalog_table, storage.leases_table):
            storage.use_table(self.query, table, write=True)

    def _grant_objects(self, storage: ArcsStorage) -> None:
        """S3 by key pattern: the data it serves and its own system folders, nothing else of the bucket.

        Data files (DuckDB reads them; an admin's delete or retention rewrites them, a database drop
        removes them) are the keys shaped as ``arcs.layout.data_key`` makes them, under the stack's
        prefix. IAM's ``*`` spans ``/``, so a quarantined copy under ``_arcs/`` has that shape too:
        an explicit deny keeps it. Of the system folders, the function writes the results it hands
        off (and reads them, for their presigned URLs) and the claim checks of a continuous query's
        manual execute, and deletes nothing: a claim check stands for an acknowledged write until
        ingest commits it.
        """
        role = self.query.role
        data = data_pattern(storage.prefix)
        system = f"{storage.prefix}/{SYSTEM_DIR}/*" if storage.prefix else f"{SYSTEM_DIR}/*"
        for actions, pattern in (
            (["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], data),
            (["s3:GetObject", "s3:PutObject"], f"{storage.results_prefix}*"),
            (["s3:PutObject"], f"{storage.claims_prefix}*"),
            # Import uploads: their status records, the presigned PUTs (and multipart uploads) it
            # signs and the size of what arrived; of them it deletes only an uploaded file refused
            # for its size, never a status record.
            (["s3:GetObject", "s3:PutObject"], f"{storage.imports_prefix}*"),
            (["s3:DeleteObject"], f"{storage.imports_prefix}*{IMPORT_UPLOAD_SUFFIX}"),
        ):
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=actions, resources=[storage.bucket.arn_for_objects(pattern)])
            )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["s3:PutObject", "s3:DeleteObject"],
                resources=[storage.bucket.arn_for_objects(f"{system}.parquet")],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[storage.bucket.bucket_arn])
        )
        bucket = logical_ref(storage.bucket)
        for pattern in (
            data,
            f"{storage.results_prefix}*",
            f"{storage.claims_prefix}*",
            f"{storage.imports_prefix}*",
            f"{storage.imports_prefix}*{IMPORT_UPLOAD_SUFFIX}",
        ):
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{pattern}]",
                "Object keys are made at run time (databases, measurements, hours, result ids); the grant is "
                "the key shape of what this function serves. Which data a caller may touch is enforced by "
                "the SQL sandbox, token permissions and scopes.",
            )


def data_pattern(prefix: str) -> str:
    """An IAM object pattern of every data key under ``prefix``: ``{database}/{measurement}/{YYYY}/
    {MM}/{DD}/{HH}/{file}.parquet`` (``arcs.layout.data_key``)."""
    head = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return f"{head}*/*/????/??/??/??/*.parquet"
