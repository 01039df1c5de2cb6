"""Line protocol bodies of one line shape read by ``arcs.native`` straight into Arrow arrays.

The shape (measurement, tag keys, field keys and each field's kind) is read off the first line;
the C reader checks every line against it as it converts the values, and the arrays go through
the same ``build_rows`` validation as every other body. A body it does not take (escapes,
quotes, comments, odd spacing, several shapes, mixed kinds, values out of range), and any body
validation refuses, returns ``None``: the column-wise path or the exact parser then reads it and
names the bad line, so every body is answered alike (tests compare both).
"""

from __future__ import annotations

import ctypes

import pyarrow as pa

from arcs.errors import ArcsError
from arcs.names import MAX_COLUMNS, TIME_COLUMN
from arcs.native import (
    LP_EVERY_LINE_TIMED,
    LP_KINDS,
    LP_NONDECREASING,
    LP_PRINTABLE_ASCII,
    MAX_INT32_OFFSET,
    LineProtocolColumn,
    LineProtocolTimes,
)
from arcs.write.batch import TIME_TYPE, MeasurementRows
from arcs.write.decoders.columns import NO_FACTS, ColumnFacts, build_rows, one_unit_scale
from arcs.write.decoders.line_protocol_columnar import field_kind

_UNUSUAL = frozenset('\\"#\r\t')
_OUT_OF_ROOM = -2  # arcs_lp_read: a tag column's values need more room than it was given
_TAG_BUDGET_BYTES = 256 << 20  # address space reserved for tag values (pages are touched only as written)
_ARRAY_TYPES = {"float": pa.float64(), "integer": pa.int64(), "unsigned": pa.int64(), "boolean": pa.bool_()}


