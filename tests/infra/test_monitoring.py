"""The stack's alarms reach someone and its dashboard shows the functions' metrics: checked on the
synthesized template, with and without a notification target, and cdk-nag stays clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Validations
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from infra.app import build

from arcs import envvars, metrics

pytestmark = pytest.mark.infra

Json = dict[str, Any]
TOPIC = "arn:aws:sns:us-east-1:123456789012:ops"
FUNCTIONS = ("Edge", "Ingest", "Query", "Authorizer", "Tasks", "Bootstrap")


def synth(layers_dir: Path, **context: str) -> tuple[Any, Json]:
    _app, stack = build(App(context={"layers_dir": str(layers_dir), **context}))
    return stack, Template.from_stack(stack).to_json()


@pytest.fixture(scope="module")
def by_email(layers_dir: Path) -> tuple[Any, Json]:
    return synth(layers_dir, alarm_email="ops@example.com", alarm_oldest_write_s="600")


def of_type(template: Json, cfn_type: str) -> dict[str, Json]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == cfn_type}


def alarms(template: Json) -> dict[str, Json]:
    return {k: v["Properties"] for k, v in of_type(template, "AWS::CloudWatch::Alarm").items()}


def test_every_alarm_notifies_the_topic_made_for_the_address(by_email: tuple[Any, Json]) -> None:
    _stack, template = by_email
    [topic_id] = of_type(template, "AWS::SNS::Topic")
    [subscription] = of_type(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "ops@example.com"
    assert subscription["Properties"]["TopicArn"] == {"Ref": topic_id}
    # enforce_ssl: the topic's policy denies publishing without TLS.
    [policy] = of_type(template, "AWS::SNS::TopicPolicy").values()
    assert "aws:SecureTransport" in json.dumps(policy)
    found = alarms(template)
    assert len(found) == 2 + 1 + 2 * len(FUNCTIONS) + 1 + 1
    for alarm_id, alarm in found.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], alarm_id


def test_the_alarms_the_issue_asks_for(by_email: tuple[Any, Json]) -> None:
    stack, template = by_email
    found = alarms(template)

    def named(part: str) -> Json:
        [alarm] = [a for k, a in found.items() if part in k]
        return alarm

    oldest = named("OldestWriteAlarm")
    assert (oldest["MetricName"], oldest["Namespace"], oldest["Threshold"]) == (
        "ApproximateAgeOfOldestMessage",
        "AWS/SQS",
        600,
    )
    for function in FUNCTIONS:
        for what in ("Errors", "Throttles"):
            alarm = named(f"Monitoring{function}{what}Alarm")
            assert (alarm["MetricName"], alarm["Namespace"], alarm["Threshold"]) == (what, "AWS/Lambda", 0)
    api = named("Api5xxAlarm")
    assert (api["MetricName"], api["Namespace"]) == ("5XXError", "AWS/ApiGateway")
    backlog = named("CompactionBacklogAlarm")
    assert (backlog["EvaluationPeriods"], backlog["DatapointsToAlarm"]) == (3, 3)
    [expression, waiting] = sorted(backlog["Metrics"], key=lambda m: "Expression" not in m)
    assert expression["Expression"] == "DIFF(waiting)"
    assert waiting["MetricStat"]["Metric"] == {
        "MetricName": metrics.COMPACTION_WAITING.name,
        "Namespace": stack.stack_name,
    }
    # The dead-letter queue and the failure queue keep their alarms.
    assert sum(1 for a in found.values() if a.get("MetricName") == "ApproximateNumberOfMessagesVisible") == 2


def test_the_functions_emit_into_the_stacks_namespace(by_email: tuple[Any, Json]) -> None:
    stack, template = by_email
    for function in of_type(template, "AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if envvars.BACKEND in variables:
            assert variables[envvars.METRICS_NAMESPACE] == stack.stack_name


def test_the_dashboard_shows_every_measure_and_every_alarm(by_email: tuple[Any, Json]) -> None:
    _stack, template = by_email
    [dashboard] = of_type(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for measure in metrics.MEASURES:
        if measure not in (metrics.QUEUE_DEPTH, metrics.QUEUE_OLDEST_AGE):  # SQS's own metrics on AWS
            assert measure.name in body, measure.name
    for name in ("ApproximateAgeOfOldestMessage", "5XXError", "Throttles", "CompactionBacklogAlarm"):
        assert name in body, name


def test_a_topic_of_ones_own_is_used_as_it_is(layers_dir: Path) -> None:
    _stack, template = synth(layers_dir, alarm_topic_arn=TOPIC)
    assert of_type(template, "AWS::SNS::Topic") == {}
    assert all(alarm["AlarmActions"] == [TOPIC] for alarm in alarms(template).values())


def test_without_a_target_the_alarms_exist_without_actions(layers_dir: Path) -> None:
    _stack, template = synth(layers_dir)
    assert of_type(template, "AWS::SNS::Topic") == {}
    assert alarms(template) and all("AlarmActions" not in alarm for alarm in alarms(template).values())


def test_cdk_nag_stays_clean_with_the_topic(by_email: tuple[Any, Json]) -> None:
    stack, _template = by_email
    report = AwsSolutionsChecks().validate_scope(stack)
    assert {v.rule_name: [str(r.construct_path) for r in v.violating_resources] for v in report.violations} == {}
    acknowledged: dict[str, str] = {}
    for construct in stack.monitoring.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acknowledged.update(entry.data)
    assert [rule.split("::")[-1] for rule in acknowledged] == ["AwsSolutions-SNS2"]
