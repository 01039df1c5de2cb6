"""How catalog records are spelled as plain data, shared by the SQLite and DynamoDB catalogs."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any

from arcs.layout import tier_of
from arcs.ports import (
    CompactionJob,
    CompactionState,
    ContinuousQuery,
    CQExecution,
    FileRecord,
    Partition,
    RetentionExecution,
    RetentionPolicy,
)

HOUR_FORMAT = "%Y-%m-%dT%H"


def hour_text(hour: datetime) -> str:
    """The hour as fixed-width text, so text order is time order."""
    return hour.astimezone(UTC).strftime(HOUR_FORMAT)


@functools.lru_cache(maxsize=1 << 16)
def hour_value(text: str) -> datetime:
    """The hour ``hour_text`` spelled. Cached: a query's file list names each hour many times (a
    measurement of 4,400 files in 720 hours), and ``strptime`` took 70 % of preparing that query."""
    return datetime.strptime(text, HOUR_FORMAT).replace(tzinfo=UTC)


def file_to_json(record: FileRecord) -> dict[str, object]:
    return {
        "database": record.database,
        "measurement": record.measurement,
        "hour": hour_text(record.hour),
        "key": record.key,
        "rows": record.rows,
        "size": record.size,
        "min_time_us": record.min_time_us,
        "max_time_us": record.max_time_us,
        "commit_id": record.commit_id,
    }


def _int(value: object) -> int:
    # JSON gives int, DynamoDB gives Decimal; both are exact for int64.
    return int(value)  # type: ignore[call-overload,no-any-return]


def file_from_json(data: dict[str, object]) -> FileRecord:
    return FileRecord(
        database=str(data["database"]),
        measurement=str(data["measurement"]),
        hour=hour_value(str(data["hour"])),
        key=str(data["key"]),
        rows=_int(data["rows"]),
        size=_int(data["size"]),
        min_time_us=_int(data["min_time_us"]),
        max_time_us=_int(data["max_time_us"]),
        commit_id=str(data["commit_id"]),
    )


# --- continuous queries ----------------------------------------------------------------------

#: How long a continuous query's execution history is kept.
CQ_EXECUTION_RETENTION = timedelta(days=30)


def cq_to_json(query: ContinuousQuery) -> dict[str, object]:
    return {
        "query_id": query.query_id,
        "name": query.name,
        "description": query.description,
        "database": query.database,
        "source_measurement": query.source_measurement,
        "destination_measurement": query.destination_measurement,
        "query": query.query,
        "interval": query.interval,
        "interval_s": query.interval_s,
        "tag_columns": list(query.tag_columns),
        "retention_days": query.retention_days,
        "delete_source_after_days": query.delete_source_after_days,
        "is_active": query.is_active,
        "created_at": query.created_at.isoformat(),
        "updated_at": query.updated_at.isoformat(),
        "version": query.version,
    }


def _optional_int(value: object) -> int | None:
    return None if value is None else _int(value)


def cq_from_json(data: dict[str, Any]) -> ContinuousQuery:
    return ContinuousQuery(
        query_id=_int(data["query_id"]),
        name=str(data["name"]),
        description=str(data.get("description") or ""),
        database=str(data["database"]),
        source_measurement=str(data["source_measurement"]),
        destination_measurement=str(data["destination_measurement"]),
        query=str(data["query"]),
        interval=str(data["interval"]),
        interval_s=_int(data["interval_s"]),
        tag_columns=tuple(str(tag) for tag in data["tag_columns"]),
        retention_days=_optional_int(data.get("retention_days")),
        delete_source_after_days=_optional_int(data.get("delete_source_after_days")),
        is_active=bool(data["is_active"]),
        created_at=datetime.fromisoformat(str(data["created_at"])),
        updated_at=datetime.fromisoformat(str(data["updated_at"])),
        version=_int(data["version"]),
    )


def execution_to_json(execution: CQExecution) -> dict[str, object]:
    return {
        "execution_id": execution.execution_id,
        "query_id": execution.query_id,
        "kind": execution.kind,
        "start_us": execution.start_us,
        "end_us": execution.end_us,
        "status": execution.status,
        "rows": execution.rows,
        "write_id": execution.write_id,
        "started_at": execution.started_at.isoformat(),
        "duration_ms": execution.duration_ms,
        "error": execution.error,
    }


def execution_from_json(data: dict[str, Any]) -> CQExecution:
    write_id = data.get("write_id")
    return CQExecution(
        execution_id=str(data["execution_id"]),
        query_id=_int(data["query_id"]),
        kind=data["kind"],
        start_us=_int(data["start_us"]),
        end_us=_int(data["end_us"]),
        status=data["status"],
        rows=_int(data["rows"]),
        write_id=None if write_id is None else str(write_id),
        started_at=datetime.fromisoformat(str(data["started_at"])),
        duration_ms=float(data["duration_ms"]),
        error=str(data.get("error") or ""),
    )


def sortable_time(moment: datetime) -> str:
    """Fixed-width UTC text, so text order is time order (to the microsecond)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _moment(value: object) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


