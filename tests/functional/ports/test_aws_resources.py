"""The AWS resources: idempotent creation, one table per kind of item, errors translated."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from arcs.adapters.aws.catalog import DynamoCatalog
from arcs.adapters.aws.objects import S3Store
from arcs.adapters.aws.queue import SqsWriteQueue
from arcs.adapters.aws.tokens import DynamoTokenStore
from arcs.adapters.aws.wiring import AwsClients, create_resources, table_names
from arcs.errors import StorageFault
from arcs.ports import (
    CompactionJob,
    Partition,
)
from tests.functional.ports.contract import H0, token

if TYPE_CHECKING:
    from tests.conftest import AwsEnv

pytestmark = pytest.mark.functional


def test_create_resources_is_idempotent(aws: AwsEnv) -> None:
    again = create_resources(
        aws.clients,
        bucket=aws.bucket,
        queue_name=aws.queue_url.rsplit("/", 1)[1],
        dlq_name=aws.dlq_url.rsplit("/", 1)[1],
        table_prefix=aws.catalog_table.removesuffix("-catalog"),
        max_receive_count=3,
    )
    assert (again["queue_url"], again["dlq_url"]) == (aws.queue_url, aws.dlq_url)
    attributes = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["MaximumMessageSize"] == "1048576"
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == again["dlq_arn"]
    assert int(redrive["maxReceiveCount"]) == 3
    assert (again["tokens_table"], again["catalog_table"], again["leases_table"]) == (
        aws.tokens_table,
        aws.catalog_table,
        aws.leases_table,
    )
    # Markers, runs, leases and jobs expire; tokens never do by TTL (an expired token stays listed).
    for table, status in (
        (aws.catalog_table, ("ENABLED", "expires_at")),
        (aws.leases_table, ("ENABLED", "expires_at")),
        (aws.tokens_table, ("DISABLED", None)),
    ):
        ttl = aws.dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        assert (ttl.get("TimeToLiveStatus"), ttl.get("AttributeName")) == status, table


def test_create_resources_from_a_session(aws: AwsEnv) -> None:
    # A bare session has no endpoint, so the moto endpoint comes from clients made here.
    clients = AwsClients.create(aws.session, endpoint_url=aws.endpoint)
    try:
        made = create_resources(clients, "arcs-second", "q-second", "dlq-second", "t-second")
    finally:
        clients.close()
    assert made["queue_url"].endswith("/q-second")
    assert (made["tokens_table"], made["catalog_table"], made["leases_table"]) == table_names("t-second")
    assert table_names("t-second") == ("t-second-tokens", "t-second-catalog", "t-second-leases")


def test_backend_failures_become_storage_faults(aws: AwsEnv) -> None:
    missing_bucket = S3Store(aws.s3, "arcs-no-such-bucket")
    with pytest.raises(StorageFault):
        missing_bucket.get("k")  # a missing bucket is our fault, not a missing object
    with pytest.raises(StorageFault):
        missing_bucket.put("k", b"x")
    with pytest.raises(StorageFault):
        list(missing_bucket.list(""))
    with pytest.raises(StorageFault):
        DynamoCatalog(aws.dynamodb, "no-such-table").get_schema("db", "cpu")
    with pytest.raises(StorageFault):
        DynamoTokenStore(aws.dynamodb, "no-such-table").list()
    with pytest.raises(StorageFault):
        DynamoCatalog(aws.dynamodb, aws.catalog_table, "no-such-table").acquire_lease("p", "me", 60)


def test_a_table_a_function_was_not_given_fails_plainly(aws: AwsEnv) -> None:
    # The edge and ingest functions get the catalog table only (docs/deploy.md).
    catalog = DynamoCatalog(aws.dynamodb, aws.catalog_table)
    assert catalog.list_databases() == []
    with pytest.raises(StorageFault, match="no DynamoDB table is configured"):
        catalog.acquire_lease("p", "me", 60)
    with pytest.raises(StorageFault, match="no DynamoDB table is configured"):
        DynamoTokenStore(aws.dynamodb, "").list()


def _keys(aws: AwsEnv, table: str) -> set[str]:
    return {item["pk"]["S"] for item in aws.dynamodb.scan(TableName=table)["Items"]}


def test_each_kind_of_item_lives_in_its_own_table(aws: AwsEnv) -> None:
    catalog = DynamoCatalog(aws.dynamodb, aws.catalog_table, aws.leases_table)
    tokens = DynamoTokenStore(aws.dynamodb, aws.tokens_table)
    catalog.create_database("db")
    assert catalog.acquire_lease("db.cpu.h", "job1", 60)
    started = datetime(2024, 3, 2, tzinfo=UTC)
    catalog.put_compaction_job(CompactionJob("job1", Partition("db", "cpu", H0), "running", started, started))
    tokens.put(token("t1", "look", 0))
    assert _keys(aws, aws.catalog_table) == {"DATABASES"}
    assert _keys(aws, aws.leases_table) == {"LEASE#db.cpu.h", "CJOBS", "CJOBS#ACTIVE"}
    assert _keys(aws, aws.tokens_table) == {"TOKENS", "TOKENLOOKUP#look"}
    queue = SqsWriteQueue(aws.sqs, aws.queue_url + "-gone", S3Store(aws.s3, aws.bucket), aws.prefix, 1024)
    with pytest.raises(StorageFault):
        queue.enqueue("w1", b"x")
