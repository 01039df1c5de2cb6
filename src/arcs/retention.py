"""Retention: whole hour partitions older than a policy's cutoff are removed, atomically each.

The cutoff is ``now - retention_days - buffer_days``; an hour partition goes only once its end is
at or before the cutoff, so no row newer than the cutoff is ever touched. Removing a partition is
a rewrite under its lease (``Compactor.rewrite``) whose inputs are all its files and whose outputs
are none: one commit hides them all at once, and their objects are deleted after the grace period
(docs/retention_and_delete.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from arcs import layout
from arcs.compaction.compactor import Compactor, PartitionBusy
from arcs.errors import BadRequest
from arcs.names import check_database, check_measurement
from arcs.ports import (
    Catalog,
    FileRecord,
    Partition,
    RetentionExecution,
    RetentionKind,
    RetentionPolicy,
    RetentionStatus,
)

logger = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def cutoff(policy: RetentionPolicy, now: datetime) -> datetime:
    """Rows older than this may go: the retention period plus the buffer before ``now``."""
    return now - timedelta(days=policy.retention_days + policy.buffer_days)


def expired(hour: datetime, limit: datetime) -> bool:
    """True if the whole hour partition starting at ``hour`` ends at or before ``limit``."""
    return hour + HOUR <= limit


def last_expired_hour(limit: datetime) -> datetime:
    """The latest hour partition that is entirely older than ``limit``."""
    return layout.floor_hour(limit) - HOUR


@dataclass(frozen=True, slots=True)
class ExpiredPartition:
    partition: Partition
    files: int
    rows: int
    bytes: int


def _no_build(picked: list[FileRecord], tmp: Path) -> Iterator[tuple[str, Path]]:
    return iter(())  # retention writes nothing: the partition's files are removed


class Retention:
    def __init__(self, catalog: Catalog, compactor: Compactor, now: Callable[[], datetime] = _utcnow) -> None:
        self.catalog = catalog
        self.compactor = compactor
        self._now = now

    def expired_partitions(self, policy: RetentionPolicy, limit: datetime) -> list[ExpiredPartition]:
        """The policy's hour partitions entirely older than ``limit``, oldest first."""
        last = last_expired_hour(limit)
        found: list[ExpiredPartition] = []
        for schema in self.catalog.list_schemas(policy.database):
            if policy.measurement is not None and schema.measurement != policy.measurement:
                continue
            by_hour: dict[datetime, list[FileRecord]] = {}
            for record in self.catalog.list_files(schema.database, schema.measurement, last_hour=last):
                by_hour.setdefault(record.hour, []).append(record)
            for hour, files in sorted(by_hour.items()):
                if expired(hour, limit):  # list_files stops at ``last``; this says why it is enough
                    partition = Partition(schema.database, schema.measurement, hour)
                    found.append(
                        ExpiredPartition(partition, len(files), sum(f.rows for f in files), sum(f.size for f in files))
                    )
        return found

    def execute(self, policy: RetentionPolicy, *, dry_run: bool, kind: RetentionKind = "manual") -> RetentionExecution:
        """Remove (or on a dry run, count) the policy's expired partitions, and record the execution."""
        started_at = datetime.now(UTC)  # the history's clock, even where tests set the policy's
        started = time.perf_counter()
        limit = cutoff(policy, self._now())
        partitions = files = rows = size = 0
        skipped: list[str] = []
        error = ""
        for item in self.expired_partitions(policy, limit):
            if dry_run:
                partitions, files, rows, size = partitions + 1, files + item.files, rows + item.rows, size + item.bytes
                continue
            try:
                removed = self._remove(item.partition, limit)
            except PartitionBusy:
                skipped.append(item.partition.name)  # compaction holds it: the next run removes it
                continue
            except Exception as exc:
                logger.exception("retention of %s failed", item.partition.name)
                skipped.append(item.partition.name)
                error = str(exc)[:1000]
                continue
            if removed[0]:
                partitions += 1
                files, rows, size = files + removed[0], rows + removed[1], size + removed[2]
        status: RetentionStatus = "dry_run" if dry_run else ("partial" if skipped else "succeeded")
        if error and not partitions:
            status = "failed"
        execution = RetentionExecution(
            execution_id=layout.sequence_id(),
            policy_id=policy.policy_id,
            kind=kind,
            dry_run=dry_run,
            status=status,
            cutoff_us=(limit - _EPOCH) // timedelta(microseconds=1),
            partitions=partitions,
            files=files,
            rows=rows,
            bytes=size,
            started_at=started_at,
            duration_ms=(time.perf_counter() - started) * 1000,
            skipped=tuple(skipped),
            error=error,
        )
        self.catalog.put_retention_execution(execution)
        return execution

    def _remove(self, partition: Partition, limit: datetime) -> tuple[int, int, int]:
        """Remove every file of an expired partition: one commit per at most ``max_files`` files."""
        if not expired(partition.hour, limit):
            raise ValueError(f"{partition.name} is not entirely older than {limit.isoformat()}")
        cap = self.compactor.config.max_files
        files = rows = size = 0
        while True:
            job = self.compactor.rewrite(
                partition,
                "retention",
                lambda listed: sorted(listed, key=lambda f: layout.file_order(f.key))[:cap],
                _no_build,
            )
            if job is None:
                return files, rows, size
            if job.status not in ("settled", "committed"):
                raise RuntimeError(job.error or f"retention job {job.job_id} ended {job.status}")
            files, rows, size = files + len(job.input_keys), rows + job.input_rows, size + job.input_bytes

    def run_due(self) -> list[RetentionExecution]:
        """The schedule's run: every active policy."""
        return self.run_due_for([policy for policy in self.catalog.list_retention_policies() if policy.is_active])

    def run_due_for(self, policies: list[RetentionPolicy]) -> list[RetentionExecution]:
        """Finish crashed rewrites, apply ``policies``, delete what waited out its grace period."""
        self.compactor.recover()
        executions = [self.execute(policy, dry_run=False, kind="scheduled") for policy in policies]
        self.compactor.sweep()
        return executions


