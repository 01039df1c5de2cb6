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

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from arcs import layout, metrics
from arcs.errors import ArcsError, NotFound
from arcs.lifecycle.compaction.merge import CorruptInput, check_parquet, merge, sort_order, time_bounds
from arcs.lifecycle.compaction.report import Candidate, RunReport
from arcs.lifecycle.compaction.tiers import TierJobs
from arcs.ports import (
    Catalog,
    CommitRecord,
    CompactionJob,
    CompactionState,
    FileRecord,
    JobKind,
    ObjectStore,
    Partition,
)
from arcs.settings import CompactionSettings
from arcs.write.points import ORDER_COLUMNS

logger = logging.getLogger(__name__)

FaultHook = Callable[[str], None]
#: A rewrite's choice of inputs among the partition's listed files, made under its lease.
SelectInputs = Callable[[list[FileRecord]], list[FileRecord]]
#: A rewrite's outputs: (the input a file replaces, a local Parquet file), one at a time.
BuildOutputs = Callable[[list[FileRecord], Path], Iterator[tuple[str, Path]]]
#: An unlisted ingest file this old belongs to an attempt that is over (Lambda's limit is 15 min).
ORPHAN_AGE = timedelta(hours=1)


def _no_fault(step: str) -> None:
    return None


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PartitionBusy(ArcsError):
    """Another job holds the partition's lease; the rewrite did not start."""

    status = 409


