"""Compaction: an hour partition's many small files become a few large ones, swapped atomically.

The protocol (the argument is in docs/compaction.md):

1. Take the partition's lease (a conditional write in the catalog), so one compactor works on it.
   If the partition's last compaction commit is not settled yet (a crashed job), settle it first.
2. Pick the inputs: the partition's listed files, oldest first, up to the job's caps. Journal the
   job as ``running`` with the compaction version it saw.
3. Read the inputs into a local work directory; a file that is not readable Parquet is moved to
   the quarantine (outside every data prefix), recorded there, and its file record removed.
4. Merge with DuckDB (sorted by time, or tags then time; rows with equal tags and time merge
   field by field, each field its last written non-null value, ``arcs.write.points``; spilling to
   disk past its memory limit), streaming record batches into
   Parquet files near the target size, and upload them under keys that hold the job id.
5. **Commit point:** one conditional write of the partition's compaction commit record (version
   n + 1, naming inputs and outputs), which succeeds only if the partition is still at version n.
   From here readers see the outputs instead of the inputs.
6. Journal ``committed``, then settle: the outputs get file records, the inputs' are retired
   (markers a late ingest roll-forward cannot revive), the commit record is marked settled.
7. After a grace period (longer than any query that listed the inputs before the swap) the
   inputs' objects are deleted and the job is ``done``.

A crash anywhere is finished by the next run: a committed job is settled, a job that cannot have
committed is fenced (an empty commit takes its version) and its uploaded outputs are deleted.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from arcs import layout, metrics
from arcs.errors import ArcsError
from arcs.lifecycle.compaction.inputs import stage
from arcs.lifecycle.compaction.outputs import write_outputs
from arcs.lifecycle.compaction.recovery import delete_orphans, job_from_state, recover, sweep, sweep_ingest_orphans
from arcs.lifecycle.compaction.report import Candidate, RunReport
from arcs.lifecycle.compaction.rewrite import BuildOutputs, SelectInputs, rewrite_leased
from arcs.lifecycle.compaction.tiers import TierJobs
from arcs.ports import (
    Catalog,
    CompactionJob,
    CompactionState,
    FileRecord,
    JobKind,
    ObjectStore,
    Partition,
)
from arcs.settings import CompactionSettings

logger = logging.getLogger(__name__)

FaultHook = Callable[[str], None]


def _no_fault(step: str) -> None:
    return None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PartitionBusy(ArcsError):
    """Another job holds the partition's lease; the rewrite did not start."""

    status = 409


