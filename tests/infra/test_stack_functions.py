"""The functions: runtime, tracing, handlers, environment, timeouts, and the tasks function's
limits following its memory and timeout.

The template is conftest's ``synth``: the stack as deployed by default, synthesized once per session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from infra.function import FUNCTIONS_DIR, KNOWN_ENV_NAMES

from arcs import envvars
from arcs.allocator import ARROW_POOL
from tests.infra.synth import Synth

pytestmark = pytest.mark.infra


# --- functions -------------------------------------------------------------------------------------


def test_every_function_is_python_312_on_arm64_traced_with_its_own_log_group(synth: Synth) -> None:
    functions = synth.of_type("AWS::Lambda::Function")
    assert set(functions) == {synth.logical_id(f.function) for f in synth.functions().values()}
    log_groups = set()
    for function in functions.values():
        props = function["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        log_groups.add(props["LoggingConfig"]["LogGroup"]["Ref"])
    assert len(log_groups) == len(functions)
    for log_group in log_groups:
        assert synth.resources[log_group]["Properties"]["RetentionInDays"] > 0


def test_handlers_point_at_the_function_folders(synth: Synth) -> None:
    expected = {
        "edge": ("edge.handler", "ingest"),
        "ingest": ("handler.handler", "ingest"),
        "query": ("handler.stream_handler", "query"),  # through the streaming runtime (infra/query.py)
        "authorizer": ("handler.handler", "authorizer"),
        "bootstrap": ("handler.handler", "bootstrap"),
        "tasks": ("handler.handler", "compact"),  # the folder keeps the project's layout
    }
    outdir = Path(synth.app.outdir)
    for name, function in synth.functions().items():
        handler, folder = expected[name]
        props = synth.props(function.function)
        assert props["Handler"] == handler
        asset = outdir / ("asset." + props["Code"]["S3Key"].removesuffix(".zip"))
        staged = sorted(p.name for p in asset.iterdir() if p.suffix == ".py")
        source = FUNCTIONS_DIR / folder
        assert staged == sorted(p.name for p in source.iterdir() if p.suffix == ".py"), name
        # Nothing heavy in the code asset: the core and its dependencies come from layers.
        assert sum(p.stat().st_size for p in asset.rglob("*")) < 256 * 1024, name


#: The tables each function's environment names: what its code really calls (docs/deploy.md).
FUNCTION_TABLES = {
    "edge": {envvars.CATALOG_TABLE},  # schemas, checked and extended before a write is queued
    "ingest": {envvars.CATALOG_TABLE},  # write markers, commits, file records
    "query": {envvars.TOKENS_TABLE, envvars.CATALOG_TABLE, envvars.LEASES_TABLE},  # + token routes, delete
    "authorizer": {envvars.TOKENS_TABLE},
    "bootstrap": {envvars.TOKENS_TABLE},
    "tasks": {envvars.CATALOG_TABLE, envvars.LEASES_TABLE},
}


def test_environment_uses_only_arcs_envvars_names(synth: Synth) -> None:
    bucket = {"Ref": synth.logical_id(synth.stack.storage.bucket)}
    tables = {
        envvars.TOKENS_TABLE: {"Ref": synth.logical_id(synth.stack.storage.tokens_table)},
        envvars.CATALOG_TABLE: {"Ref": synth.logical_id(synth.stack.storage.catalog_table)},
        envvars.LEASES_TABLE: {"Ref": synth.logical_id(synth.stack.storage.leases_table)},
    }
    queue = {"Ref": synth.logical_id(synth.stack.ingest.queue)}
    envs = {name: synth.props(f.function)["Environment"]["Variables"] for name, f in synth.functions().items()}
    for name, env in envs.items():
        assert set(env) <= KNOWN_ENV_NAMES, name
        assert envvars.AWS_REGION not in env  # reserved: Lambda sets it
        assert envvars.AWS_ENDPOINT_URL not in env  # emulators only
        assert env[envvars.BACKEND] == "aws"
        assert env[envvars.BUCKET] == bucket
        # Exactly the tables the function uses (tests/infra/test_deploy_iam.py pins its grants on them).
        named = {variable: env[variable] for variable in tables if variable in env}
        assert named == {variable: tables[variable] for variable in FUNCTION_TABLES[name]}, name
        assert env[envvars.PREFIX] == ""
        # The authorizer's own cache and the gateway's (tests/infra/test_api_front.py) add up to 60 s.
        assert env[envvars.TOKEN_CACHE_TTL_S] == ("30" if name == "authorizer" else "60"), name
        assert env[envvars.WORK_DIR].startswith("/tmp/")
        # Arrow on the tuned C heap: a handler loads pyarrow before its runtime could choose.
        assert env[envvars.ARROW_MEMORY_POOL] == ARROW_POOL, name
    assert envs["edge"][envvars.QUEUE_URL] == queue
    assert envs["ingest"][envvars.QUEUE_URL] == queue
    # The query function (a continuous query's manual execute) and the tasks function (scheduled
    # continuous queries) write through the write path too.
    assert envs["query"][envvars.QUEUE_URL] == queue
    assert envs["tasks"][envvars.QUEUE_URL] == queue
    for name in ("authorizer", "bootstrap"):
        assert envvars.QUEUE_URL not in envs[name], name
    assert envs["query"][envvars.DUCKDB_MEMORY_LIMIT].endswith("MB")
    memory = synth.props(synth.stack.query.query.function)["MemorySize"]
    assert int(envs["query"][envvars.DUCKDB_MEMORY_LIMIT].removesuffix("MB")) == memory // 2
    # What the function may hold besides DuckDB: a result, its JSON text, and the response.
    assert 0 < int(envs["query"][envvars.QUERY_MAX_RESULT_BYTES]) <= memory * 1024 * 1024 // 16
    assert int(envs["query"][envvars.DUCKDB_THREADS]) >= 2


def test_http_functions_fit_api_gateway_timeout(synth: Synth) -> None:
    # The edge's integration buffers: 29 s. The query function's streams, for up to 15 minutes
    # (tests/infra/test_api_front.py holds its timeout to its query budget and largest result).
    assert synth.props(synth.functions()["edge"].function)["Timeout"] <= 29
    assert 29 < synth.props(synth.functions()["query"].function)["Timeout"] <= 900


# --- compaction and continuous queries -----------------------------------------------------------------


def test_tasks_function_limits_follow_its_memory_and_timeout(synth: Synth) -> None:
    props = synth.props(synth.stack.tasks.tasks.function)
    env = props["Environment"]["Variables"]
    assert props["Timeout"] == 900
    assert props["EphemeralStorage"] == {"Size": 10240}
    # Half the memory for DuckDB: an output file is read into memory for its upload meanwhile.
    assert env[envvars.COMPACTION_MEMORY_LIMIT] == f"{props['MemorySize'] // 2}MB"
    assert env[envvars.DUCKDB_MEMORY_LIMIT] == env[envvars.COMPACTION_MEMORY_LIMIT]
    assert 1 <= int(env[envvars.COMPACTION_THREADS]) <= 6
    # The last job starts with time left to finish; the lease outlives any run.
    assert 60 <= int(env[envvars.COMPACTION_TIME_BUDGET_S]) <= props["Timeout"] - 60
    assert int(env[envvars.COMPACTION_LEASE_S]) > props["Timeout"]
    assert 0 < float(env[envvars.QUERY_TIMEOUT_S]) < props["Timeout"]


def test_tasks_settings_parse_as_the_runtime_reads_them(synth: Synth) -> None:
    from arcs.settings import Settings

    env = synth.props(synth.stack.tasks.tasks.function)["Environment"]["Variables"]
    plain = {name: value for name, value in env.items() if isinstance(value, str)}
    settings = Settings.from_env({**plain, envvars.BUCKET: "b", envvars.CATALOG_TABLE: "t", envvars.QUEUE_URL: "q"})
    assert settings.compaction.time_budget_s == float(env[envvars.COMPACTION_TIME_BUDGET_S])
    assert settings.compaction.lease_s == float(env[envvars.COMPACTION_LEASE_S])
    assert settings.compaction.memory_limit == env[envvars.COMPACTION_MEMORY_LIMIT]
