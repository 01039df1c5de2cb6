"""The CDK app: ``uv run python -m infra.app`` synthesizes into ``cdk.out`` (``cdk.json`` runs it too).

Context (``-c key=value`` with the CDK CLI): ``stack_name`` (default ``ArcServerless``),
``prefix`` (key prefix of everything in the bucket, default none).
"""

from __future__ import annotations

import os

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks

from infra.function import REPO_ROOT
from infra.stack import ArcsStack

DEFAULT_STACK_NAME = "ArcServerless"


def build(app: App | None = None) -> tuple[App, ArcsStack]:
    """The app with its one stack, checked by cdk-nag's AWS Solutions pack at synthesis."""
    app = app or App()
    stack = ArcsStack(
        app,
        str(app.node.try_get_context("stack_name") or DEFAULT_STACK_NAME),
        prefix=str(app.node.try_get_context("prefix") or ""),
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
