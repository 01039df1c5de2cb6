"""Least privilege: no wildcard actions or managed policies, each function's grants and tables.

The template is conftest's ``synth``: the stack as deployed by default, synthesized once per session.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.synth import Synth, actions_of

pytestmark = pytest.mark.infra


# --- IAM: least privilege --------------------------------------------------------------------------


def test_no_wildcard_actions_and_no_managed_policies_on_function_roles(synth: Synth) -> None:
    for policy_id, policy in synth.of_type("AWS::IAM::Policy").items():
        for action in actions_of(policy["Properties"]["PolicyDocument"]["Statement"]):
            assert "*" not in action, (policy_id, action)
    for name, function in synth.functions().items():
        role = synth.props(function.role)
        assert "ManagedPolicyArns" not in role, name
        assert "Policies" not in role, name


def test_grants_are_what_each_function_needs(synth: Synth) -> None:
    bucket_arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.storage.bucket), "Arn"]}
    grants = {name: synth.statements(f.role) for name, f in synth.functions().items()}
    actions = {name: actions_of(statements) for name, statements in grants.items()}

    assert {"sqs:SendMessage", "s3:PutObject", "dynamodb:GetItem", "dynamodb:PutItem"} <= actions["edge"]
    assert not {"s3:DeleteObject", "s3:ListBucket", "sqs:ReceiveMessage"} & actions["edge"]
    edge_objects = {
        s["Resource"]["Fn::Join"][1][1]: actions_of([s])
        for s in grants["edge"]
        if any(a.startswith("s3:") for a in actions_of([s]))
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
        resource["Fn::Join"][1][1]: (s["Effect"], actions_of([s]))
        for s in grants["query"]
        if any(a.startswith("s3:") and a != "s3:ListBucket" for a in actions_of([s]))
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
    assert not any("s3:PutObject" in actions_of([s]) for s in grants["tasks"] if s["Effect"] == "Deny")

    # The compaction trigger: the query function invokes the tasks function, and nothing else does.
    [invoke] = [s for s in grants["query"] if "lambda:InvokeFunction" in actions_of([s])]
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
    names = {synth.logical_id(table): name for name, table in synth.tables().items()}
    found: dict[str, set[str]] = {}
    for statement in synth.statements(role):
        actions = {a for a in actions_of([statement]) if a.startswith("dynamodb:")}
        if not actions:
            continue
        assert statement["Effect"] == "Allow"
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for resource in resources:
            found.setdefault(names[resource["Fn::GetAtt"][0]], set()).update(actions)
    return found


def test_each_function_reads_and_writes_only_its_tables(synth: Synth) -> None:
    access = {name: _table_actions(synth, f.role) for name, f in synth.functions().items()}
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
