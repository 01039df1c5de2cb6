"""The CDK app synthesizes the stack docs/deploy.md describes, and passes cdk-nag (AWS Solutions).

One synthesis per module (a few seconds on two cores); every test reads the same template.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Validations
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks
from infra.api import PUBLIC_PATHS
from infra.app import build
from infra.function import FUNCTIONS_DIR, KNOWN_ENV_NAMES
from infra.stack import ArcsStack

from arcs import envvars, layout
from arcs.adapters.aws_sqs import SQS_MAX_MESSAGE_BYTES, claim_key
from arcs.adapters.dynamo_table import TTL_ATTRIBUTE
from arcs.allocator import ARROW_POOL
from arcs.write.paths import WRITE_ROUTES

pytestmark = pytest.mark.infra

Json = dict[str, Any]
FOURTEEN_DAYS_S = 14 * 24 * 3600
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


@dataclass(frozen=True)
class Synth:
    app: App
    stack: ArcsStack
    template: Template
    resources: dict[str, Json]

    def of_type(self, cfn_type: str) -> dict[str, Json]:
        return {k: v for k, v in self.resources.items() if v["Type"] == cfn_type}

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def props(self, construct: Any) -> Json:
        return self.resources[self.logical_id(construct)]["Properties"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def synth(layers_dir: Path) -> Synth:
    app, stack = build(App(context={"layers_dir": str(layers_dir)}))
    template = Template.from_stack(stack)
    return Synth(app, stack, template, template.to_json()["Resources"])


def _functions(synth: Synth) -> dict[str, Any]:
    stack = synth.stack
    return {
        "edge": stack.edge.edge,
        "ingest": stack.ingest.ingest,
        "query": stack.query.query,
        "authorizer": stack.authorizer.authorizer_function,
        "bootstrap": stack.bootstrap.bootstrap,
        "tasks": stack.tasks.tasks,
    }


def _statements(synth: Synth, role: Any) -> list[Json]:
    role_id = synth.logical_id(role)
    out: list[Json] = []
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def _actions(statements: list[Json]) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        value = statement["Action"]
        actions.update([value] if isinstance(value, str) else value)
    return actions


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
    synth.template.has_resource_properties(
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
    synth.template.has_resource_properties(
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
    synth.template.has_resource_properties(
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


def _tables(synth: Synth) -> dict[str, Any]:
    storage = synth.stack.storage
    return {"tokens": storage.tokens_table, "catalog": storage.catalog_table, "leases": storage.leases_table}


def test_three_tables_and_nothing_else(synth: Synth) -> None:
    assert set(synth.of_type("AWS::DynamoDB::Table")) == {synth.logical_id(t) for t in _tables(synth).values()}
    # The catalog keeps the logical id of the single table of earlier versions: an update keeps its data.
    assert synth.logical_id(synth.stack.storage.catalog_table).startswith("StorageCatalog")


@pytest.mark.parametrize("name", ["tokens", "catalog", "leases"])
def test_table_keys_billing_ttl_and_recovery(synth: Synth, name: str) -> None:
    construct = _tables(synth)[name]
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


# --- functions -------------------------------------------------------------------------------------


def test_every_function_is_python_312_on_arm64_traced_with_its_own_log_group(synth: Synth) -> None:
    functions = synth.of_type("AWS::Lambda::Function")
    assert set(functions) == {synth.logical_id(f.function) for f in _functions(synth).values()}
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
    for name, function in _functions(synth).items():
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
    envs = {name: synth.props(f.function)["Environment"]["Variables"] for name, f in _functions(synth).items()}
    for name, env in envs.items():
        assert set(env) <= KNOWN_ENV_NAMES, name
        assert envvars.AWS_REGION not in env  # reserved: Lambda sets it
        assert envvars.AWS_ENDPOINT_URL not in env  # emulators only
        assert env[envvars.BACKEND] == "aws"
        assert env[envvars.BUCKET] == bucket
        # Exactly the tables the function uses (tests/infra/test_deploy.py pins its grants on them).
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
    assert synth.props(_functions(synth)["edge"].function)["Timeout"] <= 29
    assert 29 < synth.props(_functions(synth)["query"].function)["Timeout"] <= 900


# --- IAM: least privilege --------------------------------------------------------------------------


def test_no_wildcard_actions_and_no_managed_policies_on_function_roles(synth: Synth) -> None:
    for policy_id, policy in synth.of_type("AWS::IAM::Policy").items():
        for action in _actions(policy["Properties"]["PolicyDocument"]["Statement"]):
            assert "*" not in action, (policy_id, action)
    for name, function in _functions(synth).items():
        role = synth.props(function.role)
        assert "ManagedPolicyArns" not in role, name
        assert "Policies" not in role, name


def test_grants_are_what_each_function_needs(synth: Synth) -> None:
    bucket_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.storage.bucket), "Arn"]}
    grants = {name: _statements(synth, f.role) for name, f in _functions(synth).items()}
    actions = {name: _actions(statements) for name, statements in grants.items()}

    assert {"sqs:SendMessage", "s3:PutObject", "dynamodb:GetItem", "dynamodb:PutItem"} <= actions["edge"]
    assert not {"s3:DeleteObject", "s3:ListBucket", "sqs:ReceiveMessage"} & actions["edge"]
    edge_objects = {
        s["Resource"]["Fn::Join"][1][1]: _actions([s])
        for s in grants["edge"]
        if any(a.startswith("s3:") for a in _actions([s]))
    }
    # Claim checks, and a bulk import's status record (its chunks are queued as writes): no data.
    assert edge_objects == {
        "/_arcs/claims/*": {"s3:PutObject"},
        "/_arcs/imports/*.json": {"s3:GetObject", "s3:PutObject"},  # status records, not the uploads
    }

    assert {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"} <= actions["ingest"]
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} <= actions["ingest"]
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"} <= actions["ingest"]
    assert "sqs:SendMessage" not in actions["ingest"]

    assert {"s3:GetObject", "s3:ListBucket", "dynamodb:GetItem", "dynamodb:PutItem"} <= actions["query"]
    # The delete API rewrites data files and a database drop removes them (admin routes); results too
    # big to answer and a manual execute's claim checks are its only other objects (key patterns and
    # what they reach: tests/infra/test_api_front.py).
    query_objects = {
        resource["Fn::Join"][1][1]: (s["Effect"], _actions([s]))
        for s in grants["query"]
        if any(a.startswith("s3:") and a != "s3:ListBucket" for a in _actions([s]))
        # IAM statements of the same actions are merged into one of several resources.
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    assert query_objects == {
        "/*/*/????/??/??/??/*.parquet": ("Allow", {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}),
        "/_arcs/results/*": ("Allow", {"s3:GetObject", "s3:PutObject"}),
        "/_arcs/claims/*": ("Allow", {"s3:PutObject"}),
        "/_arcs/imports/*": ("Allow", {"s3:GetObject", "s3:PutObject"}),
        "/_arcs/imports/*.upload": ("Allow", {"s3:DeleteObject"}),
        "/_arcs/*.parquet": ("Deny", {"s3:PutObject", "s3:DeleteObject"}),
    }
    assert "sqs:SendMessage" in actions["query"]
    assert not {"sqs:ReceiveMessage", "sqs:DeleteMessage"} & actions["query"]

    # Compaction and continuous queries: data objects, the catalog, and the write path's sending end.
    assert {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"} <= actions["tasks"]
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:BatchWriteItem"} <= actions["tasks"]
    assert "sqs:SendMessage" in actions["tasks"]
    assert not {"sqs:ReceiveMessage", "sqs:DeleteMessage"} & actions["tasks"]
    assert not any(action.startswith("lambda:") for action in actions["tasks"])
    # It may write claim checks (big continuous-query results), never delete one.
    [deny] = [s for s in grants["tasks"] if s["Effect"] == "Deny"]
    assert deny["Action"] == "s3:DeleteObject"
    assert deny["Resource"] == {"Fn::Join": ["", [bucket_arn, "/_arcs/claims/*"]]}
    assert not any("s3:PutObject" in _actions([s]) for s in grants["tasks"] if s["Effect"] == "Deny")

    # The compaction trigger: the query function invokes the tasks function, and nothing else does.
    [invoke] = [s for s in grants["query"] if "lambda:InvokeFunction" in _actions([s])]
    assert invoke["Action"] == "lambda:InvokeFunction"
    assert invoke["Resource"] == {"Fn::GetAtt": [synth.logical_id(synth.stack.tasks.tasks.function), "Arn"]}
    for name in ("edge", "ingest", "authorizer", "bootstrap", "tasks"):
        assert not any(action.startswith("lambda:") for action in actions[name]), name

    assert {"dynamodb:GetItem", "dynamodb:Query"} <= actions["authorizer"]
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    assert not writes & actions["authorizer"]
    assert not any(action.startswith(("s3:", "sqs:")) for action in actions["authorizer"])


def _table_actions(synth: Synth, role: Any) -> dict[str, set[str]]:
    """Table name ("tokens", "catalog", "leases") -> the DynamoDB actions the role has on it."""
    names = {synth.logical_id(table): name for name, table in _tables(synth).items()}
    found: dict[str, set[str]] = {}
    for statement in _statements(synth, role):
        actions = {a for a in _actions([statement]) if a.startswith("dynamodb:")}
        if not actions:
            continue
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for resource in resources:
            found.setdefault(names[resource["Fn::GetAtt"][0]], set()).update(actions)
    return found


def test_each_function_reads_and_writes_only_its_tables(synth: Synth) -> None:
    access = {name: _table_actions(synth, f.role) for name, f in _functions(synth).items()}
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    reads = {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"}
    writers = {
        "edge": {"catalog"},
        "ingest": {"catalog"},
        "query": {"tokens", "catalog", "leases"},
        "authorizer": set(),
        "bootstrap": {"tokens"},
        "tasks": {"catalog", "leases"},
    }
    readers = {**writers, "authorizer": {"tokens"}}
    for name, tables in access.items():
        assert set(tables) == readers[name], name
        for table, actions in tables.items():
            assert reads <= actions, (name, table)
            assert bool(writes & actions) == (table in writers[name]), (name, table)
    # The authorizer reads tokens on every request: it can neither write them nor touch the catalog.
    assert not writes & access["authorizer"]["tokens"]
    assert "catalog" not in access["authorizer"] and "leases" not in access["authorizer"]
    # Ingest and the edge never see tokens or leases; compaction never sees tokens.
    for name in ("edge", "ingest", "tasks"):
        assert "tokens" not in access[name], name


# --- API Gateway -----------------------------------------------------------------------------------


def _routes(synth: Synth) -> dict[tuple[str, str], Json]:
    """(path, method) -> the method's properties."""
    api_id = synth.logical_id(synth.stack.api.api)
    paths = {f"ROOT:{api_id}": "/"}
    resources = synth.of_type("AWS::ApiGateway::Resource")

    def path_of(ref: Json) -> str:
        if "Fn::GetAtt" in ref:
            return "/"
        logical = ref["Ref"]
        if logical not in paths:
            props = resources[logical]["Properties"]
            parent = path_of(props["ParentId"])
            paths[logical] = parent.rstrip("/") + "/" + props["PathPart"]
        return paths[logical]

    return {
        (path_of(m["Properties"]["ResourceId"]), m["Properties"]["HttpMethod"]): m["Properties"]
        for m in synth.of_type("AWS::ApiGateway::Method").values()
    }


