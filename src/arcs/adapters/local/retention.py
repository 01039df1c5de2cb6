"""Retention policies and their executions in the SQLite file (docs/retention-and-delete.md): a
part of ``SqliteCatalog``."""

from __future__ import annotations

from dataclasses import replace

from arcs.adapters.local.sqlite_database import Definitions, SqliteDatabase
from arcs.adapters.records import (
    RETENTION_EXECUTION_RETENTION,
    policy_from_json,
    policy_to_json,
    retention_execution_from_json,
    retention_execution_to_json,
)
from arcs.ports import RetentionExecution, RetentionPolicy


class SqliteRetentionPolicies:
    """The Catalog port's retention-policy methods, over ``db`` (mixed into ``SqliteCatalog``)."""

    db: SqliteDatabase

    @property
    def _policies(self) -> Definitions:
        return Definitions(self.db, "retention_policies", "policy_id", "retention_executions")

    def create_retention_policy(self, policy: RetentionPolicy) -> RetentionPolicy | None:
        columns = {"database": policy.database, "name": policy.name}
        policy_id = self._policies.add(columns, lambda new: policy_to_json(replace(policy, policy_id=new)))
        return None if policy_id is None else replace(policy, policy_id=policy_id)

    def get_retention_policy(self, policy_id: int) -> RetentionPolicy | None:
        raw = self._policies.get(policy_id)
        return None if raw is None else policy_from_json(raw)

    def list_retention_policies(self, database: str | None = None) -> list[RetentionPolicy]:
        return [policy_from_json(raw) for raw in self._policies.of_database(database)]

    def update_retention_policy(self, policy: RetentionPolicy) -> bool:
        columns = {"database": policy.database, "name": policy.name}
        return self._policies.replace(policy.policy_id, columns, policy_to_json(policy))

    def delete_retention_policy(self, policy_id: int) -> bool:
        return self._policies.delete(policy_id)

    def put_retention_execution(self, execution: RetentionExecution) -> None:
        record = retention_execution_to_json(execution)
        self._policies.put_execution(
            execution.policy_id, execution.execution_id, execution.started_at, record, RETENTION_EXECUTION_RETENTION
        )

    def list_retention_executions(self, policy_id: int, limit: int = 100) -> list[RetentionExecution]:
        return [retention_execution_from_json(raw) for raw in self._policies.executions(policy_id, limit)]
