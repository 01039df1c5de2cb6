"""Retention and delete: exact rows under crashes at every step, with a reader alongside.

Both rewrite partitions through the compactor's swap; every test runs on SQLite + a directory and
on DynamoDB + S3 in moto (the ``env`` fixture of the compaction protocol tests).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from arcs import layout
from arcs.errors import BadRequest
from arcs.lifecycle.compaction.compactor import Compactor, PartitionBusy
from arcs.lifecycle.deletion import Deleter
from arcs.lifecycle.retention import Retention
from arcs.ports import Partition, RetentionPolicy
from arcs.query.pruning import TimeRange
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from tests.functional.test_compaction_protocol import HOUR, PARTITION, Crash, Env, Row, batch, crash_at, env, fill
from tests.helpers import BASE_US, HOUR_US, LOCAL_AND_SLOW_AWS

__all__ = ["env"]  # the fixture, shared with the compaction protocol tests

pytestmark = pytest.mark.functional

LATER = HOUR + timedelta(hours=2)  # fill() puts one row in this partition, the rest in HOUR
LATER_US = BASE_US + 2 * HOUR_US
DELETE_STEPS = ["leased", "journaled", "output-written", "outputs-written", "committed", "journaled-commit", "settled"]
RETENTION_STEPS = ["leased", "journaled", "outputs-written", "committed", "journaled-commit", "settled"]


def policy(measurement: str | None = "cpu", retention_days: int = 1, buffer_days: int = 0) -> RetentionPolicy:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return RetentionPolicy(1, "p", "db", measurement, retention_days, buffer_days, True, moment, moment)


def retention(env: Env, cutoff: datetime, compactor: Compactor | None = None) -> Retention:
    """A retention whose clock makes a 1-day policy's cutoff ``cutoff``."""
    return Retention(env.catalog, compactor or env.compactor(), now=lambda: cutoff + timedelta(days=1))


def deleter(env: Env, compactor: Compactor | None = None) -> Deleter:
    return Deleter(env.catalog, env.store, compactor or env.compactor())


def matches(row: Row) -> bool:
    """The delete's ``where`` below, in Python."""
    return row[1] == "b" or row[2] == -1.0


WHERE = "host = 'b' OR value = -1.0"


def assert_clean(env: Env) -> None:
    env.compactor().sweep()
    assert sorted(info.key for info in env.store.list(layout.measurement_prefix(env.prefix, "db", "cpu"))) == sorted(
        f.key for f in env.listed()
    )
    assert env.catalog.list_compaction_jobs(active=True) == []


# --- retention ------------------------------------------------------------------------------------


def test_retention_removes_whole_partitions_ending_by_the_cutoff_and_nothing_newer(env: Env) -> None:
    before, _ = fill(env)
    later = [row for row in before if row[0] == LATER_US]
    policy_ = policy()
    # The first hour ends one microsecond after this cutoff: nothing is old enough.
    early = retention(env, HOUR + timedelta(hours=1) - timedelta(microseconds=1))
    assert early.expired_partitions("db", "cpu", HOUR + timedelta(hours=1) - timedelta(microseconds=1)) == []
    nothing = early.execute(policy_, dry_run=False)
    assert (nothing.status, nothing.partitions) == ("succeeded", 0)
    assert env.rows() == before
    on_time = retention(env, HOUR + timedelta(hours=1))  # the hour's end is the cutoff: it goes
    dry = on_time.execute(policy_, dry_run=True)
    assert (dry.status, dry.partitions, dry.files, dry.rows) == ("dry_run", 1, 6, 42)
    assert env.rows() == before  # a dry run changes nothing
    done = on_time.execute(policy_, dry_run=False)
    assert (done.status, done.partitions, done.files, done.rows, done.skipped) == ("succeeded", 1, 6, 42, ())
    assert env.rows() == later
    assert [job.kind for job in env.catalog.list_compaction_jobs()] == ["retention"]
    assert [e.execution_id for e in env.catalog.list_retention_executions(1)] == [
        done.execution_id,
        dry.execution_id,
        nothing.execution_id,
    ]
    assert_clean(env)
    # Everything is old enough later on; a whole-database policy reaches every measurement.
    env.ingest(batch([BASE_US + 7], ["a"], [1.0], measurement="mem"))
    gone = retention(env, HOUR + timedelta(days=1)).execute(policy(measurement=None), dry_run=False)
    assert (gone.partitions, gone.rows) == (2, 2)
    assert env.rows() == [] and env.rows("mem") == []


def test_retention_skips_a_partition_whose_lease_another_job_holds(env: Env) -> None:
    before, _ = fill(env)
    assert env.catalog.acquire_lease(PARTITION.name, "a-compactor", 60)
    run = retention(env, HOUR + timedelta(days=1)).execute(policy(), dry_run=False)
    assert (run.status, run.partitions, run.skipped) == ("partial", 1, (PARTITION.name,))
    assert env.rows() == [row for row in before if row[0] != LATER_US]  # the later hour went
    env.catalog.release_lease(PARTITION.name, "a-compactor")
    assert retention(env, HOUR + timedelta(days=1)).execute(policy(), dry_run=False).rows == 42
    assert env.rows() == []


