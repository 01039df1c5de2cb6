"""Query results as Arc's columnar MessagePack document (``POST /api/v1/query/msgpack``).

One map, its keys in this order: ``success`` (true), ``columns`` (names), ``types`` (one of Arc's
wire type names per column), ``data`` (one array per column, not per row: ``data[c][r]``),
``row_count``, ``execution_time_ms`` (an integer) and ``timestamp`` (RFC 3339, seconds). Values
keep their type: integers as MessagePack integers, floats as floats (NaN and infinities as they
are), booleans, strings as str, binary as bin, timestamps and dates as the MessagePack timestamp
extension (type -1, an instant in UTC), nulls as nil. Decimals become ``int64`` (scale 0) or
``float64``, as in Arc. Types MessagePack has no form for (times, durations, intervals) are
``string_encoded`` text; lists, structs and maps are JSON text under ``list``, ``struct``, ``map``.

Fixed-width columns are written without a Python object per value: each value in one fixed-width
MessagePack form (``int 64``, ``uint 64``, ``float 32/64``, ``timestamp 96``), built from the
column's buffers with strided copies, a nil in place of each null.
"""

from __future__ import annotations

import array
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgpack
import pyarrow as pa
from pyarrow import _compute

from arcs.errors import ResultTooLarge
from arcs.query.results import SizedBody

if TYPE_CHECKING:
    from arcs.query.service import QueryResult

_NIL = b"\xc0"
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
#: Integer widths, by the Arrow type a column is read as, and their MessagePack marker.
_SIGNED = (0xD3, "q", 8)
_UNSIGNED = (0xCF, "Q", 8)
_FLOAT64 = (0xCB, "d", 8)
_FLOAT32 = (0xCA, "f", 4)
_TIMESTAMP96 = b"\xc7\x0c\xff"  # ext 8, 12 bytes, type -1: nanoseconds (u32) then seconds (i64)


def _call(name: str, *arguments: Any, options: _compute.FunctionOptions | None = None) -> Any:
    return _compute.call_function(name, list(arguments), options)


