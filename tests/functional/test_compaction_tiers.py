"""The day and month tiers: a day's (month's) files merged again into day (month) files, with the
hour swap's guarantees.

Every test runs for both tiers (``tier``), on SQLite + a directory and on DynamoDB + S3 in moto
(the ``env`` fixture of test_compaction_protocol.py), except the query-side ones, which read
through DuckDB locally. A month test first merges the days (the tier below), as a run does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from arcs import layout
from arcs.adapters.records import hour_text
from arcs.auth.tokens import Principal
from arcs.errors import StorageFault
from arcs.layout import Tier
from arcs.lifecycle.compaction import tiers as tier_jobs
from arcs.lifecycle.compaction.compactor import Compactor
from arcs.lifecycle.deletion import Deleter
from arcs.lifecycle.drop_database import drop_database
from arcs.lifecycle.retention import Retention
from arcs.ports import CompactionState, FileRecord, Partition
from arcs.query.engine import Engine
from arcs.query.pruning import TimeRange
from arcs.query.service import QueryService
from tests.functional.test_compaction_protocol import STEPS, Crash, Env, Row, assert_clean, batch, crash_at
from tests.functional.test_compaction_protocol import env as env  # the fixture: both catalogs
from tests.helpers import BASE_US, HOUR_US, LOCAL_AND_SLOW_AWS

pytestmark = pytest.mark.functional

DAY0 = layout.floor_day(layout.hour_from_micros(BASE_US))
DAY0_US = (DAY0 - layout.hour_from_micros(0)) // timedelta(microseconds=1)
HOURS = (1, 5, 9)
H5 = DAY0 + timedelta(hours=5)
#: An hour of another day of DAY0's month (2023-11-16 03:00), where a month test writes too.
OTHER_DAY_HOUR = 51


#: The month tier is the day tier's protocol one level up, and takes twice the calls on moto.
@pytest.fixture(params=["day", pytest.param("month", marks=pytest.mark.slow)])
def tier(request: pytest.FixtureRequest) -> Tier:
    return request.param  # type: ignore[no-any-return]


def span(tier: Tier) -> Partition:
    """The day (month) the tests merge: DAY0's."""
    return Partition("db", "cpu", layout.tier_floor(DAY0, tier), tier)


def probe(tier: Tier) -> datetime:
    """An hour whose files a job of ``tier`` takes, after the tier below ran: a day job takes hour
    5's output; a month job takes DAY0's day file, recorded at the day's first hour."""
    return H5 if tier == "day" else DAY0


def at(hour: int, offset_us: int = 0) -> int:
    return DAY0_US + hour * HOUR_US + offset_us


