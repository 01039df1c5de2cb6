"""Least privilege: each function reaches only what it needs, and only the functions whose job it
is delete data or invoke another function; with S3 Express, the directory bucket's sessions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdk_nag import AwsSolutionsChecks

from arcs import envvars
from tests.infra.synth import ATHENA_TABLES, Synth, actions_of, synthesize

pytestmark = pytest.mark.infra


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
    # PutObject: claim checks; Get/Put: a bulk import's status record (tests/infra/test_stack_iam.py).
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
    # tests/infra/test_stack_*.py pin the resources.
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


def test_each_function_has_exactly_the_permissions_it_needs(athena_synth: Synth) -> None:
    functions = athena_synth.functions()
    assert set(functions) == set(EXPECTED_ACTIONS)
    bucket = athena_synth.logical_id(athena_synth.stack.storage.bucket)
    bucket_arn = {"Fn::GetAtt": [bucket, "Arn"]}
    storage = athena_synth.stack.storage
    tables = {
        json.dumps({"Fn::GetAtt": [athena_synth.logical_id(table), "Arn"]}): name
        for name, table in (
            ("tokens", storage.tokens_table),
            ("catalog", storage.catalog_table),
            ("leases", storage.leases_table),
        )
    }
    queue = {"Fn::GetAtt": [athena_synth.logical_id(athena_synth.stack.ingest.queue), "Arn"]}
    failures = {"Fn::GetAtt": [athena_synth.logical_id(athena_synth.stack.failures.queue), "Arn"]}
    #: Functions invoked asynchronously send their failed invocations' records to the failure queue.
    sends = {"edge": [queue], "query": [queue], "tasks": [queue, failures], "bootstrap": [failures]}
    for name, function in functions.items():
        statements = athena_synth.statements(function.role)
        allowed = [s for s in statements if s["Effect"] == "Allow"]
        denied = [s for s in statements if s["Effect"] != "Allow"]
        assert actions_of(allowed) == EXPECTED_ACTIONS[name], name
        assert [(sorted(actions_of([s])), s["Resource"]) for s in denied] == [
            (actions, {"Fn::Join": ["", [bucket_arn, prefix]]}) for actions, prefix in EXPECTED_DENIES.get(name, [])
        ], name
        granted: dict[str, set[str]] = {}
        for statement in allowed:
            actions = actions_of([statement])
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


def test_only_the_query_function_invokes_and_only_the_tasks_function(athena_synth: Synth) -> None:
    tasks_arn = {"Fn::GetAtt": [athena_synth.logical_id(athena_synth.stack.tasks.tasks.function), "Arn"]}
    invokes = {
        name: [
            s["Resource"] for s in athena_synth.statements(function.role) if "lambda:InvokeFunction" in actions_of([s])
        ]
        for name, function in athena_synth.functions().items()
    }
    # The function itself: no version or alias wildcard (":*").
    assert {name: found for name, found in invokes.items() if found} == {"query": [tasks_arn]}
    env = athena_synth.props(athena_synth.stack.query.query.function)["Environment"]["Variables"]
    assert env[envvars.TASKS_FUNCTION] == {"Ref": athena_synth.logical_id(athena_synth.stack.tasks.tasks.function)}


def test_only_the_functions_whose_job_is_deleting_data_can_delete_it(athena_synth: Synth) -> None:
    deleters = {
        name
        for name, function in athena_synth.functions().items()
        if "s3:DeleteObject"
        in actions_of([s for s in athena_synth.statements(function.role) if s["Effect"] == "Allow"])
    }
    # ingest: claim checks once committed, and its own orphans; query: an admin's database drop,
    # and an uploaded import file refused for its size; tasks: replaced inputs and an uploaded
    # import file once imported (never claim checks: denied).
    assert deleters == {"ingest", "query", "tasks"}
    bucket_arn = {"Fn::GetAtt": [athena_synth.logical_id(athena_synth.stack.storage.bucket), "Arn"]}

    def objects(pattern: str) -> str:
        return json.dumps({"Fn::Join": ["", [bucket_arn, pattern]]})

    # The edge writes claim checks and import status records, never data or an uploaded file.
    edge_writes = [
        s for s in athena_synth.statements(athena_synth.stack.edge.edge.role) if "s3:PutObject" in actions_of([s])
    ]
    assert sorted(json.dumps(s["Resource"]) for s in edge_writes) == [
        objects("/_arcs/claims/*"),
        objects("/_arcs/imports/*.json"),
    ]
    # Of the imports folder the query function deletes uploaded files only: a status record is what
    # makes a retried import answer its first run instead of storing it again.
    query_deletes = [
        json.dumps(resource)
        for s in athena_synth.statements(athena_synth.stack.query.query.role)
        if s["Effect"] == "Allow" and "s3:DeleteObject" in actions_of([s])
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
        if "_arcs/" in json.dumps(resource)
    ]
    assert query_deletes == [objects("/_arcs/imports/*.upload")]


def test_no_role_outside_the_functions_but_api_gateways_logging_role(athena_synth: Synth) -> None:
    roles = set(athena_synth.of_type("AWS::IAM::Role"))
    function_roles = {athena_synth.logical_id(f.role) for f in athena_synth.functions().values()}
    [other] = roles - function_roles
    assert athena_synth.resources[other]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "apigateway.amazonaws.com"
    }


# --- S3 Express One Zone (optional) ----------------------------------------------------------------


def test_express_bucket_sessions_go_to_exactly_the_functions_that_use_the_data(layers_dir: Path) -> None:
    express = synthesize(
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
        grants = [s for s in express.statements(function.role) if "s3express:CreateSession" in actions_of([s])]
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
        assert actions_of(allowed) - {"s3express:CreateSession"} == EXPECTED_ACTIONS[name], name
    assert "ExpressBucketName" in express.template["Outputs"]
    # Athena's tables point at the data where it is: the directory bucket.
    [table] = express.of_type("AWS::Glue::Table").values()
    descriptor = table["Properties"]["TableInput"]["StorageDescriptor"]
    assert descriptor["Location"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket_id}, "/metrics/cpu-load/"]]}
    report = AwsSolutionsChecks().validate_scope(express.stack)
    assert [v.rule_name for v in report.violations] == []