def _target(method: Json, functions: list[str]) -> str:
    """Which of ``functions`` (logical ids) the method's Lambda proxy integration invokes."""
    assert method["Integration"]["Type"] == "AWS_PROXY"
    uri = json.dumps(method["Integration"]["Uri"])
    found = [logical for logical in functions if f'"{logical}"' in uri]
    assert len(found) == 1, uri
    return found[0]


def test_routes_writes_to_the_edge_and_the_rest_to_query(synth: Synth) -> None:
    edge = synth.logical_id(synth.stack.edge.edge.function)
    query = synth.logical_id(synth.stack.query.query.function)
    cached = {"Ref": synth.logical_id(synth.stack.authorizer.token_authorizer)}
    uncached = {"Ref": synth.logical_id(synth.stack.authorizer.request_authorizer)}
    routes = _routes(synth)

    def target(method: Json) -> str:
        return _target(method, [edge, query])

    for path in WRITE_ROUTES:
        method = routes[(path, "POST")]
        assert target(method) == edge, path
        assert method["AuthorizationType"] == "CUSTOM"
        assert method["AuthorizerId"] == uncached
    for path in PUBLIC_PATHS:
        for verb in ("GET", "HEAD"):
            method = routes[(path, verb)]
            assert method["Integration"]["Type"] == "MOCK", path
            assert method["AuthorizationType"] == "NONE"
    assert target(routes[("/", "ANY")]) == query
    assert target(routes[("/{proxy+}", "ANY")]) == query
    # The resources above write paths must not swallow the rest of their subtree.
    for prefix in ("/api", "/api/v1", "/api/v1/write", "/api/v2"):
        assert target(routes[(prefix + "/{proxy+}", "ANY")]) == query, prefix

    for (path, verb), method in routes.items():
        if path in PUBLIC_PATHS:
            continue
        assert method["AuthorizationType"] == "CUSTOM", (path, verb)
        if (path, verb) not in {(p, "POST") for p in WRITE_ROUTES}:
            assert target(method) == query, (path, verb)
            arc_api = (path == "/api/v1" or path.startswith("/api/v1/")) and not path.startswith("/api/v1/write")
            assert method["AuthorizerId"] == (cached if arc_api else uncached), (path, verb)


