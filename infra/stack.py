"""The one stack: storage, the three HTTP-facing functions, the SQS consumer, compaction, and the REST API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.api import ArcsApi
from infra.authorizer import ArcsAuthorizer
from infra.compact import ArcsCompact
from infra.function import FunctionDefaults, base_environment
from infra.ingest import ArcsIngest
from infra.query import ArcsQuery
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
        layers: Sequence[lambda_.ILayerVersion] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.storage = ArcsStorage(self, "Storage", prefix=prefix)
        defaults = FunctionDefaults(
            environment=base_environment(
                bucket_name=self.storage.bucket.bucket_name,
                table_name=self.storage.table.table_name,
                prefix=self.storage.prefix,
                token_cache_ttl_s=TOKEN_CACHE_TTL_S,
            ),
            layers=tuple(layers),
        )
        self.ingest = ArcsIngest(self, "Ingest", storage=self.storage, defaults=defaults)
        self.compact = ArcsCompact(self, "Compaction", storage=self.storage, defaults=defaults)
        self.query = ArcsQuery(
            self,
            "Query",
            storage=self.storage,
            defaults=defaults,
            compact_function_name=self.compact.compact.function.function_name,
        )
        self.compact.allow_trigger(self.query.query.role)
        self.authorizer = ArcsAuthorizer(self, "Authorizer", storage=self.storage, defaults=defaults)
        self.api = ArcsApi(
            self,
            "Http",
            edge=self.ingest.edge.function,
            query=self.query.query.function,
            authorizer=self.authorizer.authorizer,
        )

        CfnOutput(self, "ApiUrl", value=self.api.api.url, description="Base URL of the HTTP API (stage included)")
        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name)
        CfnOutput(self, "TableName", value=self.storage.table.table_name)
        CfnOutput(self, "QueueUrl", value=self.ingest.queue.queue_url)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.ingest.dead_letter_queue.queue_url)
