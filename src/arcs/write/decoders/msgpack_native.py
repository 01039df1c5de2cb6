"""MessagePack (and JSON) columnar bodies read by ``arcs.native`` straight into Arrow arrays.

The common body of Arc's clients - one ``{"m", "columns", "tags", "precision"}`` map whose columns
each hold one kind of scalar - skips the Python objects of a general decoder: the C scan checks its
shape, notes what validation would otherwise look for again (integer bounds and order,
printable-ASCII strings), sizes every column and lays them out in one block; one fill writes them
all, and the arrays go through the same ``build_rows`` validation as every other body. Anything the scan does
not take, and any body that validation refuses, returns ``None``: the general decoders then read it
and word the error, so both paths answer every body alike (a property test checks it).

The same document written as JSON is read by a C twin of the scan and fill (json_columns.c) into
the same descriptions, and from there on alike.
"""

from __future__ import annotations

import ctypes
import threading

import pyarrow as pa

from arcs.errors import ArcsError
from arcs.names import MAX_COLUMNS, TIME_COLUMN
from arcs.native import (
    MSGPACK_BOOL,
    MSGPACK_FLOAT64,
    MSGPACK_INT64,
    MSGPACK_NONDECREASING,
    MSGPACK_PRINTABLE_ASCII,
    MSGPACK_STRING,
    MsgpackColumn,
    MsgpackDocument,
    MsgpackSpan,
)
from arcs.write.batch import TIME_TYPE, MeasurementRows
from arcs.write.decoders.columns import NO_FACTS, ColumnFacts, build_rows, check_precision, one_unit_scale

#: The Arrow type of each column kind the scan reports.
ARROW_TYPES = {
    MSGPACK_INT64: pa.int64(),
    MSGPACK_FLOAT64: pa.float64(),
    MSGPACK_STRING: pa.string(),
    MSGPACK_BOOL: pa.bool_(),
}
# One more than a measurement may have: a body with more is refused by the general path. Each
# thread keeps its descriptions (90 KB) rather than zeroing new ones per body.
_scratch = threading.local()


def column_slots() -> ctypes.Array[MsgpackColumn]:
    slots: ctypes.Array[MsgpackColumn] | None = getattr(_scratch, "columns", None)
    if slots is None:
        slots = _scratch.columns = (MsgpackColumn * (MAX_COLUMNS + 1))()
    return slots


#: The C readers of the columnar document: MessagePack's (msgpack_columns.c) and JSON's
#: (json_columns.c), which describe a body alike.
MSGPACK, JSON = "msgpack", "json"


def decode_columnar(
    native: ctypes.CDLL, body: bytes, now_micros: int, precision: str | None, reader: str = MSGPACK
) -> list[MeasurementRows] | None:
    """The body's rows (a document in ``reader``'s format), or None when the general decoders must read it."""
    if not isinstance(body, bytes):
        return None
    scan, read_tags, fill = (getattr(native, f"arcs_{reader}_{step}") for step in ("scan", "tags", "fill"))
    document = MsgpackDocument()
    slots = column_slots()
    if scan(body, len(body), ctypes.byref(document), slots, len(slots)):
        return None
    if document.tag_count > MAX_COLUMNS:
        return None  # more tags than a measurement has columns (and spans sized by a hostile count)
    tags = (MsgpackSpan * document.tag_count)()
    if document.tag_count and read_tags(body, len(body), ctypes.byref(document), tags):
        return None
    columns = slots[: document.column_count]
    try:
        block = _fill(fill, body, document, slots)
        arrays: dict[str, pa.Array] = {}
        facts: dict[str, ColumnFacts] = {}
        time_column = None
        for column in columns:
            name = text(body, column.name)
            arrays[name], facts[name] = _array(block, column)
            if name == TIME_COLUMN:
                time_column = column
        measurement = text(body, document.measurement) if document.measurement.offset >= 0 else None
        item_precision = text(body, document.precision) if document.precision.offset >= 0 else None
        names = [text(body, tag) for tag in tags]
        request_precision = check_precision(precision)  # checked first, as the general path does
        precision = check_precision(item_precision) or request_precision
        if time_column is not None:
            in_nanos = _nanos_in_place(native, block, time_column, precision)
            if in_nanos is not None:
                arrays[TIME_COLUMN], facts[TIME_COLUMN] = in_nanos
        return [build_rows(measurement, arrays, names, precision, now_micros, datetimes=False, facts=facts)]
    except (UnicodeDecodeError, pa.ArrowException, ArcsError):
        return None  # the general path answers, in its own words


def text(body: bytes, span: MsgpackSpan) -> str:
    """The string at ``span`` (UnicodeDecodeError for bytes that are not UTF-8)."""
    return body[span.offset : span.offset + span.length].decode()


def _fill(
    fill: ctypes._NamedFuncPointer, body: bytes, document: MsgpackDocument, slots: ctypes.Array[MsgpackColumn]
) -> pa.Buffer:
    """Every column's buffers in one block, where the scan laid them out, filled in one call."""
    block = pa.allocate_buffer(document.block_bytes)
    if fill(body, len(body), slots, document.column_count, block.address, block.size):
        raise pa.ArrowInvalid("the columns changed between scan and fill")
    return block


def _array(block: pa.Buffer, column: MsgpackColumn) -> tuple[pa.Array, ColumnFacts]:
    count, kind = column.count, column.kind
    if kind == MSGPACK_STRING:
        offsets = block.slice(column.values_at, 4 * (count + 1))
        data = block.slice(column.data_at, column.string_bytes)
        strings = pa.StringArray.from_buffers(count, offsets, data)
        printable = bool(column.flags & MSGPACK_PRINTABLE_ASCII)
        if not printable:
            strings.validate(full=True)  # UTF-8: the general path names a bad string
        return strings, ColumnFacts(printable=printable)
    if kind == MSGPACK_BOOL:
        bitmap = block.slice(column.values_at, (count + 7) // 8)
        return pa.Array.from_buffers(pa.bool_(), count, [None, bitmap]), NO_FACTS
    array = pa.Array.from_buffers(ARROW_TYPES[kind], count, [None, block.slice(column.values_at, 8 * count)])
    if kind == MSGPACK_INT64:
        ordered = bool(column.flags & MSGPACK_NONDECREASING)
        return array, ColumnFacts(bounds=(column.minimum, column.maximum), ordered=ordered)
    return array, NO_FACTS


def _nanos_in_place(
    native: ctypes.CDLL, block: pa.Buffer, column: MsgpackColumn, precision: str | None
) -> tuple[pa.Array, ColumnFacts] | None:
    """The time column made nanoseconds where the fill wrote it (the block is this body's alone),
    when its integers are in order and one unit covers them; None leaves it to ``build_rows``.

    In C because Arrow's divide is a kernel call that costs more than the division itself, which
    is by a variable there; here 1,000 is a constant the compiler turns into a multiply.
    """
    if column.kind != MSGPACK_INT64 or not column.flags & MSGPACK_NONDECREASING or column.count == 0:
        return None
    scale = one_unit_scale((column.minimum, column.maximum), precision)
    if scale is None:
        return None
    multiply, divide = scale
    if native.arcs_msgpack_rescale(block.address + column.values_at, column.count, multiply, divide):
        return None
    nanos = pa.Array.from_buffers(TIME_TYPE, column.count, [None, block.slice(column.values_at, 8 * column.count)])
    # In order, so the first and last times are the bounds, scaled alike.
    bounds = (column.minimum * multiply // divide, column.maximum * multiply // divide)
    return nanos, ColumnFacts(bounds=bounds, ordered=True, scaled=True)
