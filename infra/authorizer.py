"""The API Gateway REQUEST authorizer: a token becomes an IAM policy plus the caller's identity.

Mirrors ``functions/authorizer``.

Caching, and why it is off at the gateway by default: a REST API caches a REQUEST authorizer's
answer by its identity sources, and once caching is on, API Gateway *requires every identity
source to be present* and answers 401 without calling the function otherwise. Our clients send
the token in exactly one of ``Authorization``, ``x-api-key`` or ``?p=``, so caching keyed on all
three would refuse them all. Instead the gateway calls the function on each request and the
function keeps verified tokens in memory for ``ARCS_TOKEN_CACHE_TTL_S`` (60 s): the slow hash runs
once per token per container, and a revocation is seen within that TTL, as API.md promises.
``cache_ttl`` and ``identity_sources`` turn gateway caching on for deployments whose clients all
send the token the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from constructs import Construct

from infra.function import ArcsFunction, FunctionDefaults
from infra.storage import ArcsStorage

#: Where clients put the token (API.md): any one of these.
TOKEN_SOURCES: tuple[str, ...] = (
    apigw.IdentitySource.header("Authorization"),
    apigw.IdentitySource.header("x-api-key"),
    apigw.IdentitySource.query_string("p"),
)
TIMEOUT = Duration.seconds(10)
NO_GATEWAY_CACHE = Duration.seconds(0)


class ArcsAuthorizer(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        memory_size_mb: int = 1024,  # the slow hash is CPU-bound; memory buys CPU
        timeout: Duration = TIMEOUT,
        cache_ttl: Duration = NO_GATEWAY_CACHE,
        identity_sources: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        if cache_ttl.to_seconds() > 0 and not identity_sources:
            raise ValueError(
                "gateway caching needs identity sources, and API Gateway then refuses (401) every request "
                "that lacks any one of them"
            )
        self.authorizer_function = ArcsFunction(
            self,
            "Authorizer",
            folder="authorizer",
            handler="handler.handler",
            description="API Gateway REQUEST authorizer: token -> policy and caller identity",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
        )
        storage.use_table(self.authorizer_function, storage.tokens_table, write=False)
        self.authorizer = apigw.RequestAuthorizer(
            self,
            "RequestAuthorizer",
            handler=self.authorizer_function.function,
            identity_sources=list(identity_sources),
            results_cache_ttl=cache_ttl,
        )
        if not identity_sources:
            # CDK writes an empty string; without caching the property is optional, so leave it out.
            cfn = self.authorizer.node.default_child
            assert isinstance(cfn, apigw.CfnAuthorizer)
            cfn.add_property_deletion_override("IdentitySource")
