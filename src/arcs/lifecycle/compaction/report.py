"""What compaction reports: candidates, runs and jobs, as the API and the tasks function show them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from arcs.ports import CompactionJob, Partition


@dataclass(frozen=True, slots=True)
class Candidate:
    partition: Partition
    files: int
    bytes: int
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.partition.database,
            "measurement": self.partition.measurement,
            "hour": self.partition.hour.isoformat(),
            "tier": self.partition.tier,
            "file_count": self.files,
            "total_bytes": self.bytes,
            "rows": self.rows,
        }


@dataclass
class RunReport:
    started_at: datetime
    finished_at: datetime | None = None
    jobs: list[CompactionJob] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # job ids a crash had left unfinished
    inputs_deleted: int = 0
    skipped: list[str] = field(default_factory=list)  # partitions another compactor holds
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "started_at": self.started_at.isoformat(),
            "finished_at": None if self.finished_at is None else self.finished_at.isoformat(),
            "jobs": [job_json(job) for job in self.jobs],
            "recovered": self.recovered,
            "inputs_deleted": self.inputs_deleted,
            "skipped": self.skipped,
            "error": self.error,
        }


def job_json(job: CompactionJob) -> dict[str, Any]:
    """A job as the API shows it."""
    duration = (job.updated_at - job.started_at).total_seconds()
    return {
        "job_id": job.job_id,
        "kind": job.kind,  # retention and delete rewrite partitions through the same journal
        "database": job.partition.database,
        "measurement": job.partition.measurement,
        "hour": job.partition.hour.isoformat(),
        "tier": job.partition.tier,  # "day": the day starting at "hour", merged into day files
        "status": job.status,
        "started_at": job.started_at.isoformat(),
        "updated_at": job.updated_at.isoformat(),
        "duration_s": round(duration, 3),
        "files_compacted": len(job.input_keys),
        "files_written": len(job.output_keys),
        "bytes_before": job.input_bytes,
        "bytes_after": job.output_bytes,
        "rows_before": job.input_rows,
        "rows_after": job.output_rows,
        "quarantined": list(job.quarantined),
        "delete_inputs_after": None if job.delete_after is None else job.delete_after.isoformat(),
        "error": job.error,
    }
