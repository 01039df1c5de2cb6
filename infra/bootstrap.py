"""The bootstrap admin token: generated at deploy into Secrets Manager, created in the catalog.

Mirrors ``functions/bootstrap``: a CloudFormation custom resource invokes that function, which
reads the secret and creates the admin token with its value once (only while no token exists).
The secret stays after the stack is deleted, like the table holding the token's hash.

CloudFormation invokes the function asynchronously and then waits for its answer. The handler
answers every failure it can see; one it cannot (an import that fails, a timeout) would leave the
stack waiting for an hour, so the custom resource gives up after ``SERVICE_TIMEOUT``, and the
invocation is not retried (a broken build does not mend) but kept in the failure queue.
"""

from __future__ import annotations

from aws_cdk import CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from layers.build import FUNCTION_LAYERS

from infra.failures import AsyncFailures
from infra.function import ArcsFunction, FunctionDefaults
from infra.nag import acknowledge
from infra.params import DEFAULT_MEMORY_MB
from infra.storage import ArcsStorage

TOKEN_LENGTH = 48  # letters and digits: ~285 bits, and nothing a shell or URL needs escaped
TIMEOUT = Duration.minutes(1)
#: The function's timeout, a cold start and time in Lambda's asynchronous queue, with room to spare.
SERVICE_TIMEOUT = Duration.minutes(5)


class ArcsBootstrap(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: ArcsStorage,
        defaults: FunctionDefaults,
        failures: AsyncFailures,
        memory_size_mb: int = DEFAULT_MEMORY_MB["bootstrap"],  # the token hash is scrypt: memory buys the CPU
    ) -> None:
        super().__init__(scope, construct_id)
        self.secret = secretsmanager.Secret(
            self,
            "AdminToken",
            description="Arc Serverless: the bootstrap admin token (Authorization: Bearer <value>)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=TOKEN_LENGTH, exclude_punctuation=True, include_space=False
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            "The secret is the bootstrap admin token's value, not a credential Secrets Manager can rotate: the "
            "token is rotated or revoked through the API (POST /api/v1/auth/tokens/{id}/rotate), which the "
            "catalog records; rotating the secret alone would leave the token unchanged.",
        )
        self.bootstrap = ArcsFunction(
            self,
            "Bootstrap",
            folder="bootstrap",
            handler="handler.handler",
            description="Deploy time: creates the bootstrap admin token from the generated secret",
            defaults=defaults,
            memory_size_mb=memory_size_mb,
            timeout=TIMEOUT,
            layers=FUNCTION_LAYERS["bootstrap"],
        )
        self.secret.grant_read(self.bootstrap.role)
        storage.use_table(self.bootstrap, storage.tokens_table, write=True)
        failures.keep(self.bootstrap.function, retry_attempts=0, max_event_age=SERVICE_TIMEOUT)
        self.token = CustomResource(
            self,
            "AdminTokenRecord",
            service_token=self.bootstrap.function.function_arn,
            resource_type="Custom::ArcsBootstrapToken",
            service_timeout=SERVICE_TIMEOUT,
            # The tokens table too: a new one (a stack upgraded from the single table) gets the
            # admin token again, since CloudFormation calls the handler only when these change.
            properties={"SecretArn": self.secret.secret_arn, "TokensTable": storage.tokens_table.table_name},
        )
