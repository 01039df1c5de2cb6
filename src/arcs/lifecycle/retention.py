"""Retention: whole hour partitions older than a cutoff are removed, atomically each (and day
files once their whole day is older: one that straddles the cutoff stays).

A policy's cutoff is ``now - retention_days - buffer_days``; continuous queries add rules derived
from their definitions at run time (``arcs.continuous_queries.retention``). An hour partition goes only once its
end is at or before the cutoff, so no row newer than the cutoff is ever touched. Removing a partition is
a rewrite under its lease (``Compactor.rewrite``) whose inputs are all its files and whose outputs
are none: one commit hides them all at once, and their objects are deleted after the grace period
(docs/retention-and-delete.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from arcs import layout, metrics
from arcs.auth.tokens import Principal
from arcs.continuous_queries.retention import DerivedRule, derived_rules
from arcs.errors import BadRequest, Conflict
from arcs.lifecycle.compaction.compactor import Compactor, PartitionBusy
from arcs.lifecycle.cutoffs import DEFAULT_BUFFER_DAYS, cutoff, expired, file_expired, last_expired_hour
from arcs.names import check_database, check_measurement
from arcs.ports import (
    FileRecord,
    Partition,
    RetentionCatalog,
    RetentionExecution,
    RetentionKind,
    RetentionPolicy,
    RetentionStatus,
)

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class ExpiredPartition:
    partition: Partition
    files: int
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Removal:
    """What removing (or on a dry run, counting) the partitions older than one cutoff did."""

    partitions: int = 0
    files: int = 0
    rows: int = 0
    bytes: int = 0
    #: Partitions it could not remove this time (another job held them, or an error): the next run retries.
    skipped: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class DerivedRemoval:
    """A rule derived from continuous queries, and what it removed: not recorded, reported."""

    rule: DerivedRule
    removal: Removal

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule.field,
            "continuous_query_ids": list(self.rule.query_ids),
            "database": self.rule.database,
            "measurement": self.rule.measurement,
            "cutoff_time": _iso(self.rule.limit),
            "limited_by": self.rule.limited_by,
            "partitions_deleted": self.removal.partitions,
            "files_deleted": self.removal.files,
            "deleted_count": self.removal.rows,
            "bytes_deleted": self.removal.bytes,
            "skipped_partitions": list(self.removal.skipped),
            "error_message": self.removal.error or None,
        }


@dataclass(frozen=True, slots=True)
class RetentionRun:
    """One run over many policies and derived rules: the schedule's, or ``POST /api/v1/retention/run``."""

    dry_run: bool
    executions: list[RetentionExecution]
    derived: list[DerivedRemoval]

    @property
    def complete(self) -> bool:
        """Nothing was skipped and nothing failed."""
        outcomes = [(e.skipped, e.error) for e in self.executions] + [
            (d.removal.skipped, d.removal.error) for d in self.derived
        ]
        return not any(skipped or error for skipped, error in outcomes)

    def to_json(self) -> dict[str, object]:
        """Totals first, then what each policy and each derived rule removed (or would)."""
        policies = [
            {
                "rule": "policy",
                "policy_id": e.policy_id,
                "execution_id": e.execution_id,
                "status": e.status,
                "cutoff_time": _iso(_EPOCH + timedelta(microseconds=e.cutoff_us)),
                "partitions_deleted": e.partitions,
                "files_deleted": e.files,
                "deleted_count": e.rows,
                "bytes_deleted": e.bytes,
                "skipped_partitions": list(e.skipped),
                "error_message": e.error or None,
            }
            for e in self.executions
        ]
        removals = [e.removal for e in self.derived]
        return {
            "dry_run": self.dry_run,
            "policies": len(self.executions),
            "derived_rules": len(self.derived),
            "partitions_deleted": sum(e.partitions for e in self.executions) + sum(r.partitions for r in removals),
            "rows_deleted": sum(e.rows for e in self.executions) + sum(r.rows for r in removals),
            "skipped": sum(len(e.skipped) for e in self.executions) + sum(len(r.skipped) for r in removals),
            "rules": [*policies, *(d.to_json() for d in self.derived)],
        }


def _every_database(database: str) -> bool:
    return True


def _no_build(picked: list[FileRecord], tmp: Path) -> Iterator[tuple[str, Path]]:
    return iter(())  # retention writes nothing: the partition's files are removed


