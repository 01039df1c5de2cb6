"""The catalog's leases, compaction commit records and job journal, on SQLite and on DynamoDB (moto)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from arcs.adapters.aws.catalog import DynamoCatalog
from arcs.ports import (
    Catalog,
    CompactionJob,
    CompactionState,
    Partition,
)
from tests.functional.ports.contract import H0, HOUR, Ports, file_record, fill
from tests.helpers import LOCAL_AND_SLOW_AWS

pytestmark = pytest.mark.functional


def test_a_holder_s_leases_are_released_together_and_no_others(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "server-a/job1", 900)
    assert catalog.acquire_lease("db/cpu/2024-03-01T01", "server-a/job2", 900)
    assert catalog.acquire_lease("db/cpu/2024-03-01T02", "server-ab/job3", 900)  # a name it prefixes
    assert catalog.acquire_lease("db/cpu/2024-03-01T03", "server-b/job4", 900)
    assert catalog.release_leases("server-a") == ["db/cpu/2024-03-01T00", "db/cpu/2024-03-01T01"]
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "server-b/job5", 900)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T02", "server-b/job6", 900)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T03", "server-a/job7", 900)
    assert catalog.release_leases("server-a") == []


def test_lease_is_held_by_one_owner_until_released_or_expired(ports: Ports) -> None:
    catalog = ports.catalog
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 60)
    assert catalog.acquire_lease("db/cpu/2024-03-01T01", "b", 60)  # another partition is free
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)  # the holder renews
    catalog.release_lease("db/cpu/2024-03-01T00", "b")  # not b's to release
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 60)
    catalog.release_lease("db/cpu/2024-03-01T00", "a")
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 0.2)
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)
    time.sleep(0.3)
    assert catalog.acquire_lease("db/cpu/2024-03-01T00", "a", 60)  # b's lease expired
    assert not catalog.acquire_lease("db/cpu/2024-03-01T00", "b", 60)


def _compaction(catalog: Catalog, hour: datetime, inputs: int, version: int, job: str) -> CompactionState:
    listed = catalog.list_files("db", "cpu", hour, hour)
    assert len(listed) >= inputs
    output = replace(file_record("db", "cpu", hour, f"out-{job}", commit_id=job), rows=sum(f.rows for f in listed))
    return CompactionState(version, job, False, tuple(f.key for f in listed[:inputs]), (output,))


def test_compaction_commit_swaps_inputs_for_outputs_atomically_and_once(ports: Ports) -> None:
    catalog = ports.catalog
    part = Partition("db", "cpu", H0)
    inputs = [file_record("db", "cpu", H0, f"in{n}") for n in range(5)]
    other_hour = file_record("db", "cpu", H0 + HOUR, "other")
    catalog.put_files([*inputs, other_hour])
    assert catalog.get_compaction_state(part) is None

    first = _compaction(catalog, H0, 4, 1, "job1")
    racing = _compaction(catalog, H0, 5, 1, "job2")
    assert catalog.commit_compaction(part, first)
    assert not catalog.commit_compaction(part, racing)  # the same version, taken
    assert catalog.get_compaction_state(part) == first
    # Committed, not settled: readers see the output instead of the four inputs already.
    expected = sorted([first.outputs[0], inputs[4]], key=lambda f: f.key)
    assert catalog.list_files("db", "cpu", H0, H0) == expected
    assert catalog.list_files("db", "cpu") == [*expected, other_hour]
    # A next version waits until this one is settled.
    assert not catalog.commit_compaction(part, replace(racing, version=2))

    catalog.settle_compaction(part, first)
    assert catalog.get_compaction_state(part) == CompactionState(1, "job1", True)
    assert catalog.list_files("db", "cpu") == [*expected, other_hour]
    catalog.settle_compaction(part, first)  # again: nothing changes
    assert catalog.list_files("db", "cpu") == [*expected, other_hour]

    # A late ingest roll-forward of a compacted input's record does not bring it back.
    catalog.put_files(inputs[:2])
    assert catalog.list_files("db", "cpu", H0, H0) == expected

    second = _compaction(catalog, H0, 2, 2, "job3")
    assert catalog.commit_compaction(part, second)
    assert catalog.list_files("db", "cpu", H0, H0) == [second.outputs[0]]
    catalog.settle_compaction(part, first)  # a stale settle of an older version is a no-op
    assert catalog.get_compaction_state(part) == second
    catalog.settle_compaction(part, second)
    assert catalog.list_files("db", "cpu", H0, H0) == [second.outputs[0]]
    assert catalog.list_files("db", "cpu", H0 + HOUR, H0 + HOUR) == [other_hour]


@pytest.mark.parametrize("ports", LOCAL_AND_SLOW_AWS, indirect=True)  # 1100 files through moto
def test_one_compaction_commit_swaps_more_files_than_a_transaction_could_hold(ports: Ports) -> None:
    catalog = ports.catalog
    if isinstance(catalog, DynamoCatalog):
        # DynamoDB's own page size: 2 would take minutes.
        catalog = DynamoCatalog(catalog.client, catalog.table, catalog.leases.table)
    part = Partition("db", "cpu", H0)
    inputs = [file_record("db", "cpu", H0, f"{n:032x}-0000") for n in range(1100)]
    catalog.put_files(inputs)
    state = _compaction(catalog, H0, 1100, 1, "job1")
    assert catalog.commit_compaction(part, state)
    assert catalog.list_files("db", "cpu") == list(state.outputs)
    catalog.settle_compaction(part, state)
    assert catalog.list_files("db", "cpu") == list(state.outputs)
    assert catalog.get_compaction_state(part) == CompactionState(1, "job1", True)


def test_delete_files_and_drop_database_forget_compaction_state(ports: Ports) -> None:
    catalog = ports.catalog
    fill(catalog, "db", ("cpu",), hours=2)
    listed = catalog.list_files("db", "cpu")
    catalog.delete_files(listed[:1])
    catalog.delete_files(listed[:1])  # already gone
    assert catalog.list_files("db", "cpu") == listed[1:]
    catalog.put_files(listed[:1])  # a late ingest roll-forward
    assert catalog.list_files("db", "cpu") == listed[1:]
    part = Partition("db", "cpu", H0 + HOUR)
    assert catalog.commit_compaction(part, _compaction(catalog, H0 + HOUR, 1, 1, "job1"))
    assert catalog.drop_database("db")
    assert catalog.get_compaction_state(part) is None
    assert catalog.list_files("db", "cpu") == []


def test_compaction_jobs_newest_first_and_the_active_ones(ports: Ports) -> None:
    catalog = ports.catalog
    started = datetime(2024, 3, 2, tzinfo=UTC)
    jobs = [
        CompactionJob(f"job{n}", Partition("db", "cpu", H0 + n * HOUR), "running", started, started, input_keys=("k",))
        for n in range(4)
    ]
    for job in jobs:
        catalog.put_compaction_job(job)
    done = replace(jobs[1], status="done", output_keys=("o1", "o2"), input_bytes=10, base_version=3)
    failed = replace(jobs[2], status="failed", error="boom", delete_after=started + HOUR)
    catalog.put_compaction_job(done)
    catalog.put_compaction_job(failed)
    assert catalog.list_compaction_jobs() == [jobs[3], failed, done, jobs[0]]
    assert catalog.list_compaction_jobs(limit=2) == [jobs[3], failed]
    assert catalog.list_compaction_jobs(active=True) == [jobs[3], jobs[0]]
    assert catalog.get_compaction_job("job2") == failed
    assert catalog.get_compaction_job("job9") is None


def test_listing_during_a_compaction_sees_inputs_or_outputs(ports: Ports, monkeypatch: pytest.MonkeyPatch) -> None:
    if ports.name == "local":
        pytest.skip("SQLite lists under the writers' lock: nothing can commit midway")
    catalog = ports.catalog
    part = Partition("db", "cpu", H0)
    inputs = [file_record("db", "cpu", H0, f"in{n}") for n in range(6)]
    catalog.put_files(inputs)
    state = _compaction(catalog, H0, 6, 1, "job1")
    real = catalog._file_items  # type: ignore[attr-defined]
    calls = 0

    def commit_midway(*args: object) -> object:
        # The files are read page by page; between pages the compaction commits and settles.
        nonlocal calls
        calls += 1
        for n, item in enumerate(real(*args)):
            if n == 2 and calls == 1:
                assert catalog.commit_compaction(part, state)
                catalog.settle_compaction(part, state)
            yield item

    monkeypatch.setattr(catalog, "_file_items", commit_midway)
    assert catalog.list_files("db", "cpu") == [state.outputs[0]]
    assert calls == 2  # the first listing saw the commit happen and read again
