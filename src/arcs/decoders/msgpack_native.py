"""MessagePack columnar bodies read by ``arcs.native`` straight into Arrow arrays.

The common body of Arc's clients - one ``{"m", "columns", "tags", "precision"}`` map whose
columns each hold one kind of scalar - skips the Python objects of a general decoder: the C scan
checks its shape and sizes every column, each column is written into buffers allocated for it,
and the arrays go through the same ``build_rows`` validation as every other body. Anything the
scan does not take, and any body that validation refuses, returns ``None``: the general decoders
then read it and word the error, so both paths answer every body alike (a property test checks it).
"""

from __future__ import annotations

import ctypes

import pyarrow as pa

from arcs.batch import MeasurementRows
from arcs.decoders.columns import build_rows, check_precision
from arcs.errors import ArcsError
from arcs.names import MAX_COLUMNS
from arcs.native import (
    MAX_INT32_OFFSET,
    MSGPACK_BOOL,
    MSGPACK_FLOAT64,
    MSGPACK_INT64,
    MSGPACK_STRING,
    MsgpackColumn,
    MsgpackDocument,
    MsgpackSpan,
)

_NUMBERS = {MSGPACK_INT64: pa.int64(), MSGPACK_FLOAT64: pa.float64()}


def decode_columnar(
    native: ctypes.CDLL, body: bytes, now_micros: int, precision: str | None
) -> list[MeasurementRows] | None:
    """The body's rows, or None when the general decoders must read it."""
    if not isinstance(body, bytes):
        return None
    document = MsgpackDocument()
    # One more than a measurement may have: a body with more is refused by the general path.
    columns = (MsgpackColumn * (MAX_COLUMNS + 1))()
    if native.arcs_msgpack_scan(body, len(body), ctypes.byref(document), columns, len(columns)):
        return None
    if document.tag_count > MAX_COLUMNS:
        return None  # more tags than a measurement has columns (and spans sized by a hostile count)
    tags = (MsgpackSpan * document.tag_count)()
    if document.tag_count and native.arcs_msgpack_tags(body, len(body), ctypes.byref(document), tags):
        return None
    try:
        arrays = {_text(body, column.name): _array(native, body, column) for column in columns[: document.column_count]}
        measurement = _text(body, document.measurement) if document.measurement.offset >= 0 else None
        item_precision = _text(body, document.precision) if document.precision.offset >= 0 else None
        names = [_text(body, tag) for tag in tags]
        request_precision = check_precision(precision)  # checked first, as the general path does
        precision = check_precision(item_precision) or request_precision
        return [build_rows(measurement, arrays, names, precision, now_micros, datetimes=False)]
    except (UnicodeDecodeError, pa.ArrowException, ArcsError):
        return None  # the general path answers, in its own words


def _text(body: bytes, span: MsgpackSpan) -> str:
    return body[span.offset : span.offset + span.length].decode()


def _array(native: ctypes.CDLL, body: bytes, column: MsgpackColumn) -> pa.Array:
    count, kind = column.count, column.kind
    if kind == MSGPACK_STRING:
        if column.string_bytes > MAX_INT32_OFFSET:
            raise pa.ArrowInvalid("strings beyond 32-bit offsets")  # a body this large is rare: the general path
        offsets, data = pa.allocate_buffer(4 * (count + 1)), pa.allocate_buffer(column.string_bytes)
        if native.arcs_msgpack_fill(body, len(body), ctypes.byref(column), None, offsets.address, data.address):
            raise pa.ArrowInvalid("the column changed between scan and fill")
        strings = pa.StringArray.from_buffers(count, offsets, data)
        strings.validate(full=True)  # UTF-8: the general path names a bad string
        return strings
    kind_type = pa.bool_() if kind == MSGPACK_BOOL else _NUMBERS[kind]
    values = pa.allocate_buffer((count + 7) // 8 if kind == MSGPACK_BOOL else 8 * count)
    if native.arcs_msgpack_fill(body, len(body), ctypes.byref(column), values.address, None, None):
        raise pa.ArrowInvalid("the column changed between scan and fill")
    return pa.Array.from_buffers(kind_type, count, [None, values])