class Compactor:
    def __init__(
        self,
        catalog: Catalog,
        store: ObjectStore,
        prefix: str,
        config: CompactionSettings,
        work_dir: Path,
        row_group_rows: int = 122_880,
        fault: FaultHook = _no_fault,
        now: Callable[[], datetime] = _utcnow,
        holder: str | None = None,
    ) -> None:
        self.catalog = catalog
        # Who holds this compactor's leases: each lease's owner is ``{holder}/{job}``. A process
        # that can prove its holder's earlier incarnation is gone (the standalone server holds its
        # data directory's lock) frees that incarnation's leases at once (``reclaim_leases``);
        # anyone else waits for them to expire.
        self.holder = holder or f"process-{os.urandom(6).hex()}"
        if "/" in self.holder:
            raise ValueError(f"a lease holder's name cannot hold '/': {self.holder!r}")
        self.store = store
        self.prefix = prefix
        self.config = config
        self.work_dir = work_dir
        self.row_group_rows = row_group_rows
        # Tests stop the protocol between any two steps through this hook.
        self._fault = fault
        self._now = now
        self._run_lock = threading.Lock()
        #: The tiers above the hour, in the order a run does them.
        self.tiers = {tier: TierJobs(self, tier) for tier in ("day", "month")}

    # --- what to compact ---------------------------------------------------------------------------
    def candidates(self, database: str | None = None, measurement: str | None = None) -> list[Candidate]:
        """Partitions whose hour ended at least ``min_age_s`` ago and that hold ``min_files`` files or more."""
        newest = layout.floor_hour(self._now() - timedelta(seconds=self.config.min_age_s)) - timedelta(hours=1)
        found: list[Candidate] = []
        for schema in self.catalog.list_schemas(database):
            if measurement is not None and schema.measurement != measurement:
                continue
            by_hour: dict[datetime, list[FileRecord]] = {}
            for record in self.catalog.list_files(schema.database, schema.measurement, last_hour=newest):
                if layout.key_tier(record.key) == "hour":  # a day or month file recorded at its first hour is no hour's
                    by_hour.setdefault(record.hour, []).append(record)
            for hour, files in sorted(by_hour.items()):
                if len(files) >= self.config.min_files:
                    partition = Partition(schema.database, schema.measurement, hour)
                    found.append(
                        Candidate(partition, len(files), sum(f.size for f in files), sum(f.rows for f in files))
                    )
        return found

    # --- a run: recover, compact, delete what waited out its grace ---------------------------------
    def run(self, database: str | None = None, measurement: str | None = None) -> RunReport:
        """One pass over every candidate; a second call while one runs in this process waits for it."""
        try:
            report = self._run(database, measurement)
        except BaseException:
            metrics.record({metrics.COMPACTION_RUNS: 1}, status="failed")
            raise
        metrics.record({metrics.COMPACTION_RUNS: 1}, status="ok")
        metrics.record({metrics.COMPACTION_JOBS: len(report.jobs)})
        return report

    def _run(self, database: str | None, measurement: str | None) -> RunReport:
        with self._run_lock:
            report = RunReport(self._now())
            started = time.monotonic()
            report.recovered = self.recover()
            waiting = self.candidates(database, measurement)
            found = list(waiting)  # every tier's, for the backlog gauges
            for candidate in waiting:
                budget = self.config.time_budget_s
                if budget and time.monotonic() - started > budget:
                    break
                job = self.compact(candidate.partition)
                if job is None:
                    report.skipped.append(candidate.partition.name)
                else:
                    report.jobs.append(job)
            for tier in self.upper_tiers():
                upper = tier.candidates(database, measurement)
                found += upper
                for candidate in upper:
                    budget = self.config.time_budget_s
                    if budget and time.monotonic() - started > budget:
                        break
                    job = tier.compact(candidate.partition)
                    if job is None:
                        report.skipped.append(candidate.partition.name)
                    else:
                        report.jobs.append(job)
            if database is None and measurement is None:  # the whole backlog, not one measurement's
                metrics.record(
                    {
                        metrics.COMPACTION_WAITING: len(found),
                        metrics.COMPACTION_FILES_PER_PARTITION: max((c.files for c in found), default=0),
                    }
                )
            report.inputs_deleted = self.sweep()
            report.finished_at = self._now()
            return report

    def upper_tiers(self) -> list[TierJobs]:
        """The tiers above the hour this compactor's settings turn on, in the order a run does them."""
        return [jobs for name, jobs in self.tiers.items() if name in self.config.tiers]

    # --- one job -----------------------------------------------------------------------------------
    def compact(self, partition: Partition) -> CompactionJob | None:
        """Compact one partition; None when another compactor holds it or there is too little to do."""
        job_id = layout.sequence_id()
        if not self.catalog.acquire_lease(partition.name, self._owner(job_id), self.config.lease_s):
            return None
        try:
            job = self._compact_leased(partition, job_id)
            sweep_ingest_orphans(self, partition)
        except Exception:
            self.catalog.release_lease(partition.name, self._owner(job_id))
            raise
        # Not in ``finally``: a crash (the tests' BaseException) must leave the lease as a dead
        # process would, held until it expires or its holder's next incarnation reclaims it.
        self.catalog.release_lease(partition.name, self._owner(job_id))
        return job

    def _owner(self, job_id: str) -> str:
        """The owner a lease taken for ``job_id`` names: this compactor's holder, then the job."""
        return f"{self.holder}/{job_id}"

    def reclaim_leases(self) -> list[str]:
        """Free every lease this compactor's holder took, in this or an earlier incarnation; the
        partitions freed. Only for a holder whose earlier incarnation is known to be gone (the
        standalone server calls it at start, holding its data directory's lock): the jobs that
        crashed under those leases are then recovered by the next run, not 15 minutes later."""
        return self.catalog.release_leases(self.holder)

    def recover_now(self) -> list[str]:
        """``recover``, as a run does it (one at a time in this process)."""
        with self._run_lock:
            return self.recover()

    def _open_job(
        self, partition: Partition, job_id: str, kind: JobKind, select: SelectInputs, minimum: int
    ) -> tuple[CompactionJob, list[FileRecord]] | None:
        """Under the lease: finish a crashed swap, pick the inputs, journal the job (None: too few)."""
        state = self.catalog.get_compaction_state(partition)
        if state is not None and not state.settled:
            self._finish(partition, state)  # a crashed job's swap: finish it before anything else
        base_version = 0 if state is None else state.version
        listed = self.catalog.list_files(partition.database, partition.measurement, partition.hour, partition.hour)
        picked = select(listed)
        if len(picked) < minimum:
            return None
        return self._journal_running(partition, job_id, picked, base_version, kind=kind), picked

    def _journal_running(
        self,
        partition: Partition,
        job_id: str,
        picked: Sequence[FileRecord],
        base_version: int,
        kind: JobKind = "compaction",
        base_versions: tuple[tuple[datetime, int], ...] = (),
    ) -> CompactionJob:
        """Journals the job ``running`` over ``picked``, before any output exists (recovery starts here)."""
        now = self._now()
        job = CompactionJob(
            job_id,
            partition,
            "running",
            now,
            now,
            base_version=base_version,
            input_keys=tuple(f.key for f in picked),
            input_bytes=sum(f.size for f in picked),
            input_rows=sum(f.rows for f in picked),
            kind=kind,
            base_versions=base_versions,
        )
        self.catalog.put_compaction_job(job)
        self._fault("journaled")
        return job

    def _compact_leased(self, partition: Partition, job_id: str) -> CompactionJob | None:
        self._fault("leased")
        opened = self._open_job(partition, job_id, "compaction", self._pick_hour_files, self.config.min_files)
        if opened is None:
            return None
        job, picked = opened
        built = self._build_or_fail(partition, job, picked)
        if isinstance(built, CompactionJob):
            return built
        return self._swap(partition, *built)

    def _pick_hour_files(self, listed: Sequence[FileRecord]) -> list[FileRecord]:
        """An hour job's inputs: the hour's own files (a day or month file recorded at this hour is its span's)."""
        return self._pick([f for f in listed if layout.key_tier(f.key) == "hour"])

    def _pick(self, listed: Sequence[FileRecord]) -> list[FileRecord]:
        """The oldest files first, so that everything left out is newer than the output."""
        picked: list[FileRecord] = []
        total = 0
        for record in sorted(listed, key=lambda f: layout.file_order(f.key)):
            if len(picked) >= self.config.max_files or (picked and total + record.size > self.config.max_input_bytes):
                break
            picked.append(record)
            total += record.size
        return picked

    # --- a partition rewrite of retention or delete, swapped like a compaction ---------------------
    def rewrite(
        self, partition: Partition, kind: JobKind, select: SelectInputs, build: BuildOutputs
    ) -> CompactionJob | None:
        """Replace the inputs ``select`` picks among the partition's files by the files ``build``
        writes (none: the inputs are removed), under the partition's lease and with the same
        journal, commit record, recovery and grace-period deletes as a compaction job.

        None when ``select`` picks nothing; raises ``PartitionBusy`` when another job holds the lease.
        """
        job_id = layout.sequence_id()
        if not self.catalog.acquire_lease(partition.name, self._owner(job_id), self.config.lease_s):
            raise PartitionBusy(f"partition {partition.name} is being rewritten by another job; try again")
        try:
            job = rewrite_leased(self, partition, job_id, kind, select, build)
        except Exception:
            self.catalog.release_lease(partition.name, self._owner(job_id))
            raise
        self.catalog.release_lease(partition.name, self._owner(job_id))  # not in ``finally``: as in ``compact``
        return job

    def _build_or_fail(
        self, partition: Partition, job: CompactionJob, picked: list[FileRecord]
    ) -> CompactionJob | tuple[CompactionJob, CompactionState]:
        """:meth:`_build`, or the job journaled ``failed`` if it raised."""
        try:
            return self._build(partition, job, picked)
        except Exception as exc:
            # Nothing is committed: the outputs uploaded so far are garbage.
            logger.exception("compaction of %s failed", partition.name)
            delete_orphans(self, partition, job.job_id)
            failed = replace(job, status="failed", updated_at=self._now(), error=str(exc)[:1000])
            self.catalog.put_compaction_job(failed)
            return failed

    def _build(
        self, partition: Partition, job: CompactionJob, picked: list[FileRecord]
    ) -> CompactionJob | tuple[CompactionJob, CompactionState]:
        """Read, merge and upload: the job's outputs and the commit that would make them visible
        (or the finished job, when too little was readable)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.work_dir, prefix="compact-") as tmp:
            staged, quarantined = stage(self, picked, Path(tmp), job.job_id)
            job = replace(job, quarantined=tuple(quarantined))
            self._fault("inputs-read")
            if len(staged) < 2:
                done = replace(job, status="aborted", updated_at=self._now(), error="fewer than 2 readable inputs")
                self.catalog.put_compaction_job(done)
                return done
            outputs = write_outputs(self, partition, job, staged, Path(tmp))
        self._fault("outputs-written")
        inputs = tuple(s.record.key for s in staged)
        state = CompactionState(job.base_version + 1, job.job_id, False, inputs, tuple(outputs))
        job = replace(
            job,
            output_keys=tuple(f.key for f in outputs),
            output_bytes=sum(f.size for f in outputs),
            output_rows=sum(f.rows for f in outputs),
        )
        return job, state

    def _swap(self, partition: Partition, job: CompactionJob, state: CompactionState) -> CompactionJob:
        if not self.catalog.commit_compaction(partition, state):
            # Another compactor committed first (our lease had expired): our outputs are garbage.
            delete_orphans(self, partition, job.job_id)
            aborted = replace(job, status="aborted", updated_at=self._now(), error="another job committed first")
            self.catalog.put_compaction_job(aborted)
            return aborted
        self._fault("committed")
        return self._finish(partition, state, job)

    def _finish(self, partition: Partition, state: CompactionState, job: CompactionJob | None = None) -> CompactionJob:
        """Settle a committed swap. The journal says ``committed`` first, so that no later commit
        (which waits for this one to be settled) can hide that this job's swap happened."""
        job = job or self.catalog.get_compaction_job(state.job_id) or job_from_state(partition, state, self._now())
        if job.partition.tier != "hour":
            return self.tiers[job.partition.tier].finish(job)  # one hour's record names a span's swap: finish all of it
        # The commit record's inputs are the truth: a crash may have come before the journal knew them.
        job = replace(
            job,
            status="committed",
            input_keys=state.inputs or job.input_keys,
            output_keys=tuple(f.key for f in state.outputs) or job.output_keys,
            updated_at=self._now(),
            delete_after=self._now() + timedelta(seconds=self.config.grace_s),
        )
        self.catalog.put_compaction_job(job)
        self._fault("journaled-commit")
        self.catalog.settle_compaction(partition, state)
        self._fault("settled")
        settled = replace(job, status="settled", updated_at=self._now())
        self.catalog.put_compaction_job(settled)
        return settled

    # --- recovery and cleanup (``recovery``) --------------------------------------------------------
    def recover(self) -> list[str]:
        """Finish what crashed jobs left: settle committed swaps, fence and clean up the rest."""
        return recover(self)

    def sweep(self) -> int:
        """Delete the objects of inputs whose grace period is over; returns how many."""
        return sweep(self)
