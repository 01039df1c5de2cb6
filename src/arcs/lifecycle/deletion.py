"""Delete: the rows of one measurement that match a WHERE expression, removed by rewriting files.

Each affected hour partition is one rewrite under its lease (``Compactor.rewrite``): the inputs
are the partition's files holding a matching row, the outputs are those files without them (a
file left empty has no output); files without a matching row are not touched. The swap is
compaction's commit record, so a reader sees a partition's old files or its new ones, and a crash
at any step is finished or undone by recovery (docs/retention-and-delete.md).

``where`` reaches this module already validated (the route checks it with DuckDB's parser as
``GET /api/v1/query/{measurement}?where=`` does, and through the sandbox). It is evaluated on one
file's rows at a time, in an in-memory DuckDB connection with file system access turned off.
Rows where it is NULL do not match (as in a query's WHERE).
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arcs import layout
from arcs.allocator import DUCKDB_ALLOCATOR
from arcs.errors import BadRequest, NotFound
from arcs.lifecycle.compaction.compactor import Compactor, PartitionBusy
from arcs.lifecycle.compaction.merge import CorruptInput
from arcs.ports import DataCatalog, FileRecord, ObjectStore, Partition
from arcs.query.pruning import TimeRange
from arcs.query.sql_time import utc_wall_clock
from arcs.write.batch import STORAGE_TYPES

logger = logging.getLogger(__name__)

#: More matching rows than this need ``confirm`` (else a 400 and nothing is deleted).
CONFIRM_ROWS = 10_000
_ROW = "__arcs_delete_row"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class DeleteResult:
    dry_run: bool
    deleted_count: int = 0
    affected_files: list[str] = field(default_factory=list)
    rewritten_files: list[str] = field(default_factory=list)
    files_read: int = 0
    failed_files: list[str] = field(default_factory=list)
    execution_time_ms: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "success": not self.failed_files,
            "deleted_count": self.deleted_count,
            "affected_files": len(self.affected_files),
            "rewritten_files": len(self.rewritten_files),
            "execution_time_ms": round(self.execution_time_ms, 3),
            "dry_run": self.dry_run,
            # Arc's ``files_processed``: the files holding matching rows (those rewritten, or on a
            # dry run, those that would be), by key.
            "files_processed": self.affected_files,
            "files_read": self.files_read,
            "failed_files": self.failed_files,
            "affected_file_keys": self.affected_files,
        }


def matching_rows(table: pa.Table, where: str, columns: Mapping[str, str] | None = None) -> pa.Array:
    """The positions of ``table``'s rows where ``where`` is true.

    ``columns`` (the measurement's schema) fills in, as nulls, the columns a file written before
    they existed lacks: the expression reads them as a query of the measurement would.
    """
    indexed = table.append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
    for name, kind in (columns or {}).items():
        if name not in table.column_names:
            indexed = indexed.append_column(name, pa.nulls(table.num_rows, STORAGE_TYPES.get(kind, pa.string())))
    conn = duckdb.connect(
        config={
            "enable_external_access": False,  # the expression sees these rows and nothing else
            "autoload_known_extensions": False,
            "autoinstall_known_extensions": False,
            "threads": 1,
            **DUCKDB_ALLOCATOR,
        }
    )
    try:
        # As the query engine: '2024-01-01' means the same instant in both. Then nothing may change.
        conn.execute("SET TimeZone = 'UTC'; SET lock_configuration = true")
        conn.register("rows", indexed)
        # Times compare as in a query: TIMESTAMPTZ expressions as UTC wall clocks (arcs.query.sql_time).
        condition = utc_wall_clock(where)
        result = conn.execute(f"SELECT {_ROW} FROM rows WHERE coalesce((\n{condition}\n), false)").to_arrow_table()
    except duckdb.Error as exc:
        raise BadRequest(f"'where' cannot be evaluated: {str(exc).strip().splitlines()[0]}") from exc
    finally:
        conn.close()
    return result.column(0).combine_chunks()


def without_rows(table: pa.Table, matched: pa.Array) -> pa.Table:
    """``table`` minus the rows at ``matched``, in the original order."""
    positions = pa.array(range(table.num_rows), pa.int64())
    return table.filter(pc.invert(pc.is_in(positions, value_set=matched)))


class Deleter:
    def __init__(
        self,
        catalog: DataCatalog,
        store: ObjectStore,
        compactor: Compactor,
        row_group_rows: int = 122_880,
        confirm_rows: int = CONFIRM_ROWS,
    ) -> None:
        self.catalog = catalog
        self.confirm_rows = confirm_rows
        self.store = store
        self.compactor = compactor
        self.row_group_rows = row_group_rows

    def candidates(self, database: str, measurement: str, bounds: TimeRange) -> list[FileRecord]:
        """The listed files that can hold a row in ``bounds``: partitions first (from the start of
        the month, where a day or month file's record sits), then min/max."""
        first = layout.tier_start(bounds.lower) if bounds.lower is not None else None
        last = layout.floor_hour(bounds.upper) if bounds.upper is not None else None
        if first is not None and last is not None and first > last:
            return []
        low = _micros(bounds.lower) if bounds.lower is not None else None
        high = _micros(bounds.upper) if bounds.upper is not None else None
        return [
            f
            for f in self.catalog.list_files(database, measurement, first, last)
            if (low is None or f.max_time_us >= low) and (high is None or f.min_time_us <= high)
        ]

    def delete(
        self, database: str, measurement: str, where: str, bounds: TimeRange, *, dry_run: bool, confirm: bool
    ) -> DeleteResult:
        """Count (and unless ``dry_run``, delete) the matching rows; over ``CONFIRM_ROWS`` needs ``confirm``."""
        started = time.perf_counter()
        schema = self.catalog.get_schema(database, measurement)
        if schema is None:
            raise NotFound(f"measurement {measurement!r} not found in database {database!r}")
        result = DeleteResult(dry_run)
        counts: dict[str, int] = {}
        files = self.candidates(database, measurement, bounds)
        for record in files:
            try:
                matched = len(matching_rows(self._read(record), where, schema.columns))
            except CorruptInput as exc:
                logger.error("delete could not read %s: %s", record.key, exc.message)
                result.failed_files.append(record.key)
                continue
            if matched:
                counts[record.key] = matched
        result.files_read = len(files)
        result.affected_files = sorted(counts)
        result.deleted_count = sum(counts.values())
        if dry_run or not counts:
            result.execution_time_ms = (time.perf_counter() - started) * 1000
            return result
        if result.deleted_count > self.confirm_rows and not confirm:
            raise BadRequest(
                f"the delete matches {result.deleted_count} rows, more than {self.confirm_rows}: "
                'send "confirm": true to delete them (nothing was deleted)'
            )
        # The rewrite, one partition at a time: what it deletes is counted again under the lease.
        result.deleted_count = 0
        result.affected_files = []
        partitions = sorted({f.hour for f in files if f.key in counts})
        for hour in partitions:
            counted = sorted(f.key for f in files if f.hour == hour and f.key in counts)
            self._rewrite(Partition(database, measurement, hour), where, schema.columns, bounds, counted, result)
        result.execution_time_ms = (time.perf_counter() - started) * 1000
        return result

    def _rewrite(
        self,
        partition: Partition,
        where: str,
        columns: Mapping[str, str],
        bounds: TimeRange,
        counted: list[str],
        result: DeleteResult,
    ) -> None:
        # Only the matched positions are kept between picking and writing: one file's rows in memory at a time.
        matches: dict[str, pa.Array] = {}
        # The files recorded at this hour: its own, and at a day's (month's) first hour, the day's (month's).
        tier: layout.Tier = "hour"
        if partition.hour == layout.floor_month(partition.hour):
            tier = "month"
        elif partition.hour == layout.floor_day(partition.hour):
            tier = "day"
        hour = TimeRange(partition.hour, layout.tier_end(partition.hour, tier) - timedelta(microseconds=1))
        in_bounds = {
            f.key
            for f in self.candidates(partition.database, partition.measurement, bounds.intersect(hour))
            if f.hour == partition.hour
        }

        def select(listed: list[FileRecord]) -> list[FileRecord]:
            picked: list[FileRecord] = []
            for record in sorted(listed, key=lambda f: layout.file_order(f.key)):
                if record.key not in in_bounds or len(picked) >= self.compactor.config.max_files:
                    continue  # a file listed since the delete began, or one for the next commit
                table = self._read(record)
                matched = matching_rows(table, where, columns)
                if len(matched):
                    matches[record.key] = matched
                    picked.append(record)
            return picked

        def build(picked: list[FileRecord], tmp: Path) -> Iterator[tuple[str, Path]]:
            for index, record in enumerate(picked):
                kept = without_rows(self._read(record), matches[record.key])  # files never change
                if kept.num_rows == 0:
                    continue
                path = tmp / f"{index:06d}.parquet"
                pq.write_table(
                    kept,
                    path,
                    compression="zstd",
                    row_group_size=self.row_group_rows,
                    write_page_checksum=True,
                )
                yield record.key, path

        while True:  # more affected files than one commit holds: a further commit for the rest
            matches.clear()
            try:
                job = self.compactor.rewrite(partition, "delete", select, build)
            except (PartitionBusy, CorruptInput) as exc:
                # Nothing more of this partition changed; running the delete again finishes it.
                logger.warning("delete skipped %s: %s", partition.name, exc)
                result.failed_files += [key for key in counted if key not in result.affected_files]
                return
            if job is None:
                return
            if job.status not in ("settled", "committed"):
                result.failed_files += list(job.input_keys)
                return
            result.affected_files += list(job.input_keys)
            result.rewritten_files += list(job.output_keys)
            result.deleted_count += job.input_rows - job.output_rows

    def _read(self, record: FileRecord) -> pa.Table:
        try:
            data = self.store.get(record.key)
        except NotFound as exc:
            raise CorruptInput(f"{record.key} is listed but missing") from exc
        try:
            return pq.read_table(io.BytesIO(data))
        except (pa.ArrowException, OSError) as exc:
            raise CorruptInput(f"{record.key} is not readable Parquet: {exc}") from exc


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)
