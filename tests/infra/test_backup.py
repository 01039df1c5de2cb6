"""Backup and restore tell one story: the catalog can be restored to any moment of a 35-day
window, and the bucket still holds every file the catalog listed at that moment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template
from infra.app import build

pytestmark = pytest.mark.infra

Json = dict[str, Any]
DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


@pytest.fixture(scope="module")
def synth(layers_dir: Path) -> tuple[Any, Json]:
    _, stack = build(App(context={"layers_dir": str(layers_dir), "prefix": "tsdb"}))
    return stack, Template.from_stack(stack).to_json()


def _bucket(stack: Any, template: Json) -> Json:
    return template["Resources"][stack.get_logical_id(stack.storage.bucket.node.default_child)]["Properties"]  # type: ignore[no-any-return]


def test_the_bucket_keeps_replaced_and_deleted_files_as_long_as_the_tables_can_be_restored(
    synth: tuple[Any, Json],
) -> None:
    stack, template = synth
    bucket = _bucket(stack, template)
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    windows = {
        r["Properties"]["PointInTimeRecoverySpecification"]["RecoveryPeriodInDays"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::DynamoDB::Table"
    }
    assert windows == {35}
    rules = {rule["Id"]: rule for rule in bucket["LifecycleConfiguration"]["Rules"]}
    everything = rules["expire-noncurrent-versions"]
    assert "Prefix" not in everything
    assert everything["NoncurrentVersionExpiration"] == {"NoncurrentDays": 35}
    assert everything["ExpiredObjectDeleteMarker"] is True
    # Staging objects are no backup: their old versions go after a day.
    for rule_id, prefix in (("expire-claim-checks", "claims"), ("expire-handed-off-results", "results")):
        assert rules[rule_id]["Prefix"] == f"tsdb/_arcs/{prefix}/"
        assert rules[rule_id]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    # The data, the tables and the secret outlive the stack; so do API Gateway's account-wide
    # CloudWatch role (shared by every REST API of the region) and the API's access logs.
    retained = {r["Type"] for r in template["Resources"].values() if r.get("DeletionPolicy") == "Retain"}
    assert retained == {
        "AWS::S3::Bucket",
        "AWS::DynamoDB::Table",
        "AWS::SecretsManager::Secret",
        "AWS::IAM::Role",
        "AWS::ApiGateway::Account",
        "AWS::Logs::LogGroup",
    }


def test_deploy_doc_gives_the_restore_procedure_for_the_same_window() -> None:
    text = DOC.read_text()
    section = text.split(". Backup and restore\n", 1)[1].split("\n## ", 1)[0]
    for needed in ("35 days", "restore-table-to-point-in-time", "list-object-versions", "delete marker"):
        assert needed in section, needed