def run_summary(executions: list[RetentionExecution]) -> dict[str, object]:
    """What a scheduled run did, for its log line and the compact function's answer."""
    return {
        "policies": len(executions),
        "partitions_deleted": sum(e.partitions for e in executions),
        "rows_deleted": sum(e.rows for e in executions),
        "skipped": sum(len(e.skipped) for e in executions),
    }


# --- a policy's fields, as the API sends them ---------------------------------------------------

MAX_DAYS = 100 * 366
DEFAULT_BUFFER_DAYS = 7  # as Arc's


def _days(document: dict[str, Any], name: str, default: int | None, low: int) -> int:
    value = document.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_DAYS:
        raise BadRequest(f"{name!r} must be a whole number of days from {low} to {MAX_DAYS}")
    return value


def policy_from_document(
    document: dict[str, Any], now: datetime, current: RetentionPolicy | None = None
) -> RetentionPolicy:
    """A policy from a create body, or ``current`` changed by an update body (absent fields keep theirs)."""
    known = {"name", "database", "measurement", "retention_days", "buffer_days", "is_active"}
    unknown = sorted(set(document) - known)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; a retention policy has {', '.join(sorted(known))}")
    base: dict[str, Any] = (
        {}
        if current is None
        else {
            "name": current.name,
            "database": current.database,
            "measurement": current.measurement,
            "retention_days": current.retention_days,
            "buffer_days": current.buffer_days,
            "is_active": current.is_active,
        }
    )
    merged = {**base, **document}
    name = merged.get("name")
    if not isinstance(name, str) or not 1 <= len(name.strip()) <= 128:
        raise BadRequest("'name' must be text of 1 to 128 characters")
    database = merged.get("database")
    if not isinstance(database, str):
        raise BadRequest("'database' is required")
    check_database(database)
    measurement = merged.get("measurement")
    if measurement is not None and not isinstance(measurement, str):
        raise BadRequest("'measurement' must be a measurement name or null (the whole database)")
    if measurement:
        check_measurement(measurement)
    is_active = merged.get("is_active", True)
    if not isinstance(is_active, bool):
        raise BadRequest("'is_active' must be true or false")
    return RetentionPolicy(
        policy_id=0 if current is None else current.policy_id,
        name=name.strip(),
        database=database,
        measurement=measurement or None,
        retention_days=_days(merged, "retention_days", None, 1),
        buffer_days=_days(merged, "buffer_days", DEFAULT_BUFFER_DAYS, 0),
        is_active=is_active,
        created_at=now if current is None else current.created_at,
        updated_at=now,
    )
