"""The merge: input Parquet files -> sorted, deduplicated Parquet files near a target size.

Bounded memory: DuckDB sorts (a plain sort spills to disk past its memory limit; a window
function would not, entirely), the rows stream out in record batches, duplicates are dropped on
the way, and pyarrow writes row groups, starting a new file once one reaches the target size.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arcs.allocator import DUCKDB_ALLOCATOR
from arcs.errors import ArcsError
from arcs.names import TIME_COLUMN
from arcs.parquet_encoding import column_encodings
from arcs.settings import CompactionSettings

#: DuckDB's columns for a row's file (its index in the input list) and place in that file.
ORDER_COLUMNS = ("file_index", "file_row_number")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CorruptInput(ArcsError):
    """An input is not readable Parquet of this measurement."""


def merge(
    paths: list[Path], tags: list[str], tmp: Path, config: CompactionSettings, row_group_rows: int
) -> Iterator[Path]:
    """Merged, deduplicated, sorted rows of ``paths`` as Parquet files near the target size.

    DuckDB sorts, spilling to disk past its memory limit (a plain sort spills; a window
    function would not, entirely); the rows stream out in record batches, duplicates are
    dropped on the way (each (tags, time) group arrives with its last write first), and
    pyarrow writes them, starting a new file once one reaches the target size.
    """
    import duckdb  # lazy: only compaction and queries load DuckDB

    from arcs.rewriter import quote_identifier, quote_literal

    spill = tmp / "spill"
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
    keys = [quote_identifier(tag) for tag in tags]
    order = [*keys, time_column] if config.sort == "tags" else [time_column, *keys]
    # Within a group the last written comes first: the latest file (inputs are in write
    # order), then its last row.
    order += ["file_index DESC", "file_row_number DESC"]
    sql = f"SELECT * FROM read_parquet({files}, union_by_name = true) ORDER BY {', '.join(order)}"
    conn = duckdb.connect(":memory:", config=settings)
    try:
        reader = conn.execute(sql).to_arrow_reader(row_group_rows)
        batches: Iterator[pa.RecordBatch] = iter(reader)
        if tags:
            batches = first_of_each_group(batches, [TIME_COLUMN, *tags])
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
                # of arcs.parquet_encoding.
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


def first_of_each_group(batches: Iterator[pa.RecordBatch], keys: list[str]) -> Iterator[pa.RecordBatch]:
    """Only the first row of each run of equal ``keys`` (nulls equal to nulls), across batches."""
    previous: pa.RecordBatch | None = None  # the last row seen, as a one-row batch
    for batch in batches:
        if batch.num_rows == 0:
            continue
        starts: pa.Array | None = None
        for name in keys:
            column = batch.column(name)
            if previous is None:
                shifted = pa.concat_arrays([column.slice(0, 1), column.slice(0, batch.num_rows - 1)])
            else:
                shifted = pa.concat_arrays([previous.column(name), column.slice(0, batch.num_rows - 1)])
            same = pc.or_kleene(
                pc.fill_null(pc.equal(column, shifted), False),
                pc.and_(pc.is_null(column), pc.is_null(shifted)),
            )
            differs = pc.invert(same)
            starts = differs if starts is None else pc.or_(starts, differs)
        assert starts is not None
        if previous is None:  # the very first row starts a group
            starts = pa.concat_arrays([pa.array([True]), starts.slice(1)])
        previous = batch.slice(batch.num_rows - 1, 1)
        kept = batch.filter(starts)
        if kept.num_rows:
            yield kept


def _utc_named(schema: pa.Schema) -> pa.Schema:
    """DuckDB names the zone 'Etc/UTC'; our files say 'UTC', as ingest writes them."""
    fields = [
        f.with_type(pa.timestamp(f.type.unit, tz="UTC")) if pa.types.is_timestamp(f.type) and f.type.tz else f
        for f in schema
    ]
    return pa.schema(fields)


def time_bounds(metadata: pq.FileMetaData) -> tuple[int, int]:
    """Smallest and largest time in a file, in µs, from its row groups' statistics."""
    index = metadata.schema.to_arrow_schema().get_field_index(TIME_COLUMN)
    lows: list[int] = []
    highs: list[int] = []
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            continue
        lows.append(_micros(stats.min))
        highs.append(_micros(stats.max))
    if not lows:
        return 0, 0
    return min(lows), max(highs)


def _micros(value: object) -> int:
    if isinstance(value, datetime):
        return (value - _EPOCH) // timedelta(microseconds=1)
    return int(value)  # type: ignore[call-overload,no-any-return]


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind))
