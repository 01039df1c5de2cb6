"""Deploy-time parameters: every value AWS would refuse stops synthesis with a message naming it,
and the defaults deploy in a new account (reduced memory and concurrency quotas)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template
from infra.app import build
from infra.params import ParameterError

from arcs import envvars
from infra import params

pytestmark = pytest.mark.infra

Json = dict[str, Any]
#: The largest memory a new account may be allowed (Lambda quotas: new accounts have reduced ones).
NEW_ACCOUNT_MEMORY_MB = 3008


def _template(context: dict[str, Any]) -> tuple[Any, Json]:
    _, stack = build(App(context=context))
    return stack, Template.from_stack(stack).to_json()


def _functions(stack: Any, template: Json) -> dict[str, Json]:
    constructs = {
        "edge": stack.edge.edge.function,
        "ingest": stack.ingest.ingest.function,
        "query": stack.query.query.function,
        "authorizer": stack.authorizer.authorizer_function.function,
        "tasks": stack.tasks.tasks.function,
        "bootstrap": stack.bootstrap.bootstrap.function,
    }
    assert set(constructs) == set(params.FUNCTIONS)
    resources = template["Resources"]
    return {
        name: resources[stack.get_logical_id(fn.node.default_child)]["Properties"] for name, fn in constructs.items()
    }


@pytest.fixture(scope="module")
def defaults(layers_dir: Path) -> tuple[Any, Json]:
    return _template({"layers_dir": str(layers_dir)})


def test_defaults_fit_a_new_accounts_quotas(defaults: tuple[Any, Json]) -> None:
    stack, template = defaults
    functions = _functions(stack, template)
    for name, props in functions.items():
        assert props["MemorySize"] <= NEW_ACCOUNT_MEMORY_MB, name
        # A new account's concurrency may be 10, all of it unreservable: reserve nothing by default.
        assert "ReservedConcurrentExecutions" not in props, name
    assert functions["query"]["MemorySize"] == functions["tasks"]["MemorySize"] == 3008


def test_a_write_the_edge_accepts_fits_the_memory_of_the_edge_and_of_ingest(
    defaults: tuple[Any, Json], layers_dir: Path
) -> None:
    """A write decodes to several times its decompressed size at the edge and again at ingest: the
    cap follows the smaller function, or an acknowledged write could fail ingest for good."""
    stack, template = defaults
    functions = _functions(stack, template)
    assert functions["edge"]["Environment"]["Variables"][envvars.MAX_DECOMPRESSED_BYTES] == str(100 * 1024 * 1024)
    stack, template = _template({"layers_dir": str(layers_dir), "ingest_memory_mb": "1024"})
    assert _functions(stack, template)["edge"]["Environment"]["Variables"][envvars.MAX_DECOMPRESSED_BYTES] == str(
        64 * 1024 * 1024
    )


def test_query_function_duckdb_gets_half_its_memory_and_three_quarters_of_its_tmp(defaults: tuple[Any, Json]) -> None:
    stack, template = defaults
    query = _functions(stack, template)["query"]
    env = query["Environment"]["Variables"]
    assert env[envvars.DUCKDB_MEMORY_LIMIT] == f"{query['MemorySize'] // 2}MB"
    assert query["EphemeralStorage"] == {"Size": 4096}
    assert env[envvars.DUCKDB_MAX_TEMP_SIZE] == "3072MiB"
    # The runtime reads it as it is written (arcs.settings -> DuckDB's max_temp_directory_size).
    from arcs.settings import Settings

    assert Settings.from_env(
        {envvars.DUCKDB_MAX_TEMP_SIZE: env[envvars.DUCKDB_MAX_TEMP_SIZE]}
    ).duckdb_max_temp_size == ("3072MiB")


def test_memory_concurrency_storage_and_timeouts_reach_the_template(layers_dir: Path) -> None:
    context: dict[str, Any] = {"layers_dir": str(layers_dir)}
    for i, name in enumerate(params.FUNCTIONS):
        context[f"{name}_memory_mb"] = str(1024 + 128 * i)
        context[f"{name}_reserved_concurrency"] = str(5 + i)
    context |= {
        "query_ephemeral_storage_mb": "8192",
        "ingest_timeout_s": "120",
        "tasks_timeout_s": "600",
        "query_timeout_s": "60",
    }
    stack, template = _template(context)
    functions = _functions(stack, template)
    for i, name in enumerate(params.FUNCTIONS):
        assert functions[name]["MemorySize"] == 1024 + 128 * i, name
        assert functions[name]["ReservedConcurrentExecutions"] == 5 + i, name
    query_env = functions["query"]["Environment"]["Variables"]
    assert query_env[envvars.DUCKDB_MEMORY_LIMIT] == f"{(1024 + 128 * 2) // 2}MB"
    assert functions["query"]["EphemeralStorage"] == {"Size": 8192}
    assert query_env[envvars.DUCKDB_MAX_TEMP_SIZE] == "6144MiB"
    assert functions["ingest"]["Timeout"] == 120
    assert functions["tasks"]["Timeout"] == 600
    # A query's 60 s, the margin, and 1,280 MB's largest result (40 MiB) streamed at 2 MiB/s past 6 MiB.
    assert query_env[envvars.QUERY_TIMEOUT_S] == "60"
    assert functions["query"]["Timeout"] == 60 + 4 + 17
    tasks_env = functions["tasks"]["Environment"]["Variables"]
    assert tasks_env[envvars.COMPACTION_TIME_BUDGET_S] == "300"  # stops starting jobs 5 minutes before
    # The write queue's visibility follows the ingest timeout (6 x, plus the batching window).
    [queue] = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue" and r["Properties"].get("RedrivePolicy")
    ]
    assert queue["VisibilityTimeout"] == 6 * 120 + 5


def test_compaction_tiers_and_sort_keys_reach_every_function_and_default_to_unset(layers_dir: Path) -> None:
    context = {"layers_dir": str(layers_dir), "compaction_tiers": "hour", "sort_keys": "cpu:host;hits:CounterID"}
    stack, template = _template(context)
    for name, function in _functions(stack, template).items():
        env = function["Environment"]["Variables"]
        assert env[envvars.COMPACTION_TIERS] == "hour", name  # e.g. an Athena user's: every file in an hour
        assert env[envvars.SORT_KEYS] == "cpu:host;hits:CounterID", name
    stack, template = _template({"layers_dir": str(layers_dir)})
    for name, function in _functions(stack, template).items():
        env = function["Environment"]["Variables"]
        assert envvars.COMPACTION_TIERS not in env and envvars.SORT_KEYS not in env, name  # the code's defaults


def test_cdk_json_values_may_be_json_numbers_and_booleans(layers_dir: Path) -> None:
    stack, template = _template(
        {"layers_dir": str(layers_dir), "query_memory_mb": 2048, "query_image": False, "ingest_batch_window_s": 10}
    )
    assert _functions(stack, template)["query"]["MemorySize"] == 2048


# Each rule, with the message a user sees. Context values arrive as strings from the command line.
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"query_memory_mb": "64"}, "query_memory_mb must be 128 to 10240 MB, got 64"),
    ({"tasks_memory_mb": "10241"}, "tasks_memory_mb must be 128 to 10240 MB, got 10241"),
    ({"edge_memory_mb": "1GB"}, "edge_memory_mb must be a whole number, got '1GB'"),
    ({"ingest_memory_mb": True}, "ingest_memory_mb must be a whole number, got True"),
    ({"authorizer_reserved_concurrency": "0"}, "authorizer_reserved_concurrency must be 1 to 100000, got 0"),
    ({"ingest_reserved_concurrency": "2"}, "ingest_reserved_concurrency must be 5 to 100000, got 2"),
    ({"query_ephemeral_storage_mb": "256"}, "query_ephemeral_storage_mb must be 512 to 10240 MB, got 256"),
    ({"ingest_timeout_s": "901"}, "ingest_timeout_s must be 1 to 900 s, got 901"),
    ({"query_timeout_s": "296"}, "query_timeout_s must be 1 to 295 s, got 296"),
    ({"tasks_timeout_s": "300"}, "tasks_timeout_s must be 360 to 900 s, got 300"),
    ({"ingest_batch_size": "10001"}, "ingest_batch_size must be 1 to 10000, got 10001"),
    ({"ingest_batch_size": "0"}, "ingest_batch_size must be 1 to 10000, got 0"),
    ({"ingest_batch_window_s": "301"}, "ingest_batch_window_s must be 0 to 300 s, got 301"),
    ({"ingest_batch_window_s": "1.5"}, "ingest_batch_window_s must be a whole number, got '1.5'"),
    (
        {"ingest_batch_window_s": "0"},
        "ingest_batch_size 1000 needs ingest_batch_window_s of at least 1 s: Lambda takes an SQS batch above 10 "
        "messages only with a batching window (got 0 s)",
    ),
    ({"architecture": "riscv64"}, "architecture must be one of ['arm64', 'x86_64'], got 'riscv64'"),
    ({"query_image": "yes"}, "query_image must be true or false, got 'yes'"),
    ({"stack_name": "1arcs"}, "stack_name must be a letter, then letters, digits and '-' (128 at most), got '1arcs'"),
    ({"stack_name": "arc_serverless"}, "stack_name must be a letter"),
    ({"prefix": "tsdb data"}, "prefix must be letters, digits and . _ - / (200 at most; a letter or digit first)"),
    ({"glue_database": "Metrics-DB"}, "glue_database must be lower-case letters, digits and '_' (255 at most)"),
    ({"express_zone": "us-east-1a"}, "express_zone must be an availability zone id such as 'use1-az4', got"),
    ({"athena_tables": "{metrics.cpu: 1}"}, "athena_tables must be JSON (Expecting property name"),
    ({"athena_tables": '["metrics.cpu"]'}, 'athena_tables must be an object {"db.measurement"'),
    ({"athena_tables": '{"metrics.cpu": {"usage": 1}}'}, "athena_tables: 'metrics.cpu' must map column names to type"),
    ({"athena_tables": '{"metrics.cpu": {"usage": "decimal"}}'}, "athena_tables: metrics.cpu: unknown types"),
    ({"alarm_email": "ops at example.com"}, "alarm_email must be an e-mail address, got 'ops at example.com'"),
    ({"alarm_topic_arn": "ops-topic"}, "alarm_topic_arn must be an SNS topic ARN"),
    (
        {"alarm_email": "ops@example.com", "alarm_topic_arn": "arn:aws:sns:us-east-1:123456789012:ops"},
        "give alarm_email or alarm_topic_arn, not both",
    ),
    ({"alarm_oldest_write_s": "59"}, "alarm_oldest_write_s must be 60 to 1209600 s, got 59"),
    ({"compaction_tiers": "day"}, "compaction_tiers: ARCS_COMPACTION_TIERS must be one of 'hour'"),
    ({"sort_keys": "hits:"}, "sort_keys: ARCS_SORT_KEYS: 'hits:' must be 'measurement:column[,column...]'"),
    ({"query_memory": "4096"}, "unknown parameter 'query_memory'; did you mean 'query_memory_mb'?"),
    ({"ingest_memory_mb": "512"}, "ingest_memory_mb must be"),
    ({"edge_memory_mb": "128"}, "edge_memory_mb must be"),
    ({"query-memory-mb": "4096"}, "unknown parameter 'query-memory-mb'; did you mean 'query_memory_mb'?"),
    ({"queryMemoryMb": "4096"}, "unknown parameter 'queryMemoryMb'; did you mean 'query_memory_mb'?"),
    ({"Query_Memory_MB": "4096"}, "unknown parameter 'Query_Memory_MB'; did you mean 'query_memory_mb'?"),
    # An earlier version's key is refused with the name that replaced it, not silently ignored.
    ({"compact_memory_mb": "4096"}, "parameter 'compact_memory_mb' is now 'tasks_memory_mb'"),
    ({"compact_timeout_s": "600"}, "parameter 'compact_timeout_s' is now 'tasks_timeout_s'"),
    (
        {"compact_reserved_concurrency": "2"},
        "parameter 'compact_reserved_concurrency' is now 'tasks_reserved_concurrency'",
    ),
]


@pytest.mark.parametrize(("context", "message"), REFUSED, ids=[m[:48] for _, m in REFUSED])
def test_a_value_aws_would_refuse_stops_synthesis_with_a_clear_message(
    layers_dir: Path, context: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        build(App(context={"layers_dir": str(layers_dir), **context}))


def test_small_batches_need_no_window_and_defaults_come_from_empty_values(layers_dir: Path) -> None:
    chosen = params.read(
        {"ingest_batch_size": "10", "ingest_batch_window_s": "0", "prefix": "/tsdb/", "stack_name": ""}
    )
    assert (chosen.ingest_batch_size, chosen.ingest_batch_window_s) == (10, 0)
    assert chosen.prefix == "tsdb"
    assert chosen.stack_name == "ArcServerless"
    # The CDK's own context keys (flags, lookups, CLI settings) are not parameters and pass through.
    params.read({"@aws-cdk/core:checkSecretUsage": True, "aws:cdk:enable-path-metadata": True})
    with pytest.raises(ParameterError):
        params.read({"ingest_batch_size": "11", "ingest_batch_window_s": "0"})


def test_every_parameter_is_documented_once_with_its_default() -> None:
    """docs/deploy.md's parameter table is the list in infra/params.py, row for row."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    section = text.split("### Parameters", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[2]
    assert rows == {p.key: p.default_text for p in params.PARAMETERS}
    assert json.dumps(sorted(rows)) == json.dumps(sorted(params.KEYS))