def _cast(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return _call("cast", values, options=_compute.CastOptions.safe(kind))


def wire_type(kind: pa.DataType) -> str:
    """Arc's name for the values of a column of this Arrow type, as this module writes them."""
    if pa.types.is_dictionary(kind):
        return wire_type(kind.value_type)
    if pa.types.is_decimal(kind):
        return "int64" if kind.scale == 0 else "float64"
    return _scalar_wire_type(kind) or _nested_wire_type(kind)


def _scalar_wire_type(kind: pa.DataType) -> str | None:
    """The name of a type of single values (numbers, text, bytes, instants), or None."""
    if pa.types.is_boolean(kind):
        return "bool"
    if pa.types.is_integer(kind):
        return str(kind)  # int8 ... uint64
    if kind == pa.float64():
        return "float64"
    if kind == pa.float32():
        return "float32"
    if pa.types.is_string(kind) or pa.types.is_string_view(kind):
        return "utf8"
    if pa.types.is_large_string(kind):
        return "large_utf8"
    if pa.types.is_binary(kind) or pa.types.is_binary_view(kind):
        return "binary"
    if pa.types.is_large_binary(kind):
        return "large_binary"
    if pa.types.is_date32(kind):
        return "date32"
    if pa.types.is_timestamp(kind):
        return f"timestamp[{kind.unit}]"
    return None


def _nested_wire_type(kind: pa.DataType) -> str:
    """The name of a list, map or struct type, of null, or of what is sent as text."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return "list"
    if pa.types.is_list_view(kind) or pa.types.is_large_list_view(kind):
        return "list"
    if pa.types.is_map(kind):
        return "map"
    if pa.types.is_struct(kind):
        return "struct"
    if pa.types.is_null(kind):
        return "null"
    return "string_encoded"


def msgpack_body(result: QueryResult, max_bytes: int | None = None) -> SizedBody:
    """The document in pieces (its head, one piece per column, its tail), sized first.

    Refused (413) as it is built once the columns pass ``max_bytes``.
    """
    started = time.perf_counter()
    table = _plain_decimals(result.table)
    packer = msgpack.Packer(use_bin_type=True)
    head = bytearray(packer.pack_map_header(7))
    head += packer.pack("success") + packer.pack(True)
    head += packer.pack("columns") + packer.pack(table.column_names)
    head += packer.pack("types") + packer.pack([wire_type(field.type) for field in table.schema])
    head += packer.pack("data") + packer.pack_array_header(table.num_columns)
    pieces: list[bytes] = [bytes(head)]
    total = 0
    for column in table.columns:
        piece = packer.pack_array_header(len(column)) + b"".join(
            _column_values(chunk, packer) for chunk in column.chunks
        )
        total += len(piece)
        if max_bytes is not None and total > max_bytes:
            raise ResultTooLarge(max_bytes)
        pieces.append(piece)
    elapsed_ms = result.execution_time_ms + (time.perf_counter() - started) * 1000
    tail = packer.pack("row_count") + packer.pack(table.num_rows)
    tail += packer.pack("execution_time_ms") + packer.pack(max(0, int(elapsed_ms)))
    tail += packer.pack("timestamp") + packer.pack(datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    pieces.append(tail)
    return SizedBody(sum(len(piece) for piece in pieces), iter(pieces))


def to_msgpack(result: QueryResult, max_bytes: int | None = None) -> bytes:
    """The whole document as one bytes object."""
    return b"".join(msgpack_body(result, max_bytes).pieces)


def error_document(message: str, execution_time_ms: float = 0.0) -> bytes:
    """Arc's error answer on the MessagePack route, in MessagePack."""
    return msgpack.packb(  # type: ignore[no-any-return]
        {
            "success": False,
            "error": message,
            "execution_time_ms": max(0, int(execution_time_ms)),
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )


def _column_values(values: pa.Array, packer: msgpack.Packer) -> bytes:
    """The values of one chunk, back to back (without the array's header)."""
    kind = values.type
    if len(values) == 0:
        return b""
    if pa.types.is_dictionary(kind):
        return _column_values(_cast(values, kind.value_type), packer)
    if pa.types.is_null(kind):
        return _NIL * len(values)
    if pa.types.is_decimal(kind):
        return _column_values(_decimal(values), packer)
    if pa.types.is_boolean(kind):
        return _with_nils(values, _booleans(values), 1)
    if pa.types.is_integer(kind):
        unsigned = pa.types.is_unsigned_integer(kind)
        return _fixed(values, pa.uint64() if unsigned else pa.int64(), _UNSIGNED if unsigned else _SIGNED)
    if kind == pa.float64():
        return _fixed(values, pa.float64(), _FLOAT64)
    if kind == pa.float32():
        return _fixed(values, pa.float32(), _FLOAT32)
    if pa.types.is_timestamp(kind):
        counts = _cast(_cast(values, pa.timestamp(kind.unit)), pa.int64())
        return _timestamps(counts, _PER_SECOND[kind.unit])
    if pa.types.is_date32(kind):
        days = _cast(_cast(values, pa.int32()), pa.int64())
        return _timestamps(_call("multiply", days, pa.scalar(86_400, pa.int64())), 1)
    return _packed_items(packer, values.to_pylist() if _packs_as_is(kind) else _as_text(values))


def _packed_items(packer: msgpack.Packer, items: list[Any]) -> bytes:
    """The items packed in one call (the packer's loop is C), without the array header it adds."""
    packed: bytes = packer.pack(items)
    return packed[len(packer.pack_array_header(len(items))) :]


def _packs_as_is(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_binary_view(kind)
    )


def _plain_decimals(table: pa.Table) -> pa.Table:
    """Decimal columns as ``int64`` (scale 0, every value in range) or ``float64`` (as JSON writes
    them): DuckDB's sums of BIGINT are HUGEINT, a ``decimal128(38, 0)`` whose values may not fit."""
    for index, field in enumerate(table.schema):
        if not pa.types.is_decimal(field.type):
            continue
        column = table.column(index)
        try:
            plain = pa.chunked_array([_decimal(chunk) for chunk in column.chunks], _decimal_type(field.type))
        except pa.ArrowInvalid:  # an integer past int64's range
            plain = pa.chunked_array(
                [_call("cast", chunk, options=_compute.CastOptions.unsafe(pa.float64())) for chunk in column.chunks],
                pa.float64(),
            )
        table = table.set_column(index, field.with_type(plain.type), plain)
    return table


def _decimal_type(kind: pa.DataType) -> pa.DataType:
    return pa.int64() if kind.scale == 0 else pa.float64()


def _decimal(values: pa.Array) -> pa.Array:
    if values.type.scale == 0:
        return _cast(values, pa.int64())
    return _call("cast", values, options=_compute.CastOptions.unsafe(pa.float64()))


def _as_text(values: pa.Array) -> list[str | None]:
    """Values MessagePack has no form for, as text: ISO for times, JSON for nested values, str() else."""
    from arcs.query.results import _fragment, _python_values

    rendered: list[str | None] = []
    for value in _python_values(values):
        if value is None or isinstance(value, str):
            rendered.append(value)
        else:
            rendered.append(_fragment(value))
    return rendered


def _big_endian(values: pa.Array, code: str, width: int) -> bytes:
    """A fixed-width array's values as big-endian bytes (nulls as whatever their slots hold)."""
    buffer = values.buffers()[1]
    data = memoryview(buffer)[values.offset * width : (values.offset + len(values)) * width]
    if sys.byteorder == "big":
        return bytes(data)
    swapped = array.array(code)
    swapped.frombytes(data)
    swapped.byteswap()
    return swapped.tobytes()


def _interleave(count: int, width: int, parts: list[tuple[bytes, int]]) -> bytes:
    """``count`` values of ``width`` bytes, each made of ``parts``: (bytes of every value's part, its size)."""
    out = bytearray(width * count)
    at = 0
    for part, size in parts:
        for byte in range(size):
            out[at + byte :: width] = part[byte::size]
        at += size
    return bytes(out)


def _fixed(values: pa.Array, kind: pa.DataType, form: tuple[int, str, int]) -> bytes:
    marker, code, width = form
    values = _cast(values, kind)
    count = len(values)
    encoded = _interleave(count, 1 + width, [(bytes([marker]) * count, 1), (_big_endian(values, code, width), width)])
    return _with_nils(values, encoded, 1 + width)


def _booleans(values: pa.Array) -> bytes:
    as_bytes = _cast(_call("coalesce", values, pa.scalar(False)), pa.uint8())
    return _big_endian(as_bytes, "B", 1).translate(_BOOLEAN_MARKERS)


_BOOLEAN_MARKERS = bytes(0xC3 if code else 0xC2 for code in range(256))


def _timestamps(counts: pa.Array, per_second: int) -> bytes:
    """int64 counts of ``1 / per_second`` since the epoch as ``timestamp 96`` extensions."""
    count = len(counts)
    filled = _call("coalesce", counts, pa.scalar(0, pa.int64()))
    per = pa.scalar(per_second, pa.int64())
    seconds = _call("divide", filled, per)  # towards zero
    rest = _call("subtract", filled, _call("multiply", seconds, per))
    negative = _call("less", rest, pa.scalar(0, pa.int64()))
    seconds = _call("if_else", negative, _call("subtract", seconds, pa.scalar(1, pa.int64())), seconds)
    rest = _call("if_else", negative, _call("add", rest, per), rest)
    nanos = _cast(_call("multiply", rest, pa.scalar(1_000_000_000 // per_second, pa.int64())), pa.uint32())
    encoded = _interleave(
        count,
        15,
        [
            (_TIMESTAMP96 * count, 3),
            (_big_endian(nanos, "I", 4), 4),
            (_big_endian(_cast(seconds, pa.int64()), "q", 8), 8),
        ],
    )
    return _with_nils(counts, encoded, 15)


def _with_nils(values: pa.Array, encoded: bytes, width: int) -> bytes:
    """``encoded`` (``width`` bytes per value) with a nil in place of each null value."""
    if not values.null_count:
        return encoded
    valid = _call("is_valid", values)
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(values), [None, pa.py_buffer(encoded)])
    masked = _call("if_else", valid, _cast(fixed, pa.large_binary()), pa.scalar(_NIL, pa.large_binary()))
    offsets = memoryview(masked.buffers()[1]).cast("q")
    start, end = offsets[masked.offset], offsets[masked.offset + len(masked)]
    return bytes(memoryview(masked.buffers()[2])[start:end])