@pytest.mark.parametrize("env", LOCAL_AND_SLOW_AWS, indirect=True)
@pytest.mark.parametrize("step", [*RETENTION_STEPS, "inputs-deleted"])
def test_retention_crash_at_every_step_then_the_schedule_finishes_it(env: Env, step: str) -> None:
    before, _ = fill(env)
    after = [row for row in before if row[0] == LATER_US]
    cutoff = HOUR + timedelta(hours=1, minutes=30)

    def reader_sees_one_side() -> None:
        assert env.rows() in (before, after)

    with pytest.raises(Crash):
        retention(env, cutoff, env.compactor(fault=crash_at(step, reader_sees_one_side))).run_due_for([policy()])
    reader_sees_one_side()
    time.sleep(0.06)  # the dead job's lease runs out
    retention(env, cutoff).run_due_for([policy()])
    assert env.rows() == after
    assert_clean(env)


# --- delete ---------------------------------------------------------------------------------------


def test_delete_dry_run_counts_then_delete_rewrites_only_files_with_matches(env: Env) -> None:
    before, _ = fill(env)
    after = [row for row in before if not matches(row)]
    listed_before = {f.key for f in env.listed()}
    dry = deleter(env).delete("db", "cpu", WHERE, TimeRange(), dry_run=True, confirm=False)
    assert (dry.deleted_count, len(dry.affected_files), dry.files_read) == (len(before) - len(after), 7, 7)
    assert env.rows() == before and {f.key for f in env.listed()} == listed_before
    done = deleter(env).delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
    assert done.deleted_count == len(before) - len(after) and done.failed_files == []
    assert (len(done.affected_files), len(done.rewritten_files)) == (7, 6)  # the later hour's file emptied
    assert env.rows() == after
    assert {job.kind for job in env.catalog.list_compaction_jobs()} == {"delete"}
    assert_clean(env)
    # Nothing matches any more: a second delete changes nothing.
    again = deleter(env).delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
    assert (again.deleted_count, again.affected_files) == (0, [])


def test_files_without_matching_rows_are_untouched_and_time_bounds_skip_partitions(env: Env) -> None:
    before, _ = fill(env)
    untouched = {f.key for f in env.catalog.list_files("db", "cpu", HOUR, HOUR)}
    bounds = TimeRange(lower=LATER)
    done = deleter(env).delete("db", "cpu", "value = -1.0", bounds, dry_run=False, confirm=False)
    assert (done.deleted_count, done.files_read) == (1, 1)
    assert env.catalog.get_compaction_state(PARTITION) is None  # the first hour was never rewritten
    assert {f.key for f in env.catalog.list_files("db", "cpu", HOUR, HOUR)} == untouched
    # One file of the first hour holds value 100.0: only it is rewritten.
    done = deleter(env).delete("db", "cpu", "value = 100.0", TimeRange(), dry_run=False, confirm=False)
    assert (done.deleted_count, len(done.affected_files), len(done.rewritten_files)) == (1, 1, 1)
    assert len(untouched & {f.key for f in env.listed()}) == 5
    assert env.rows() == [row for row in before if row[2] not in (-1.0, 100.0)]


def test_delete_over_the_confirmation_threshold_needs_confirm(env: Env) -> None:
    before, _ = fill(env)
    low = Deleter(env.catalog, env.store, env.compactor(), confirm_rows=3)
    with pytest.raises(BadRequest, match="more than 3"):
        low.delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
    assert env.rows() == before
    assert low.delete("db", "cpu", WHERE, TimeRange(), dry_run=True, confirm=False).deleted_count > 3
    assert low.delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=True).deleted_count > 3
    assert env.rows() == [row for row in before if not matches(row)]


def test_a_partition_another_job_holds_is_reported_failed_and_left_whole(env: Env) -> None:
    before, _ = fill(env)
    assert env.catalog.acquire_lease(PARTITION.name, "a-compactor", 60)
    done = deleter(env).delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
    assert len(done.failed_files) == 6 and not done.to_json()["success"]
    assert env.rows() == [row for row in before if row[2] != -1.0]


@pytest.mark.parametrize("env", LOCAL_AND_SLOW_AWS, indirect=True)
@pytest.mark.parametrize("step", [*DELETE_STEPS, "inputs-deleted"])
def test_delete_crash_at_every_step_then_recovery_and_a_rerun_leave_exact_rows(env: Env, step: str) -> None:
    before, _ = fill(env)
    after = [row for row in before if not matches(row)]
    # Partitions go one at a time, oldest first: between them a reader sees the first one done.
    first_done = [row for row in before if not (matches(row) and row[0] != LATER_US)]

    def reader_sees_a_whole_partition() -> None:
        assert env.rows() in (before, first_done, after)

    crashing = env.compactor(fault=crash_at(step, reader_sees_a_whole_partition))

    def delete_then_sweep() -> None:
        deleter(env, crashing).delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
        crashing.sweep()  # where "inputs-deleted" comes

    with pytest.raises(Crash):
        delete_then_sweep()
    reader_sees_a_whole_partition()
    time.sleep(0.06)  # the dead job's lease runs out
    env.compactor().recover()
    deleter(env).delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
    assert env.rows() == after
    assert_clean(env)


