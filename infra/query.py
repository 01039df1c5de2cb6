"""Queries and the rest of the HTTP API (everything but writes). Mirrors ``functions/query``."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from layers.build import FUNCTION_LAYERS

from arcs import envvars
from arcs.settings import default_duckdb_memory_limit, default_max_result_bytes
from infra.function import API_TIMEOUT, ArcsFunction, FunctionDefaults
from infra.params import DEFAULT_MEMORY_MB, DEFAULT_QUERY_EPHEMERAL_MB
from infra.storage import ArcsStorage

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


QUERY_TIMEOUT_MARGIN_S = 4


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
        timeout: Duration = API_TIMEOUT,
        from_image: bool = False,
        compact_function_name: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        self.query = ArcsFunction(
            self,
            "Query",
            folder="query",
            handler="handler.handler",
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
                # Interrupt a query before the function itself is killed, so the caller gets a clear error.
                envvars.QUERY_TIMEOUT_S: str(max(timeout.to_seconds() - QUERY_TIMEOUT_MARGIN_S, 1)),
                # POST /api/v1/compaction/trigger invokes it asynchronously.
                **({envvars.COMPACT_FUNCTION: compact_function_name} if compact_function_name else {}),
                # A continuous query's manual execute writes its results through the write path.
                envvars.QUEUE_URL: write_queue.queue_url,
            },
        )
        # Reads for queries (DuckDB's httpfs: GET, HEAD). The admin routes change data too:
        # DELETE /api/v1/databases/{name} removes a dropped database's objects, POST /api/v1/delete
        # writes each affected file again without the deleted rows, and results too big to answer
        # inline, like a continuous query's manual-execute claim checks, are written under _arcs/.
        storage.grant_data_access(
            self.query.role,
            ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Queries read Parquet files under any database/measurement/hour prefix of the data bucket; an "
            "admin's delete rewrites them and a database drop removes them (keys are made at run time); "
            "which data a caller may touch is enforced by the SQL sandbox, token permissions and scopes.",
        )
        write_queue.grant_send_messages(self.query.role)
        # The token routes manage tokens; databases, retention policies and continuous queries live in
        # the catalog; a delete rewrites partitions under their leases and lists compaction jobs.
        for table in (storage.tokens_table, storage.catalog_table, storage.leases_table):
            storage.use_table(self.query, table, write=True)
