"""The one stack: storage, the functions (one construct each, as in ``functions/``), the REST API,
the schedules, the bootstrap token and the Athena tables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct
from layers.build import BUILD_DIR, DEFAULT_ARCH

from infra.api import ArcsApi
from infra.athena import ArcsAthena
from infra.authorizer import ArcsAuthorizer
from infra.bootstrap import ArcsBootstrap
from infra.compact import ArcsCompact
from infra.express import ArcsExpress
from infra.function import FUNCTIONS_DIR, FunctionDefaults, base_environment
from infra.ingest import BATCHING_WINDOW, ArcsIngest
from infra.layers import ArcsLayers
from infra.query import DEFAULT_MEMORY_MB, ArcsQuery
from infra.storage import ArcsStorage

#: How long a verified token is trusted in a warm function (API.md: revocation within 60 s).
TOKEN_CACHE_TTL_S = 60


class ArcsStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        prefix: str = "",
        architecture: str = DEFAULT_ARCH,
        layers_dir: Path = BUILD_DIR,
        functions_dir: Path = FUNCTIONS_DIR,
        query_memory_mb: int = DEFAULT_MEMORY_MB,
        query_image: bool = False,
        ingest_batch_size: int = 1000,
        ingest_batching_window: Duration = BATCHING_WINDOW,
        glue_database: str | None = None,
        athena_tables: Mapping[str, Mapping[str, str]] | None = None,
        express_zone: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.storage = ArcsStorage(self, "Storage", prefix=prefix)
        self.layers = ArcsLayers(self, "Layers", architecture=architecture, build_dir=layers_dir)
        defaults = FunctionDefaults(
            environment=base_environment(
                bucket_name=self.storage.bucket.bucket_name,
                prefix=self.storage.prefix,
                token_cache_ttl_s=TOKEN_CACHE_TTL_S,
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
            batch_size=ingest_batch_size,
            max_batching_window=ingest_batching_window,
        )
        # Scheduled compaction and continuous queries; the query function's trigger route invokes it.
        self.compact = ArcsCompact(
            self, "Compact", storage=self.storage, defaults=defaults, write_queue=self.ingest.queue
        )
        self.query = ArcsQuery(
            self,
            "Query",
            storage=self.storage,
            defaults=defaults,
            write_queue=self.ingest.queue,
            memory_size_mb=query_memory_mb,
            from_image=query_image,
            compact_function_name=self.compact.compact.function.function_name,
        )
        self.compact.allow_trigger(self.query.query.role)
        self.authorizer = ArcsAuthorizer(self, "Authorizer", storage=self.storage, defaults=defaults)
        # Optional S3 Express One Zone, the data files' bucket then: ingest writes them, compaction
        # rewrites them, the query function reads them and deletes or rewrites them for admins.
        self.express = ArcsExpress(self, "Express", zone_id=express_zone) if express_zone else None
        if self.express is not None:
            for user in (self.ingest.ingest, self.compact.compact, self.query.query):
                self.express.grant_sessions(user.function, user.role)
        self.bootstrap = ArcsBootstrap(self, "Bootstrap", storage=self.storage, defaults=defaults)
        self.api = ArcsApi(
            self,
            "Http",
            edge=self.ingest.edge.function,
            query=self.query.query.function,
            token_authorizer=self.authorizer.token_authorizer,
            request_authorizer=self.authorizer.request_authorizer,
        )
        self.athena = ArcsAthena(
            self,
            "Athena",
            # Athena reads the data where it is: the directory bucket when there is one.
            bucket_name=self.express.bucket_name if self.express is not None else self.storage.bucket.bucket_name,
            prefix=self.storage.prefix,
            database_name=glue_database or construct_id.lower().replace("-", "_"),
            tables=athena_tables or {},
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
        if self.express is not None:
            CfnOutput(self, "ExpressBucketName", value=self.express.bucket_name)
        CfnOutput(self, "GlueDatabase", value=self.athena.database_name, description="Athena: the data's tables")
