"""The CDK app: ``uv run python -m infra.app`` synthesizes into ``cdk.out`` (``cdk.json`` runs it too).

Its parameters are CDK context (``cdk deploy -c key=value``), listed and checked in
``infra/params.py`` and documented in docs/deploy.md. ``cdk.json``'s ``context`` holds the CDK
feature flags this app is built with; they apply however the app is run (the CDK CLI passes them
itself; ``build`` adds those it was not given), so the template is the same either way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Validations
from cdk_nag import AwsSolutionsChecks
from layers.build import BUILD_DIR

from infra import params
from infra.function import FUNCTIONS_DIR, REPO_ROOT
from infra.stack import ArcsStack

CDK_JSON = REPO_ROOT / "cdk.json"


def feature_flags() -> dict[str, Any]:
    """The CDK feature flags of ``cdk.json`` (its ``context`` holds nothing else)."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


def build(app: App | None = None, functions_dir: Path = FUNCTIONS_DIR) -> tuple[App, ArcsStack]:
    """The app with its one stack, checked by cdk-nag's AWS Solutions pack at synthesis.

    A context value the stack cannot deploy with raises ``params.ParameterError`` naming it.
    ``functions_dir``: where the handlers are (tests add one that is not written yet).
    """
    app = app or App()
    for flag, value in feature_flags().items():
        if app.node.try_get_context(flag) is None:
            app.node.set_context(flag, value)
    chosen = params.read(app.node.get_all_context())
    layers_dir = Path(chosen.layers_dir) if chosen.layers_dir else BUILD_DIR
    stack = ArcsStack(
        app,
        chosen.stack_name,
        parameters=chosen,
        layers_dir=layers_dir if layers_dir.is_absolute() else REPO_ROOT / layers_dir,
        functions_dir=functions_dir,
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
