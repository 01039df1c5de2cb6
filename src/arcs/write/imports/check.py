"""Checking an import's file whole before anything of it is stored.

Every chunk is checked against the stored schemas as if the chunks before it were stored; a file
that is wrong anywhere is a 4xx naming the lines or rows, and changes nothing. A file that passes
has the columns it adds recorded in one catalog write, and its status says what it holds."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from arcs.errors import BadRequest
from arcs.names import TIME_COLUMN
from arcs.write.import_status import ImportStatus
from arcs.write.imports.chunks import Chunk
from arcs.write.imports.options import ImportOptions
from arcs.write.schema import SchemaPlan, SchemaRegistry

_NS_PER_HOUR = 3_600_000_000_000


def check_file(registry: SchemaRegistry, status: ImportStatus, options: ImportOptions, chunks: Iterable[Chunk]) -> None:
    """Check every chunk, reserve the columns the file adds, and record its shape in ``status``."""
    plan = SchemaPlan(registry, options.database)
    measurements: dict[str, None] = {}
    columns: dict[str, None] = {}
    hours: set[int] = set()
    low: int | None = None
    high: int | None = None
    count = 0
    for chunk in chunks:
        plan.check(chunk.parts)
        for part in chunk.parts:
            measurements.setdefault(part.measurement)
            columns.update(dict.fromkeys(part.table.column_names))
            times = part.table.column(TIME_COLUMN).cast(pa.int64())
            bounds = pc.min_max(times).as_py()
            low = bounds["min"] if low is None else min(low, bounds["min"])
            high = bounds["max"] if high is None else max(high, bounds["max"])
            hours.update(pc.unique(pc.divide(times, _NS_PER_HOUR)).to_pylist())
        status.rows_checked += chunk.rows
        count += 1
    if status.rows_checked == 0:
        if options.measurement is not None:
            raise BadRequest(f"no records found for measurement {options.measurement!r}")
        raise BadRequest("the file holds no rows")
    plan.reserve()
    status.chunks = count
    status.measurements = list(measurements)
    status.columns = list(columns)
    status.time_min_ns, status.time_max_ns, status.hours = low, high, len(hours)
