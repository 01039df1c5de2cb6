"""The retention store, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from arcs.ports import (
    RetentionExecution,
    RetentionPolicy,
)
from tests.functional.ports.contract import Ports

pytestmark = pytest.mark.functional


def retention_policy(name: str, database: str = "db", **changes: object) -> RetentionPolicy:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    policy = RetentionPolicy(0, name, database, "cpu", 30, 7, True, moment, moment)
    return replace(policy, **changes)  # type: ignore[arg-type]


RECENT = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)


def retention_run(policy_id: int, minute: int) -> RetentionExecution:
    return RetentionExecution(
        execution_id=f"r{minute:03d}",
        policy_id=policy_id,
        kind="manual",
        dry_run=minute % 2 == 0,
        status="succeeded",
        cutoff_us=minute * 60_000_000,
        partitions=minute,
        files=minute * 2,
        rows=minute * 10,
        bytes=minute * 100,
        started_at=RECENT + timedelta(minutes=minute),  # executions are kept for 30 days
        duration_ms=1.5,
        skipped=("db/cpu/2026-01-01T00",) if minute == 3 else (),
    )


def test_retention_policies_are_unique_per_database_renamed_and_deleted_with_their_executions(ports: Ports) -> None:
    catalog = ports.catalog
    first = catalog.create_retention_policy(retention_policy("b"))
    second = catalog.create_retention_policy(retention_policy("a", measurement=None))
    elsewhere = catalog.create_retention_policy(retention_policy("a", database="other"))
    assert first is not None and second is not None and elsewhere is not None
    assert (first.policy_id, second.policy_id, elsewhere.policy_id) == (1, 2, 3)
    assert catalog.create_retention_policy(retention_policy("a")) is None  # taken in "db"
    assert catalog.get_retention_policy(2) == second and second.measurement is None
    assert catalog.get_retention_policy(99) is None
    assert catalog.list_retention_policies("db") == [second, first]
    assert catalog.list_retention_policies() == [second, first, elsewhere]
    assert not catalog.update_retention_policy(replace(first, name="a"))  # another's name
    assert catalog.update_retention_policy(replace(first, name="c", retention_days=1, is_active=False))
    assert catalog.get_retention_policy(1) == replace(first, name="c", retention_days=1, is_active=False)
    assert catalog.create_retention_policy(retention_policy("b")) is not None  # the old name is free
    assert not catalog.update_retention_policy(replace(first, policy_id=77))
    for minute in (1, 3, 2):
        catalog.put_retention_execution(retention_run(1, minute))
    catalog.put_retention_execution(retention_run(2, 5))
    assert [e.execution_id for e in catalog.list_retention_executions(1)] == ["r003", "r002", "r001"]
    assert catalog.list_retention_executions(1, limit=1) == [retention_run(1, 3)]
    assert catalog.delete_retention_policy(1)
    assert not catalog.delete_retention_policy(1)
    assert catalog.get_retention_policy(1) is None and catalog.list_retention_executions(1) == []
    assert catalog.list_retention_executions(2) == [retention_run(2, 5)]
