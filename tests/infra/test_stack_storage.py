"""The write queue between the edge and the ingest function, the bucket and the tables.

The template is conftest's ``synth``: the stack as deployed by default, synthesized once per session.
"""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match

from arcs import envvars, layout
from arcs.adapters.aws.dynamo_table import TTL_ATTRIBUTE
from arcs.adapters.aws.queue import SQS_MAX_MESSAGE_BYTES, claim_key
from tests.infra.synth import Synth

pytestmark = pytest.mark.infra


FOURTEEN_DAYS_S = 14 * 24 * 3600


# --- the queue between the edge and the ingest function ------------------------------------------


def test_write_queue_takes_1_mib_messages_keeps_14_days_and_redrives(synth: Synth) -> None:
    assert SQS_MAX_MESSAGE_BYTES == 1_048_576
    queue = synth.props(synth.stack.ingest.queue)
    assert queue["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES
    assert queue["MessageRetentionPeriod"] == FOURTEEN_DAYS_S
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [synth.logical_id(synth.stack.ingest.dead_letter_queue), "Arn"]},
        "maxReceiveCount": 5,
    }
    assert synth.props(synth.stack.ingest.dead_letter_queue)["MessageRetentionPeriod"] == FOURTEEN_DAYS_S


def test_visibility_timeout_is_at_least_six_times_the_consumer_timeout(synth: Synth) -> None:
    queue_id = synth.logical_id(synth.stack.ingest.queue)
    [mapping] = synth.of_type("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    function_id = mapping["Properties"]["FunctionName"]["Ref"]
    assert function_id == synth.logical_id(synth.stack.ingest.ingest.function)
    timeout = synth.resources[function_id]["Properties"]["Timeout"]
    visibility = synth.resources[queue_id]["Properties"]["VisibilityTimeout"]
    assert visibility >= 6 * timeout


def test_ingest_consumes_batches_and_reports_item_failures(synth: Synth) -> None:
    synth.assertions.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": Match.any_value(),
            "MaximumBatchingWindowInSeconds": Match.any_value(),
        },
    )
    [mapping] = synth.of_type("AWS::Lambda::EventSourceMapping").values()
    props = mapping["Properties"]
    assert 1 <= props["BatchSize"] <= 10_000
    assert 0 < props["MaximumBatchingWindowInSeconds"] <= 300  # batches above 10 need a window
    env = synth.props(synth.stack.ingest.ingest.function)["Environment"]["Variables"]
    assert env[envvars.INGEST_BATCH_MESSAGES] == str(props["BatchSize"])


def test_queues_refuse_plain_http(synth: Synth) -> None:
    policies = synth.of_type("AWS::SQS::QueuePolicy").values()
    secured: set[str] = set()
    for policy in policies:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}:
                secured.update(queue["Ref"] for queue in policy["Properties"]["Queues"])
    assert secured == {
        synth.logical_id(synth.stack.ingest.queue),
        synth.logical_id(synth.stack.ingest.dead_letter_queue),
        synth.logical_id(synth.stack.failures.queue),
    }


def test_dead_letters_raise_an_alarm(synth: Synth) -> None:
    synth.assertions.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ApproximateNumberOfMessagesVisible",
            "Dimensions": [{"Name": "QueueName", "Value": Match.any_value()}],
            "Threshold": 0,
        },
    )


# --- storage ---------------------------------------------------------------------------------------


def test_bucket_is_encrypted_private_and_tls_only(synth: Synth) -> None:
    bucket = synth.props(synth.stack.storage.bucket)
    assert bucket["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    synth.assertions.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            }
        },
    )
    assert synth.resources[synth.logical_id(synth.stack.storage.bucket)]["DeletionPolicy"] == "Retain"


def test_claim_check_objects_expire_after_15_days_where_the_core_writes_them(synth: Synth) -> None:
    core_prefix = claim_key("", "w").rsplit("/", 1)[0] + "/"
    assert core_prefix == "_arcs/claims/"
    rules = synth.props(synth.stack.storage.bucket)["LifecycleConfiguration"]["Rules"]
    [claims] = [rule for rule in rules if rule.get("Prefix") == core_prefix]
    assert claims["ExpirationInDays"] == 15
    assert claims["Status"] == "Enabled"


def test_handed_off_results_expire_after_a_day_where_the_core_writes_them(synth: Synth) -> None:
    core_prefix = layout.result_key("", "r", "json").rsplit("/", 1)[0] + "/"
    assert core_prefix == "_arcs/results/" == synth.stack.storage.results_prefix
    rules = synth.props(synth.stack.storage.bucket)["LifecycleConfiguration"]["Rules"]
    [results] = [rule for rule in rules if rule.get("Prefix") == core_prefix]
    assert results["ExpirationInDays"] == 1
    assert results["Status"] == "Enabled"


def test_three_tables_and_nothing_else(synth: Synth) -> None:
    assert set(synth.of_type("AWS::DynamoDB::Table")) == {synth.logical_id(t) for t in synth.tables().values()}
    # The catalog keeps the logical id of the single table of earlier versions: an update keeps its data.
    assert synth.logical_id(synth.stack.storage.catalog_table).startswith("StorageCatalog")


@pytest.mark.parametrize("name", ["tokens", "catalog", "leases"])
def test_table_keys_billing_ttl_and_recovery(synth: Synth, name: str) -> None:
    construct = synth.tables()[name]
    table = synth.props(construct)
    assert table["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert table["AttributeDefinitions"] == [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    if name == "tokens":
        assert "TimeToLiveSpecification" not in table  # an expired token stays listed until deleted
    else:
        assert table["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert TTL_ATTRIBUTE == "expires_at"
    # The longest window; the bucket keeps old versions as long (tests/infra/test_backup.py).
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True, "RecoveryPeriodInDays": 35}
    assert table["SSESpecification"] == {"SSEEnabled": True}  # AWS managed key
    resource = synth.resources[synth.logical_id(construct)]
    assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain")
