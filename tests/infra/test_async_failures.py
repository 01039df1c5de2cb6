"""Asynchronous invocations (the schedules, the compaction trigger, the bootstrap custom resource)
are configured as Lambda runs them: Lambda's own retries and event age, then a kept failure.

EventBridge and CloudFormation hand the event to Lambda asynchronously; from then on only the
function's EventInvokeConfig decides what happens to a failed run. Without one, Lambda retries
twice and drops the event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template
from infra.app import build

pytestmark = pytest.mark.infra

Json = dict[str, Any]


@pytest.fixture(scope="module")
def synth(layers_dir: Path) -> tuple[Any, Json]:
    _, stack = build(App(context={"layers_dir": str(layers_dir)}))
    return stack, Template.from_stack(stack).to_json()


def _logical(stack: Any, construct: Any) -> str:
    return str(stack.get_logical_id(construct.node.default_child))


def _invoke_configs(stack: Any, template: Json) -> dict[str, Json]:
    return {
        r["Properties"]["FunctionName"]["Ref"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventInvokeConfig"
    }


def test_tasks_runs_that_fail_are_retried_then_kept_in_the_failure_queue(synth: tuple[Any, Json]) -> None:
    stack, template = synth
    failures_arn = {"Fn::GetAtt": [_logical(stack, stack.failures.queue), "Arn"]}
    config = _invoke_configs(stack, template)[_logical(stack, stack.tasks.tasks.function)]
    # Unqualified: the schedules and the trigger route (adapters/aws/wiring.py, InvocationType=Event)
    # both invoke the function by name, which runs $LATEST.
    assert config["Qualifier"] == "$LATEST"
    assert config["MaximumRetryAttempts"] == 2
    assert config["MaximumEventAgeInSeconds"] == 3600
    assert config["DestinationConfig"] == {"OnFailure": {"Destination": failures_arn}}
    # The function may send its failed events there (Lambda uses the function's role).
    role = stack.tasks.tasks.role
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": _logical(stack, role)} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(
        "sqs:SendMessage" in s["Action"]
        and failures_arn in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        for s in statements
    )


def test_schedule_targets_retry_only_delivery_into_the_same_queue(synth: tuple[Any, Json]) -> None:
    stack, template = synth
    failures_arn = {"Fn::GetAtt": [_logical(stack, stack.failures.queue), "Arn"]}
    rules = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    assert len(rules) == 3
    for rule in rules:
        [target] = rule["Targets"]
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2}
        assert target["DeadLetterConfig"] == {"Arn": failures_arn}
    # EventBridge may write undelivered events into the queue, and only from these rules.
    [policy] = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::QueuePolicy"
        and r["Properties"]["Queues"] == [{"Ref": _logical(stack, stack.failures.queue)}]
    ]
    senders = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert {s["Principal"]["Service"] for s in senders} == {"events.amazonaws.com"}
    assert len(senders) == 3


def test_bootstrap_is_not_retried_and_cloudformation_gives_up_in_five_minutes(synth: tuple[Any, Json]) -> None:
    stack, template = synth
    failures_arn = {"Fn::GetAtt": [_logical(stack, stack.failures.queue), "Arn"]}
    config = _invoke_configs(stack, template)[_logical(stack, stack.bootstrap.bootstrap.function)]
    assert config["MaximumRetryAttempts"] == 0
    assert config["MaximumEventAgeInSeconds"] == 300
    assert config["DestinationConfig"] == {"OnFailure": {"Destination": failures_arn}}
    [token] = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "Custom::ArcsBootstrapToken"]
    # Not CloudFormation's default hour: a bootstrap that never answers fails the deployment in minutes.
    assert int(token["ServiceTimeout"]) == 300
    function = template["Resources"][_logical(stack, stack.bootstrap.bootstrap.function)]["Properties"]
    assert function["Timeout"] < int(token["ServiceTimeout"])


def test_only_the_asynchronously_invoked_functions_have_a_failure_destination(synth: tuple[Any, Json]) -> None:
    stack, template = synth
    assert set(_invoke_configs(stack, template)) == {
        _logical(stack, stack.tasks.tasks.function),
        _logical(stack, stack.bootstrap.bootstrap.function),
    }


def test_the_failure_queue_is_encrypted_tls_only_kept_14_days_and_alarmed(synth: tuple[Any, Json]) -> None:
    stack, template = synth
    queue_id = _logical(stack, stack.failures.queue)
    queue = template["Resources"][queue_id]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    policies = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::QueuePolicy" and {"Ref": queue_id} in r["Properties"]["Queues"]
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for statements in policies
        for s in statements
    )
    alarm = template["Resources"][_logical(stack, stack.failures.alarm)]["Properties"]
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert json.dumps(alarm["Dimensions"]) == json.dumps(
        [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    )
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert template["Outputs"]["FailedRunsQueueUrl"]["Value"] == {"Ref": queue_id}
