"""Recovery and cleanup: what crashed jobs left is finished, and objects nothing lists are deleted.

A committed job is settled; a job that cannot have committed is fenced (an empty commit takes its
version) and its uploaded outputs are deleted. Inputs whose grace period is over are deleted, and
so are the files of ingest attempts that never committed."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from arcs import layout
from arcs.ports import CommitRecord, CompactionJob, CompactionState, Partition

if TYPE_CHECKING:
    from arcs.lifecycle.compaction.compactor import Compactor

logger = logging.getLogger(__name__)

#: An unlisted ingest file this old belongs to an attempt that is over (Lambda's limit is 15 min).
ORPHAN_AGE = timedelta(hours=1)


def recover(c: Compactor) -> list[str]:
    """Finish what crashed jobs left: settle committed swaps, fence and clean up the rest."""
    recovered: list[str] = []
    for job in c.catalog.list_compaction_jobs(active=True, limit=10_000):
        if job.status == "settled":
            continue  # the sweep deletes its inputs when their grace period is over
        if _recover_job(c, job):
            recovered.append(job.job_id)
    return recovered


def _recover_job(c: Compactor, job: CompactionJob) -> bool:
    if job.partition.tier != "hour":
        return c.tiers[job.partition.tier].recover(job)
    partition = job.partition
    fence_id = layout.sequence_id()
    owner = c._owner(fence_id)
    # The lease is free only once the job's holder is gone (or its lease ran out).
    if not c.catalog.acquire_lease(partition.name, owner, c.config.lease_s):
        return False
    try:
        state = c.catalog.get_compaction_state(partition)
        if state is not None and state.job_id == job.job_id:
            if state.settled:
                mark_settled(c, job)
            else:
                c._finish(partition, state, job)
            return True
        if job.status == "committed":
            mark_settled(c, job)  # the swap happened; later commits settled it
            return True
        if state is None or state.version <= job.base_version:
            # The job could still commit if it is alive but slow: take its version first.
            if state is not None and not state.settled:
                c._finish(partition, state)
            fence = CompactionState(job.base_version + 1, fence_id, False)
            if c.catalog.commit_compaction(partition, fence):
                c.catalog.settle_compaction(partition, fence)
            else:
                return _recover_again(c, job)
        delete_orphans(c, partition, job.job_id)
        aborted = replace(job, status="aborted", updated_at=c._now(), error="the job stopped before its commit")
        c.catalog.put_compaction_job(aborted)
        return True
    finally:
        c.catalog.release_lease(partition.name, owner)


def _recover_again(c: Compactor, job: CompactionJob) -> bool:
    # Someone committed between our read and the fence: maybe the job itself. Look again.
    state = c.catalog.get_compaction_state(job.partition)
    if state is not None and state.job_id == job.job_id:
        c._finish(job.partition, state, job)
        return True
    delete_orphans(c, job.partition, job.job_id)
    c.catalog.put_compaction_job(replace(job, status="aborted", updated_at=c._now()))
    return True


def mark_settled(c: Compactor, job: CompactionJob) -> None:
    delete_after = job.delete_after or c._now() + timedelta(seconds=c.config.grace_s)
    c.catalog.put_compaction_job(replace(job, status="settled", updated_at=c._now(), delete_after=delete_after))


def delete_orphans(c: Compactor, partition: Partition, job_id: str) -> None:
    """Delete the objects a job uploaded that no reader can see (it never committed)."""
    markers = (f"-c{job_id}-", f"-r{job_id}-", f"-d{job_id}-", f"-m{job_id}-")
    # A span's directory holds its hours' too: a rewrite of a day (month) file, recorded at
    # the span's first hour, writes there.
    tier: layout.Tier = "month" if partition.hour == layout.floor_month(partition.hour) else "day"
    start = layout.tier_floor(partition.hour, tier)
    prefix = layout.tier_prefix(c.prefix, partition.database, partition.measurement, start, tier)
    last = layout.tier_end(start, tier) - timedelta(hours=1)
    listed = {f.key for f in c.catalog.list_files(partition.database, partition.measurement, start, last)}
    for info in list(c.store.list(prefix)):
        if any(marker in info.key for marker in markers) and info.key not in listed:
            c.store.delete(info.key)


def sweep_ingest_orphans(c: Compactor, partition: Partition) -> int:
    """Delete the files of ingest attempts that never committed (docs/ingest.md leaves them here).

    A file no record lists, named by an ingest attempt (not by a compaction job, whose files
    the journal accounts for) made over ``ORPHAN_AGE`` ago: if its attempt has no commit
    record, storing ``aborted`` for it first makes sure it never will (the ingest protocol's
    own fence); an attempt that committed is left alone (a roll-forward may still list it, or
    it is a replaced input waiting out its grace period).
    """
    listed = {
        f.key for f in c.catalog.list_files(partition.database, partition.measurement, partition.hour, partition.hour)
    }
    cutoff = c._now() - ORPHAN_AGE
    deleted = 0
    prefix = layout.hour_prefix(c.prefix, partition.database, partition.measurement, partition.hour)
    for info in list(c.store.list(prefix)):
        commit_id = layout.ingest_commit_of(layout.file_order(info.key))
        made = None if commit_id is None else layout.sequence_time(commit_id)
        if info.key in listed or commit_id is None or made is None or made > cutoff:
            continue
        record = c.catalog.get_commit(commit_id)
        if record is None and not c.catalog.put_commit_if_absent(CommitRecord(commit_id, "aborted")):
            continue  # it committed a moment ago
        if record is not None and record.status == "committed":
            continue
        logger.info("deleting %s: its ingest attempt never committed", info.key)
        c.store.delete(info.key)
        deleted += 1
    return deleted


def sweep(c: Compactor) -> int:
    """Delete the objects of inputs whose grace period is over; returns how many."""
    deleted = 0
    now = c._now()
    for job in c.catalog.list_compaction_jobs(active=True, limit=10_000):
        if job.status != "settled" or job.delete_after is None or job.delete_after > now:
            continue
        for key in job.input_keys:
            c.store.delete(key)
            deleted += 1
        c._fault("inputs-deleted")
        c.catalog.put_compaction_job(replace(job, status="done", updated_at=now))
    return deleted


def job_from_state(partition: Partition, state: CompactionState, now: datetime) -> CompactionJob:
    return CompactionJob(state.job_id, partition, "committed", now, now, base_version=state.version - 1)