class Retention:
    def __init__(self, catalog: RetentionCatalog, compactor: Compactor, now: Callable[[], datetime] = _utcnow) -> None:
        self.catalog = catalog
        self.compactor = compactor
        self._now = now

    def create_policy(self, document: dict[str, Any], caller: Principal) -> RetentionPolicy:
        """Store the policy a create body describes, of a database ``caller`` may use; 409 if its
        name is taken in that database."""
        policy = policy_from_document(document, self._now())
        caller.require_database(policy.database)
        stored = self.catalog.create_retention_policy(policy)
        if stored is None:
            raise Conflict(f"a retention policy named {policy.name!r} exists in database {policy.database!r}")
        return stored

    def update_policy(self, current: RetentionPolicy, document: dict[str, Any], caller: Principal) -> RetentionPolicy:
        """``current`` changed by an update body (absent fields keep theirs), kept in a database
        ``caller`` may use; 409 if its new name is taken in that database."""
        policy = policy_from_document(document, self._now(), current)
        caller.require_database(policy.database)
        if not self.catalog.update_retention_policy(policy):
            raise Conflict(f"a retention policy named {policy.name!r} exists in database {policy.database!r}")
        return policy

    def delete_policy(self, policy: RetentionPolicy) -> None:
        self.catalog.delete_retention_policy(policy.policy_id)

    def expired_partitions(self, database: str, measurement: str | None, limit: datetime) -> list[ExpiredPartition]:
        """The hour partitions of ``measurement`` (None: every one of ``database``) entirely older
        than ``limit``, oldest first."""
        last = last_expired_hour(limit)
        found: list[ExpiredPartition] = []
        for schema in self.catalog.list_schemas(database):
            if measurement is not None and schema.measurement != measurement:
                continue
            by_hour: dict[datetime, list[FileRecord]] = {}
            for record in self.catalog.list_files(schema.database, schema.measurement, last_hour=last):
                if file_expired(record, limit):  # a day file recorded at an expired hour may not be
                    by_hour.setdefault(record.hour, []).append(record)
            for hour, files in sorted(by_hour.items()):
                if expired(hour, limit):  # list_files stops at ``last``; this says why it is enough
                    partition = Partition(schema.database, schema.measurement, hour)
                    found.append(
                        ExpiredPartition(partition, len(files), sum(f.rows for f in files), sum(f.size for f in files))
                    )
        return found

    def remove_expired(
        self, database: str, measurement: str | None, limit: datetime | None, *, dry_run: bool
    ) -> Removal:
        """Remove (or on a dry run, count) the partitions entirely older than ``limit`` (None: none)."""
        if limit is None:
            return Removal()
        partitions = files = rows = size = 0
        skipped: list[str] = []
        error = ""
        for item in self.expired_partitions(database, measurement, limit):
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
        return Removal(partitions, files, rows, size, tuple(skipped), error)

    def execute(self, policy: RetentionPolicy, *, dry_run: bool, kind: RetentionKind = "manual") -> RetentionExecution:
        """Remove (or on a dry run, count) the policy's expired partitions, and record the execution."""
        started_at = datetime.now(UTC)  # the history's clock, even where tests set the policy's
        started = time.perf_counter()
        limit = cutoff(policy, self._now())
        removal = self.remove_expired(policy.database, policy.measurement, limit, dry_run=dry_run)
        status: RetentionStatus = "dry_run" if dry_run else ("partial" if removal.skipped else "succeeded")
        if removal.error and not removal.partitions:
            status = "failed"
        execution = RetentionExecution(
            execution_id=layout.sequence_id(),
            policy_id=policy.policy_id,
            kind=kind,
            dry_run=dry_run,
            status=status,
            cutoff_us=(limit - _EPOCH) // timedelta(microseconds=1),
            partitions=removal.partitions,
            files=removal.files,
            rows=removal.rows,
            bytes=removal.bytes,
            started_at=started_at,
            duration_ms=(time.perf_counter() - started) * 1000,
            skipped=removal.skipped,
            error=removal.error,
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
                lambda listed: sorted(
                    (f for f in listed if file_expired(f, limit)), key=lambda f: layout.file_order(f.key)
                )[:cap],
                _no_build,
            )
            if job is None:
                return files, rows, size
            if job.status not in ("settled", "committed"):
                raise RuntimeError(job.error or f"retention job {job.job_id} ended {job.status}")
            files, rows, size = files + len(job.input_keys), rows + job.input_rows, size + job.input_bytes

    def run_due(
        self,
        *,
        dry_run: bool = False,
        kind: RetentionKind = "scheduled",
        scope: Callable[[str], bool] = _every_database,
    ) -> RetentionRun:
        """Every active policy and every rule derived from the continuous queries, of the databases
        in ``scope``: the schedule's run, or a manual one."""
        try:
            policies = [p for p in self.catalog.list_retention_policies() if p.is_active and scope(p.database)]
            rules = [rule for rule in derived_rules(self.catalog, self._now()) if scope(rule.database)]
            run = self.run_due_for(policies, rules, dry_run=dry_run, kind=kind)
        except BaseException:
            metrics.record({metrics.RETENTION_RUNS: 1}, status="failed")
            raise
        failed = any(e.error for e in run.executions) or any(d.removal.error for d in run.derived)
        metrics.record({metrics.RETENTION_RUNS: 1}, status="failed" if failed else "ok")
        if run.executions or run.derived:
            logger.info("retention: %s", run.to_json())
        return run

    def run_due_for(
        self,
        policies: list[RetentionPolicy],
        rules: list[DerivedRule] | None = None,
        *,
        dry_run: bool = False,
        kind: RetentionKind = "scheduled",
    ) -> RetentionRun:
        """Finish crashed rewrites, apply ``policies`` and ``rules``, delete what waited out its grace
        period (a dry run only counts)."""
        if not dry_run:
            self.compactor.recover()
        executions = [self.execute(policy, dry_run=dry_run, kind=kind) for policy in policies]
        derived = [
            DerivedRemoval(rule, self.remove_expired(rule.database, rule.measurement, rule.limit, dry_run=dry_run))
            for rule in rules or []
        ]
        if not dry_run:
            self.compactor.sweep()
        return RetentionRun(dry_run, executions, derived)


# --- a policy's fields, as the API sends them ---------------------------------------------------

MAX_DAYS = 100 * 366


def _days(document: dict[str, Any], name: str, default: int | None, low: int) -> int:
    value = document.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_DAYS:
        raise BadRequest(f"{name!r} must be a whole number of days from {low} to {MAX_DAYS}")
    return value


#: What a create or update body may hold.
POLICY_FIELDS = ("name", "database", "measurement", "retention_days", "buffer_days", "is_active")


def policy_from_document(
    document: dict[str, Any], now: datetime, current: RetentionPolicy | None = None
) -> RetentionPolicy:
    """A policy from a create body, or ``current`` changed by an update body (absent fields keep theirs)."""
    unknown = sorted(set(document) - set(POLICY_FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; a retention policy has {', '.join(sorted(POLICY_FIELDS))}")
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
