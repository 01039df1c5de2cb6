"""The day tier: once a day is old enough, its files (hour outputs, late writes, an earlier day
file) are merged again into day files, swapped in as atomically as an hour's.

A day file sits in the day's directory (``{db}/{m}/YYYY/MM/DD/{sequence}-d{job}-{n}.parquet``)
and its record at the day's first hour, so a listing by time starts at the day's start
(``layout.tier_start``) and filters by the records' min/max times.

The swap fences every hour it touches: one commit (a SQLite transaction, a DynamoDB
``TransactWriteItems``) moves each hour's compaction record from the version the job saw to the
next, naming that hour's inputs, and the first hour's the outputs too. A job of one of those
hours (compaction, retention, delete) that saw the old version can then no longer commit, and the
day's commit fails if any of them committed first. Each hour's record names its own inputs, so a
listing of one hour hides them as soon as the day commits. The argument: docs/compaction.md, "Tiers".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from arcs import layout
from arcs.compaction.report import Candidate
from arcs.ports import CompactionJob, CompactionState, FileRecord, Partition

if TYPE_CHECKING:
    from arcs.compaction.compactor import Compactor


HOUR = timedelta(hours=1)
Commits = list[tuple[Partition, CompactionState]]


class DayJobs:
    """The day tier of one compactor: its candidates, jobs, and their recovery."""

    def __init__(self, compactor: Compactor) -> None:
        self.compactor = compactor

    def candidates(self, database: str | None = None, measurement: str | None = None) -> list[Candidate]:
        """Days that ended at least ``day_min_age_s`` ago, hold ``day_min_files`` files or more, and
        at least one that is not a day file yet (a day merged already waits for late writes)."""
        c = self.compactor
        newest = layout.floor_day(c._now() - timedelta(seconds=c.config.day_min_age_s)) - layout.DAY
        found: list[Candidate] = []
        for schema in c.catalog.list_schemas(database):
            if measurement is not None and schema.measurement != measurement:
                continue
            by_day: dict[datetime, list[FileRecord]] = {}
            last = newest + layout.DAY - HOUR
            for record in c.catalog.list_files(schema.database, schema.measurement, last_hour=last):
                by_day.setdefault(layout.floor_day(record.hour), []).append(record)
            for day, files in sorted(by_day.items()):
                if len(files) >= c.config.day_min_files and any(layout.key_tier(f.key) == "hour" for f in files):
                    partition = Partition(schema.database, schema.measurement, day, "day")
                    found.append(
                        Candidate(partition, len(files), sum(f.size for f in files), sum(f.rows for f in files))
                    )
        return found

    def compact(self, partition: Partition) -> CompactionJob | None:
        """Merge one day; None when another job holds its lease, one of its hours has a swap
        still settling (its own job or recovery finishes it first), or there is too little to do."""
        c = self.compactor
        job_id = layout.sequence_id()
        if not c.catalog.acquire_lease(partition.name, c._owner(job_id), c.config.lease_s):
            return None
        try:
            job = self._compact_leased(partition, job_id)
        except Exception:
            c.catalog.release_lease(partition.name, c._owner(job_id))
            raise
        c.catalog.release_lease(partition.name, c._owner(job_id))  # not in ``finally``: as Compactor.compact
        return job

    def _compact_leased(self, partition: Partition, job_id: str) -> CompactionJob | None:
        c = self.compactor
        c._fault("leased")
        day, database, measurement = partition.hour, partition.database, partition.measurement
        last = day + layout.DAY - HOUR
        hours = sorted({f.hour for f in c.catalog.list_files(database, measurement, day, last)} | {day})
        # The versions first, then the files: whatever commits after this read moves a version,
        # and the day's commit, conditional on all of them, then fails.
        versions: dict[datetime, int] = {}
        for hour in hours:
            state = c.catalog.get_compaction_state(Partition(database, measurement, hour))
            if state is not None and not state.settled:
                return None  # a swap still settling: its job (or the next run's recovery) finishes it
            versions[hour] = 0 if state is None else state.version
        listed = c.catalog.list_files(database, measurement, day, last)
        picked = c._pick([f for f in listed if f.hour in versions])
        if len(picked) < 2 or all(layout.key_tier(f.key) == "day" for f in picked):
            return None
        used = sorted({f.hour for f in picked} | {day})
        job = c._journal_running(
            partition,
            job_id,
            picked,
            versions[day],
            base_versions=tuple((hour, versions[hour]) for hour in used),
        )
        built = c._build_or_fail(partition, job, picked)
        if isinstance(built, CompactionJob):
            return built
        job, state = built
        hour_of = {f.key: f.hour for f in picked}
        commits: Commits = [
            (
                Partition(database, measurement, hour),
                CompactionState(
                    version + 1,
                    job_id,
                    False,
                    tuple(key for key in state.inputs if hour_of[key] == hour),
                    state.outputs if hour == day else (),
                ),
            )
            for hour, version in job.base_versions
        ]
        if not c.catalog.commit_compactions(commits):
            # An hour of the day was compacted, rewritten or merged by another job first.
            c._delete_orphans(partition, job_id)
            aborted = replace(job, status="aborted", updated_at=c._now(), error="another job committed first")
            c.catalog.put_compaction_job(aborted)
            return aborted
        c._fault("committed")
        return self.finish(job, commits)

    def _committed(self, job: CompactionJob) -> Commits:
        """The hours' records that still name ``job``'s swap (settled or not)."""
        c = self.compactor
        commits: Commits = []
        for hour, version in job.base_versions:
            partition = Partition(job.partition.database, job.partition.measurement, hour)
            state = c.catalog.get_compaction_state(partition)
            if state is not None and (state.version, state.job_id) == (version + 1, job.job_id):
                commits.append((partition, state))
        return commits

    def finish(self, job: CompactionJob, commits: Sequence[tuple[Partition, CompactionState]] = ()) -> CompactionJob:
        """Settle a committed day swap: journal ``committed`` (with every input), then settle all
        its hours' records, then journal ``settled``."""
        c = self.compactor
        commits = list(commits) or self._committed(job)
        if job.status != "committed":
            # Not journaled as committed yet, so no record was settled: the records name everything.
            job = replace(
                job,
                input_keys=tuple(key for _partition, state in commits for key in state.inputs) or job.input_keys,
                output_keys=tuple(f.key for _partition, state in commits for f in state.outputs) or job.output_keys,
            )
        job = replace(
            job,
            status="committed",
            updated_at=c._now(),
            delete_after=c._now() + timedelta(seconds=c.config.grace_s),
        )
        c.catalog.put_compaction_job(job)
        c._fault("journaled-commit")
        c.catalog.settle_compactions(commits)
        c._fault("settled")
        settled = replace(job, status="settled", updated_at=c._now())
        c.catalog.put_compaction_job(settled)
        return settled

    def recover(self, job: CompactionJob) -> bool:
        """Finish a day job a crash left: settle its swap if it committed, else fence it (an empty
        commit of its first hour's next version, which its own commit needs) and delete its outputs."""
        c = self.compactor
        partition = job.partition
        fence_id = layout.sequence_id()
        owner = c._owner(fence_id)
        if not c.catalog.acquire_lease(partition.name, owner, c.config.lease_s):
            return False
        try:
            first = Partition(partition.database, partition.measurement, partition.hour)
            base = dict(job.base_versions).get(partition.hour, job.base_version)
            state = c.catalog.get_compaction_state(first)
            if state is not None and (state.version, state.job_id) == (base + 1, job.job_id):
                commits = self._committed(job)
                if any(not s.settled for _partition, s in commits):
                    self.finish(job, commits)
                else:
                    c._mark_settled(job)
                return True
            if job.status == "committed":
                c._mark_settled(job)  # the swap happened; later commits settled it
                return True
            if state is None or state.version <= base:
                if state is not None and not state.settled:
                    c._finish(first, state)
                fence = CompactionState(base + 1, fence_id, False)
                if c.catalog.commit_compaction(first, fence):
                    c.catalog.settle_compaction(first, fence)
                else:
                    again = c.catalog.get_compaction_state(first)
                    if again is not None and again.job_id == job.job_id:
                        self.finish(job)  # it committed between our read and the fence
                        return True
            c._delete_orphans(partition, job.job_id)
            aborted = replace(job, status="aborted", updated_at=c._now(), error="the job stopped before its commit")
            c.catalog.put_compaction_job(aborted)
            return True
        finally:
            c.catalog.release_lease(partition.name, owner)
