"""A compaction job's outputs: the inputs merged into Parquet files near the target size, uploaded
under keys that hold the job id, the lease renewed between files."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from arcs import layout
from arcs.errors import ArcsError
from arcs.lifecycle.compaction.inputs import Staged
from arcs.lifecycle.compaction.merge import merge, sort_order, time_bounds
from arcs.ports import CompactionJob, FileRecord, Partition
from arcs.write.points import ORDER_COLUMNS

if TYPE_CHECKING:
    from arcs.lifecycle.compaction.compactor import Compactor

logger = logging.getLogger(__name__)


def write_outputs(
    c: Compactor, partition: Partition, job: CompactionJob, staged: list[Staged], tmp: Path
) -> list[FileRecord]:
    schema = c.catalog.get_schema(partition.database, partition.measurement)
    columns: dict[str, None] = {}
    for item in staged:
        columns.update(dict.fromkeys(item.schema.names))
    tags = [tag for tag in (schema.tags if schema else ()) if tag in columns]
    if tags and any(name in columns for name in ORDER_COLUMNS):
        raise ArcsError(f"a column named {' or '.join(ORDER_COLUMNS)} prevents ordering duplicates")
    latest = staged[-1].record.key
    outputs: list[FileRecord] = []
    order = sort_order(partition.measurement, tags, columns, c.config)
    paths = [s.path for s in staged]
    for index, path in enumerate(merge(paths, tags, tmp, c.config, c.row_group_rows, order)):
        name = layout.compacted_filename(latest, job.job_id, index, tier=partition.tier)
        key = layout.data_key(c.prefix, partition.database, partition.measurement, partition.hour, name, partition.tier)
        outputs.append(upload(c, path, key, partition, job.job_id))
        path.unlink()
        c._fault("output-written")
        renew(c, partition, job.job_id)
    renew(c, partition, job.job_id)
    return outputs


def renew(c: Compactor, partition: Partition, job_id: str) -> None:
    """Keep the lease through a long job; if someone took it over, stop (the commit would fail)."""
    if not c.catalog.acquire_lease(partition.name, c._owner(job_id), c.config.lease_s):
        raise ArcsError(f"lost the lease of {partition.name} to another compactor")


def upload(c: Compactor, path: Path, key: str, partition: Partition, job_id: str) -> FileRecord:
    with pq.ParquetFile(path) as parquet:
        metadata = parquet.metadata
    lowest, highest = time_bounds(metadata)
    data = path.read_bytes()
    if not c.store.put_if_absent(key, data):
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
