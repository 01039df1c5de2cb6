"""A partition rewrite of retention or delete: the files a selection picks replaced by the files a
builder writes (none: the inputs are removed), journaled, committed and recovered as a compaction
job is (``Compactor.rewrite`` takes the lease)."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from arcs import layout
from arcs.lifecycle.compaction.outputs import renew, upload
from arcs.lifecycle.compaction.recovery import delete_orphans
from arcs.ports import CompactionJob, CompactionState, FileRecord, JobKind, Partition

if TYPE_CHECKING:
    from arcs.lifecycle.compaction.compactor import Compactor

logger = logging.getLogger(__name__)

#: A rewrite's choice of inputs among the partition's listed files, made under its lease.
SelectInputs = Callable[[list[FileRecord]], list[FileRecord]]
#: A rewrite's outputs: (the input a file replaces, a local Parquet file), one at a time.
BuildOutputs = Callable[[list[FileRecord], Path], Iterator[tuple[str, Path]]]


def rewrite_leased(
    c: Compactor, partition: Partition, job_id: str, kind: JobKind, select: SelectInputs, build: BuildOutputs
) -> CompactionJob | None:
    c._fault("leased")
    opened = c._open_job(partition, job_id, kind, select, 1)
    if opened is None:
        return None
    job, picked = opened
    outputs: list[FileRecord] = []
    try:
        c.work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=c.work_dir, prefix=f"{kind}-") as tmp:
            for index, (source, path) in enumerate(build(picked, Path(tmp))):
                name = layout.compacted_filename(source, job_id, index, merged=False)
                # The rest of a day file stays a day file, in the day's directory.
                tier = layout.key_tier(source)
                key = layout.data_key(c.prefix, partition.database, partition.measurement, partition.hour, name, tier)
                outputs.append(upload(c, path, key, partition, job_id))
                path.unlink()
                c._fault("output-written")
                renew(c, partition, job_id)
            renew(c, partition, job_id)
    except Exception as exc:
        logger.exception("%s of %s failed", kind, partition.name)
        delete_orphans(c, partition, job_id)
        failed = replace(job, status="failed", updated_at=c._now(), error=str(exc)[:1000])
        c.catalog.put_compaction_job(failed)
        return failed
    c._fault("outputs-written")
    state = CompactionState(job.base_version + 1, job_id, False, job.input_keys, tuple(outputs))
    job = replace(
        job,
        output_keys=tuple(f.key for f in outputs),
        output_bytes=sum(f.size for f in outputs),
        output_rows=sum(f.rows for f in outputs),
    )
    return c._swap(partition, job, state)
