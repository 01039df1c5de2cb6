"""The CDK app: ``uv run python -m infra.app`` synthesizes into ``cdk.out`` (``cdk.json`` runs it too).

Context (``cdk deploy -c key=value``; docs/deploy.md):

==========================  ===================================================  ==================
key                         meaning                                              default
==========================  ===================================================  ==================
``stack_name``              the stack's name                                     ``ArcServerless``
``prefix``                  key prefix of everything in the bucket               none
``architecture``            ``arm64`` or ``x86_64`` (layers built for it)        ``arm64``
``layers_dir``              where ``make layers`` wrote the layers               ``layers/build``
``query_memory_mb``         the query function's memory (DuckDB gets half)       ``4096``
``query_image``             ``true``: the query function runs the container      ``false``
``ingest_batch_size``       SQS messages per ingest invocation                   ``1000``
``ingest_batch_window_s``   how long SQS gathers a batch (0-300 s)               ``5``
``glue_database``           the Glue database for Athena                         stack name, lower
``athena_tables``           JSON ``{"db.measurement": {"col": "type"}}``         none
``express_zone``            AZ id for an S3 Express One Zone bucket (optional)   none
==========================  ===================================================  ==================
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Duration, Environment, Validations
from cdk_nag import AwsSolutionsChecks
from layers.build import BUILD_DIR, DEFAULT_ARCH

from infra.function import FUNCTIONS_DIR, REPO_ROOT
from infra.stack import ArcsStack

DEFAULT_STACK_NAME = "ArcServerless"


def _context(app: App, key: str, default: Any) -> Any:
    value = app.node.try_get_context(key)
    return default if value is None or value == "" else value


def _json_context(app: App, key: str) -> Any:
    # On the command line every context value is a string; in cdk.json it may already be JSON.
    value = _context(app, key, None)
    return json.loads(value) if isinstance(value, str) else value


def build(app: App | None = None, functions_dir: Path = FUNCTIONS_DIR) -> tuple[App, ArcsStack]:
    """The app with its one stack, checked by cdk-nag's AWS Solutions pack at synthesis.

    ``functions_dir``: where the handlers are (tests add one that is not written yet).
    """
    app = app or App()
    layers_dir = Path(str(_context(app, "layers_dir", BUILD_DIR)))
    stack = ArcsStack(
        app,
        str(_context(app, "stack_name", DEFAULT_STACK_NAME)),
        prefix=str(_context(app, "prefix", "")),
        architecture=str(_context(app, "architecture", DEFAULT_ARCH)),
        layers_dir=layers_dir if layers_dir.is_absolute() else REPO_ROOT / layers_dir,
        functions_dir=functions_dir,
        query_memory_mb=int(_context(app, "query_memory_mb", 4096)),
        query_image=str(_context(app, "query_image", "false")).lower() == "true",
        ingest_batch_size=int(_context(app, "ingest_batch_size", 1000)),
        ingest_batching_window=Duration.seconds(int(_context(app, "ingest_batch_window_s", 5))),
        glue_database=_context(app, "glue_database", None),
        athena_tables=_json_context(app, "athena_tables"),
        express_zone=_context(app, "express_zone", None),
        # Environment-agnostic unless the CDK CLI (or the user) names an account and region.
        env=Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")),
        description="Arc Serverless: a serverless time-series database (DuckDB over Parquet on S3)",
    )
    # cdk-nag 3 is a policy-validation plugin (no longer an aspect): any unacknowledged finding
    # fails synthesis and is written to cdk.out/validation-report.json.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


def main() -> None:
    # The CDK CLI says where to write (CDK_OUTDIR); run directly, write where the CLI would.
    outdir = None if os.environ.get("CDK_OUTDIR") else str(REPO_ROOT / "cdk.out")
    app, _ = build(App(outdir=outdir))
    app.synth()


if __name__ == "__main__":
    main()
