"""The API Gateway REQUEST authorizers: a token becomes an IAM policy plus the caller's identity.

Mirrors ``functions/authorizer``: one function, attached twice, because API Gateway can cache a
REQUEST authorizer's answer only when *every* identity source is in the request (it answers 401
without calling the function otherwise), and our clients put the token in different places:

- ``token_authorizer``, cached for ``GATEWAY_CACHE_TTL`` on ``Authorization`` alone, serves the
  Arc API under ``/api/v1`` but the writes: its clients send ``Authorization: Bearer`` (``Token``
  and ``Basic`` are in the same header and work too). A request without that header is a 401 there.
- ``request_authorizer``, uncached, serves the writes and every other path (InfluxDB's ``/write``
  with ``?u=&p=`` or Basic, ``/api/v2/write`` with ``Token``, ``x-api-key``): it reads the token
  wherever the client put it, and sees each write's declared length (``functions/authorizer``).

A cached policy is reused for the caller's other routes, so the policy allows the whole stage and
each route checks the token's permissions itself. A revocation is seen within the gateway's TTL
plus the function's own token cache (``FUNCTION_TOKEN_CACHE_TTL_S``): 60 s, as the README says.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from constructs import Construct

from arcs import envvars
from infra.function import ArcsFunction, FunctionDefaults
from infra.storage import ArcsStorage

#: The one identity source every client of the cached routes sends.
TOKEN_HEADER = apigw.IdentitySource.header("Authorization")
GATEWAY_CACHE_TTL = Duration.seconds(30)
#: The function's own cache of verified tokens, so that gateway and function together stay within 60 s.
FUNCTION_TOKEN_CACHE_TTL_S = 30
TIMEOUT = Duration.seconds(10)


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
    ) -> None:
        super().__init__(scope, construct_id)
        self.authorizer_function = ArcsFunction(
            self,
            "Authorizer",
            folder="authorizer",
            handler="handler.handler",
            description="API Gateway REQUEST authorizer: token -> policy and caller identity",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=timeout,
            environment={envvars.TOKEN_CACHE_TTL_S: str(FUNCTION_TOKEN_CACHE_TTL_S)},
        )
        storage.use_table(self.authorizer_function, storage.tokens_table, write=False)
        self.token_authorizer = apigw.RequestAuthorizer(
            self,
            "TokenAuthorizer",
            handler=self.authorizer_function.function,
            identity_sources=[TOKEN_HEADER],
            results_cache_ttl=GATEWAY_CACHE_TTL,
        )
        self.request_authorizer = apigw.RequestAuthorizer(
            self,
            "RequestAuthorizer",
            handler=self.authorizer_function.function,
            identity_sources=[],
            results_cache_ttl=Duration.seconds(0),
        )
        # CDK writes an empty string; uncached, the property is optional and an absent one lets every
        # request through to the function, whichever place holds its token.
        cfn = self.request_authorizer.node.default_child
        assert isinstance(cfn, apigw.CfnAuthorizer)
        cfn.add_property_deletion_override("IdentitySource")
