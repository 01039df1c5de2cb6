"""The day tier: a day's files merged again into day files, with the hour swap's guarantees.

Every test runs on SQLite + a directory and on DynamoDB + S3 in moto (the ``env`` fixture of
test_compaction_protocol.py), except the query-side ones, which read through DuckDB locally.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from arcs import layout
from arcs.adapters.records import hour_text
from arcs.compaction.compactor import Compactor
from arcs.deletion import Deleter
from arcs.engine import Engine
from arcs.errors import StorageFault
from arcs.ports import CompactionState, FileRecord, Partition
from arcs.pruning import TimeRange
from arcs.query import QueryService
from arcs.retention import Retention
from arcs.routes.databases import drop_database
from arcs.tokens import Principal
from tests.functional.test_compaction_protocol import STEPS, Crash, Env, Row, assert_clean, batch, crash_at
from tests.functional.test_compaction_protocol import env as env  # the fixture: both catalogs
from tests.helpers import BASE_US, HOUR_US

pytestmark = pytest.mark.functional

DAY0 = layout.floor_day(layout.hour_from_micros(BASE_US))
DAY0_US = (DAY0 - layout.hour_from_micros(0)) // timedelta(microseconds=1)
HOURS = (1, 5, 9)
H5 = DAY0 + timedelta(hours=5)
DAY = Partition("db", "cpu", DAY0, "day")


def at(hour: int, offset_us: int = 0) -> int:
    return DAY0_US + hour * HOUR_US + offset_us


def fill_day(env: Env) -> list[Row]:
    """Three ingests into each of three hours of one day (points repeated across them) and one
    into a fourth hour; returns what readers see once merged (the last write of each point)."""
    written: list[Row] = []
    for hour in HOURS:
        for n in range(3):
            times = [at(hour, n * 10 + i) for i in range(3)] + [at(hour, 1)]  # (a, +1) repeated
            hosts = ["a", "b", "a", "a"]
            values = [float(hour * 1000 + n * 100 + i) for i in range(4)]
            env.ingest(batch(times, hosts, values))
            written += list(zip(times, hosts, values, strict=True))
    env.ingest(batch([at(12, 7)], ["b"], [-12.0]))
    written.append((at(12, 7), "b", -12.0))
    last: dict[tuple[object, object], Row] = {}
    for row in written:
        last[(row[0], row[1])] = row
    return sorted(last.values())


def tiers(env: Env, fault: Callable[[str], None] | None = None, **changes: object) -> Compactor:
    return env.compactor(fault, **{"tiers": ("hour", "day"), "day_min_age_s": 0, **changes})


def hours_only(env: Env) -> Compactor:
    return env.compactor(tiers=("hour",))


def keys(records: list[FileRecord]) -> set[str]:
    return {f.key for f in records}


# --- the normal path ---------------------------------------------------------------------------------


def test_a_day_is_merged_into_day_files_that_a_listing_from_any_of_its_hours_finds(env: Env) -> None:
    after = fill_day(env)
    report = tiers(env).run()
    assert [(job.partition.tier, job.status) for job in report.jobs].count(("day", "settled")) == 1
    listed = env.listed()
    assert len(listed) == 1 and all(layout.key_tier(f.key) == "day" and f.hour == DAY0 for f in listed)
    assert layout.parse_data_key(env.prefix, listed[0].key).tier == "day"
    assert "-d" in layout.file_order(listed[0].key)
    assert env.rows() == after
    # A range that starts mid-day lists from the day's start, then filters by min/max time.
    assert keys(env.catalog.list_files("db", "cpu", layout.tier_start(H5), H5)) == keys(listed)
    assert_clean(env)
    assert tiers(env).run().jobs == []  # a merged day is no candidate until a late write lands


def test_hour_files_are_merged_first_then_their_day(env: Env) -> None:
    after = fill_day(env)
    hours_only(env).run()
    assert len(env.listed()) == len(HOURS) + 1
    assert [c.partition.name for c in tiers(env).days.candidates()] == ["db/cpu/" + DAY0.strftime("%Y-%m-%d")]
    tiers(env).run()
    assert [layout.key_tier(f.key) for f in env.listed()] == ["day"]
    assert env.rows() == after
    assert_clean(env)


def test_a_day_too_young_or_already_one_file_is_no_candidate(env: Env) -> None:
    fill_day(env)
    assert tiers(env, day_min_age_s=10 * 365 * 86400).days.candidates() == []
    assert tiers(env, tiers=("hour",)).run().jobs != []
    assert all(job.partition.tier == "hour" for job in hours_only(env).run().jobs)


def test_a_day_commit_moves_every_hour_s_record_or_none(env: Env) -> None:
    first, fifth = Partition("db", "cpu", DAY0), Partition("db", "cpu", H5)
    hour_job = CompactionState(1, "hourjob", False)
    assert env.catalog.commit_compaction(fifth, hour_job)
    env.catalog.settle_compaction(fifth, hour_job)
    stale = [(first, CompactionState(1, "dayjob", False)), (fifth, CompactionState(1, "dayjob", False))]
    assert not env.catalog.commit_compactions(stale)  # hour 5 is at 1, not 0: nothing moves
    assert env.catalog.get_compaction_state(first) is None
    assert env.catalog.get_compaction_state(fifth) == CompactionState(1, "hourjob", True)
    fresh = [(first, CompactionState(1, "dayjob", False)), (fifth, CompactionState(2, "dayjob", False))]
    assert env.catalog.commit_compactions(fresh)
    assert not env.catalog.commit_compactions([(fifth, CompactionState(3, "other", False))])  # not settled
    env.catalog.settle_compactions(fresh)
    assert [env.catalog.get_compaction_state(p) for p in (first, fifth)] == [
        CompactionState(1, "dayjob", True),
        CompactionState(2, "dayjob", True),
    ]


# --- crashes and readers -----------------------------------------------------------------------------


@pytest.mark.parametrize("step", STEPS)
def test_a_day_job_crashed_at_any_step_leaves_the_inputs_or_the_outputs_and_the_next_run_exact_rows(
    env: Env, step: str
) -> None:
    after = fill_day(env)
    hours_only(env).run()
    inputs = keys(env.listed())
    with pytest.raises(Crash):
        tiers(env, crash_at(step)).run()
    listed = env.listed()
    assert keys(listed) == inputs or all(layout.key_tier(f.key) == "day" for f in listed)
    assert env.rows() == after
    time.sleep(0.1)  # the crashed job's lease runs out
    tiers(env).run()
    assert env.rows() == after
    assert [layout.key_tier(f.key) for f in env.listed()] == ["day"]
    tiers(env).run()  # a crash after settling leaves the inputs' deletes to the next sweep
    assert_clean(env)


def test_a_reader_between_every_two_steps_sees_the_day_s_inputs_or_its_outputs(env: Env) -> None:
    after = fill_day(env)
    hours_only(env).run()
    inputs = keys(env.listed())
    (hour5_input,) = keys(env.catalog.list_files("db", "cpu", H5, H5))
    seen: list[str] = []

    def check(step: str) -> None:
        listed = keys(env.listed())
        swapped = listed != inputs
        if swapped:
            assert all(layout.key_tier(key) == "day" for key in listed), step
        # A listing of one hour applies the day's commit too: its input is gone the moment it lands.
        assert keys(env.catalog.list_files("db", "cpu", H5, H5)) == (set() if swapped else {hour5_input}), step
        assert env.rows() == after, step
        seen.append(f"{step}:{'outputs' if swapped else 'inputs'}")

    tiers(env, check).run()
    assert "outputs-written:inputs" in seen and "committed:outputs" in seen
    assert_clean(env)


def _stale_commit_reads(
    env: Env, monkeypatch: pytest.MonkeyPatch, old: dict[str, dict[str, object]], hour: str, reads: int
) -> list[int]:
    """Make the next ``reads`` queries of the commit records show ``hour``'s record as ``old`` had
    it (absent if it had none) and the others as they are: a transaction DynamoDB has applied to
    some items and not yet to others, as its read-committed Query may see. Returns the reads done."""
    real = env.catalog._query  # type: ignore[attr-defined]
    done: list[int] = []

    def query(pk: str, *args: object, **kwargs: object) -> Iterator[dict[str, object]]:
        items = list(real(pk, *args, **kwargs))
        if not pk.startswith("COMPACTION#"):
            return iter(items)
        done.append(1)
        if len(done) > reads:
            return iter(items)
        mixed = [item for item in items if item["sk"] != hour]
        if hour in old:
            mixed.append(old[hour])
        return iter(sorted(mixed, key=lambda item: str(item["sk"])))

    monkeypatch.setattr(env.catalog, "_query", query)
    return done


@pytest.mark.parametrize("env", ["aws"], indirect=True)
@pytest.mark.parametrize("stale", [0, 5])
def test_a_listing_that_sees_a_day_s_commit_half_applied_reads_again(
    env: Env, monkeypatch: pytest.MonkeyPatch, stale: int
) -> None:
    # Stale hour 0 (its record new in the transaction): inputs hidden without the outputs, rows
    # missing. Stale hour 5: the outputs shown with hour 5's input still listed, rows twice.
    after = fill_day(env)
    hours_only(env).run()
    inputs = keys(env.listed())
    pk = "COMPACTION#db#cpu"
    old = {str(item["sk"]): item for item in env.catalog._query(pk)}  # type: ignore[attr-defined]
    with pytest.raises(Crash):
        tiers(env, crash_at("committed")).days.compact(DAY)
    outputs = keys(env.listed())
    assert outputs != inputs and all(layout.key_tier(key) == "day" for key in outputs)
    hour = hour_text(DAY0 + timedelta(hours=stale))
    # Both reads of one listing alike, and half applied: only the transaction's own versions show it.
    reads = _stale_commit_reads(env, monkeypatch, old, hour, reads=2)
    assert keys(env.listed()) == outputs
    assert len(reads) == 4  # read again once
    _stale_commit_reads(env, monkeypatch, old, hour, reads=2)
    assert env.rows() == after
    # Seen half applied on every attempt: a clear error, never a wrong answer.
    _stale_commit_reads(env, monkeypatch, old, hour, reads=1000)
    with pytest.raises(StorageFault, match="half applied"):
        env.listed()


# --- races with hour jobs, retention and delete rewrites ----------------------------------------------


def test_a_stalled_hour_job_cannot_commit_over_a_day_that_merged_its_inputs(env: Env) -> None:
    after = fill_day(env)
    merged: list[str] = []

    def stall(step: str) -> None:
        if step == "outputs-written" and not merged:
            time.sleep(0.1)  # the hour job's lease runs out while it stalls; a day job merges the day
            job = tiers(env).days.compact(DAY)
            assert job is not None and job.status == "settled"
            merged.append(job.job_id)

    job = env.compactor(stall, tiers=("hour",)).compact(Partition("db", "cpu", H5))
    assert job is not None and job.status == "aborted"
    assert env.rows() == after  # nothing twice: the hour's outputs never became visible
    assert [layout.key_tier(f.key) for f in env.listed()] == ["day"]
    tiers(env).run()
    assert_clean(env)


@pytest.mark.parametrize("racer", ["hour compaction", "delete rewrite"])
def test_a_day_job_whose_hour_was_rewritten_meanwhile_cannot_commit(env: Env, racer: str) -> None:
    after = fill_day(env)
    raced: list[str] = []

    def race(step: str) -> None:
        if step != "outputs-written" or raced:
            return
        if racer == "hour compaction":  # hour 5's three files, merged by an hour job
            job = hours_only(env).compact(Partition("db", "cpu", H5))
        else:  # hour 12's one file removed by a rewrite through the same protocol
            hour = Partition("db", "cpu", DAY0 + timedelta(hours=12))
            job = hours_only(env).rewrite(hour, "delete", lambda listed: listed, lambda _p, _t: iter(()))
        assert job is not None and job.status == "settled"
        raced.append(job.job_id)

    job = tiers(env, race).days.compact(DAY)
    assert job is not None and job.status == "aborted" and "another job" in job.error
    expected = after if racer == "hour compaction" else [r for r in after if r[0] != at(12, 7)]
    tiers(env).run()  # the next run merges the day, with what the racer left
    assert env.rows() == expected
    assert [layout.key_tier(f.key) for f in env.listed()] == ["day"]
    assert_clean(env)


def test_a_late_write_into_a_merged_hour_stays_a_file_of_its_own_and_wins_when_the_day_merges_again(
    env: Env,
) -> None:
    after = fill_day(env)
    tiers(env).run()
    (day_file,) = env.listed()
    env.ingest(batch([at(5, 1), at(5, 500)], ["a", "a"], [999.0, 5.5]))  # (a, 5h+1) is in the day file
    listed = env.listed()
    assert len(listed) == 2 and layout.file_order(listed[1].key) > layout.file_order(day_file.key)
    tiers(env).run()
    expected = sorted([r for r in after if r[:2] != (at(5, 1), "a")] + [(at(5, 1), "a", 999.0), (at(5, 500), "a", 5.5)])
    assert env.rows() == expected
    assert [layout.key_tier(f.key) for f in env.listed()] == ["day"]
    assert_clean(env)


def test_an_hour_swap_left_unsettled_by_an_earlier_version_is_finished_before_its_day_merges(env: Env) -> None:
    # A per-hour commit record as the hour tier alone leaves it when it crashes after committing.
    after = fill_day(env)
    with pytest.raises(Crash):
        env.compactor(crash_at("committed"), tiers=("hour",)).compact(Partition("db", "cpu", H5))
    state = env.catalog.get_compaction_state(Partition("db", "cpu", H5))
    assert isinstance(state, CompactionState) and not state.settled
    assert tiers(env).days.compact(DAY) is None  # a swap still settling: the day waits for it
    time.sleep(0.1)
    tiers(env).run()  # recovery settles the hour, then the day merges
    assert env.rows() == after
    assert [layout.key_tier(f.key) for f in env.listed()] == ["day"]
    assert_clean(env)


def test_an_hour_job_that_finds_its_hour_naming_a_day_s_unsettled_swap_finishes_the_whole_day(env: Env) -> None:
    after = fill_day(env)
    hours_only(env).run()
    inputs = keys(env.listed())
    with pytest.raises(Crash):
        tiers(env, crash_at("committed")).days.compact(DAY)
    for n in range(3):  # late writes: hour 5 becomes a candidate of its own
        env.ingest(batch([at(5, 900 + n)], ["c"], [float(n)]))
    late = [(at(5, 900 + n), "c", float(n)) for n in range(3)]
    job = hours_only(env).compact(Partition("db", "cpu", H5))  # no recovery first: the job finds it
    assert job is not None and job.status == "settled"
    (day_job,) = [j for j in env.catalog.list_compaction_jobs(limit=100) if j.partition.tier == "day"]
    assert day_job.status == "settled" and set(day_job.input_keys) == inputs  # every hour's, for the sweep
    assert all(state.settled for state in _states(env))
    assert env.rows() == sorted(after + late)
    tiers(env).run()
    assert env.rows() == sorted(after + late)
    assert_clean(env)


def _states(env: Env) -> list[CompactionState]:
    found = [env.catalog.get_compaction_state(Partition("db", "cpu", DAY0 + timedelta(hours=h))) for h in range(24)]
    return [state for state in found if state is not None]


def test_a_crashed_day_job_is_fenced_before_its_outputs_are_deleted(env: Env) -> None:
    after = fill_day(env)
    hours_only(env).run()
    with pytest.raises(Crash):
        tiers(env, crash_at("outputs-written")).days.compact(DAY)
    time.sleep(0.1)
    assert tiers(env).recover_now() != []
    # The stalled job's commit would now fail: its first hour's record moved past what it saw.
    state = env.catalog.get_compaction_state(Partition("db", "cpu", DAY0))
    assert state is not None and state.settled and state.version >= 1
    assert env.rows() == after
    tiers(env).run()
    assert_clean(env)


# --- retention and delete across tiers ---------------------------------------------------------------


def test_retention_keeps_a_day_file_that_straddles_its_cutoff_and_removes_it_once_the_day_is_over(
    env: Env,
) -> None:
    after = fill_day(env)
    tiers(env).run()
    env.ingest(batch([at(3, 5)], ["z"], [3.0]))  # a late write: an hour file of hour 3
    retention = Retention(env.catalog, tiers(env))
    removal = retention.remove_expired("db", "cpu", DAY0 + timedelta(hours=6), dry_run=False)
    assert (removal.files, removal.rows) == (1, 1)  # hour 3's file; the day file holds rows to keep
    assert env.rows() == after
    removal = retention.remove_expired("db", "cpu", DAY0 + layout.DAY, dry_run=False)
    assert removal.files == 1 and removal.rows == len(after)
    assert env.rows() == []
    tiers(env).run()
    assert_clean(env)


def test_a_delete_in_the_middle_of_a_merged_day_rewrites_its_day_file_in_the_day_s_directory(env: Env) -> None:
    after = fill_day(env)
    tiers(env).run()
    deleter = Deleter(env.catalog, env.store, tiers(env))
    low, high = DAY0 + timedelta(hours=5), DAY0 + timedelta(hours=6)
    where = f"host = 'b' AND time >= '{low.isoformat()}' AND time < '{high.isoformat()}'"
    result = deleter.delete("db", "cpu", where, TimeRange(low, high), dry_run=False, confirm=True)
    assert result.deleted_count == 3 and len(result.rewritten_files) == 1
    (rewritten,) = result.rewritten_files
    assert layout.key_tier(rewritten) == "day" and layout.parse_data_key(env.prefix, rewritten).tier == "day"
    assert env.rows() == [r for r in after if not (r[1] == "b" and at(5) <= int(str(r[0])) < at(6))]
    tiers(env).run()
    assert_clean(env)


def test_dropping_a_database_deletes_its_day_files_too(env: Env) -> None:
    fill_day(env)
    tiers(env).run()
    env.ingest(batch([at(5, 77)], ["a"], [1.0]))  # and a late write's hour file beside it
    assert {layout.key_tier(key) for key in env.data_keys()} == {"day", "hour"}
    result = drop_database(env.catalog, env.store, env.prefix, "db")
    assert result.existed and result.objects_deleted == 2
    assert env.data_keys() == []


# --- queries read across tiers (DuckDB over the local store) ------------------------------------------


def local_query(env: Env, tmp_path: Path) -> QueryService:
    root = Path(env.store.url("x")).parent
    return QueryService(env.catalog, env.store, Engine([str(root) + "/"], tmp_path / "engine"), 1_000_000)


def test_queries_merge_a_day_file_with_a_late_write_and_find_it_from_mid_day(env: Env, tmp_path: Path) -> None:
    if env.name != "local":
        pytest.skip("queries read the local store here; the protocol is the same on both")
    after = fill_day(env)
    tiers(env).run()
    env.ingest(batch([at(5, 1)], ["a"], [999.0]))  # repeats a point the day file holds
    service = local_query(env, tmp_path)
    admin = Principal("t", "admin", frozenset({"admin"}), ())
    table = service.run("SELECT time, host, value FROM cpu ORDER BY time, host", "db", admin).table
    got = sorted(
        zip(
            [t // 1000 for t in table.column("time").cast("int64").to_pylist()],
            table.column("host").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )
    assert got == sorted([r for r in after if r[:2] != (at(5, 1), "a")] + [(at(5, 1), "a", 999.0)])
    mid = f"time >= '{(DAY0 + timedelta(hours=5)).isoformat()}' AND time < '{(DAY0 + timedelta(hours=6)).isoformat()}'"
    count = service.run(f"SELECT count(*) FROM cpu WHERE {mid}", "db", admin).table.column(0)[0].as_py()
    assert count == sum(1 for r in after if at(5) <= int(str(r[0])) < at(6))
