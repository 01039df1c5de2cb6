"""The continuous-query store, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from arcs.ports import (
    ContinuousQuery,
    CQExecution,
)
from tests.functional.ports.contract import H0, Ports

pytestmark = pytest.mark.functional


def continuous_query(name: str, database: str = "db", **changes: object) -> ContinuousQuery:
    query = ContinuousQuery(
        query_id=0,
        name=name,
        database=database,
        source_measurement="cpu",
        destination_measurement="cpu_1h",
        query="SELECT * FROM cpu WHERE time >= {start_time} AND time < {end_time}",
        interval="1h",
        interval_s=3600,
        tag_columns=("host",),
        retention_days=30,
        delete_source_after_days=None,
        is_active=True,
        created_at=H0,
        updated_at=H0,
        description="hourly",
    )
    return replace(query, **changes)  # type: ignore[arg-type]


def test_continuous_query_names_are_unique_per_database_and_ids_count_up(ports: Ports) -> None:
    catalog = ports.catalog
    first = catalog.create_continuous_query(continuous_query("b"), 100)
    second = catalog.create_continuous_query(continuous_query("a"), 200)
    elsewhere = catalog.create_continuous_query(continuous_query("a", database="other"), 300)
    assert first is not None and second is not None and elsewhere is not None
    assert (first.query_id, second.query_id, elsewhere.query_id) == (1, 2, 3)
    assert first == replace(continuous_query("b"), query_id=1)
    assert catalog.create_continuous_query(continuous_query("a"), 400) is None  # taken in "db"
    assert catalog.get_continuous_query(2) == second
    assert catalog.get_continuous_query(99) is None
    assert catalog.list_continuous_queries("db") == [second, first]  # by name
    assert catalog.list_continuous_queries() == [second, first, elsewhere]  # by database, then name
    assert catalog.list_continuous_queries("none") == []
    assert [catalog.get_cq_progress(n) for n in (1, 2, 3, 99)] == [100, 200, 300, None]


def test_continuous_query_update_is_compare_and_set_and_renames_free_the_old_name(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 0)
    taken = catalog.create_continuous_query(continuous_query("b"), 0)
    assert stored is not None and taken is not None
    changed = replace(stored, query="SELECT 2 FROM cpu WHERE {start_time} < {end_time}", is_active=False)
    assert catalog.update_continuous_query(changed, 1)
    assert catalog.get_continuous_query(stored.query_id) == replace(changed, version=2)
    assert not catalog.update_continuous_query(replace(changed, interval="5m"), 1)  # stale version
    assert not catalog.update_continuous_query(replace(changed, name="b"), 2)  # name taken
    assert catalog.get_continuous_query(stored.query_id) == replace(changed, version=2)
    assert catalog.update_continuous_query(replace(changed, name="c"), 2)
    assert [q.name for q in catalog.list_continuous_queries()] == ["b", "c"]
    again = catalog.create_continuous_query(continuous_query("a"), 0)  # the old name is free
    assert again is not None and again.query_id == 3


def test_continuous_query_progress_is_compare_and_set(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 1000)
    assert stored is not None
    query_id = stored.query_id
    assert not catalog.set_cq_progress(query_id, 999, 2000)
    assert catalog.get_cq_progress(query_id) == 1000
    assert catalog.set_cq_progress(query_id, 1000, 2000)
    assert not catalog.set_cq_progress(query_id, 1000, 3000)  # a second runner with the same view loses
    assert catalog.set_cq_progress(query_id, None, 5000)  # unconditional, for an existing query
    assert catalog.get_cq_progress(query_id) == 5000
    assert not catalog.set_cq_progress(77, None, 1)
    assert catalog.get_cq_progress(77) is None


def execution(query_id: int, minute: int, **changes: object) -> CQExecution:
    record = CQExecution(
        execution_id=f"e{minute:03d}",
        query_id=query_id,
        kind="scheduled",
        start_us=minute * 60_000_000,
        end_us=(minute + 1) * 60_000_000,
        status="succeeded",
        rows=minute,
        write_id=f"cq-{query_id}-{minute}",
        started_at=datetime.now(UTC) - timedelta(hours=1) + timedelta(minutes=minute),
        duration_ms=1.5,
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def test_continuous_query_executions_newest_first_and_deleted_with_the_query(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 0)
    other = catalog.create_continuous_query(continuous_query("b"), 0)
    assert stored is not None and other is not None
    records = [execution(stored.query_id, minute) for minute in range(7)]
    records.append(execution(stored.query_id, 7, status="failed", rows=0, write_id=None, error="boom", kind="manual"))
    for record in records:
        catalog.put_cq_execution(record)
    catalog.put_cq_execution(execution(other.query_id, 0))
    assert catalog.list_cq_executions(stored.query_id) == records[::-1]
    assert catalog.list_cq_executions(stored.query_id, limit=3) == records[::-1][:3]
    assert catalog.list_cq_executions(99) == []

    assert catalog.delete_continuous_query(stored.query_id)
    assert not catalog.delete_continuous_query(stored.query_id)
    assert catalog.get_continuous_query(stored.query_id) is None
    assert catalog.get_cq_progress(stored.query_id) is None
    assert catalog.list_cq_executions(stored.query_id) == []
    assert [q.name for q in catalog.list_continuous_queries()] == ["b"]
    assert len(catalog.list_cq_executions(other.query_id)) == 1
    again = catalog.create_continuous_query(continuous_query("a"), 0)  # its name is free again
    assert again is not None and again.query_id == 3  # and ids are never reused


def test_continuous_query_executions_expire_after_thirty_days(ports: Ports) -> None:
    catalog = ports.catalog
    stored = catalog.create_continuous_query(continuous_query("a"), 0)
    assert stored is not None
    records = [
        execution(stored.query_id, 0, started_at=datetime.now(UTC) - timedelta(days=31)),
        execution(stored.query_id, 1),
    ]
    for record in records:
        catalog.put_cq_execution(record)
    if ports.name == "local":
        assert catalog.list_cq_executions(stored.query_id) == records[1:]  # pruned as the next one is put
        return
    # DynamoDB deletes expired items by itself (moto does not): each carries its expiry.
    items = catalog.client.query(  # type: ignore[attr-defined]
        TableName=catalog.table,  # type: ignore[attr-defined]
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"CQRUN#{stored.query_id}"}},
    )["Items"]
    expiries = sorted(int(item["expires_at"]["N"]) for item in items)
    assert expiries == [int((record.started_at + timedelta(days=30)).timestamp()) for record in records]