def fill(env: Env, tier: Tier) -> list[Row]:
    """Three ingests into each of three hours of one day (points repeated across them) and one
    into a fourth hour, and for a month two into an hour of another day; returns what readers see
    once merged (the last write of each point)."""
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
    if tier == "month":
        for n in range(2):
            rows = [(at(OTHER_DAY_HOUR, 3), "a", float(n)), (at(OTHER_DAY_HOUR, 4 + n), "b", float(n))]
            env.ingest(batch([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))  # type: ignore[misc]
            written += rows
    last: dict[tuple[object, object], Row] = {}
    for row in written:
        last[(row[0], row[1])] = row
    return sorted(last.values())


def tiers(env: Env, tier: Tier, fault: Callable[[str], None] | None = None, **changes: object) -> Compactor:
    """A compactor with every tier up to ``tier``, each old enough at once."""
    upto = ("hour", "day") if tier == "day" else ("hour", "day", "month")
    return env.compactor(fault, **{"tiers": upto, "day_min_age_s": 0, "month_min_age_s": 0, **changes})


def below(env: Env, tier: Tier) -> Compactor:
    """A compactor of the tiers below ``tier``: hours for a day, hours and days for a month."""
    return env.compactor(tiers=("hour",) if tier == "day" else ("hour", "day"), day_min_age_s=0)


def hours_only(env: Env) -> Compactor:
    return env.compactor(tiers=("hour",))


def jobs(compactor: Compactor, tier: Tier) -> tier_jobs.TierJobs:
    return compactor.tiers[tier]


def keys(records: list[FileRecord]) -> set[str]:
    return {f.key for f in records}


# --- the normal path ---------------------------------------------------------------------------------


def test_a_span_is_merged_into_files_of_its_tier_that_a_listing_from_any_of_its_hours_finds(
    env: Env, tier: Tier
) -> None:
    after = fill(env, tier)
    report = tiers(env, tier).run()
    assert [(job.partition.tier, job.status) for job in report.jobs].count((tier, "settled")) == 1
    listed = env.listed()
    start = span(tier).hour
    assert len(listed) == 1 and all(layout.key_tier(f.key) == tier and f.hour == start for f in listed)
    assert layout.parse_data_key(env.prefix, listed[0].key).tier == tier
    assert layout.parse_data_key(env.prefix, listed[0].key).hour == start
    assert f"-{tier[0]}" in layout.file_order(listed[0].key)
    assert env.rows() == after
    # A range that starts mid-span lists from the month's start, then filters by min/max time.
    assert keys(env.catalog.list_files("db", "cpu", layout.tier_start(H5), H5)) == keys(listed)
    assert_clean(env)
    assert tiers(env, tier).run().jobs == []  # a merged span is no candidate until a late write lands


def test_files_of_the_tiers_below_are_merged_first_then_their_span(env: Env, tier: Tier) -> None:
    after = fill(env, tier)
    below(env, tier).run()
    assert len(env.listed()) == (len(HOURS) + 1 if tier == "day" else 2)
    assert [c.partition.name for c in jobs(tiers(env, tier), tier).candidates()] == [span(tier).name]
    tiers(env, tier).run()
    assert [layout.key_tier(f.key) for f in env.listed()] == [tier]
    assert env.rows() == after
    assert_clean(env)


def test_a_span_too_young_or_already_one_file_is_no_candidate(env: Env, tier: Tier) -> None:
    fill(env, tier)
    young = {f"{tier}_min_age_s": 10 * 365 * 86400}
    assert jobs(tiers(env, tier, **young), tier).candidates() == []
    assert tiers(env, tier, tiers=("hour",)).run().jobs != []
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


def test_a_month_job_takes_files_from_at_most_one_transaction_s_hours_and_the_next_run_the_rest(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hours only below the month: each file of the month is an hour's; a swap may move 3 records.
    monkeypatch.setattr(tier_jobs, "MAX_SWAP_HOURS", 3)
    after = fill(env, "month")
    month = env.compactor(tiers=("hour", "month"), month_min_age_s=0)
    first = month.run()
    (job,) = [j for j in first.jobs if j.partition.tier == "month"]
    assert job.status == "settled" and len(job.base_versions) == 3  # the month's first hour and two more
    # No point lost; the files left out repeat some until they are merged (queries merge on read).
    assert {row[:2] for row in env.rows()} == {row[:2] for row in after}
    assert any(layout.key_tier(f.key) == "hour" for f in env.listed())
    for _ in range(5):
        if not month.run().jobs:
            break
    assert [layout.key_tier(f.key) for f in env.listed()] == ["month"]
    assert env.rows() == after
    assert_clean(env)


# --- crashes and readers -----------------------------------------------------------------------------


@pytest.mark.parametrize("env", LOCAL_AND_SLOW_AWS, indirect=True)
@pytest.mark.parametrize("step", STEPS)
def test_a_span_job_crashed_at_any_step_leaves_the_inputs_or_the_outputs_and_the_next_run_exact_rows(
    env: Env, tier: Tier, step: str
) -> None:
    after = fill(env, tier)
    below(env, tier).run()
    inputs = keys(env.listed())
    with pytest.raises(Crash):
        tiers(env, tier, crash_at(step)).run()
    listed = env.listed()
    assert keys(listed) == inputs or all(layout.key_tier(f.key) == tier for f in listed)
    assert env.rows() == after
    time.sleep(0.1)  # the crashed job's lease runs out
    tiers(env, tier).run()
    assert env.rows() == after
    assert [layout.key_tier(f.key) for f in env.listed()] == [tier]
    tiers(env, tier).run()  # a crash after settling leaves the inputs' deletes to the next sweep
    assert_clean(env)


def test_a_reader_between_every_two_steps_sees_the_span_s_inputs_or_its_outputs(env: Env, tier: Tier) -> None:
    after = fill(env, tier)
    below(env, tier).run()
    inputs = keys(env.listed())
    hour = probe(tier)
    (hour_input,) = keys(env.catalog.list_files("db", "cpu", hour, hour))
    seen: list[str] = []

    def check(step: str) -> None:
        listed = keys(env.listed())
        swapped = listed != inputs
        if swapped:
            assert all(layout.key_tier(key) == tier for key in listed), step
        # A listing of one hour applies the span's commit too: its input is gone the moment it lands.
        one_hour = keys(env.catalog.list_files("db", "cpu", hour, hour))
        if tier == "day" or not swapped:
            assert one_hour == (set() if swapped else {hour_input}), step
        else:
            assert one_hour == set(), step  # the month file is recorded at the month's first hour
        assert env.rows() == after, step
        seen.append(f"{step}:{'outputs' if swapped else 'inputs'}")

    tiers(env, tier, check).run()
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
@pytest.mark.parametrize("stale", ["first", "other"])
def test_a_listing_that_sees_a_span_s_commit_half_applied_reads_again(
    env: Env, monkeypatch: pytest.MonkeyPatch, tier: Tier, stale: str
) -> None:
    # Stale first hour (its record new in the transaction): inputs hidden without the outputs, rows
    # missing. Stale other hour: the outputs shown with that hour's input still listed, rows twice.
    after = fill(env, tier)
    below(env, tier).run()
    inputs = keys(env.listed())
    pk = "COMPACTION#db#cpu"
    old = {str(item["sk"]): item for item in env.catalog._query(pk)}  # type: ignore[attr-defined]
    with pytest.raises(Crash):
        jobs(tiers(env, tier, crash_at("committed")), tier).compact(span(tier))
    outputs = keys(env.listed())
    assert outputs != inputs and all(layout.key_tier(key) == tier for key in outputs)
    hour = hour_text(span(tier).hour if stale == "first" else probe(tier))
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


# --- races with jobs of the tier below, retention and delete rewrites -----------------------------------


def test_a_stalled_job_of_the_tier_below_cannot_commit_over_a_span_that_merged_its_inputs(env: Env, tier: Tier) -> None:
    after = fill(env, tier)
    merged: list[str] = []

    def stall(step: str) -> None:
        if step == "outputs-written" and not merged:
            time.sleep(0.1)  # the job's lease runs out while it stalls; a job of the span merges it
            job = jobs(tiers(env, tier), tier).compact(span(tier))
            assert job is not None and job.status == "settled"
            merged.append(job.job_id)

    if tier == "day":
        job = env.compactor(stall, tiers=("hour",)).compact(Partition("db", "cpu", H5))
    else:
        stalled = env.compactor(stall, tiers=("hour", "day"), day_min_age_s=0)
        job = jobs(stalled, "day").compact(Partition("db", "cpu", DAY0, "day"))
    assert job is not None and job.status == "aborted"
    assert env.rows() == after  # nothing twice: the stalled job's outputs never became visible
    assert [layout.key_tier(f.key) for f in env.listed()] == [tier]
    tiers(env, tier).run()
    assert_clean(env)


@pytest.mark.parametrize("racer", ["hour compaction", "delete rewrite"])
def test_a_span_job_whose_hour_was_rewritten_meanwhile_cannot_commit(env: Env, tier: Tier, racer: str) -> None:
    after = fill(env, tier)
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

    job = jobs(tiers(env, tier, race), tier).compact(span(tier))
    assert job is not None and job.status == "aborted" and "another job" in job.error
    expected = after if racer == "hour compaction" else [r for r in after if r[0] != at(12, 7)]
    tiers(env, tier).run()  # the next run merges the span, with what the racer left
    assert env.rows() == expected
    assert [layout.key_tier(f.key) for f in env.listed()] == [tier]
    assert_clean(env)


def test_a_late_write_into_a_merged_hour_stays_a_file_of_its_own_and_wins_when_the_span_merges_again(
    env: Env, tier: Tier
) -> None:
    after = fill(env, tier)
    tiers(env, tier).run()
    (merged,) = env.listed()
    env.ingest(batch([at(5, 1), at(5, 500)], ["a", "a"], [999.0, 5.5]))  # (a, 5h+1) is in the merged file
    listed = env.listed()
    assert len(listed) == 2 and layout.file_order(listed[1].key) > layout.file_order(merged.key)
    tiers(env, tier).run()
    expected = sorted([r for r in after if r[:2] != (at(5, 1), "a")] + [(at(5, 1), "a", 999.0), (at(5, 500), "a", 5.5)])
    assert env.rows() == expected
    assert [layout.key_tier(f.key) for f in env.listed()] == [tier]
    assert_clean(env)


def test_an_hour_swap_left_unsettled_by_an_earlier_version_is_finished_before_its_span_merges(
    env: Env, tier: Tier
) -> None:
    # A per-hour commit record as the hour tier alone leaves it when it crashes after committing.
    after = fill(env, tier)
    with pytest.raises(Crash):
        env.compactor(crash_at("committed"), tiers=("hour",)).compact(Partition("db", "cpu", H5))
    state = env.catalog.get_compaction_state(Partition("db", "cpu", H5))
    assert isinstance(state, CompactionState) and not state.settled
    assert jobs(tiers(env, tier), tier).compact(span(tier)) is None  # a swap still settling: the span waits
    time.sleep(0.1)
    tiers(env, tier).run()  # recovery settles the hour, then the span merges
    assert env.rows() == after
    assert [layout.key_tier(f.key) for f in env.listed()] == [tier]
    assert_clean(env)


def test_an_hour_job_that_finds_its_hour_naming_a_span_s_unsettled_swap_finishes_the_whole_span(
    env: Env, tier: Tier
) -> None:
    after = fill(env, tier)
    below(env, tier).run()
    inputs = keys(env.listed())
    with pytest.raises(Crash):
        jobs(tiers(env, tier, crash_at("committed")), tier).compact(span(tier))
    hour = probe(tier)
    offset = (hour - DAY0) // timedelta(hours=1)
    for n in range(3):  # late writes: the hour becomes a candidate of its own
        env.ingest(batch([at(offset, 900 + n)], ["c"], [float(n)]))
    late = [(at(offset, 900 + n), "c", float(n)) for n in range(3)]
    job = hours_only(env).compact(Partition("db", "cpu", hour))  # no recovery first: the job finds it
    assert job is not None and job.status == "settled"
    (span_job,) = [j for j in env.catalog.list_compaction_jobs(limit=100) if j.partition.tier == tier]
    assert span_job.status == "settled" and set(span_job.input_keys) == inputs  # every hour's, for the sweep
    assert all(state.settled for state in _states(env, tier))
    assert env.rows() == sorted(after + late)
    tiers(env, tier).run()
    assert env.rows() == sorted(after + late)
    assert_clean(env)


def _states(env: Env, tier: Tier) -> list[CompactionState]:
    start = span(tier).hour
    hours = (layout.tier_end(start, tier) - start) // timedelta(hours=1)
    found = [env.catalog.get_compaction_state(Partition("db", "cpu", start + timedelta(hours=h))) for h in range(hours)]
    return [state for state in found if state is not None]


def test_a_crashed_span_job_is_fenced_before_its_outputs_are_deleted(env: Env, tier: Tier) -> None:
    after = fill(env, tier)
    below(env, tier).run()
    with pytest.raises(Crash):
        jobs(tiers(env, tier, crash_at("outputs-written")), tier).compact(span(tier))
    time.sleep(0.1)
    assert tiers(env, tier).recover_now() != []
    # The stalled job's commit would now fail: its first hour's record moved past what it saw.
    state = env.catalog.get_compaction_state(Partition("db", "cpu", span(tier).hour))
    assert state is not None and state.settled and state.version >= 1
    assert env.rows() == after
    tiers(env, tier).run()
    assert_clean(env)


# --- retention and delete across tiers ---------------------------------------------------------------


def test_retention_keeps_a_merged_file_that_straddles_its_cutoff_and_removes_it_once_its_span_is_over(
    env: Env, tier: Tier
) -> None:
    after = fill(env, tier)
    tiers(env, tier).run()
    env.ingest(batch([at(3, 5)], ["z"], [3.0]))  # a late write: an hour file of hour 3
    retention = Retention(env.catalog, tiers(env, tier))
    removal = retention.remove_expired("db", "cpu", DAY0 + timedelta(hours=6), dry_run=False)
    assert (removal.files, removal.rows) == (1, 1)  # hour 3's file; the merged file holds rows to keep
    assert env.rows() == after
    end = layout.tier_end(span(tier).hour, tier)
    assert retention.remove_expired("db", "cpu", end - timedelta(hours=1), dry_run=False).files == 0
    removal = retention.remove_expired("db", "cpu", end, dry_run=False)
    assert removal.files == 1 and removal.rows == len(after)
    assert env.rows() == []
    tiers(env, tier).run()
    assert_clean(env)


def test_a_delete_in_the_middle_of_a_merged_span_rewrites_its_file_in_the_span_s_directory(
    env: Env, tier: Tier
) -> None:
    after = fill(env, tier)
    tiers(env, tier).run()
    deleter = Deleter(env.catalog, env.store, tiers(env, tier))
    low, high = DAY0 + timedelta(hours=5), DAY0 + timedelta(hours=6)
    where = f"host = 'b' AND time >= '{low.isoformat()}' AND time < '{high.isoformat()}'"
    result = deleter.delete("db", "cpu", where, TimeRange(low, high), dry_run=False, confirm=True)
    assert result.deleted_count == 3 and len(result.rewritten_files) == 1
    (rewritten,) = result.rewritten_files
    assert layout.key_tier(rewritten) == tier and layout.parse_data_key(env.prefix, rewritten).tier == tier
    assert env.rows() == [r for r in after if not (r[1] == "b" and at(5) <= int(str(r[0])) < at(6))]
    tiers(env, tier).run()
    assert_clean(env)


def test_dropping_a_database_deletes_its_merged_files_too(env: Env, tier: Tier) -> None:
    fill(env, tier)
    tiers(env, tier).run()
    env.ingest(batch([at(5, 77)], ["a"], [1.0]))  # and a late write's hour file beside it
    assert {layout.key_tier(key) for key in env.data_keys()} == {tier, "hour"}
    result = drop_database(env.catalog, env.store, env.prefix, "db")
    assert result.existed and result.objects_deleted == 2
    assert env.data_keys() == []


# --- queries read across tiers (DuckDB over the local store) ------------------------------------------


def local_query(env: Env, tmp_path: Path) -> QueryService:
    root = Path(env.store.url("x")).parent
    return QueryService(env.catalog, env.store, Engine([str(root) + "/"], tmp_path / "engine"), 1_000_000)


def test_queries_merge_a_merged_file_with_a_late_write_and_find_it_from_mid_span(
    env: Env, tier: Tier, tmp_path: Path
) -> None:
    if env.name != "local":
        pytest.skip("queries read the local store here; the protocol is the same on both")
    after = fill(env, tier)
    tiers(env, tier).run()
    env.ingest(batch([at(5, 1)], ["a"], [999.0]))  # repeats a point the merged file holds
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
    # A range inside the span (as a continuous query's window, or a dashboard's hour) finds the
    # merged file recorded at the span's first hour, and only that range's rows.
    for hour in (5, OTHER_DAY_HOUR):
        low, high = DAY0 + timedelta(hours=hour), DAY0 + timedelta(hours=hour + 1)
        mid = f"time >= '{low.isoformat()}' AND time < '{high.isoformat()}'"
        count = service.run(f"SELECT count(*) FROM cpu WHERE {mid}", "db", admin).table.column(0)[0].as_py()
        assert count == sum(1 for r in after if at(hour) <= int(str(r[0])) < at(hour + 1))


def test_the_backlog_gauges_count_every_tier_s_candidates(
    env: Env, tier: Tier, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arcs import metrics

    fill(env, tier)
    below(env, tier).run()  # the hours merged: what waits now is the span alone
    recorded: list[dict[str, float]] = []

    class Capture:
        def record(self, values: dict[metrics.Measure, float], labels: dict[str, str]) -> None:
            recorded.append({measure.name: value for measure, value in values.items()})

    monkeypatch.setattr(metrics, "_recorder", Capture())
    tiers(env, tier).run()
    (gauges,) = [r for r in recorded if metrics.COMPACTION_WAITING.name in r]
    assert gauges[metrics.COMPACTION_WAITING.name] >= 1
    assert gauges[metrics.COMPACTION_FILES_PER_PARTITION.name] >= 2
