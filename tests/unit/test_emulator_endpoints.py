"""Which emulator each AWS client talks to, and the names ``arcs local`` gives its resources.

LocalStack without its DynamoDB (docs/localstack.md) serves S3 and SQS while another emulator
serves DynamoDB: the SDKs' ``AWS_ENDPOINT_URL_DYNAMODB`` says where, for the functions and for
``arcs local`` alike. Several ``arcs local`` on one emulator each name their own resources.
"""

from __future__ import annotations

import boto3
import pytest

from arcs import envvars
from arcs.adapters.aws.wiring import AwsClients
from arcs.emulation import EmulationConfig
from arcs.settings import ConfigError, Settings

SHARED = "http://127.0.0.1:4566"
DYNAMODB = "http://127.0.0.1:4567"


def endpoints(clients: AwsClients) -> tuple[str, str, str]:
    try:
        return clients.s3.meta.endpoint_url, clients.sqs.meta.endpoint_url, clients.dynamodb.meta.endpoint_url
    finally:
        clients.close()


def session() -> boto3.Session:
    return boto3.Session(aws_access_key_id="AK", aws_secret_access_key="SK", region_name="us-east-1")


def test_dynamodb_follows_its_own_endpoint_where_one_is_set() -> None:
    env = {envvars.BACKEND: "aws", envvars.AWS_ENDPOINT_URL: SHARED, envvars.AWS_ENDPOINT_URL_DYNAMODB: DYNAMODB}
    settings = Settings.from_env(env)
    assert endpoints(AwsClients.from_settings(settings, session())) == (SHARED, SHARED, DYNAMODB)
    settings = Settings.from_env({envvars.BACKEND: "aws", envvars.AWS_ENDPOINT_URL: SHARED})
    assert endpoints(AwsClients.from_settings(settings, session())) == (SHARED, SHARED, SHARED)


def test_the_local_emulation_reads_the_dynamodb_endpoint() -> None:
    config = EmulationConfig.from_env({envvars.AWS_ENDPOINT_URL: SHARED, envvars.AWS_ENDPOINT_URL_DYNAMODB: DYNAMODB})
    assert (config.endpoint_url, config.dynamodb_endpoint_url) == (SHARED, DYNAMODB)
    assert EmulationConfig.from_env({}).dynamodb_endpoint_url is None


def test_a_resource_prefix_names_the_bucket_queues_and_tables() -> None:
    default = EmulationConfig.from_env({})
    assert (default.bucket, default.queue_name, default.dlq_name, default.table_prefix) == (
        "arcs-local",
        "arcs-writes",
        "arcs-writes-dlq",
        "arcs-local",
    )
    named = EmulationConfig.from_env({"ARCS_LOCAL_RESOURCE_PREFIX": "team-a"})
    assert (named.bucket, named.queue_name, named.dlq_name, named.table_prefix) == (
        "team-a",
        "team-a-writes",
        "team-a-writes-dlq",
        "team-a",
    )


@pytest.mark.parametrize("prefix", ["ab", "Team-A", "team_a", "-team", "team-", "a.b", "x" * 64])
def test_a_prefix_that_is_no_bucket_name_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigError, match="ARCS_LOCAL_RESOURCE_PREFIX"):
        EmulationConfig.from_env({"ARCS_LOCAL_RESOURCE_PREFIX": prefix})