def test_api_passes_every_body_as_binary(synth: Synth) -> None:
    api = synth.props(synth.stack.api.api)
    assert api["BinaryMediaTypes"] == ["*/*"]
    assert api["EndpointConfiguration"] == {"Types": ["REGIONAL"]}


def test_stage_throttles_logs_access_and_never_logs_bodies(synth: Synth) -> None:
    [stage] = synth.of_type("AWS::ApiGateway::Stage").values()
    props = stage["Properties"]
    # The log group's ARN without the ':*' suffix (the logGroupDestinationArnWithoutWildcard flag).
    assert synth.logical_id(synth.stack.api.access_logs) in json.dumps(props["AccessLogSetting"]["DestinationArn"])
    assert not json.dumps(props["AccessLogSetting"]["DestinationArn"]).endswith(':*"]]}')
    assert "$context.requestId" in props["AccessLogSetting"]["Format"]
    [settings] = props["MethodSettings"]
    assert settings["HttpMethod"] == "*"
    assert settings["ResourcePath"] == "/*"
    assert settings["ThrottlingRateLimit"] > 0
    assert settings["ThrottlingBurstLimit"] > 0
    assert settings["LoggingLevel"] == "ERROR"
    assert settings["DataTraceEnabled"] is False
    assert props["TracingEnabled"] is True


def test_gateway_errors_use_the_api_error_shape(synth: Synth) -> None:
    for response_type in ("DEFAULT_4XX", "DEFAULT_5XX"):
        synth.template.has_resource_properties(
            "AWS::ApiGateway::GatewayResponse",
            {
                "ResponseType": response_type,
                "ResponseTemplates": {"application/json": Match.string_like_regexp(r'"success": false')},
            },
        )


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