@dataclass(frozen=True, slots=True)
class _Staged:
    record: FileRecord
    path: Path
    schema: pa.Schema


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
            if database is None and measurement is None:  # the whole backlog, not one measurement's
                metrics.record(
                    {
                        metrics.COMPACTION_WAITING: len(waiting),
                        metrics.COMPACTION_FILES_PER_PARTITION: max((c.files for c in waiting), default=0),
                    }
                )
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
                for candidate in tier.candidates(database, measurement):
                    budget = self.config.time_budget_s
                    if budget and time.monotonic() - started > budget:
                        break
                    job = tier.compact(candidate.partition)
                    if job is None:
                        report.skipped.append(candidate.partition.name)
                    else:
                        report.jobs.append(job)
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
            self._sweep_ingest_orphans(partition)
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
            job = self._rewrite_leased(partition, job_id, kind, select, build)
        except Exception:
            self.catalog.release_lease(partition.name, self._owner(job_id))
            raise
        self.catalog.release_lease(partition.name, self._owner(job_id))  # not in ``finally``: as in ``compact``
        return job

    def _rewrite_leased(
        self, partition: Partition, job_id: str, kind: JobKind, select: SelectInputs, build: BuildOutputs
    ) -> CompactionJob | None:
        self._fault("leased")
        opened = self._open_job(partition, job_id, kind, select, 1)
        if opened is None:
            return None
        job, picked = opened
        outputs: list[FileRecord] = []
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self.work_dir, prefix=f"{kind}-") as tmp:
                for index, (source, path) in enumerate(build(picked, Path(tmp))):
                    name = layout.compacted_filename(source, job_id, index, merged=False)
                    # The rest of a day file stays a day file, in the day's directory.
                    tier = layout.key_tier(source)
                    key = layout.data_key(
                        self.prefix, partition.database, partition.measurement, partition.hour, name, tier
                    )
                    outputs.append(self._upload(path, key, partition, job_id))
                    path.unlink()
                    self._fault("output-written")
                    self._renew(partition, job_id)
                self._renew(partition, job_id)
        except Exception as exc:
            logger.exception("%s of %s failed", kind, partition.name)
            self._delete_orphans(partition, job_id)
            failed = replace(job, status="failed", updated_at=self._now(), error=str(exc)[:1000])
            self.catalog.put_compaction_job(failed)
            return failed
        self._fault("outputs-written")
        state = CompactionState(job.base_version + 1, job_id, False, job.input_keys, tuple(outputs))
        job = replace(
            job,
            output_keys=tuple(f.key for f in outputs),
            output_bytes=sum(f.size for f in outputs),
            output_rows=sum(f.rows for f in outputs),
        )
        return self._swap(partition, job, state)

    def _build_or_fail(
        self, partition: Partition, job: CompactionJob, picked: list[FileRecord]
    ) -> CompactionJob | tuple[CompactionJob, CompactionState]:
        """:meth:`_build`, or the job journaled ``failed`` if it raised."""
        try:
            return self._build(partition, job, picked)
        except Exception as exc:
            # Nothing is committed: the outputs uploaded so far are garbage.
            logger.exception("compaction of %s failed", partition.name)
            self._delete_orphans(partition, job.job_id)
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
            staged, quarantined = self._stage(picked, Path(tmp), job.job_id)
            job = replace(job, quarantined=tuple(quarantined))
            self._fault("inputs-read")
            if len(staged) < 2:
                done = replace(job, status="aborted", updated_at=self._now(), error="fewer than 2 readable inputs")
                self.catalog.put_compaction_job(done)
                return done
            outputs = self._write_outputs(partition, job, staged, Path(tmp))
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
            self._delete_orphans(partition, job.job_id)
            aborted = replace(job, status="aborted", updated_at=self._now(), error="another job committed first")
            self.catalog.put_compaction_job(aborted)
            return aborted
        self._fault("committed")
        return self._finish(partition, state, job)

    def _finish(self, partition: Partition, state: CompactionState, job: CompactionJob | None = None) -> CompactionJob:
        """Settle a committed swap. The journal says ``committed`` first, so that no later commit
        (which waits for this one to be settled) can hide that this job's swap happened."""
        job = job or self.catalog.get_compaction_job(state.job_id) or _job_from_state(partition, state, self._now())
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

    # --- reading the inputs ------------------------------------------------------------------------
    def _stage(self, picked: list[FileRecord], tmp: Path, job_id: str) -> tuple[list[_Staged], list[str]]:
        staged: list[_Staged] = []
        quarantined: list[str] = []
        inputs = tmp / "inputs"
        inputs.mkdir()
        for index, record in enumerate(picked):
            try:
                path = self._local_copy(record, inputs / f"{index:06d}.parquet")
                schema = check_parquet(path, record.rows)
            except CorruptInput as exc:
                self._quarantine(record, exc.message, job_id)
                quarantined.append(record.key)
                continue
            staged.append(_Staged(record, path, schema))
        return staged, quarantined

    def _local_copy(self, record: FileRecord, target: Path) -> Path:
        url = self.store.url(record.key)
        if "://" not in url:
            if not Path(url).is_file():
                raise CorruptInput(f"{record.key} is listed but missing")
            return Path(url)  # a local store: read in place
        try:
            data = self.store.get(record.key)
        except NotFound as exc:
            raise CorruptInput(f"{record.key} is listed but missing") from exc
        target.write_bytes(data)
        return target

    def _quarantine(self, record: FileRecord, reason: str, job_id: str) -> None:
        """Move a bad file out of the data prefixes, say why next to it, and stop listing it."""
        logger.error("quarantining %s: %s", record.key, reason)
        target = layout.quarantine_key(self.prefix, record.key)
        with contextlib.suppress(NotFound):  # if it is gone, the note below still says what was listed
            self.store.put(target, self.store.get(record.key))
        note = {
            "key": record.key,
            "reason": reason,
            "job_id": job_id,
            "at": self._now().isoformat(),
            "record": {"rows": record.rows, "size": record.size, "commit_id": record.commit_id},
        }
        self.store.put(target + ".json", json.dumps(note).encode())
        self.catalog.delete_files([record])
        self.store.delete(record.key)

    # --- merging -------------------------------------------------------------------------------------
    def _write_outputs(
        self, partition: Partition, job: CompactionJob, staged: list[_Staged], tmp: Path
    ) -> list[FileRecord]:
        schema = self.catalog.get_schema(partition.database, partition.measurement)
        columns: dict[str, None] = {}
        for item in staged:
            columns.update(dict.fromkeys(item.schema.names))
        tags = [tag for tag in (schema.tags if schema else ()) if tag in columns]
        if tags and any(name in columns for name in ORDER_COLUMNS):
            raise ArcsError(f"a column named {' or '.join(ORDER_COLUMNS)} prevents ordering duplicates")
        latest = staged[-1].record.key
        outputs: list[FileRecord] = []
        order = sort_order(partition.measurement, tags, columns, self.config)
        paths = [s.path for s in staged]
        for index, path in enumerate(merge(paths, tags, tmp, self.config, self.row_group_rows, order)):
            name = layout.compacted_filename(latest, job.job_id, index, tier=partition.tier)
            key = layout.data_key(
                self.prefix, partition.database, partition.measurement, partition.hour, name, partition.tier
            )
            outputs.append(self._upload(path, key, partition, job.job_id))
            path.unlink()
            self._fault("output-written")
            self._renew(partition, job.job_id)
        self._renew(partition, job.job_id)
        return outputs

    def _renew(self, partition: Partition, job_id: str) -> None:
        """Keep the lease through a long job; if someone took it over, stop (the commit would fail)."""
        if not self.catalog.acquire_lease(partition.name, self._owner(job_id), self.config.lease_s):
            raise ArcsError(f"lost the lease of {partition.name} to another compactor")

    def _upload(self, path: Path, key: str, partition: Partition, job_id: str) -> FileRecord:
        with pq.ParquetFile(path) as parquet:
            metadata = parquet.metadata
        lowest, highest = time_bounds(metadata)
        data = path.read_bytes()
        if not self.store.put_if_absent(key, data):
            logger.info("compacted file %s already present", key)  # the key holds this job's id
        return FileRecord(
            partition.database,
            partition.measurement,
            partition.hour,
            key,
            metadata.num_rows,
            len(data),
            lowest,
            highest,
            job_id,
        )

    # --- recovery and cleanup ----------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Finish what crashed jobs left: settle committed swaps, fence and clean up the rest."""
        recovered: list[str] = []
        for job in self.catalog.list_compaction_jobs(active=True, limit=10_000):
            if job.status == "settled":
                continue  # the sweep deletes its inputs when their grace period is over
            if self._recover(job):
                recovered.append(job.job_id)
        return recovered

    def _recover(self, job: CompactionJob) -> bool:
        if job.partition.tier != "hour":
            return self.tiers[job.partition.tier].recover(job)
        partition = job.partition
        fence_id = layout.sequence_id()
        owner = self._owner(fence_id)
        # The lease is free only once the job's holder is gone (or its lease ran out).
        if not self.catalog.acquire_lease(partition.name, owner, self.config.lease_s):
            return False
        try:
            state = self.catalog.get_compaction_state(partition)
            if state is not None and state.job_id == job.job_id:
                if state.settled:
                    self._mark_settled(job)
                else:
                    self._finish(partition, state, job)
                return True
            if job.status == "committed":
                self._mark_settled(job)  # the swap happened; later commits settled it
                return True
            if state is None or state.version <= job.base_version:
                # The job could still commit if it is alive but slow: take its version first.
                if state is not None and not state.settled:
                    self._finish(partition, state)
                fence = CompactionState(job.base_version + 1, fence_id, False)
                if self.catalog.commit_compaction(partition, fence):
                    self.catalog.settle_compaction(partition, fence)
                else:
                    return self._recover_again(job)
            self._delete_orphans(partition, job.job_id)
            aborted = replace(job, status="aborted", updated_at=self._now(), error="the job stopped before its commit")
            self.catalog.put_compaction_job(aborted)
            return True
        finally:
            self.catalog.release_lease(partition.name, owner)

    def _recover_again(self, job: CompactionJob) -> bool:
        # Someone committed between our read and the fence: maybe the job itself. Look again.
        state = self.catalog.get_compaction_state(job.partition)
        if state is not None and state.job_id == job.job_id:
            self._finish(job.partition, state, job)
            return True
        self._delete_orphans(job.partition, job.job_id)
        self.catalog.put_compaction_job(replace(job, status="aborted", updated_at=self._now()))
        return True

    def _mark_settled(self, job: CompactionJob) -> None:
        delete_after = job.delete_after or self._now() + timedelta(seconds=self.config.grace_s)
        self.catalog.put_compaction_job(
            replace(job, status="settled", updated_at=self._now(), delete_after=delete_after)
        )

    def _delete_orphans(self, partition: Partition, job_id: str) -> None:
        """Delete the objects a job uploaded that no reader can see (it never committed)."""
        markers = (f"-c{job_id}-", f"-r{job_id}-", f"-d{job_id}-", f"-m{job_id}-")
        # A span's directory holds its hours' too: a rewrite of a day (month) file, recorded at
        # the span's first hour, writes there.
        tier: layout.Tier = "month" if partition.hour == layout.floor_month(partition.hour) else "day"
        start = layout.tier_floor(partition.hour, tier)
        prefix = layout.tier_prefix(self.prefix, partition.database, partition.measurement, start, tier)
        last = layout.tier_end(start, tier) - timedelta(hours=1)
        listed = {f.key for f in self.catalog.list_files(partition.database, partition.measurement, start, last)}
        for info in list(self.store.list(prefix)):
            if any(marker in info.key for marker in markers) and info.key not in listed:
                self.store.delete(info.key)

    def _sweep_ingest_orphans(self, partition: Partition) -> int:
        """Delete the files of ingest attempts that never committed (docs/ingest.md leaves them here).

        A file no record lists, named by an ingest attempt (not by a compaction job, whose files
        the journal accounts for) made over ``ORPHAN_AGE`` ago: if its attempt has no commit
        record, storing ``aborted`` for it first makes sure it never will (the ingest protocol's
        own fence); an attempt that committed is left alone (a roll-forward may still list it, or
        it is a replaced input waiting out its grace period).
        """
        listed = {
            f.key
            for f in self.catalog.list_files(partition.database, partition.measurement, partition.hour, partition.hour)
        }
        cutoff = self._now() - ORPHAN_AGE
        deleted = 0
        prefix = layout.hour_prefix(self.prefix, partition.database, partition.measurement, partition.hour)
        for info in list(self.store.list(prefix)):
            commit_id = layout.ingest_commit_of(layout.file_order(info.key))
            made = None if commit_id is None else layout.sequence_time(commit_id)
            if info.key in listed or commit_id is None or made is None or made > cutoff:
                continue
            record = self.catalog.get_commit(commit_id)
            if record is None and not self.catalog.put_commit_if_absent(CommitRecord(commit_id, "aborted")):
                continue  # it committed a moment ago
            if record is not None and record.status == "committed":
                continue
            logger.info("deleting %s: its ingest attempt never committed", info.key)
            self.store.delete(info.key)
            deleted += 1
        return deleted

    def sweep(self) -> int:
        """Delete the objects of inputs whose grace period is over; returns how many."""
        deleted = 0
        now = self._now()
        for job in self.catalog.list_compaction_jobs(active=True, limit=10_000):
            if job.status != "settled" or job.delete_after is None or job.delete_after > now:
                continue
            for key in job.input_keys:
                self.store.delete(key)
                deleted += 1
            self._fault("inputs-deleted")
            self.catalog.put_compaction_job(replace(job, status="done", updated_at=now))
        return deleted


def _job_from_state(partition: Partition, state: CompactionState, now: datetime) -> CompactionJob:
    return CompactionJob(state.job_id, partition, "committed", now, now, base_version=state.version - 1)
