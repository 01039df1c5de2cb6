"""Points of one series at one time are one point: InfluxDB's merge, field by field.

A measurement with tags stores points: rows with equal tag values (nulls equal to nulls) and an
equal ``time`` are the same point written more than once, and they merge field by field, each
field taking the value of the latest write that holds one (a null, a field the write lacked, keeps
the earlier value). A measurement without tags keeps every row: several rows at one time are data
there.

Everything that reads or rewrites stored rows applies this one rule, so a query's answer does not
depend on when compaction ran: ingest merges the points a file would repeat (``merge_points``),
compaction merges its sorted stream (``merge_runs``), and a query reads the files that may repeat
each other's points through ``scan``'s merge. (The query path imports this module and needs no
``pyarrow.compute``, whose import costs a cold start about 50 ms: the functions that do import it.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from arcs import layout
from arcs.names import TIME_COLUMN
from arcs.ports import FileRecord

#: DuckDB's columns for a row's file (its index in the list read) and place in that file: together
#: they are the write order of the rows of files listed in write order.
ORDER_COLUMNS = ("file_index", "file_row_number")


def run_starts(table: pa.Table | pa.RecordBatch, keys: Sequence[str], previous: pa.RecordBatch | None) -> pa.Array:
    """True where a row's ``keys`` differ from the row before it (nulls equal to nulls); the first
    row is compared with ``previous`` (a one-row batch), or starts a run when there is none."""
    import pyarrow.compute as pc  # lazy: see the module's docstring

    rows = table.num_rows
    starts: pa.Array | None = None
    for name in keys:
        column = table.column(name)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        before = previous.column(name) if previous is not None else column.slice(0, 1)
        shifted = pa.concat_arrays([before, column.slice(0, rows - 1)])
        same = pc.or_kleene(
            pc.fill_null(pc.equal(column, shifted), False),
            pc.and_(pc.is_null(column), pc.is_null(shifted)),
        )
        differs = pc.invert(same)
        starts = differs if starts is None else pc.or_(starts, differs)
    if starts is None:
        starts = pa.array([False] * rows)
    if previous is None:
        starts = pa.concat_arrays([pa.array([True]), starts.slice(1)])
    return starts


def merge_runs(table: pa.Table, starts: pa.Array, keys: Sequence[str]) -> pa.Table:
    """Each run of rows (``starts`` marks its first) as one row: its ``keys`` as they are, every
    other column its last non-null value in the run. The table itself when no run has two rows."""
    import pyarrow.compute as pc  # lazy: see the module's docstring

    if pc.all(starts).as_py():
        return table
    fields = [name for name in table.column_names if name not in keys]
    run = _unused_name(table.column_names)
    numbers = pc.subtract(pc.cumulative_sum(starts.cast(pa.int64())), 1)
    merged = (
        table.select(fields)
        .append_column(run, numbers)
        # One thread: "last" then follows the rows' order (pyarrow requires it for ordered aggregates).
        .group_by(run, use_threads=False)
        .aggregate([(name, "last") for name in fields])
    )
    merged = merged.take(pc.sort_indices(merged.column(run)))
    firsts = table.filter(starts)
    columns = {name: firsts.column(name) for name in keys}
    columns.update({name: merged.column(f"{name}_last") for name in fields})
    return pa.table({name: columns[name] for name in table.column_names}, schema=table.schema)


def merge_points(table: pa.Table, tags: Sequence[str]) -> pa.Table:
    """A time-ordered table with each point once (see the module), still in time order; the table
    itself when no point repeats. Only looks closer when two neighbours share a time."""
    import pyarrow.compute as pc  # lazy: see the module's docstring

    if not tags or table.num_rows < 2:
        return table
    times = table.column(TIME_COLUMN)
    if not pc.any(pc.equal(times.slice(1), times.slice(0, table.num_rows - 1))).as_py():
        return table  # sorted with no time twice: no point twice
    keys = [TIME_COLUMN, *tags]
    fields = [name for name in table.column_names if name not in keys]
    # One thread: "last" then follows the rows' order (pyarrow requires it for ordered aggregates).
    merged = table.group_by(keys, use_threads=False).aggregate([(name, "last") for name in fields])
    if merged.num_rows == table.num_rows:
        return table
    merged = merged.take(pc.sort_indices(merged, [(TIME_COLUMN, "ascending")]))
    columns = {name: merged.column(name) for name in keys}
    columns.update({name: merged.column(f"{name}_last") for name in fields})
    return pa.table({name: columns[name] for name in table.column_names}, schema=table.schema)


# --- reading: which files may repeat each other's points, and the SQL that merges them --------


def may_repeat(files: Sequence[FileRecord]) -> list[FileRecord]:
    """The files whose points may also be in another file listed: those whose time range meets
    that of a file of another *unit*, in the same month (a point's time fixes its hour, day and
    month; a day or month file may repeat a point of a late write into one of its hours).

    A unit holds each point once: a file ingest wrote (it merges a batch's points before writing),
    or all outputs of one compaction job (the merge wrote each point once). Ranges are the
    catalog's, in whole microseconds rounded outward, so "meets" errs toward merging.
    """
    by_hour: dict[object, list[FileRecord]] = {}
    for record in files:
        by_hour.setdefault(layout.floor_month(record.hour), []).append(record)
    repeated: list[FileRecord] = []
    for hour_files in by_hour.values():
        if len(hour_files) < 2:
            continue
        hour_files.sort(key=lambda f: (f.min_time_us, f.max_time_us))
        # Sweep the ranges in order of their start: a cluster is a run of ranges that meet.
        cluster = [hour_files[0]]
        reach = hour_files[0].max_time_us
        for record in hour_files[1:]:
            if record.min_time_us <= reach:
                cluster.append(record)
                reach = max(reach, record.max_time_us)
                continue
            repeated += _repeating(cluster)
            cluster, reach = [record], record.max_time_us
        repeated += _repeating(cluster)
    return repeated


def _repeating(cluster: list[FileRecord]) -> list[FileRecord]:
    return cluster if len({unit_of(f) for f in cluster}) > 1 else []


def unit_of(record: FileRecord) -> str:
    """What holds each point once: a compaction job's outputs together, any other file alone."""
    job = layout.compaction_job_of(layout.file_order(record.key))
    return f"job {job}" if job is not None else record.key


def scan(files: Sequence[FileRecord], tags: Sequence[str], columns: Sequence[str], url: Callable[[str], str]) -> str:
    """The SQL relation that reads ``files`` (of one measurement) with each point once.

    Files that cannot repeat another's points are read as they are; the others through a merge:
    grouped by tags and time, each field its latest non-null value, the latest being the one of the
    file later in write order (file names sort so), then later in its file. A measurement without
    tags, or with a column named like DuckDB's row-order columns, is read as it is (compaction keeps
    its rows alike, so the answer does not change when it runs).
    """
    from arcs.query.rewriter import quote_identifier, quote_literal

    merged = may_repeat(files) if tags and not set(ORDER_COLUMNS) & set(columns) else []

    def read(records: Sequence[FileRecord]) -> str:
        paths = ", ".join(quote_literal(url(f.key)) for f in records)
        return f"read_parquet([{paths}], union_by_name = true)"

    if not merged:
        return read(files)
    merged.sort(key=lambda f: layout.file_order(f.key))
    keys = "[" + ", ".join(quote_literal(name) for name in [TIME_COLUMN, *tags]) + "]"
    name = _unused_name(columns)
    order = quote_identifier(name)
    # COLUMNS(lambda) picks what the files hold: a tag or field some never had is simply absent.
    # arg_max skips nulls, so a field a later write left null keeps the earlier value.
    merging = (
        f"SELECT COLUMNS(c -> list_contains({keys}, c)), "
        f"arg_max(COLUMNS(c -> NOT list_contains({keys}, c) AND c != {quote_literal(name)}), {order}) "
        f"FROM (SELECT *, file_index * 4294967296 + file_row_number AS {order} FROM {read(merged)}) GROUP BY ALL"
    )
    merged_keys = {f.key for f in merged}
    rest = [f for f in files if f.key not in merged_keys]
    if not rest:
        return f"({merging})"
    return f"(SELECT * FROM {read(rest)} UNION ALL BY NAME {merging})"


def _unused_name(names: Sequence[str]) -> str:
    taken = {name.lower() for name in names}
    name = "__arcs_order"
    while name in taken:
        name += "_"
    return name
