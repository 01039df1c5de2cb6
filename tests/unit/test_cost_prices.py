"""The cost benchmark's arithmetic: usage in AWS's billing units, priced."""

from __future__ import annotations

import json

import pytest
from benchmarks import cost, cost_metering, cost_prices
from benchmarks.cost_prices import Usage


def test_lambda_bills_configured_memory_times_duration_and_each_request() -> None:
    usage = Usage()
    usage.add_invocation(2048, 0.5)  # 1 GB-s
    usage.add_invocation(1024, 2.0)  # 2 GB-s
    assert cost_prices.gb_seconds(usage.billed_s) == pytest.approx(3.0)
    bill = cost_prices.dollars(usage)
    assert bill["lambda"] == pytest.approx(3 * 0.0000133334 + 2 * 0.20 / 1e6)


def test_each_service_at_its_published_price() -> None:
    usage = Usage(
        api_requests=1_000_000,
        sqs_requests=1_000_000,
        s3_put=1000,
        s3_get=1000,
        ddb_read_units=1e6,
        ddb_write_units=1e6,
    )
    bill = cost_prices.dollars(usage)
    assert bill["api_gateway"] == pytest.approx(3.50)
    assert bill["sqs"] == pytest.approx(0.40)
    assert bill["s3"] == pytest.approx(0.005 + 0.0004)
    assert bill["dynamodb"] == pytest.approx(0.125 + 0.625)
    assert cost_prices.total(usage) == pytest.approx(sum(bill.values()))


def test_usage_adds_and_scales() -> None:
    one = Usage({2048: 1.0}, invocations=2, api_requests=1, s3_put=3, ddb_write_units=1.5)
    two = one + Usage({2048: 1.0, 3008: 2.0}, invocations=1)
    assert two.billed_s == {2048: 2.0, 3008: 2.0} and two.invocations == 3 and two.s3_put == 3
    assert one.scaled(1000).billed_s == {2048: 1000.0}
    assert cost_prices.total(one.scaled(1000)) == pytest.approx(cost_prices.total(one) * 1000, rel=1e-6)


def test_sqs_bills_each_64_kb_chunk() -> None:
    assert cost_prices.sqs_chunks(0) == 1
    assert cost_prices.sqs_chunks(64 * 1024) == 1
    assert cost_prices.sqs_chunks(64 * 1024 + 1) == 2


def test_firehose_rounds_each_record_up_to_5_kb() -> None:
    per_gb = 0.029 + 0.018
    # A 100-byte record bills as 5 KB: a million of them are 5,000,000 KB.
    assert cost_prices.firehose_ingest(1_000_000, 100) == pytest.approx(1_000_000 * 5 * 1024 / 1024**3 * per_gb)
    assert cost_prices.firehose_ingest(1, 5 * 1024 + 1) == pytest.approx(10 * 1024 / 1024**3 * per_gb)


def test_athena_bills_at_least_10_mb_a_query_rounded_up_to_the_mb() -> None:
    mb = 1024**2
    minimum = 10 * mb / 1024**4 * 5.0
    assert cost_prices.athena_query(0) == pytest.approx(minimum)
    assert cost_prices.athena_query(1024**4) == pytest.approx(5.0)
    assert cost_prices.athena_query(20 * mb + 1) == pytest.approx(21 * mb / 1024**4 * 5.0)


def test_schedules_storage_and_fixed_costs() -> None:
    assert cost_prices.monthly_runs(60) == 43_200
    assert cost_prices.storage_month(1024**3) == pytest.approx(0.023)
    assert cost_prices.idle_fixed_month(17, 1, 1) == pytest.approx(1.70 + 3.00 + 0.40)


def test_storage_requests_become_billing_units() -> None:
    transaction = json.dumps({"TransactItems": [{}, {}, {}]}).encode()
    requests = [
        cost_metering.Request("s3", "PUT", 10_000),
        cost_metering.Request("s3", "LIST", 0),
        cost_metering.Request("s3", "GET", 0, received=9000),
        cost_metering.Request("s3", "HEAD", 0),
        cost_metering.Request("s3", "DELETE", 0),  # free
        cost_metering.Request("sqs", "SendMessage", 70 * 1024),  # two chunks
        cost_metering.Request("sqs", "ReceiveMessage", 100, received=50),  # empty: idle polling, not the workload's
        cost_metering.Request("sqs", "ReceiveMessage", 100, received=5000, items=2),
        cost_metering.Request("dynamodb", "Query", 100, received=9000),  # 3 read units
        cost_metering.Request(
            "dynamodb", "TransactWriteItems", 500, items=cost_metering._write_items("X.TransactWriteItems", transaction)
        ),
        cost_metering.Request("dynamodb", "PutItem", 2500),  # 3 write units
    ]
    usage = Usage()
    cost_metering.storage_usage(requests, usage)
    assert (usage.s3_put, usage.s3_get) == (2, 2)
    assert usage.sqs_requests == 3
    assert usage.ddb_read_units == 3
    assert usage.ddb_write_units == 3 * 2 + 3
    assert cost_metering.s3_bytes_read(requests) == 9000


def test_the_stack_figures_match_the_stack() -> None:
    """The memory, schedules and alarm count the benchmark prices are the stack's defaults."""
    from infra.params import DEFAULT_MEMORY_MB

    assert {
        "arcs-edge": DEFAULT_MEMORY_MB["edge"],
        "arcs-ingest": DEFAULT_MEMORY_MB["ingest"],
        "arcs-query": DEFAULT_MEMORY_MB["query"],
        "arcs-authorizer": DEFAULT_MEMORY_MB["authorizer"],
        "arcs-tasks": DEFAULT_MEMORY_MB["tasks"],
    } == cost.MEMORY_MB
    from infra.compact import DEFAULT_SCHEDULES

    from tests.infra.test_deploy_app import EXPECTED_RESOURCE_TYPES

    assert {task: schedule.expression_string for task, schedule in DEFAULT_SCHEDULES.items()} == {
        "compaction": "rate(15 minutes)",
        "continuous_queries": "rate(1 minute)",
        "retention": "cron(17 * * * ? *)",
    }
    assert cost.SCHEDULES_S == {"compaction": 900, "continuous_queries": 60, "retention": 3600}
    assert EXPECTED_RESOURCE_TYPES["AWS::CloudWatch::Alarm"] == cost.STACK_ALARMS
    assert EXPECTED_RESOURCE_TYPES["AWS::CloudWatch::Dashboard"] == cost.STACK_DASHBOARDS
    assert EXPECTED_RESOURCE_TYPES["AWS::SecretsManager::Secret"] == cost.STACK_SECRETS


def test_the_quoted_command_leaves_out_the_output_path() -> None:
    argv = ["--rows", "500", "--out", "/tmp/x.md", "--clickbench-rows=20", "--out=/tmp/y.md"]
    assert cost._without_out(argv) == ["--rows", "500", "--clickbench-rows=20"]