def job_to_json(job: CompactionJob) -> dict[str, object]:
    return {
        "job_id": job.job_id,
        "database": job.partition.database,
        "measurement": job.partition.measurement,
        "hour": hour_text(job.partition.hour),
        "status": job.status,
        "started_at": _time(job.started_at),
        "updated_at": _time(job.updated_at),
        "base_version": job.base_version,
        "input_keys": list(job.input_keys),
        "output_keys": list(job.output_keys),
        "input_bytes": job.input_bytes,
        "output_bytes": job.output_bytes,
        "input_rows": job.input_rows,
        "output_rows": job.output_rows,
        "quarantined": list(job.quarantined),
        "delete_after": _time(job.delete_after),
        "error": job.error,
        "kind": job.kind,
        "tier": job.partition.tier,
        "base_versions": [[hour_text(hour), version] for hour, version in job.base_versions],
    }


def job_from_json(data: dict[str, Any]) -> CompactionJob:
    return CompactionJob(
        job_id=str(data["job_id"]),
        partition=Partition(
            str(data["database"]),
            str(data["measurement"]),
            hour_value(str(data["hour"])),
            tier_of(data.get("tier")),
        ),
        status=data["status"],
        started_at=_moment(data["started_at"]) or datetime.now(UTC),
        updated_at=_moment(data["updated_at"]) or datetime.now(UTC),
        base_version=_int(data.get("base_version", 0)),
        input_keys=tuple(str(k) for k in data.get("input_keys", [])),
        output_keys=tuple(str(k) for k in data.get("output_keys", [])),
        input_bytes=_int(data.get("input_bytes", 0)),
        output_bytes=_int(data.get("output_bytes", 0)),
        input_rows=_int(data.get("input_rows", 0)),
        output_rows=_int(data.get("output_rows", 0)),
        quarantined=tuple(str(k) for k in data.get("quarantined", [])),
        delete_after=_moment(data.get("delete_after")),
        error=str(data.get("error", "")),
        kind=data.get("kind", "compaction"),
        base_versions=tuple((hour_value(str(hour)), _int(version)) for hour, version in data.get("base_versions", [])),
    )


def apply_compactions(files: list[FileRecord], pending: list[CompactionState]) -> list[FileRecord]:
    """What readers see: each unsettled commit's outputs instead of its inputs, in (hour, key) order."""
    if not pending:
        return files
    hidden = {key for state in pending for key in state.inputs}
    shown = {f.key: f for f in files if f.key not in hidden}
    for state in pending:
        for output in state.outputs:
            shown.setdefault(output.key, output)
    return sorted(shown.values(), key=lambda f: (f.hour, f.key))


# --- retention policies (docs/retention-and-delete.md) -------------------------------------------

RETENTION_EXECUTION_RETENTION = timedelta(days=30)


def policy_to_json(policy: RetentionPolicy) -> dict[str, object]:
    return {
        "policy_id": policy.policy_id,
        "name": policy.name,
        "database": policy.database,
        "measurement": policy.measurement,
        "retention_days": policy.retention_days,
        "buffer_days": policy.buffer_days,
        "is_active": policy.is_active,
        "created_at": _time(policy.created_at),
        "updated_at": _time(policy.updated_at),
    }


def policy_from_json(data: dict[str, Any]) -> RetentionPolicy:
    return RetentionPolicy(
        policy_id=_int(data["policy_id"]),
        name=str(data["name"]),
        database=str(data["database"]),
        measurement=None if data.get("measurement") is None else str(data["measurement"]),
        retention_days=_int(data["retention_days"]),
        buffer_days=_int(data["buffer_days"]),
        is_active=bool(data["is_active"]),
        created_at=_moment(data["created_at"]) or datetime.now(UTC),
        updated_at=_moment(data["updated_at"]) or datetime.now(UTC),
    )


def retention_execution_to_json(execution: RetentionExecution) -> dict[str, object]:
    return {
        "execution_id": execution.execution_id,
        "policy_id": execution.policy_id,
        "kind": execution.kind,
        "dry_run": execution.dry_run,
        "status": execution.status,
        "cutoff_us": execution.cutoff_us,
        "partitions": execution.partitions,
        "files": execution.files,
        "rows": execution.rows,
        "bytes": execution.bytes,
        "started_at": _time(execution.started_at),
        "duration_ms": execution.duration_ms,
        "skipped": list(execution.skipped),
        "error": execution.error,
    }


def retention_execution_from_json(data: dict[str, Any]) -> RetentionExecution:
    return RetentionExecution(
        execution_id=str(data["execution_id"]),
        policy_id=_int(data["policy_id"]),
        kind=data["kind"],
        dry_run=bool(data["dry_run"]),
        status=data["status"],
        cutoff_us=_int(data["cutoff_us"]),
        partitions=_int(data["partitions"]),
        files=_int(data["files"]),
        rows=_int(data["rows"]),
        bytes=_int(data["bytes"]),
        started_at=_moment(data["started_at"]) or datetime.now(UTC),
        duration_ms=float(data["duration_ms"]),
        skipped=tuple(str(name) for name in data.get("skipped", [])),
        error=str(data.get("error", "")),
    )
