"""The merge: input Parquet files -> sorted Parquet files near a target size, each point once.

Bounded memory: DuckDB sorts (a plain sort spills to disk past its memory limit; a window
function would not, entirely), the rows stream out in record batches, a point's rows merge on
the way, and pyarrow writes row groups, starting a new file once one reaches the target size.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arcs.allocator import DUCKDB_ALLOCATOR
from arcs.errors import ArcsError
from arcs.names import TIME_COLUMN
from arcs.settings import CompactionSettings
from arcs.write.parquet_encoding import column_encodings
from arcs.write.points import ORDER_COLUMNS, merge_runs, run_starts

#: (multiply, divide) taking a timestamp unit to microseconds.
_TO_MICROS = {"s": (1_000_000, 1), "ms": (1_000, 1), "us": (1, 1), "ns": (1, 1_000)}


class CorruptInput(ArcsError):
    """An input is not readable Parquet of this measurement."""


def sort_order(
    measurement: str, tags: Sequence[str], columns: Collection[str], config: CompactionSettings
) -> list[str]:
    """The columns a merge sorts by, time included, before write order.

    A measurement's ``ARCS_SORT_KEYS`` come first (those its files hold), then time (unless named),
    then the rest of its tags; without keys, ``ARCS_COMPACTION_SORT`` says time then tags, or tags
    then time. With tags, only keys that are tags can lead: a point's rows (equal tags and time)
    must arrive together to merge, and a field may differ between them."""
    keys = config.sort_keys_of(measurement)
    if keys is None:
        return [*tags, TIME_COLUMN] if config.sort == "tags" else [TIME_COLUMN, *tags]
    usable = [key for key in keys if key in columns and (not tags or key in tags or key == TIME_COLUMN)]
    if TIME_COLUMN not in usable:
        usable.append(TIME_COLUMN)
    return usable + [tag for tag in tags if tag not in usable]


def merge(
    paths: list[Path], tags: list[str], tmp: Path, config: CompactionSettings, row_group_rows: int, order: list[str]
) -> Iterator[Path]:
    """Merged, sorted rows of ``paths`` (in write order) as Parquet files near the target size.

    DuckDB sorts, spilling to disk past its memory limit (a plain sort spills; a window
    function would not, entirely); the rows stream out in record batches, each point's rows
    (equal tags and time) arrive together in write order and merge on the way, field by field
    (``arcs.write.points``), and pyarrow writes them, starting a new file once one reaches the target
    size. Times come out as nanoseconds (an earlier version stored microseconds, zoned UTC).
    """
    import duckdb  # lazy: only compaction and queries load DuckDB

    from arcs.query.rewriter import quote_identifier, quote_literal

    spill = tmp / "spill"  # ``order``: ``sort_order``'s columns
    spill.mkdir()
    settings: dict[str, Any] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "temp_directory": str(spill),
        **DUCKDB_ALLOCATOR,
    }
    if config.memory_limit:
        settings["memory_limit"] = config.memory_limit
    if config.threads:
        settings["threads"] = config.threads
    files = "[" + ", ".join(quote_literal(str(path)) for path in paths) + "]"
    time_column = quote_identifier(TIME_COLUMN)
    # Within a point, write order: the inputs' order (theirs), then the rows' in each.
    by = [*(quote_identifier(column) for column in order), *ORDER_COLUMNS]
    sql = (
        f"SELECT * REPLACE (CAST({time_column} AS TIMESTAMP_NS) AS {time_column}) "
        f"FROM read_parquet({files}, union_by_name = true) ORDER BY {', '.join(by)}"
    )
    conn = duckdb.connect(":memory:", config=settings)
    try:
        # Older files hold zoned (UTC) times; converting them must not depend on the host's zone.
        conn.execute("SET TimeZone = 'UTC'")
        reader = conn.execute(sql).to_arrow_reader(row_group_rows)
        batches: Iterator[pa.RecordBatch] = iter(reader)
        if tags:
            # A point's rows are adjacent in any ``sort_order``: it leads with tags or time only.
            batches = merge_groups(batches, [TIME_COLUMN, *tags])
        yield from _write_batches(batches, reader.schema, tmp, config, row_group_rows)
    except duckdb.Error as exc:
        raise ArcsError(f"merging failed: {exc}") from exc
    finally:
        conn.close()


def _write_batches(
    batches: Iterator[pa.RecordBatch], source: pa.Schema, tmp: Path, config: CompactionSettings, row_group_rows: int
) -> Iterator[Path]:
    """Row groups of ``row_group_rows`` rows into files of about ``target_file_bytes``."""
    schema = _utc_named(source)
    writer: pq.ParquetWriter | None = None
    sink: Any = None
    path = tmp / "out-0.parquet"
    count = 0
    pending: list[pa.RecordBatch] = []
    pending_rows = 0

    def flush() -> None:
        nonlocal writer, sink, path, pending, pending_rows
        if not pending_rows:
            return
        if writer is None:
            path = tmp / f"out-{count}.parquet"
            sink = pa.OSFile(str(path), "wb")
            writer = pq.ParquetWriter(
                sink,
                schema,
                compression="zstd",
                compression_level=config.zstd_level,
                # Strings (tags above all) repeat, so dictionaries pay; numbers take the encodings
                # of arcs.write.parquet_encoding.
                use_dictionary=[field.name for field in schema if _is_text(field.type)],
                column_encoding=column_encodings(schema),
                write_statistics=True,
                write_page_checksum=True,
            )
        table = pa.Table.from_batches(pending, schema=source).cast(schema)
        writer.write_table(table, row_group_size=row_group_rows)
        pending, pending_rows = [], 0

    for batch in batches:
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows < row_group_rows:
            continue
        flush()
        if sink is not None and sink.tell() >= config.target_file_bytes:
            assert writer is not None
            writer.close()
            sink.close()
            writer = None
            count += 1
            yield path
    flush()
    if writer is not None:
        writer.close()
        sink.close()
        yield path


def check_parquet(path: Path, expected_rows: int) -> pa.Schema:
    """The file's schema, if it decodes whole as Parquet with a time column and the rows its record
    says; CorruptInput otherwise. Every page is decoded (one batch at a time) and its checksum
    verified where the writer stored one (ingest and compaction do): DuckDB reads some damaged
    pages without an error, and garbage must not be merged into good data."""
    rows = 0
    try:
        with pq.ParquetFile(path, page_checksum_verification=True) as parquet:
            schema = parquet.schema_arrow
            for batch in parquet.iter_batches(batch_size=65_536):
                rows += batch.num_rows
    except (pa.ArrowException, OSError) as exc:
        raise CorruptInput(f"not readable Parquet: {exc}") from exc
    if TIME_COLUMN not in schema.names:
        raise CorruptInput("no time column")
    if rows != expected_rows:
        raise CorruptInput(f"holds {rows} rows; its file record says {expected_rows}")
    return schema


def merge_groups(batches: Iterator[pa.RecordBatch], keys: list[str]) -> Iterator[pa.RecordBatch]:
    """Each run of equal ``keys`` (nulls equal to nulls) as one row, as ``arcs.write.points.merge_runs``
    makes it, across batches: a batch's last run is held back until a later batch shows where it
    ends (memory: a batch, and one run)."""
    held: pa.Table | None = None  # the rows of the run the batches so far ended with
    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        if held is not None:
            table = pa.concat_tables([held, table]).combine_chunks()
        starts = run_starts(table, keys, None)
        begins = pc.indices_nonzero(starts)
        last = begins[len(begins) - 1].as_py()  # the first row starts a run, so there is one
        if last:
            yield from merge_runs(table.slice(0, last), starts.slice(0, last), keys).to_batches()
        held = table.slice(last)
    if held is not None:
        starts = pa.array([True] + [False] * (held.num_rows - 1))
        yield from merge_runs(held, starts, keys).to_batches()


def _utc_named(schema: pa.Schema) -> pa.Schema:
    """DuckDB names the zone 'Etc/UTC'; our files say 'UTC', as ingest writes them."""
    fields = [
        f.with_type(pa.timestamp(f.type.unit, tz="UTC")) if pa.types.is_timestamp(f.type) and f.type.tz else f
        for f in schema
    ]
    return pa.schema(fields)


def time_bounds(metadata: pq.FileMetaData) -> tuple[int, int]:
    """Smallest and largest time in a file, in whole µs rounded outward, from its row groups'
    statistics (their stored integers, in the column's unit)."""
    arrow = metadata.schema.to_arrow_schema()
    index = arrow.get_field_index(TIME_COLUMN)
    kind = arrow.field(index).type
    times, per_micro = _TO_MICROS.get(kind.unit, (1, 1)) if pa.types.is_timestamp(kind) else (1, 1)
    lows: list[int] = []
    highs: list[int] = []
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            continue
        lows.append(int(stats.min_raw) * times // per_micro)
        highs.append(-(-int(stats.max_raw) * times // per_micro))
    if not lows:
        return 0, 0
    return min(lows), max(highs)


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind))
