"""The app as the CDK CLI runs it: synthesized offline, clean under cdk-nag, and making exactly
the kinds of resources the tests cover.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdk_nag import AwsSolutionsChecks
from infra.function import FUNCTIONS_DIR

from tests.infra.synth import Synth

pytestmark = pytest.mark.infra


# --- cdk-nag on the whole stack --------------------------------------------------------------------


def test_cdk_nag_finds_nothing_unacknowledged_with_tasks_and_athena(athena_synth: Synth) -> None:
    report = AwsSolutionsChecks().validate_scope(athena_synth.stack)
    found = {v.rule_name: sorted(str(r.construct_path) for r in v.violating_resources) for v in report.violations}
    assert found == {}
    assert report.success


# --- the app as the CDK CLI runs it ----------------------------------------------------------------


def test_the_app_synthesizes_offline_as_cdk_synth_runs_it(tmp_path: Path) -> None:
    """``cdk synth`` runs ``python -m infra.app`` with CDK_OUTDIR and CDK_CONTEXT_JSON; no network,
    no built layers (as in CI): the template is written, and cdk-nag (a validation plugin) passes."""
    import os
    import subprocess
    import sys

    outdir = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({"layers_dir": str(tmp_path / "no-layers")}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    done = subprocess.run(
        [sys.executable, "-m", "infra.app"], cwd=FUNCTIONS_DIR.parent, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    template = json.loads((outdir / "ArcServerless.template.json").read_text())
    assert any(name.startswith("LayersLayersBuilt") for name in template["Rules"])
    assert len([r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]) >= 5


def test_cdk_json_runs_the_app_as_a_module_from_the_lock() -> None:
    config = json.loads((FUNCTIONS_DIR.parent / "cdk.json").read_text())
    # uv from the PATH, or (as the Makefile does) the one installed as a module: tests/infra/test_cdk_json.py.
    assert "uv run --frozen python -m infra.app" in config["app"]


#: Every kind of resource the stack makes (with the tasks function, an Athena table and no S3
#: Express), each covered by the tests here or in test_stack_*.py. A new kind must come with its tests.
EXPECTED_RESOURCE_TYPES = {
    "AWS::S3::Bucket": 1,
    "AWS::S3::BucketPolicy": 1,
    "AWS::DynamoDB::Table": 3,  # tokens, catalog, leases
    "AWS::SQS::Queue": 3,
    "AWS::SQS::QueuePolicy": 3,
    # dead letters; failed asynchronous runs; the oldest queued write; 6 functions' errors and
    # throttles; API 5xx; the compaction backlog (infra/monitoring.py)
    "AWS::CloudWatch::Alarm": 17,
    "AWS::CloudWatch::Dashboard": 1,
    "AWS::Lambda::LayerVersion": 3,
    "AWS::Lambda::Function": 6,
    "AWS::Lambda::EventSourceMapping": 1,
    "AWS::Lambda::EventInvokeConfig": 2,  # tasks, bootstrap: invoked asynchronously
    "AWS::Lambda::Permission": 7,
    "AWS::IAM::Role": 7,
    "AWS::IAM::Policy": 6,
    "AWS::Logs::LogGroup": 7,
    "AWS::Events::Rule": 3,
    "AWS::SecretsManager::Secret": 1,
    "Custom::ArcsBootstrapToken": 1,
    "AWS::ApiGateway::RestApi": 1,
    "AWS::ApiGateway::Account": 1,
    "AWS::ApiGateway::Deployment": 1,
    "AWS::ApiGateway::Stage": 1,
    "AWS::ApiGateway::Authorizer": 2,
    "AWS::ApiGateway::GatewayResponse": 3,
    # /api/v1/import with its fallback (ANY, {proxy+}), and a POST on the edge per import format.
    "AWS::ApiGateway::Resource": 23,
    "AWS::ApiGateway::Method": 27,
    "AWS::Glue::Database": 1,
    "AWS::Glue::Table": 1,
}


def test_the_stack_makes_exactly_the_expected_resources(athena_synth: Synth) -> None:
    counts: dict[str, int] = {}
    for resource in athena_synth.resources.values():
        counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    assert counts == EXPECTED_RESOURCE_TYPES