def test_a_reader_between_every_two_steps_sees_each_partition_before_or_after(env: Env) -> None:
    before, _ = fill(env)
    after = [row for row in before if not matches(row)]
    first_done = [row for row in before if not (matches(row) and row[0] != LATER_US)]
    seen: list[tuple[str, str]] = []
    names = {tuple(before): "before", tuple(first_done): "first", tuple(after): "after"}

    def look(step: str) -> None:
        seen.append((step, names[tuple(env.rows())]))

    deleter(env, env.compactor(fault=look)).delete("db", "cpu", WHERE, TimeRange(), dry_run=False, confirm=False)
    assert seen == [
        ("leased", "before"),
        ("journaled", "before"),
        *[("output-written", "before")] * 6,
        ("outputs-written", "before"),
        ("committed", "first"),
        ("journaled-commit", "first"),
        ("settled", "first"),
        ("leased", "first"),  # anything left for another commit? no
        ("leased", "first"),
        ("journaled", "first"),
        ("outputs-written", "first"),
        ("committed", "after"),
        ("journaled-commit", "after"),
        ("settled", "after"),
        ("leased", "after"),
    ]


def test_rows_ingested_after_the_delete_picked_its_inputs_are_untouched(env: Env) -> None:
    before, _ = fill(env)

    def late(step: str) -> None:
        if step == "outputs-written" and not env.catalog.list_files("db", "late"):
            env.ingest(batch([BASE_US + 77], ["b"], [5.0]))  # matches, into the partition being rewritten
            env.ingest(batch([BASE_US + 1], ["x"], [0.0], measurement="late"))

    done = deleter(env, env.compactor(fault=late)).delete(
        "db", "cpu", "host = 'b'", TimeRange(upper=HOUR + timedelta(minutes=59)), dry_run=False, confirm=False
    )
    assert done.deleted_count == len([row for row in before if row[1] == "b"])
    assert env.rows() == sorted([*[row for row in before if row[1] != "b"], (BASE_US + 77, "b", 5.0)])


def test_compaction_waits_for_a_delete_holding_the_partition(env: Env) -> None:
    fill(env)

    def compact_meanwhile(step: str) -> None:
        if step == "outputs-written":
            assert env.compactor().compact(Partition("db", "cpu", HOUR)) is None  # the lease is the delete's
            with pytest.raises(PartitionBusy):
                env.compactor().rewrite(PARTITION, "delete", lambda listed: listed, lambda picked, tmp: iter(()))

    # A lease that outlasts the test's steps on a loaded machine: the check is whose it is.
    deleter(env, env.compactor(fault=compact_meanwhile, lease_s=60)).delete(
        "db", "cpu", "host = 'b'", TimeRange(), dry_run=False, confirm=False
    )


def test_a_where_on_a_column_older_files_lack_reads_it_as_null_there(env: Env) -> None:
    before, _ = fill(env, files=2)
    table = pa.table(
        {
            "time": pa.array([BASE_US + 500, BASE_US + 501], pa.int64())
            .cast(pa.timestamp("us", tz="UTC"))
            .cast(TIME_TYPE),
            "host": ["a", "a"],
            "value": [1.5, 2.5],
            "zone": ["eu", "us"],  # a column the earlier files do not have
        }
    )
    env.ingest(WriteBatch("w-zone", "db", (MeasurementRows("cpu", table, ("host",)),)))
    done = deleter(env).delete("db", "cpu", "zone = 'us' OR value = 0.0", TimeRange(), dry_run=False, confirm=False)
    assert (done.deleted_count, len(done.affected_files), done.failed_files) == (2, 2, [])
    assert env.rows() == sorted([*[row for row in before if row[2] != 0.0], (BASE_US + 500, "a", 1.5)])


def test_more_affected_files_than_one_commit_holds_take_several_commits(env: Env) -> None:
    before, _ = fill(env)
    capped = env.compactor(min_files=2, max_files=2)
    done = deleter(env, capped).delete("db", "cpu", "host = 'b'", TimeRange(), dry_run=False, confirm=False)
    assert (len(done.affected_files), len(done.rewritten_files), done.failed_files) == (6, 6, [])
    assert [len(job.input_keys) for job in env.catalog.list_compaction_jobs()] == [2, 2, 2]
    assert env.rows() == [row for row in before if row[1] != "b"]
    removed = Retention(env.catalog, capped, now=lambda: HOUR + timedelta(days=3)).execute(policy(), dry_run=False)
    assert (removed.partitions, removed.files) == (2, 7)
    assert env.rows() == []
