"""The one stack: storage, the functions (one construct each, as in ``functions/``), the REST API,
the schedules, the bootstrap token, the alarms and dashboard, and the Athena tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct
from layers.build import BUILD_DIR

from arcs import envvars
from infra.api import ArcsApi
from infra.athena import ArcsAthena
from infra.authorizer import ArcsAuthorizer
from infra.bootstrap import ArcsBootstrap
from infra.compact import ArcsTasks
from infra.express import ArcsExpress
from infra.failures import AsyncFailures
from infra.function import FUNCTIONS_DIR, FunctionDefaults, base_environment, reserve_concurrency
from infra.ingest import ArcsEdge, ArcsIngest
from infra.layers import ArcsLayers
from infra.monitoring import ArcsMonitoring
from infra.params import Parameters
from infra.query import ArcsQuery
from infra.storage import ArcsStorage

#: How long a verified token is trusted in a warm function (a revocation takes effect within 60 s).
TOKEN_CACHE_TTL_S = 60


class ArcsStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        parameters: Parameters | None = None,
        layers_dir: Path = BUILD_DIR,
        functions_dir: Path = FUNCTIONS_DIR,
        **kwargs: Any,
    ) -> None:
        """``parameters``: the deploy-time choices, validated (``infra/params.py``)."""
        super().__init__(scope, construct_id, **kwargs)
        params = parameters or Parameters()
        memory = params.memory_mb
        self.storage = ArcsStorage(self, "Storage", prefix=params.prefix)
        self.layers = ArcsLayers(self, "Layers", architecture=params.architecture, build_dir=layers_dir)
        # Asynchronous runs (schedules, the trigger route, the bootstrap) that failed for good.
        self.failures = AsyncFailures(self, "FailedRuns")
        defaults = FunctionDefaults(
            environment=base_environment(
                bucket_name=self.storage.bucket.bucket_name,
                prefix=self.storage.prefix,
                token_cache_ttl_s=TOKEN_CACHE_TTL_S,
                # One namespace per stack, so two stacks in an account keep their metrics apart.
                metrics_namespace=construct_id,
                # Every function: the API's candidates and status routes read them too.
                settings={envvars.COMPACTION_TIERS: params.compaction_tiers, envvars.SORT_KEYS: params.sort_keys},
            ),
            layers=self.layers.layers,
            architecture=self.layers.architecture,
            functions_dir=functions_dir,
        )
        self.ingest = ArcsIngest(
            self,
            "Ingest",
            storage=self.storage,
            defaults=defaults,
            ingest_memory_mb=memory["ingest"],
            ingest_timeout=Duration.seconds(params.ingest_timeout_s),
            batch_size=params.ingest_batch_size,
            max_batching_window=Duration.seconds(params.ingest_batch_window_s),
        )
        self.edge = ArcsEdge(
            self,
            "Edge",
            storage=self.storage,
            defaults=defaults,
            write_queue=self.ingest.queue,
            memory_size_mb=memory["edge"],
            ingest_memory_mb=memory["ingest"],
        )
        # Background tasks: compaction, retention, continuous queries and imports, on schedules or when
        # the query function's routes invoke it (the compaction trigger, an upload's completion).
        self.tasks = ArcsTasks(
            self,
            "Tasks",
            storage=self.storage,
            defaults=defaults,
            write_queue=self.ingest.queue,
            failures=self.failures,
            memory_size_mb=memory["tasks"],
            timeout=Duration.seconds(params.tasks_timeout_s),
        )
        self.query = ArcsQuery(
            self,
            "Query",
            storage=self.storage,
            defaults=defaults,
            write_queue=self.ingest.queue,
            memory_size_mb=memory["query"],
            ephemeral_storage_mb=params.query_ephemeral_storage_mb,
            query_budget_s=params.query_timeout_s,
            from_image=params.query_image,
            tasks_function_name=self.tasks.tasks.function.function_name,
        )
        self.tasks.allow_trigger(self.query.query.role)
        self.authorizer = ArcsAuthorizer(
            self, "Authorizer", storage=self.storage, defaults=defaults, memory_size_mb=memory["authorizer"]
        )
        # Optional S3 Express One Zone, the data files' bucket then: ingest writes them, compaction
        # rewrites them, the query function reads them and deletes or rewrites them for admins.
        zone = params.express_zone
        self.express = ArcsExpress(self, "Express", zone_id=zone) if zone else None
        if self.express is not None:
            for user in (self.ingest.ingest, self.tasks.tasks, self.query.query):
                self.express.grant_sessions(user.function, user.role)
        self.bootstrap = ArcsBootstrap(
            self,
            "Bootstrap",
            storage=self.storage,
            defaults=defaults,
            failures=self.failures,
            memory_size_mb=memory["bootstrap"],
        )
        # Only where asked for: a new account may not have the concurrency to reserve any.
        functions = {
            "edge": self.edge.edge.function,
            "ingest": self.ingest.ingest.function,
            "query": self.query.query.function,
            "authorizer": self.authorizer.authorizer_function.function,
            "tasks": self.tasks.tasks.function,
            "bootstrap": self.bootstrap.bootstrap.function,
        }
        for name, count in params.reserved_concurrency.items():
            reserve_concurrency(functions[name], count)
        self.api = ArcsApi(
            self,
            "Http",
            edge=self.edge.edge.function,
            query=self.query.query.function,
            query_timeout=self.query.query.timeout,
            token_authorizer=self.authorizer.token_authorizer,
            request_authorizer=self.authorizer.request_authorizer,
        )
        self.monitoring = ArcsMonitoring(
            self,
            "Monitoring",
            namespace=construct_id,
            write_queue=self.ingest.queue,
            dead_letter_queue=self.ingest.dead_letter_queue,
            failure_queue=self.failures.queue,
            queue_alarms=[self.ingest.dead_letter_alarm, self.failures.alarm],
            functions=functions,
            api=self.api.api,
            oldest_write_s=params.alarm_oldest_write_s,
            alarm_email=params.alarm_email,
            alarm_topic_arn=params.alarm_topic_arn,
        )
        self.athena = ArcsAthena(
            self,
            "Athena",
            # Athena reads the data where it is: the directory bucket when there is one.
            bucket_name=self.express.bucket_name if self.express is not None else self.storage.bucket.bucket_name,
            prefix=self.storage.prefix,
            database_name=params.glue_database or construct_id.lower().replace("-", "_"),
            tables=params.athena_tables or {},
        )

        CfnOutput(self, "ApiUrl", value=self.api.api.url, description="Base URL of the HTTP API (stage included)")
        CfnOutput(
            self,
            "AdminTokenSecretArn",
            value=self.bootstrap.secret.secret_arn,
            description="The bootstrap admin token: aws secretsmanager get-secret-value --secret-id <this>",
        )
        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name)
        CfnOutput(self, "TokensTableName", value=self.storage.tokens_table.table_name)
        CfnOutput(self, "CatalogTableName", value=self.storage.catalog_table.table_name)
        CfnOutput(self, "LeasesTableName", value=self.storage.leases_table.table_name)
        CfnOutput(self, "QueueUrl", value=self.ingest.queue.queue_url)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.ingest.dead_letter_queue.queue_url)
        CfnOutput(
            self,
            "FailedRunsQueueUrl",
            value=self.failures.queue.queue_url,
            description="Asynchronous runs (schedules, compaction trigger, bootstrap) that failed after their retries",
        )
        if self.express is not None:
            CfnOutput(self, "ExpressBucketName", value=self.express.bucket_name)
        CfnOutput(
            self,
            "DashboardName",
            value=self.monitoring.dashboard.dashboard_name,
            description="The CloudWatch dashboard of the stack's metrics and alarms",
        )
        CfnOutput(self, "GlueDatabase", value=self.athena.database_name, description="Athena: the data's tables")
