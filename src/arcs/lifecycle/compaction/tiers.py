"""The day and month tiers: once a day (a month) is old enough, its files (hour outputs, late
writes, day files, an earlier file of the tier) are merged again into day (month) files, swapped
in as atomically as an hour's.

A day file sits in the day's directory (``{db}/{m}/YYYY/MM/DD/{sequence}-d{job}-{n}.parquet``), a
month file in the month's (``{db}/{m}/YYYY/MM/{sequence}-m{job}-{n}.parquet``), and its record at
the span's first hour, so a listing by time starts at the month's start (``layout.tier_start``)
and filters by the records' min/max times.

The swap fences every hour it touches: one commit (a SQLite transaction, a DynamoDB
``TransactWriteItems``) moves each hour's compaction record from the version the job saw to the
next, naming that hour's inputs, and the first hour's the outputs too. A job of one of those
hours (compaction, retention, delete, a day of the month) that saw the old version can then no
longer commit, and the span's commit fails if any of them committed first. Each hour's record
names its own inputs, so a listing of one hour hides them as soon as the span commits. A job takes
files from at most ``MAX_SWAP_HOURS`` hours (one transaction's items). The argument:
docs/compaction.md, "Tiers".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from arcs import layout
from arcs.layout import Tier
from arcs.lifecycle.compaction.recovery import delete_orphans, mark_settled
from arcs.lifecycle.compaction.report import Candidate
from arcs.ports import CompactionJob, CompactionState, FileRecord, Partition

if TYPE_CHECKING:
    from arcs.lifecycle.compaction.compactor import Compactor


HOUR = timedelta(hours=1)
#: The hours one swap may move (DynamoDB's ``TransactWriteItems`` takes 100 items): a month job
#: takes its inputs, oldest first, from at most this many hours, the month's first among them.
MAX_SWAP_HOURS = 100
Commits = list[tuple[Partition, CompactionState]]


class TierJobs:
    """One tier above the hour (``day`` or ``month``) of one compactor: its candidates, jobs, and
    their recovery."""

    def __init__(self, compactor: Compactor, tier: Tier) -> None:
        self.compactor = compactor
        self.tier = tier
        #: The files a job of this tier merges: those of the tiers up to its own (a day job
        #: leaves the month file recorded at its first hour alone).
        self.takes = layout.TIERS[: layout.TIERS.index(tier) + 1]

    def _settings(self) -> tuple[float, int]:
        config = self.compactor.config
        if self.tier == "day":
            return config.day_min_age_s, config.day_min_files
        return config.month_min_age_s, config.month_min_files

    def candidates(self, database: str | None = None, measurement: str | None = None) -> list[Candidate]:
        """Spans (days, months) that ended at least the tier's minimum age ago, hold its minimum of
        files or more, and at least one of a lower tier (a span merged already waits for late writes)."""
        c = self.compactor
        min_age_s, min_files = self._settings()
        ended = c._now() - timedelta(seconds=min_age_s)
        last = layout.tier_floor(ended, self.tier) - HOUR  # the last hour of the newest span that ended
        found: list[Candidate] = []
        for schema in c.catalog.list_schemas(database):
            if measurement is not None and schema.measurement != measurement:
                continue
            by_span: dict[datetime, list[FileRecord]] = {}
            for record in c.catalog.list_files(schema.database, schema.measurement, last_hour=last):
                if layout.key_tier(record.key) in self.takes:
                    by_span.setdefault(layout.tier_floor(record.hour, self.tier), []).append(record)
            for start, files in sorted(by_span.items()):
                if len(files) >= min_files and any(layout.key_tier(f.key) != self.tier for f in files):
                    partition = Partition(schema.database, schema.measurement, start, self.tier)
                    found.append(
                        Candidate(partition, len(files), sum(f.size for f in files), sum(f.rows for f in files))
                    )
        return found

    def compact(self, partition: Partition) -> CompactionJob | None:
        """Merge one span; None when another job holds its lease, one of its hours has a swap
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
        start, database, measurement = partition.hour, partition.database, partition.measurement
        last = layout.tier_end(start, self.tier) - HOUR
        hours = sorted({f.hour for f in self._pick(c.catalog.list_files(database, measurement, start, last), start)})
        # The versions first, then the files: whatever commits after this read moves a version,
        # and the span's commit, conditional on all of them, then fails.
        versions: dict[datetime, int] = {}
        for hour in sorted({*hours, start}):
            state = c.catalog.get_compaction_state(Partition(database, measurement, hour))
            if state is not None and not state.settled:
                return None  # a swap still settling: its job (or the next run's recovery) finishes it
            versions[hour] = 0 if state is None else state.version
        picked = self._pick(c.catalog.list_files(database, measurement, start, last), start, versions)
        if len(picked) < 2 or all(layout.key_tier(f.key) == self.tier for f in picked):
            return None
        used = sorted({f.hour for f in picked} | {start})
        job = c._journal_running(
            partition,
            job_id,
            picked,
            versions[start],
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
                    state.outputs if hour == start else (),
                ),
            )
            for hour, version in job.base_versions
        ]
        if not c.catalog.commit_compactions(commits):
            # An hour of the span was compacted, rewritten or merged by another job first.
            delete_orphans(c, partition, job_id)
            aborted = replace(job, status="aborted", updated_at=c._now(), error="another job committed first")
            c.catalog.put_compaction_job(aborted)
            return aborted
        c._fault("committed")
        return self.finish(job, commits)

    def _pick(
        self, listed: Sequence[FileRecord], first: datetime, versions: dict[datetime, int] | None = None
    ) -> list[FileRecord]:
        """The span's files of this tier and below, oldest first under the job's caps, from at most
        ``MAX_SWAP_HOURS`` hours (the first hour's included) and, given ``versions``, only hours
        read there. A prefix in write order, so that everything left out is newer than the output."""
        ours = [f for f in listed if layout.key_tier(f.key) in self.takes]
        picked: list[FileRecord] = []
        hours = {first}
        for record in self.compactor._pick(ours):
            if versions is not None and record.hour not in versions:
                break
            if record.hour not in hours and len(hours) >= MAX_SWAP_HOURS:
                break
            hours.add(record.hour)
            picked.append(record)
        return picked

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
        """Settle a committed span's swap: journal ``committed`` (with every input), then settle all
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
        """Finish a span's job a crash left: settle its swap if it committed, else fence it (an empty
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
                    mark_settled(c, job)
                return True
            if job.status == "committed":
                mark_settled(c, job)  # the swap happened; later commits settled it
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
            delete_orphans(c, partition, job.job_id)
            aborted = replace(job, status="aborted", updated_at=c._now(), error="the job stopped before its commit")
            c.catalog.put_compaction_job(aborted)
            return True
        finally:
            c.catalog.release_lease(partition.name, owner)
