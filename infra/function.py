"""The one Lambda function construct every function of the stack is built with.

It fixes what must be the same everywhere: Python 3.12 on one architecture (arm64, Graviton, by
default; the layers are built for exactly that), active tracing, a log group with a retention,
an execution role with no managed policy (each construct grants what its function needs, nothing
more), environment variables named only by :mod:`arcs.envvars`, and the code asset: the
function's own folder under ``functions/``. The core package and its dependencies come from the
layers (``infra/layers.py``): each function names the ones it imports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Size
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from arcs import envvars
from infra.nag import acknowledge

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
#: The layers a function gets unless it names others (see ``layers/build.py``: FUNCTION_LAYERS).
DEFAULT_LAYERS: tuple[str, ...] = ("deps", "core")
# Where DuckDB keeps its home, temp files and extensions: the only writable place in Lambda.
LAMBDA_WORK_DIR = "/tmp/arcs"  # noqa: S108 - Lambda's /tmp is private to the execution environment

#: Every name the runtime reads; anything else in a function's environment is a typo.
KNOWN_ENV_NAMES = frozenset(value for name, value in vars(envvars).items() if name.isupper() and isinstance(value, str))
#: Set by Lambda itself (reserved) or meant only for emulators: never set by the stack.
FORBIDDEN_ENV_NAMES = frozenset({envvars.AWS_REGION, envvars.AWS_ENDPOINT_URL})
#: API Gateway's integration timeout: a function behind it gets no longer.
API_TIMEOUT = Duration.seconds(29)
_ASSET_EXCLUDES = ["__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache"]


@dataclass(frozen=True)
class FunctionDefaults:
    """What all functions of one stack share."""

    environment: Mapping[str, str]
    #: The built layers by name (``duckdb``, ``deps``, ``core``); empty when they are not built,
    #: and then the stack refuses to deploy (``infra/layers.py``).
    layers: Mapping[str, lambda_.ILayerVersion] = field(default_factory=dict)
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    architecture: lambda_.Architecture = ARCHITECTURE
    #: Where the handlers' folders are (tests point it elsewhere).
    functions_dir: Path = FUNCTIONS_DIR


def base_environment(
    *,
    bucket_name: str,
    prefix: str,
    token_cache_ttl_s: int,
    metrics_namespace: str,
    settings: Mapping[str, str | None] | None = None,
) -> dict[str, str]:
    """The variables every function needs to build its runtime on AWS; each table's name comes with
    its grant (``ArcsStorage.use_table``). ``settings``: deploy-time choices (unset ones left out)."""
    chosen = {name: value for name, value in (settings or {}).items() if value}
    return {
        **chosen,
        envvars.BACKEND: "aws",
        envvars.BUCKET: bucket_name,
        envvars.PREFIX: prefix,
        envvars.TOKEN_CACHE_TTL_S: str(token_cache_ttl_s),
        envvars.METRICS_NAMESPACE: metrics_namespace,
        envvars.WORK_DIR: LAMBDA_WORK_DIR,
        # Arrow on the C heap the runtime tunes (arcs.allocator.ARROW_POOL): set here, as Arrow
        # fixes its pool when pyarrow is imported, and handlers import it before any runtime exists.
        envvars.ARROW_MEMORY_POOL: "system",
    }


def check_environment(environment: Mapping[str, str]) -> None:
    unknown = sorted(set(environment) - KNOWN_ENV_NAMES)
    if unknown:
        raise ValueError(f"environment variables not named in arcs.envvars: {unknown}")
    forbidden = sorted(set(environment) & FORBIDDEN_ENV_NAMES)
    if forbidden:
        raise ValueError(f"environment variables the stack must not set: {forbidden}")


def reserve_concurrency(function: lambda_.IFunction, count: int) -> None:
    """Reserve ``count`` of the account's concurrency for ``function`` (and cap it there).

    Unset by default: a new account may have a concurrency quota of 10, and Lambda keeps part of the
    quota unreserved, so any reservation could fail the deployment there.
    """
    cfn = function.node.default_child
    if not isinstance(cfn, lambda_.CfnFunction):
        raise TypeError(f"{function.node.path} is not a function of this stack")
    cfn.reserved_concurrent_executions = count


class ArcsFunction(Construct):
    """A Lambda function of Arc Serverless; ``function`` and ``role`` are the handles to grant on.

    ``image``: run from the repository's container image (``Dockerfile``: the same code and the
    locked dependencies on the Lambda Python 3.12 base) instead of the function's folder and layers.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        folder: str,
        handler: str,
        description: str,
        defaults: FunctionDefaults,
        memory_size_mb: int,
        timeout: Duration,
        environment: Mapping[str, str] | None = None,
        layers: Sequence[str] = DEFAULT_LAYERS,
        ephemeral_storage_mb: int | None = None,
        image: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        code_dir = defaults.functions_dir / folder
        if not (code_dir / f"{handler.rsplit('.', 1)[0]}.py").is_file():
            raise ValueError(f"no handler module for {handler!r} in {code_dir}")
        env = {**defaults.environment, **(environment or {})}
        check_environment(env)

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=defaults.log_retention,
            # Logs are not data: they go with the stack.
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Arc Serverless {construct_id}: {description}",
        )
        # Instead of the AWSLambdaBasicExecutionRole managed policy (any log group): this one only.
        self.log_group.grant_write(self.role)
        self.timeout = timeout
        common: dict[str, Any] = {
            "description": description,
            "architecture": defaults.architecture,
            "memory_size": memory_size_mb,
            "timeout": timeout,
            "environment": env,
            "ephemeral_storage_size": Size.mebibytes(ephemeral_storage_mb) if ephemeral_storage_mb else None,
            "log_group": self.log_group,
            "role": self.role,
            "tracing": lambda_.Tracing.ACTIVE,
        }
        if image:
            # The repository's Dockerfile, built for this architecture, running this function's handler.
            module = f"functions.{folder}.{handler}"
            arm = defaults.architecture.name == lambda_.Architecture.ARM_64.name
            platform = ecr_assets.Platform.LINUX_ARM64 if arm else ecr_assets.Platform.LINUX_AMD64
            code = lambda_.DockerImageCode.from_image_asset(str(REPO_ROOT), cmd=[module], platform=platform)
            self.function: lambda_.Function = lambda_.DockerImageFunction(self, "Function", code=code, **common)
        else:
            self.function = lambda_.Function(
                self,
                "Function",
                runtime=RUNTIME,
                code=lambda_.Code.from_asset(str(code_dir), exclude=_ASSET_EXCLUDES),
                handler=handler,
                layers=[defaults.layers[name] for name in layers if name in defaults.layers],
                **common,
            )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "X-Ray's PutTraceSegments/PutTelemetryRecords (active tracing) support no resource-level "
            "permissions; '*' is the only valid resource.",
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "Pinned to Python 3.12 on purpose: the core layer (duckdb 1.5.5 + httpfs, pyarrow) is built and "
            "smoke-tested for exactly this runtime; moving on is a deliberate change of the layer build.",
        )
