"""Retention policies on the catalog table (docs/retention-and-delete.md).

| kind | pk | sk | attributes |
|---|---|---|---|
| retention policy | ``RETENTION`` | ``{policy_id:012d}`` | definition (JSON text), database, name |
| policy id counter | ``RETENTIONCOUNTER`` | ``#`` | next_id: the last id handed out |
| its name | ``RETENTIONNAME#{db}`` | ``{name}`` | policy_id: keeps names unique per database |
| its execution | ``RETENTIONRUN#{policy_id}`` | ``{started_at}#{execution_id}`` | record (JSON text), TTL |
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from arcs.adapters.aws.dynamo_table import TTL_ATTRIBUTE, DynamoTable, id_sort, item_key, put_op, to_item
from arcs.adapters.records import (
    RETENTION_EXECUTION_RETENTION,
    policy_from_json,
    policy_to_json,
    retention_execution_from_json,
    retention_execution_to_json,
    sortable_time,
)
from arcs.errors import StorageFault
from arcs.ports import RetentionExecution, RetentionPolicy

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

_POLICY_PK = "RETENTION"
_POLICY_COUNTER_PK = "RETENTIONCOUNTER"


def _policy_name_pk(database: str) -> str:
    return f"RETENTIONNAME#{database}"


def _policy_runs_pk(policy_id: int) -> str:
    return f"RETENTIONRUN#{policy_id}"


def _policy_values(policy: RetentionPolicy) -> dict[str, object]:
    return {
        "pk": _POLICY_PK,
        "sk": id_sort(policy.policy_id),  # fixed width: listing order is id order
        "database": policy.database,
        "name": policy.name,
        "definition": json.dumps(policy_to_json(policy)),
    }


def _policy_name_values(policy: RetentionPolicy) -> dict[str, object]:
    return {"pk": _policy_name_pk(policy.database), "sk": policy.name, "policy_id": policy.policy_id}


class DynamoRetentionPolicies(DynamoTable):
    """The retention-policy part of ``DynamoCatalog``."""

    def create_retention_policy(self, policy: RetentionPolicy) -> RetentionPolicy | None:
        policy = replace(policy, policy_id=self.next_id(_POLICY_COUNTER_PK))
        codes = self._transact(
            [
                put_op(self.table, _policy_values(policy), "attribute_not_exists(pk)"),
                put_op(self.table, _policy_name_values(policy), "attribute_not_exists(pk)"),
            ]
        )
        if codes is None:
            return policy
        if "ConditionalCheckFailed" in codes:
            return None
        raise StorageFault(f"DynamoDB creation of retention policy {policy.name!r} cancelled: {codes}")

    def get_retention_policy(self, policy_id: int) -> RetentionPolicy | None:
        item = self._get(_POLICY_PK, id_sort(policy_id))
        return None if item is None else policy_from_json(json.loads(str(item["definition"])))

    def list_retention_policies(self, database: str | None = None) -> list[RetentionPolicy]:
        found = [policy_from_json(json.loads(str(item["definition"]))) for item in self._query(_POLICY_PK)]
        return sorted(
            (policy for policy in found if database is None or policy.database == database),
            key=lambda policy: (policy.database, policy.name),
        )

    def update_retention_policy(self, policy: RetentionPolicy) -> bool:
        current = self.get_retention_policy(policy.policy_id)
        if current is None:
            return False
        ops: list[TransactWriteItemTypeDef] = [put_op(self.table, _policy_values(policy), "attribute_exists(pk)")]
        if (current.database, current.name) != (policy.database, policy.name):
            ops += [
                put_op(self.table, _policy_name_values(policy), "attribute_not_exists(pk)"),
                {"Delete": {"TableName": self.table, "Key": item_key(_policy_name_pk(current.database), current.name)}},
            ]
        codes = self._transact(ops)
        if codes is None:
            return True
        if "ConditionalCheckFailed" in codes or "TransactionConflict" in codes:
            return False
        raise StorageFault(f"DynamoDB update of retention policy {policy.name!r} cancelled: {codes}")

    def delete_retention_policy(self, policy_id: int) -> bool:
        current = self.get_retention_policy(policy_id)
        if current is None:
            return False
        # One transaction: a policy is never gone while its name stays taken.
        codes = self._transact(
            [
                {"Delete": {"TableName": self.table, "Key": item_key(_POLICY_PK, id_sort(policy_id))}},
                {"Delete": {"TableName": self.table, "Key": item_key(_policy_name_pk(current.database), current.name)}},
            ]
        )
        if codes is not None:
            raise StorageFault(f"DynamoDB deletion of retention policy {current.name!r} cancelled: {codes}")
        pk = _policy_runs_pk(policy_id)
        self._delete_keys([(pk, str(item["sk"])) for item in self._query(pk)])
        return True

    def put_retention_execution(self, execution: RetentionExecution) -> None:
        values = {
            "pk": _policy_runs_pk(execution.policy_id),
            "sk": f"{sortable_time(execution.started_at)}#{execution.execution_id}",
            "record": json.dumps(retention_execution_to_json(execution)),
            TTL_ATTRIBUTE: int((execution.started_at + RETENTION_EXECUTION_RETENTION).timestamp()),
        }
        self._batch_write([{"PutRequest": {"Item": to_item(values)}}])

    def list_retention_executions(self, policy_id: int, limit: int = 100) -> list[RetentionExecution]:
        items = self._query(_policy_runs_pk(policy_id), descending=True)  # sort keys start with the start time
        return [
            retention_execution_from_json(json.loads(str(item["record"]))) for item in itertools.islice(items, limit)
        ]
