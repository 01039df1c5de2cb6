"""What deploying needs beyond the request path: layers, the tasks function and its schedules, the
bootstrap token, Athena's tables, the parameters, least privilege per function, and every route.

The main synthesis here has an Athena table. Layers are the stand-ins of conftest's
``layers_dir``; tests/layers builds the real ones.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, CfnElement, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from infra.api import PUBLIC_PATHS
from infra.app import build
from infra.athena import ArcsAthena
from infra.compact import TASKS, ArcsTasks
from infra.failures import AsyncFailures
from infra.function import FUNCTIONS_DIR, FunctionDefaults
from infra.stack import ArcsStack
from infra.storage import ArcsStorage
from layers.build import FUNCTION_LAYERS, LAYERS

from arcs import envvars

pytestmark = pytest.mark.infra

Json = dict[str, Any]
ATHENA_TABLES = {"metrics.cpu-load": {"host": "string", "usage": "float64", "procs": "int64", "up": "bool"}}


@dataclass(frozen=True)
class Synth:
    app: App
    stack: ArcsStack
    template: Json

    @property
    def resources(self) -> dict[str, Json]:
        return self.template["Resources"]  # type: ignore[no-any-return]

    def of_type(self, cfn_type: str) -> dict[str, Json]:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def logical_id(self, construct: Any) -> str:
        element = construct if isinstance(construct, CfnElement) else construct.node.default_child
        return self.stack.get_logical_id(element)

    def props(self, construct: Any) -> Json:
        return self.resources[self.logical_id(construct)]["Properties"]  # type: ignore[no-any-return]

    def functions(self) -> dict[str, Any]:
        stack = self.stack
        return {
            "edge": stack.edge.edge,
            "ingest": stack.ingest.ingest,
            "query": stack.query.query,
            "authorizer": stack.authorizer.authorizer_function,
            "bootstrap": stack.bootstrap.bootstrap,
            "tasks": stack.tasks.tasks,
        }

    def statements(self, role: Any) -> list[Json]:
        role_id = self.logical_id(role)
        return [
            statement
            for policy in self.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]


def _synth(context: dict[str, Any], functions_dir: Path = FUNCTIONS_DIR) -> Synth:
    app, stack = build(App(context=context), functions_dir=functions_dir)
    return Synth(app, stack, Template.from_stack(stack).to_json())


@pytest.fixture(scope="module")
def synth(layers_dir: Path) -> Synth:
    return _synth({"layers_dir": str(layers_dir), "athena_tables": json.dumps(ATHENA_TABLES)})


def _actions(statements: list[Json]) -> set[str]:
    out: set[str] = set()
    for statement in statements:
        action = statement["Action"]
        out.update([action] if isinstance(action, str) else action)
    return out


# --- layers ----------------------------------------------------------------------------------------


def test_each_function_has_exactly_its_layers_for_its_architecture(synth: Synth, layers_dir: Path) -> None:
    layers = synth.of_type("AWS::Lambda::LayerVersion")
    by_name = {name: synth.logical_id(layer) for name, layer in synth.stack.layers.layers.items()}
    assert set(by_name) == set(LAYERS)
    assert set(layers) == set(by_name.values())
    for name, logical in by_name.items():
        props = layers[logical]["Properties"]
        assert props["CompatibleRuntimes"] == ["python3.12"]
        assert props["CompatibleArchitectures"] == ["arm64"]
        assert props["Description"].startswith(f"Arc Serverless {name}: {name}==0")
        # The asset is the build's own zip, byte for byte.
        asset = Path(synth.app.outdir) / ("asset." + props["Content"]["S3Key"])
        assert asset.read_bytes() == (layers_dir / "arm64" / f"{name}.zip").read_bytes()
    for function, construct in synth.functions().items():
        props = synth.props(construct.function)
        # In CDK's order (sorted, with the recognizeLayerVersion flag): the layers' trees are disjoint.
        assert sorted(props["Layers"], key=json.dumps) == sorted(
            ({"Ref": by_name[name]} for name in FUNCTION_LAYERS[function]), key=json.dumps
        ), function
        assert props["Architectures"] == ["arm64"]
    assert "Rules" not in synth.template or "LayersBuilt" not in json.dumps(synth.template["Rules"])


def test_without_built_layers_synthesis_works_and_deployment_is_refused(tmp_path: Path) -> None:
    bare = _synth({"layers_dir": str(tmp_path)})
    assert bare.of_type("AWS::Lambda::LayerVersion") == {}
    for function in bare.functions().values():
        assert "Layers" not in bare.props(function.function)
    [rule] = [r for name, r in bare.template["Rules"].items() if name.startswith("LayersLayersBuilt")]
    [assertion] = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": ["not-built", "built"]}  # always false: never deploys
    assert "make layers ARCH=arm64" in assertion["AssertDescription"]
    warnings = [
        entry.data
        for construct in bare.stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:warning"
    ]
    assert any("make layers" in str(w) for w in warnings)


def test_parameters_reach_the_template(layers_dir: Path) -> None:
    custom = _synth(
        {
            "layers_dir": str(layers_dir),
            "architecture": "x86_64",
            "query_memory_mb": "2048",
            "ingest_batch_size": "500",
            "ingest_batch_window_s": "20",
            "prefix": "tsdb",
            "stack_name": "Arcs-Test",
        }
    )
    assert custom.stack.stack_name == "Arcs-Test"
    for function in custom.functions().values():
        assert custom.props(function.function)["Architectures"] == ["x86_64"]
    for layer in custom.of_type("AWS::Lambda::LayerVersion").values():
        assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64"]
    query = custom.props(custom.stack.query.query.function)
    assert query["MemorySize"] == 2048
    # DuckDB gets half the function's memory; results and the process keep the rest.
    assert query["Environment"]["Variables"][envvars.DUCKDB_MEMORY_LIMIT] == "1024MB"
    assert query["Environment"]["Variables"][envvars.PREFIX] == "tsdb"
    [mapping] = custom.of_type("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["BatchSize"] == 500
    assert mapping["Properties"]["MaximumBatchingWindowInSeconds"] == 20
    ingest_env = custom.props(custom.stack.ingest.ingest.function)["Environment"]["Variables"]
    assert ingest_env[envvars.INGEST_BATCH_MESSAGES] == "500"
    assert ingest_env[envvars.INGEST_BATCH_WINDOW_S] == "20"
    # The claim checks and quarantine follow the prefix.
    rules = custom.props(custom.stack.storage.bucket)["LifecycleConfiguration"]["Rules"]
    assert {r.get("Prefix") for r in rules} >= {"tsdb/_arcs/claims/", "tsdb/_arcs/quarantine/"}
    assert custom.props(custom.stack.athena.database)["DatabaseInput"]["Name"] == "arcs_test"


def test_unknown_architecture_is_refused(layers_dir: Path) -> None:
    with pytest.raises(ValueError, match="architecture"):
        _synth({"layers_dir": str(layers_dir), "architecture": "riscv64"})


# --- tasks and its schedules ----------------------------------------------------------------------


def test_tasks_function_runs_long_with_duckdb_disk_and_the_write_path(synth: Synth) -> None:
    props = synth.props(synth.stack.tasks.tasks.function)
    assert props["Handler"] == "handler.handler"
    assert props["Timeout"] == 900
    assert props["EphemeralStorage"] == {"Size": 10240}
    assert props["MemorySize"] >= 2048
    env = props["Environment"]["Variables"]
    assert set(env) >= {envvars.BUCKET, envvars.CATALOG_TABLE, envvars.LEASES_TABLE, envvars.WORK_DIR}
    assert envvars.TOKENS_TABLE not in env
    # Continuous queries write their results through the write queue.
    assert env[envvars.QUEUE_URL] == {"Ref": synth.logical_id(synth.stack.ingest.queue)}


def _tasks_handler_tasks() -> set[str]:
    """The tasks ``functions/compact/handler.py`` runs (any other one it refuses)."""
    spec = importlib.util.spec_from_file_location("arcs_tasks_handler", FUNCTIONS_DIR / "compact" / "handler.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {module.COMPACTION, module.CONTINUOUS_QUERIES, module.RETENTION}


def test_schedules_send_the_tasks_function_only_tasks_it_runs(synth: Synth) -> None:
    function_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.tasks.tasks.function), "Arn"]}
    dlq_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.failures.queue), "Arn"]}
    rules = synth.of_type("AWS::Events::Rule")
    assert len(rules) == len(TASKS) == 3
    seen = {}
    for rule in rules.values():
        props = rule["Properties"]
        assert props["State"] == "ENABLED"
        [target] = props["Targets"]
        assert target["Arn"] == function_arn
        assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2}
        assert target["DeadLetterConfig"] == {"Arn": dlq_arn}
        event = json.loads(target["Input"])
        assert set(event) == {"task"}
        seen[event["task"]] = props["ScheduleExpression"]
    assert seen == {
        "compaction": "rate(15 minutes)",
        "continuous_queries": "rate(1 minute)",
        "retention": "cron(17 * * * ? *)",
    }
    assert set(seen) <= _tasks_handler_tasks()
    # EventBridge may invoke the function, and only its rules may.
    permissions = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert len(permissions) == len(TASKS)
    assert {json.dumps(p["SourceArn"]) for p in permissions} == {
        json.dumps({"Fn::GetAtt": [logical, "Arn"]}) for logical in rules
    }


def test_a_schedule_for_a_task_the_function_does_not_run_is_refused() -> None:
    stack = Stack(App(), "Probe")
    storage = ArcsStorage(stack, "Storage")
    with pytest.raises(ValueError, match="vacuum"):
        ArcsTasks(
            stack,
            "Tasks",
            storage=storage,
            defaults=FunctionDefaults(environment={}),
            write_queue=sqs.Queue(stack, "Writes"),
            failures=AsyncFailures(stack, "Failures"),
            schedules={"vacuum": events.Schedule.cron(hour="3", minute="17")},
        )


# --- the bootstrap admin token ----------------------------------------------------------------------


def test_admin_token_is_generated_into_secrets_manager_and_created_at_deploy(synth: Synth) -> None:
    boot = synth.stack.bootstrap
    secret_id = synth.logical_id(boot.secret)
    secret = synth.resources[secret_id]
    assert secret["DeletionPolicy"] == "Retain"
    generated = secret["Properties"]["GenerateSecretString"]
    assert generated["PasswordLength"] >= 32
    assert generated["ExcludePunctuation"] is True
    [custom] = synth.of_type("Custom::ArcsBootstrapToken").values()
    assert custom["Properties"]["ServiceToken"] == {"Fn::GetAtt": [synth.logical_id(boot.bootstrap.function), "Arn"]}
    assert custom["Properties"]["SecretArn"] == {"Ref": secret_id}
    # A new tokens table makes CloudFormation call the handler again, which fills it.
    assert custom["Properties"]["TokensTable"] == {"Ref": synth.logical_id(synth.stack.storage.tokens_table)}
    [read] = [s for s in synth.statements(boot.bootstrap.role) if "secretsmanager:GetSecretValue" in _actions([s])]
    assert read["Resource"] == {"Ref": secret_id}
    handler = synth.props(boot.bootstrap.function)
    assert handler["Handler"] == "handler.handler"
    assert (FUNCTIONS_DIR / "bootstrap" / "handler.py").is_file()


def test_outputs_name_the_api_the_secret_and_the_bucket(synth: Synth) -> None:
    outputs = synth.template["Outputs"]
    assert "ApiUrl" in outputs
    assert outputs["AdminTokenSecretArn"]["Value"] == {"Ref": synth.logical_id(synth.stack.bootstrap.secret)}
    assert "get-secret-value" in outputs["AdminTokenSecretArn"]["Description"]
    assert outputs["BucketName"]["Value"] == {"Ref": synth.logical_id(synth.stack.storage.bucket)}
    assert outputs["GlueDatabase"]["Value"] == "arcserverless"


# --- storage ---------------------------------------------------------------------------------------


def test_quarantined_files_expire_after_90_days(synth: Synth) -> None:
    rules = synth.props(synth.stack.storage.bucket)["LifecycleConfiguration"]["Rules"]
    [quarantine] = [r for r in rules if r.get("Prefix") == "_arcs/quarantine/"]
    assert quarantine["ExpirationInDays"] == 90
    assert quarantine["Status"] == "Enabled"
    # Nothing expires under a data prefix: every other rule is the system directory's or multipart aborts.
    for rule in rules:
        assert rule.get("Prefix", "_arcs/").startswith("_arcs/") or "ExpirationInDays" not in rule


# --- Athena ----------------------------------------------------------------------------------------


def test_glue_tables_project_the_hour_layout(synth: Synth) -> None:
    database = synth.props(synth.stack.athena.database)
    assert database["DatabaseInput"]["Name"] == "arcserverless"
    [table] = synth.of_type("AWS::Glue::Table").values()
    props = table["Properties"]
    assert props["DatabaseName"] == "arcserverless"
    table_input = props["TableInput"]
    assert table_input["Name"] == "metrics_cpu_load"
    assert table_input["TableType"] == "EXTERNAL_TABLE"
    assert table_input["PartitionKeys"] == [{"Name": "hour", "Type": "string"}]
    params = table_input["Parameters"]
    assert params["projection.enabled"] == "true"
    assert params["projection.hour.type"] == "date"
    assert params["projection.hour.format"] == "yyyy/MM/dd/HH"
    assert params["projection.hour.interval.unit"] == "HOURS"
    assert params["projection.hour.range"].endswith(",NOW")
    bucket = {"Ref": synth.logical_id(synth.stack.storage.bucket)}
    assert params["storage.location.template"] == {"Fn::Join": ["", ["s3://", bucket, "/metrics/cpu-load/${hour}/"]]}
    descriptor = table_input["StorageDescriptor"]
    assert descriptor["Location"] == {"Fn::Join": ["", ["s3://", bucket, "/metrics/cpu-load/"]]}
    assert descriptor["SerdeInfo"]["SerializationLibrary"].endswith("ParquetHiveSerDe")
    assert descriptor["Columns"] == [
        {"Name": "time", "Type": "timestamp"},
        {"Name": "host", "Type": "string"},
        {"Name": "usage", "Type": "double"},
        {"Name": "procs", "Type": "bigint"},
        {"Name": "up", "Type": "boolean"},
    ]


def test_projection_format_matches_the_storage_layout() -> None:
    from datetime import UTC, datetime

    from arcs import layout

    key = layout.data_key("", "metrics", "cpu", datetime(2026, 11, 22, 7, tzinfo=UTC), "f.parquet")
    assert re.search(r"/2026/11/22/07/", key), key  # yyyy/MM/dd/HH, as projected


@pytest.mark.parametrize(
    "tables",
    [{"nodot": {"a": "string"}}, {"metrics.cpu": {"a": "varchar"}}, {"1db.cpu": {"a": "string"}}],
)
def test_athena_tables_that_cannot_exist_are_refused(tables: dict[str, dict[str, str]]) -> None:
    stack = Stack(App(), "Probe")
    storage = ArcsStorage(stack, "Storage")
    with pytest.raises(ValueError, match="athena_tables"):
        ArcsAthena(
            stack, "Athena", bucket_name=storage.bucket.bucket_name, prefix="", database_name="probe", tables=tables
        )


# --- IAM: each function reaches only what it needs ---------------------------------------------------

_LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
_XRAY = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
_DDB_READ = {
    "dynamodb:BatchGetItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
}
_DDB_WRITE = {"dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
_SEND = {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
#: The whole of each function's permissions; anything added must be added here on purpose.
EXPECTED_ACTIONS = {
    # PutObject: claim checks; Get/Put: a bulk import's status record (tests/infra/test_stack.py).
    "edge": _LOGS | _XRAY | _DDB_READ | _DDB_WRITE | _SEND | {"s3:GetObject", "s3:PutObject"},
    "ingest": _LOGS
    | _XRAY
    | _DDB_READ
    | _DDB_WRITE
    | {
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:ListBucket",
    },
    # PutObject: the delete API rewrites data files, big results and a manual execute's claim checks
    # go under _arcs/; InvokeFunction only on the tasks function (the compaction trigger).
    # tests/infra/test_stack.py pins the resources.
    "query": _LOGS
    | _XRAY
    | _DDB_READ
    | _DDB_WRITE
    | _SEND
    | {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "lambda:InvokeFunction"},
    "authorizer": _LOGS | _XRAY | _DDB_READ,
    "bootstrap": _LOGS
    | _XRAY
    | _DDB_READ
    | _DDB_WRITE
    | _SEND  # a failed invocation's record, to the failure queue
    | {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"},
    # Continuous queries' results go through the write path; deleting claim checks is denied (below).
    "tasks": _LOGS
    | _XRAY
    | _DDB_READ
    | _DDB_WRITE
    | _SEND
    | {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"},
}
#: The tables each function may read (r) or read and write (rw); none other.
EXPECTED_TABLES = {
    "edge": {"catalog": "rw"},
    "ingest": {"catalog": "rw"},
    "query": {"tokens": "rw", "catalog": "rw", "leases": "rw"},
    "authorizer": {"tokens": "r"},
    "bootstrap": {"tokens": "rw"},
    "tasks": {"catalog": "rw", "leases": "rw"},
}
#: The explicit denies: a claim check stands for an acknowledged write until ingest commits it.
EXPECTED_DENIES = {
    "tasks": [(["s3:DeleteObject"], "/_arcs/claims/*")],
    # Quarantined copies have a data file's key shape, under _arcs/: the query function's grant
    # on data keys must not reach them.
    "query": [(["s3:DeleteObject", "s3:PutObject"], "/_arcs/*.parquet")],
}


def test_each_function_has_exactly_the_permissions_it_needs(synth: Synth) -> None:
    functions = synth.functions()
    assert set(functions) == set(EXPECTED_ACTIONS)
    bucket = synth.logical_id(synth.stack.storage.bucket)
    bucket_arn = {"Fn::GetAtt": [bucket, "Arn"]}
    storage = synth.stack.storage
    tables = {
        json.dumps({"Fn::GetAtt": [synth.logical_id(table), "Arn"]}): name
        for name, table in (
            ("tokens", storage.tokens_table),
            ("catalog", storage.catalog_table),
            ("leases", storage.leases_table),
        )
    }
    queue = {"Fn::GetAtt": [synth.logical_id(synth.stack.ingest.queue), "Arn"]}
    failures = {"Fn::GetAtt": [synth.logical_id(synth.stack.failures.queue), "Arn"]}
    #: Functions invoked asynchronously send their failed invocations' records to the failure queue.
    sends = {"edge": [queue], "query": [queue], "tasks": [queue, failures], "bootstrap": [failures]}
    for name, function in functions.items():
        statements = synth.statements(function.role)
        allowed = [s for s in statements if s["Effect"] == "Allow"]
        denied = [s for s in statements if s["Effect"] != "Allow"]
        assert _actions(allowed) == EXPECTED_ACTIONS[name], name
        assert [(sorted(_actions([s])), s["Resource"]) for s in denied] == [
            (actions, {"Fn::Join": ["", [bucket_arn, prefix]]}) for actions, prefix in EXPECTED_DENIES.get(name, [])
        ], name
        granted: dict[str, set[str]] = {}
        for statement in allowed:
            actions = _actions([statement])
            if any(a.startswith("dynamodb:") for a in actions):
                assert all(a.startswith("dynamodb:") for a in actions), name
                resources = statement["Resource"]
                for resource in resources if isinstance(resources, list) else [resources]:  # whole tables only
                    granted.setdefault(tables[json.dumps(resource)], set()).update(actions)
            if any(a.startswith("s3:") for a in actions):
                assert bucket in json.dumps(statement["Resource"]), name  # the data bucket only
            if any(a.startswith("sqs:") for a in actions) and name != "ingest":
                resources = statement["Resource"]  # minimized policies merge statements
                for resource in resources if isinstance(resources, list) else [resources]:
                    assert resource in sends[name], name  # senders: their queues only
            if statement["Resource"] == "*":
                assert actions == _XRAY, name  # X-Ray alone has no resource-level permissions
        expected = {
            table: _DDB_READ | (_DDB_WRITE if mode == "rw" else set()) for table, mode in EXPECTED_TABLES[name].items()
        }
        assert granted == expected, name


def test_only_the_query_function_invokes_and_only_the_tasks_function(synth: Synth) -> None:
    tasks_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.tasks.tasks.function), "Arn"]}
    invokes = {
        name: [s["Resource"] for s in synth.statements(function.role) if "lambda:InvokeFunction" in _actions([s])]
        for name, function in synth.functions().items()
    }
    # The function itself: no version or alias wildcard (":*").
    assert {name: found for name, found in invokes.items() if found} == {"query": [tasks_arn]}
    env = synth.props(synth.stack.query.query.function)["Environment"]["Variables"]
    assert env[envvars.TASKS_FUNCTION] == {"Ref": synth.logical_id(synth.stack.tasks.tasks.function)}


def test_only_the_functions_whose_job_is_deleting_data_can_delete_it(synth: Synth) -> None:
    deleters = {
        name
        for name, function in synth.functions().items()
        if "s3:DeleteObject" in _actions([s for s in synth.statements(function.role) if s["Effect"] == "Allow"])
    }
    # ingest: claim checks once committed, and its own orphans; query: an admin's database drop,
    # and an uploaded import file refused for its size; tasks: replaced inputs and an uploaded
    # import file once imported (never claim checks: denied).
    assert deleters == {"ingest", "query", "tasks"}
    bucket_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.storage.bucket), "Arn"]}

    def objects(pattern: str) -> str:
        return json.dumps({"Fn::Join": ["", [bucket_arn, pattern]]})

    # The edge writes claim checks and import status records, never data or an uploaded file.
    edge_writes = [s for s in synth.statements(synth.stack.edge.edge.role) if "s3:PutObject" in _actions([s])]
    assert sorted(json.dumps(s["Resource"]) for s in edge_writes) == [
        objects("/_arcs/claims/*"),
        objects("/_arcs/imports/*.json"),
    ]
    # Of the imports folder the query function deletes uploaded files only: a status record is what
    # makes a retried import answer its first run instead of storing it again.
    query_deletes = [
        json.dumps(resource)
        for s in synth.statements(synth.stack.query.query.role)
        if s["Effect"] == "Allow" and "s3:DeleteObject" in _actions([s])
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        if "_arcs/" in json.dumps(resource)
    ]
    assert query_deletes == [objects("/_arcs/imports/*.upload")]


def test_no_role_outside_the_functions_but_api_gateways_logging_role(synth: Synth) -> None:
    roles = set(synth.of_type("AWS::IAM::Role"))
    function_roles = {synth.logical_id(f.role) for f in synth.functions().values()}
    [other] = roles - function_roles
    assert synth.resources[other]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "apigateway.amazonaws.com"
    }


# --- every route of the HTTP API reaches its function -------------------------------------------------

WRITE = "edge"
QUERY = "query"
PROBE = "probe"  # answered by API Gateway itself
#: (method, path, function) for every route of the HTTP API (path parameters filled in).
API_ROUTES = [
    ("POST", "/api/v1/write/msgpack", WRITE),
    ("POST", "/api/v1/write/line-protocol", WRITE),
    ("POST", "/write", WRITE),
    ("POST", "/api/v2/write", WRITE),
    ("POST", "/api/v1/write/json", WRITE),
    ("POST", "/api/v1/query", QUERY),
    ("POST", "/api/v1/query/arrow", QUERY),
    ("POST", "/api/v1/query/msgpack", QUERY),
    ("POST", "/api/v1/query/estimate", QUERY),
    ("GET", "/api/v1/query/cpu", QUERY),
    ("GET", "/api/v1/measurements", QUERY),
    ("GET", "/api/v1/databases", QUERY),
    ("POST", "/api/v1/databases", QUERY),
    ("GET", "/api/v1/databases/metrics", QUERY),
    ("GET", "/api/v1/databases/metrics/measurements", QUERY),
    ("DELETE", "/api/v1/databases/metrics", QUERY),
    ("GET", "/api/v1/auth/verify", QUERY),
    ("POST", "/api/v1/auth/tokens", QUERY),
    ("GET", "/api/v1/auth/tokens", QUERY),
    ("GET", "/api/v1/auth/tokens/abc", QUERY),
    ("PATCH", "/api/v1/auth/tokens/abc", QUERY),
    ("DELETE", "/api/v1/auth/tokens/abc", QUERY),
    ("POST", "/api/v1/auth/tokens/abc/rotate", QUERY),
    ("POST", "/api/v1/auth/tokens/abc/revoke", QUERY),
    ("GET", "/api/v1/retention", QUERY),
    ("POST", "/api/v1/retention", QUERY),
    ("GET", "/api/v1/retention/1", QUERY),
    ("PUT", "/api/v1/retention/1", QUERY),
    ("DELETE", "/api/v1/retention/1", QUERY),
    ("POST", "/api/v1/retention/1/execute", QUERY),
    ("GET", "/api/v1/retention/1/executions", QUERY),
    ("POST", "/api/v1/retention/run", QUERY),
    ("GET", "/api/v1/continuous_queries", QUERY),
    ("POST", "/api/v1/continuous_queries", QUERY),
    ("GET", "/api/v1/continuous_queries/1", QUERY),
    ("PUT", "/api/v1/continuous_queries/1", QUERY),
    ("DELETE", "/api/v1/continuous_queries/1", QUERY),
    ("POST", "/api/v1/continuous_queries/1/execute", QUERY),
    ("GET", "/api/v1/continuous_queries/1/executions", QUERY),
    ("POST", "/api/v1/delete", QUERY),
    ("GET", "/api/v1/delete/config", QUERY),
    ("GET", "/api/v1/compaction/status", QUERY),
    ("GET", "/api/v1/compaction/stats", QUERY),
    ("GET", "/api/v1/compaction/candidates", QUERY),
    ("GET", "/api/v1/compaction/jobs", QUERY),
    ("GET", "/api/v1/compaction/history", QUERY),
    ("POST", "/api/v1/compaction/trigger", QUERY),
    ("GET", "/health", PROBE),
    ("HEAD", "/health", PROBE),
    ("GET", "/ready", PROBE),
    ("HEAD", "/ready", PROBE),
    ("GET", "/ping", PROBE),
    ("HEAD", "/ping", PROBE),
]


def _resolve(synth: Synth, method: str, path: str) -> Json:
    """The method API Gateway picks for a request: the deepest static resource matching the path,
    else the greedy ``{proxy+}`` under the deepest one that matched (the API declares one under
    every static resource, so this is what happens whatever API Gateway's backtracking)."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    api_id = synth.logical_id(synth.stack.api.api)
    children: dict[str, dict[str, str]] = {}
    for logical, resource in resources.items():
        parent = resource["Properties"]["ParentId"]
        parent_key = "root" if "Fn::GetAtt" in parent else parent["Ref"]
        children.setdefault(parent_key, {})[resource["Properties"]["PathPart"]] = logical
    methods: dict[tuple[str, str], Json] = {}
    for m in synth.of_type("AWS::ApiGateway::Method").values():
        ref = m["Properties"]["ResourceId"]
        key = "root" if "Fn::GetAtt" in ref and ref["Fn::GetAtt"][0] == api_id else ref["Ref"]
        methods[(key, m["Properties"]["HttpMethod"])] = m["Properties"]

    node = "root"
    parts = path.strip("/").split("/")
    for i, part in enumerate(parts):
        nxt = children.get(node, {}).get(part)
        if nxt is None:
            node = children[node]["{proxy+}"]
            break
        node = nxt
        if i == len(parts) - 1:
            break
    return methods.get((node, method)) or methods[(node, "ANY")]


@pytest.mark.parametrize(("method", "path", "function"), API_ROUTES)
def test_every_api_route_reaches_its_function_behind_the_authorizer(
    synth: Synth, method: str, path: str, function: str
) -> None:
    targets = {
        WRITE: synth.logical_id(synth.stack.edge.edge.function),
        QUERY: synth.logical_id(synth.stack.query.query.function),
    }
    resolved = _resolve(synth, method, path)
    if function == PROBE:
        assert path in PUBLIC_PATHS
        assert resolved["Integration"]["Type"] == "MOCK"
        assert resolved["AuthorizationType"] == "NONE"
        return
    uri = json.dumps(resolved["Integration"]["Uri"])
    assert resolved["Integration"]["Type"] == "AWS_PROXY"
    assert [name for name, logical in targets.items() if f'"{logical}"' in uri] == [function]
    assert resolved["AuthorizationType"] == "CUSTOM"
    # Arc's API takes the token in the Authorization header and is cached; writes and InfluxDB's
    # paths take it anywhere, uncached (tests/infra/test_api_front.py).
    authorizers = synth.stack.authorizer
    cached = path.startswith("/api/v1/") and function != WRITE
    expected = authorizers.token_authorizer if cached else authorizers.request_authorizer
    assert resolved["AuthorizerId"] == {"Ref": synth.logical_id(expected)}


# --- cdk-nag on the whole stack --------------------------------------------------------------------


def test_cdk_nag_finds_nothing_unacknowledged_with_tasks_and_athena(synth: Synth) -> None:
    report = AwsSolutionsChecks().validate_scope(synth.stack)
    found = {v.rule_name: sorted(str(r.construct_path) for r in v.violating_resources) for v in report.violations}
    assert found == {}
    assert report.success


# --- S3 Express One Zone (optional) ----------------------------------------------------------------


def test_express_bucket_sessions_go_to_exactly_the_functions_that_use_the_data(layers_dir: Path) -> None:
    express = _synth(
        {"layers_dir": str(layers_dir), "express_zone": "use1-az4", "athena_tables": json.dumps(ATHENA_TABLES)}
    )
    assert express.stack.express is not None
    bucket_id = express.logical_id(express.stack.express.bucket)
    bucket = express.resources[bucket_id]
    assert bucket["Type"] == "AWS::S3Express::DirectoryBucket"
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["Properties"]["LocationName"] == "use1-az4"
    assert bucket["Properties"]["DataRedundancy"] == "SingleAvailabilityZone"
    users = set()
    for name, function in express.functions().items():
        env = express.props(function.function)["Environment"]["Variables"]
        grants = [s for s in express.statements(function.role) if "s3express:CreateSession" in _actions([s])]
        if grants or envvars.EXPRESS_BUCKET in env:
            users.add(name)
            assert env[envvars.EXPRESS_BUCKET] == {"Ref": bucket_id}, name
            # Read-write sessions (no SessionMode condition), on this bucket only, and no other action.
            assert grants == [
                {"Action": "s3express:CreateSession", "Effect": "Allow", "Resource": {"Fn::GetAtt": [bucket_id, "Arn"]}}
            ], name
    # ingest writes the data files, tasks rewrites them, query reads them and (for admins)
    # deletes and rewrites them; edge, authorizer and bootstrap never touch them.
    assert users == {"ingest", "tasks", "query"}
    # Everything else the functions may do is what they may do without the directory bucket.
    for name, function in express.functions().items():
        allowed = [s for s in express.statements(function.role) if s["Effect"] == "Allow"]
        assert _actions(allowed) - {"s3express:CreateSession"} == EXPECTED_ACTIONS[name], name
    assert "ExpressBucketName" in express.template["Outputs"]
    # Athena's tables point at the data where it is: the directory bucket.
    [table] = express.of_type("AWS::Glue::Table").values()
    descriptor = table["Properties"]["TableInput"]["StorageDescriptor"]
    assert descriptor["Location"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/metrics/cpu-load/"]]}
    report = AwsSolutionsChecks().validate_scope(express.stack)
    assert [v.rule_name for v in report.violations] == []


# --- the app as the CDK CLI runs it ----------------------------------------------------------------


def test_the_app_synthesizes_offline_as_cdk_synth_runs_it(tmp_path: Path) -> None:
    """``cdk synth`` runs ``python -m infra.app`` with CDK_OUTDIR and CDK_CONTEXT_JSON; no network,
    no built layers (as in CI): the template is written, and cdk-nag (a validation plugin) passes."""
    import os
    import subprocess
    import sys

    outdir = tmp_path / "cdk.out"
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({"layers_dir": str(tmp_path / "no-layers")}),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    done = subprocess.run(
        [sys.executable, "-m", "infra.app"], cwd=FUNCTIONS_DIR.parent, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    template = json.loads((outdir / "ArcServerless.template.json").read_text())
    assert any(name.startswith("LayersLayersBuilt") for name in template["Rules"])
    assert len([r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]) >= 5


def test_cdk_json_runs_the_app_as_a_module_from_the_lock() -> None:
    config = json.loads((FUNCTIONS_DIR.parent / "cdk.json").read_text())
    # uv from the PATH, or (as the Makefile does) the one installed as a module: tests/infra/test_cdk_json.py.
    assert "uv run --frozen python -m infra.app" in config["app"]


#: Every kind of resource the stack makes (with the tasks function, an Athena table and no S3
#: Express), each covered by the tests here or in test_stack.py. A new kind must come with its tests.
EXPECTED_RESOURCE_TYPES = {
    "AWS::S3::Bucket": 1,
    "AWS::S3::BucketPolicy": 1,
    "AWS::DynamoDB::Table": 3,  # tokens, catalog, leases
    "AWS::SQS::Queue": 3,
    "AWS::SQS::QueuePolicy": 3,
    # dead letters; failed asynchronous runs; the oldest queued write; 6 functions' errors and
    # throttles; API 5xx; the compaction backlog (infra/monitoring.py)
    "AWS::CloudWatch::Alarm": 17,
    "AWS::CloudWatch::Dashboard": 1,
    "AWS::Lambda::LayerVersion": 3,
    "AWS::Lambda::Function": 6,
    "AWS::Lambda::EventSourceMapping": 1,
    "AWS::Lambda::EventInvokeConfig": 2,  # tasks, bootstrap: invoked asynchronously
    "AWS::Lambda::Permission": 7,
    "AWS::IAM::Role": 7,
    "AWS::IAM::Policy": 6,
    "AWS::Logs::LogGroup": 7,
    "AWS::Events::Rule": 3,
    "AWS::SecretsManager::Secret": 1,
    "Custom::ArcsBootstrapToken": 1,
    "AWS::ApiGateway::RestApi": 1,
    "AWS::ApiGateway::Account": 1,
    "AWS::ApiGateway::Deployment": 1,
    "AWS::ApiGateway::Stage": 1,
    "AWS::ApiGateway::Authorizer": 2,
    "AWS::ApiGateway::GatewayResponse": 3,
    # /api/v1/import with its fallback (ANY, {proxy+}), and a POST on the edge per import format.
    "AWS::ApiGateway::Resource": 23,
    "AWS::ApiGateway::Method": 27,
    "AWS::Glue::Database": 1,
    "AWS::Glue::Table": 1,
}


def test_the_stack_makes_exactly_the_expected_resources(synth: Synth) -> None:
    counts: dict[str, int] = {}
    for resource in synth.resources.values():
        counts[resource["Type"]] = counts.get(resource["Type"], 0) + 1
    assert counts == EXPECTED_RESOURCE_TYPES


# --- the query function from the container image (optional) ----------------------------------------


def test_query_function_can_run_the_container_image(layers_dir: Path) -> None:
    image = _synth({"layers_dir": str(layers_dir), "query_image": "true"})
    query = image.props(image.stack.query.query.function)
    assert query["PackageType"] == "Image"
    assert "Layers" not in query
    assert "Runtime" not in query
    assert "Handler" not in query
    assert query["ImageConfig"] == {"Command": ["functions.query.handler.stream_handler"]}
    assert query["Architectures"] == ["arm64"]
    # The same environment and permissions as from layers; the image's entry point starts the
    # streaming runtime itself (container/entrypoint.sh), so no wrapper is named.
    env = query["Environment"]["Variables"]
    assert env[envvars.BACKEND] == "aws"
    assert envvars.AWS_LAMBDA_EXEC_WRAPPER not in env
    assert envvars.DUCKDB_MEMORY_LIMIT in env
    assert _actions(image.statements(image.stack.query.query.role)) == EXPECTED_ACTIONS["query"]
    # The image asset is the repository's Dockerfile, built for the functions' architecture.
    assets = json.loads((Path(image.app.outdir) / f"{image.stack.stack_name}.assets.json").read_text())
    [docker] = assets["dockerImages"].values()
    assert docker["source"]["platform"] == "linux/arm64"
    staged = Path(image.app.outdir) / docker["source"]["directory"]
    assert (staged / "Dockerfile").read_bytes() == (FUNCTIONS_DIR.parent / "Dockerfile").read_bytes()
    assert not (staged / ".venv").exists()  # .dockerignore applies to the staged context
    assert not (staged / "layers" / "build").exists()
    # The other functions still run from their folders and layers.
    for name, function in image.functions().items():
        if name != "query":
            assert image.props(function.function)["Runtime"] == "python3.12", name
    report = AwsSolutionsChecks().validate_scope(image.stack)
    assert [v.rule_name for v in report.violations] == []


def test_layer_descriptions_name_whole_versions_within_lambdas_limit() -> None:
    from infra.layers import layer_description

    assert layer_description("core", ["arcs (src/arcs)"]) == "Arc Serverless core: arcs (src/arcs)"
    many = [f"package-{i}==1.{i}.0" for i in range(40)]
    text = layer_description("deps", many)
    assert len(text) <= 256
    *listed, last = text.removeprefix("Arc Serverless deps: ").split(", ")
    assert last == "..."
    assert listed == many[: len(listed)]  # whole entries, in order, as many as fit
    assert len(listed) > 5


def test_layers_built_for_another_architecture_are_refused(tmp_path: Path) -> None:
    from infra.layers import ArcsLayers

    from tests.infra.conftest import fake_layers

    fake_layers(tmp_path, "arm64")
    (tmp_path / "arm64").rename(tmp_path / "x86_64")  # an arm64 build where x86_64 is looked for
    with pytest.raises(ValueError, match="on arm64"):
        ArcsLayers(Stack(App(), "Probe"), "Layers", architecture="x86_64", build_dir=tmp_path)
