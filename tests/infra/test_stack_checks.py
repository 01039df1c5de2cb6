"""cdk-nag (AWS Solutions) finds nothing unacknowledged, every acknowledgement is a known one with
its reason, and synthesis reports no errors or warnings.

The template is conftest's ``synth``: the stack as deployed by default, synthesized once per session.
"""

from __future__ import annotations

import re

import pytest
from aws_cdk import Validations
from cdk_nag import AwsSolutionsChecks

from tests.infra.synth import Synth

pytestmark = pytest.mark.infra


#: Every cdk-nag finding the stack accepts; each carries its reason where it is acknowledged.
#: A new one must be added here on purpose.
ACKNOWLEDGED = {
    "AwsSolutions-S1",  # no server access logs on the data bucket
    "AwsSolutions-IAM5[Resource::*]",  # X-Ray has no resource-level permissions
    "AwsSolutions-L1",  # Python 3.12, the runtime the layers are built for
    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
    "AwsSolutions-APIG2",  # bodies are binary; the edge validates them
    "AwsSolutions-APIG3",  # WAF left to the deployer
    "AwsSolutions-APIG4",  # /health and /ready are public
    "AwsSolutions-COG4",  # Arc tokens, not Cognito
    "AwsSolutions-SMG4",  # the bootstrap token is rotated through the API, not by Secrets Manager
    "AwsSolutions-SQS3",  # the failure queue is where failed asynchronous runs end (nothing redrives it)
}


# --- checks --------------------------------------------------------------------------------------


def test_cdk_nag_aws_solutions_finds_nothing_unacknowledged(synth: Synth) -> None:
    report = AwsSolutionsChecks().validate_scope(synth.stack)
    found = {v.rule_name: sorted(str(r.construct_path) for r in v.violating_resources) for v in report.violations}
    assert found == {}
    assert report.success


def test_acknowledged_findings_are_the_known_ones_with_reasons(synth: Synth) -> None:
    acknowledged: dict[str, str] = {}
    for construct in synth.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acknowledged.update(entry.data)
    # CDK stores acknowledgments as "Annotation::<id>" (older versions: lower case).
    ids = {re.sub(r"^annotation::", "", rule_id, flags=re.IGNORECASE) for rule_id in acknowledged}
    bucket = synth.logical_id(synth.stack.storage.bucket)
    assert {i for i in ids if i.startswith("AwsSolutions-IAM5[Resource::<")} == {
        f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{pattern}]"
        for pattern in (
            "*",
            "_arcs/claims/*",
            "_arcs/results/*",
            "_arcs/imports/*",
            "*/*/????/??/??/??/*.parquet",
            "_arcs/imports/*.json",
            "_arcs/imports/*.upload",
        )
    }
    assert {i for i in ids if not i.startswith("AwsSolutions-IAM5[Resource::<")} == ACKNOWLEDGED
    assert all(len(reason) >= 20 for reason in acknowledged.values())


def test_synthesis_reports_no_errors_or_warnings(synth: Synth) -> None:
    messages = [
        (construct.node.path, entry.type, entry.data)
        for construct in synth.stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type in ("aws:cdk:error", "aws:cdk:warning")
    ]
    assert messages == []