def decode_one_shape(native: ctypes.CDLL, body: bytes, now_micros: int, precision: str) -> list[MeasurementRows] | None:
    """``body``'s rows, or None when the other decoders must read it.

    The body need not have been decoded as UTF-8 first: every line must match the first one's
    bytes (decoded here) outside its values, and numbers and booleans are ASCII, so only tag
    values can hold other bytes, and a tag column the reader did not find printable ASCII is
    checked as UTF-8.
    """
    shape = _first_line_shape(body)
    if shape is None:
        return None
    measurement, tag_pairs, pairs = shape
    names = [name for name, _eq, _value in pairs]
    kinds = ["tag"] * len(tag_pairs) + [field_kind(value) for _name, _eq, value in pairs[len(tag_pairs) :]]
    lines = native.arcs_count_byte(body, len(body), ord("\n")) + 1  # bytes.count: 4x slower
    # Buffers are sized before any line is read: a body cannot hold more lines of this shape than
    # its bytes allow (each takes the keys, '=', a byte of value and a separator per column), and
    # tag columns get the body's size each, within a budget. Beyond either, the Python decoders.
    shortest_line = len(measurement) + sum(len(name) + 3 for name in names)
    if (lines - 1) * (shortest_line + 1) > len(body) or len(tag_pairs) * len(body) > _TAG_BUDGET_BYTES:
        return None
    keys = [name.encode() for name in names]
    buffers: list[tuple[pa.Buffer, ...]] = []
    columns = (LineProtocolColumn * len(pairs))()
    for column, encoded, kind, (_name, _eq, first_value) in zip(columns, keys, kinds, pairs, strict=True):
        column.key, column.key_length, column.kind = encoded, len(encoded), LP_KINDS[kind]
        if kind == "tag":
            # Room for values twice as long as the first line's, not the whole body: each request's
            # buffers then stay small (and in the cache); a body that needs more is read again.
            capacity = min(len(body), lines * (2 * len(first_value) + 8))
            offsets, data = pa.allocate_buffer(4 * (lines + 1)), pa.allocate_buffer(capacity)
            column.offsets, column.data, column.data_capacity = offsets.address, data.address, data.size
            buffers.append((offsets, data))
        else:
            values = pa.allocate_buffer((lines + 7) // 8 if kind == "boolean" else 8 * lines)
            column.values = values.address
            buffers.append((values,))
    times, times_valid = pa.allocate_buffer(8 * lines), pa.allocate_buffer((lines + 7) // 8)
    name = measurement.encode()
    seen = LineProtocolTimes()

    def read_lines() -> int:
        return int(
            native.arcs_lp_read(
                body,
                len(body),
                name,
                len(name),
                columns,
                len(pairs),
                len(tag_pairs),
                times.address,
                times_valid.address,
                lines,
                ctypes.byref(seen),
            )
        )

    read = read_lines()
    if read == _OUT_OF_ROOM:
        for index, column in enumerate(columns[: len(tag_pairs)]):
            data = pa.allocate_buffer(len(body))  # no line's tags can hold more than the body
            column.data, column.data_capacity = data.address, data.size
            buffers[index] = (buffers[index][0], data)
        read = read_lines()
    if read < 0:
        return None
    arrays: dict[str, pa.Array] = {}
    facts: dict[str, ColumnFacts] = {}
    arrays[TIME_COLUMN], facts[TIME_COLUMN] = _times(native, read, times, times_valid, seen, precision)
    for column, column_name, kind, owned in zip(columns, names, kinds, buffers, strict=True):
        if kind == "tag":
            arrays[column_name] = pa.StringArray.from_buffers(read, owned[0], owned[1])
            facts[column_name] = ColumnFacts(printable=bool(column.flags & LP_PRINTABLE_ASCII))
        else:
            arrays[column_name] = pa.Array.from_buffers(_ARRAY_TYPES[kind], read, [None, owned[0]])
    tags = names[: len(tag_pairs)]
    try:
        for tag in tags:
            if not facts[tag].printable:
                arrays[tag].validate(full=True)  # UTF-8: the other decoders name a bad line
        return [build_rows(measurement, arrays, tags, precision, now_micros, null_time_is_now=True, facts=facts)]
    except (pa.ArrowException, ArcsError):
        return None  # the other decoders answer, naming the line


def _first_line_shape(body: bytes) -> tuple[str, list[str], list[tuple[str, str, str]]] | None:
    """The first line's measurement, its ``tag=value`` pairs, and every key's (name, '=', value),
    or None when that line is not one this reader takes."""
    end = body.find(b"\n")
    try:
        first = (body if end < 0 else body[:end]).decode()
    except UnicodeDecodeError:
        return None
    if not first or len(body) > MAX_INT32_OFFSET or not _UNUSUAL.isdisjoint(first):
        return None
    sections = first.split(" ")
    if len(sections) not in (2, 3):
        return None
    measurement, *tag_pairs = sections[0].split(",")
    pairs = [pair.partition("=") for pair in (*tag_pairs, *sections[1].split(","))]
    if not measurement or len(pairs) > MAX_COLUMNS or any(not eq for _name, eq, _value in pairs):
        return None
    folded = [name.lower() for name, _eq, _value in pairs]
    if len(set(folded)) != len(folded) or TIME_COLUMN in folded:
        return None  # a key twice, or one that would be time: the exact parser says which line
    return measurement, tag_pairs, pairs


def _times(
    native: ctypes.CDLL, lines: int, times: pa.Buffer, valid: pa.Buffer, seen: LineProtocolTimes, precision: str
) -> tuple[pa.Array, ColumnFacts]:
    """The lines' times, and what the reader saw of them: made nanoseconds in place when every
    line has one, in order, and one unit covers them (as the MessagePack reader does); else as
    written, for ``build_rows`` to convert."""
    if not seen.flags & LP_EVERY_LINE_TIMED:
        return pa.Array.from_buffers(pa.int64(), lines, [valid, times]), NO_FACTS
    written = pa.Array.from_buffers(pa.int64(), lines, [None, times])
    ordered = bool(seen.flags & LP_NONDECREASING)
    bounds = (seen.minimum, seen.maximum)
    scale = one_unit_scale(bounds, precision) if ordered else None
    if scale is None or native.arcs_msgpack_rescale(times.address, lines, *scale):
        return written, ColumnFacts(bounds=bounds, ordered=ordered)
    multiply, divide = scale
    nanos = pa.Array.from_buffers(TIME_TYPE, lines, [None, times])
    scaled = (bounds[0] * multiply // divide, bounds[1] * multiply // divide)
    return nanos, ColumnFacts(bounds=scaled, ordered=True, scaled=True)
