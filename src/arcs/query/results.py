"""Query results on the wire: the JSON document and the Arrow IPC stream.

JSON is built column-wise, never value by value in Python: each column becomes the JSON text of
its values (numbers cast to text, strings escaped only where a quote, backslash or control
character occurs), then the rows are interleaved with their brackets, commas and quotes. With the
C library of ``arcs.native`` (built by ``make setup`` and into the Lambda layer), it formats
integers and timestamps and writes the rows straight into the returned bytes; without it, Arrow's
casts format them and one ``binary_join_element_wise`` per batch of rows writes every row as
``[a,"b",...],`` whose data buffers are spliced into the document. Both give the same bytes.

The JSON document (Arc's): ``{"success": true, "columns": [...], "data": [[...], ...],
"row_count": N, "execution_time_ms": F, "timestamp": "RFC3339"}``; timestamps are RFC 3339 UTC
strings with the column's precision (``2023-11-14T22:13:20.000000Z`` for microseconds), NaN and
infinities are ``null``, dates ISO strings, decimals numbers, binary lowercase hex, nested values
JSON; non-ASCII text is sent as UTF-8. Rare types (decimals, times, binary, durations, intervals,
nested values, out-of-range dates and timestamps) are rendered value by value in Python.
"""

from __future__ import annotations

import bisect
import ctypes
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

# The kernels themselves: ``pyarrow.compute`` would build a Python wrapper for each of ~300
# functions on import, ~50 ms of a query function's cold start (and ``Array.cast`` imports it).
from pyarrow import _compute

from arcs.errors import ResultTooLarge
from arcs.native import TextColumn, library

if TYPE_CHECKING:
    from arcs.query.service import QueryResult

#: Rows rendered per step: small enough for the caches and for 32-bit offsets, large enough to amortize.
_BATCH_ROWS = 1 << 16
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
#: Arrow's cast writes ``YYYY-MM-DD HH:MM:SS[.fff...]`` with a 4-digit year from year 0 to 9999.
_FIRST_SECOND = -62_167_219_200  # 0000-01-01T00:00:00Z
_END_SECOND = 253_402_300_800  # 10000-01-01T00:00:00Z
_FRACTION_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
#: ``YYYY-MM-DD HH:MM:SS``, then a dot and the fraction's digits.
_TIMESTAMP_WIDTH = {unit: 19 + (digits and digits + 1) for unit, digits in _FRACTION_DIGITS.items()}
_INT64_WIDTH = 20  # "-9223372036854775808"
#: Control characters and their JSON escapes (backslashes and quotes are escaped before them).
_CONTROL_ESCAPES = {code: f"\\u{code:04x}" for code in range(32)} | {
    8: "\\b",
    9: "\\t",
    10: "\\n",
    12: "\\f",
    13: "\\r",
}
#: Bytes that need escaping in a JSON string map to 0, all others to 1.
_SPECIAL_BYTES = bytes(0 if code < 0x20 or code in b'"\\' else 1 for code in range(256))
_NOT_CONTROL = bytes(range(0x20, 256))
_EMPTY = pa.scalar("", pa.large_string())
_ROW_END = "],["
_NULL_AS_TEXT = _compute.JoinOptions(null_handling="replace", null_replacement="null")
_EXPONENT = _compute.MatchSubstringOptions("e")
_CONSTANTS: dict[str, pa.Array] = {}


class JsonText(NamedTuple):
    """A column's values as JSON text (a large string array, NULL for null) and what goes around each."""

    text: pa.Array
    before: str
    after: str
    escape: bool = False  # raw strings that arcs.native escapes as it writes them


# A bytes object made empty and filled in place before anyone else sees it (as C extensions do).
_uninitialized_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_uninitialized_bytes.restype = ctypes.py_object
_uninitialized_bytes.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
_bytes_address = ctypes.pythonapi.PyBytes_AsString
_bytes_address.restype = ctypes.c_void_p
_bytes_address.argtypes = [ctypes.py_object]


@dataclass(frozen=True)
class SizedBody:
    """A body known by its size before any of it is made, then made piece by piece."""

    size: int
    pieces: Iterator[bytes]


def to_json_document(result: QueryResult, max_bytes: int | None = None) -> bytes:
    """The query result as the UTF-8 JSON document described above.

    Its text can be a few times larger than the Arrow result (numbers and times as text, escapes):
    above ``max_bytes`` of rows it is refused as it is built, before the document is.
    """
    table = result.table
    head, tail = _document_ends(result)
    native = library()
    if native is not None and table.num_rows and table.num_columns:
        return _native_document(native, table, head, tail, max_bytes)
    return b"".join([head, *_json_rows(table, max_bytes), tail])


def json_document_body(result: QueryResult, max_bytes: int | None = None) -> SizedBody:
    """The same document as :func:`to_json_document`, byte for byte, sized first and then made one
    batch of rows at a time: it never exists whole in memory."""
    table = result.table
    head, tail = _document_ends(result)
    native = library()
    if native is not None and table.num_rows and table.num_columns:
        batches, total = _native_batches(native, table, max_bytes)
        return SizedBody(len(head) + total + len(tail), _native_pieces(native, batches, head, tail))
    rows = _json_rows(table, max_bytes)
    size = len(head) + sum(len(piece) for piece in rows) + len(tail)
    return SizedBody(size, iter([head, *(bytes(piece) for piece in rows), tail]))


def _document_ends(result: QueryResult) -> tuple[bytes, bytes]:
    """What comes before the rows and after them."""
    table = result.table
    head = b'{"success":true,"columns":' + json.dumps(table.column_names, separators=(",", ":")).encode() + b',"data":['
    tail = (
        f'],"row_count":{table.num_rows},'
        f'"execution_time_ms":{json.dumps(round(result.execution_time_ms, 3))},'
        f'"timestamp":"{datetime.now(UTC).isoformat().replace("+00:00", "Z")}"}}'
    ).encode()
    return head, tail


_NativeBatch = tuple["ctypes.Array[TextColumn]", list[JsonText], int, int]


def _native_batches(native: ctypes.CDLL, table: pa.Table, max_bytes: int | None) -> tuple[list[_NativeBatch], int]:
    """Each batch's columns as JSON text, with the size of its rows; refused past ``max_bytes``."""
    batches: list[_NativeBatch] = []
    total = 0
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        if not batch.num_rows:
            continue
        texts = [_json_text(column, native) for column in batch.columns]
        columns = (TextColumn * len(texts))(*(_text_column(*text) for text in texts))
        size = native.arcs_json_rows_size(columns, len(texts), batch.num_rows, bool(batches))
        total += size
        if max_bytes is not None and total > max_bytes:
            raise ResultTooLarge(max_bytes)
        batches.append((columns, texts, batch.num_rows, size))  # the texts own the memory the columns point at
    return batches, total


def _write_rows(native: ctypes.CDLL, batch: _NativeBatch, first: bool, at: int) -> None:
    columns, _texts, rows, size = batch
    if native.arcs_json_rows_write(columns, len(columns), rows, not first, at, size) != size:
        raise RuntimeError("the JSON rows' size changed between measuring and writing them")


def _native_document(native: ctypes.CDLL, table: pa.Table, head: bytes, tail: bytes, max_bytes: int | None) -> bytes:
    """The document with its rows interleaved by ``arcs.native``, written once into the bytes returned.

    Each batch's columns become their JSON text as on the Arrow path; the C loop then copies every
    value, with its quotes, commas and brackets, straight into the document.
    """
    batches, total = _native_batches(native, table, max_bytes)
    document = _uninitialized_bytes(None, len(head) + total + len(tail))
    at = _bytes_address(document)
    ctypes.memmove(at, head, len(head))
    at += len(head)
    for index, batch in enumerate(batches):
        _write_rows(native, batch, index == 0, at)
        at += batch[3]
    ctypes.memmove(at, tail, len(tail))
    return document  # type: ignore[no-any-return]


def _native_pieces(native: ctypes.CDLL, batches: list[_NativeBatch], head: bytes, tail: bytes) -> Iterator[bytes]:
    """The document as :func:`_native_document` writes it, one batch's rows per piece; each batch's
    text is let go once written."""
    yield head
    for index in range(len(batches)):
        batch = batches[index]
        piece = _uninitialized_bytes(None, batch[3])
        _write_rows(native, batch, index == 0, _bytes_address(piece))
        batches[index] = (batch[0], [], 0, 0)  # the columns point into freed texts: never read again
        yield piece
    yield tail


def _text_column(text: pa.Array, before: str, after: str, escape: bool) -> TextColumn:
    if text.type != pa.large_string():  # the C side reads 64-bit offsets
        raise TypeError(f"JSON text must be a large string array, not {text.type}")
    validity, offsets, data = text.buffers()
    opening, closing = before.encode(), after.encode()
    return TextColumn(
        offsets=offsets.address + 8 * text.offset,
        data=data.address if data is not None else None,
        validity=validity.address if text.null_count else None,
        validity_offset=text.offset,
        before=opening,
        before_length=len(opening),
        after=closing,
        after_length=len(closing),
        escape=escape,
    )


def utc_zoned(table: pa.Table) -> pa.Table:
    """Timestamps without a zone as UTC instants, for an Arrow answer: DuckDB keeps ``time`` (and
    what is made of it) as the UTC wall clock in a ``TIMESTAMP``, and a client reading the stream
    should get the instants, as JSON's ``Z`` and MessagePack's timestamps say. Only the schema
    changes: Arrow's timestamps count from the epoch in UTC whatever their zone."""
    fields = list(table.schema)
    zoned = [
        field.with_type(pa.timestamp(field.type.unit, tz="UTC"))
        if pa.types.is_timestamp(field.type) and field.type.tz is None
        else field
        for field in fields
    ]
    if zoned == fields:
        return table
    return table.cast(pa.schema(zoned, metadata=table.schema.metadata))


def arrow_stream_body(table: pa.Table) -> SizedBody:
    """The same bytes as :func:`to_arrow_stream`, sized first and then written one record batch at
    a time."""
    counter = pa.MockOutputStream()
    with pa.ipc.new_stream(counter, table.schema) as writer:
        writer.write_table(table)
    return SizedBody(counter.size(), _arrow_pieces(table))


class _Pieces:
    """A file Arrow writes into, emptied by whoever reads the pieces."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> int:
        self.pieces.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> Iterator[bytes]:
        taken, self.pieces = self.pieces, []
        return iter(taken)


def _arrow_pieces(table: pa.Table) -> Iterator[bytes]:
    sink = _Pieces()
    writer = pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), table.schema)
    yield from sink.take()
    for batch in table.to_batches():
        writer.write_batch(batch)
        yield from sink.take()
    writer.close()
    yield from sink.take()


def to_arrow_stream(table: pa.Table) -> bytes:
    """The table as an Arrow IPC stream: sized first (nothing is copied), then written once."""
    counter = pa.MockOutputStream()
    with pa.ipc.new_stream(counter, table.schema) as writer:
        writer.write_table(table)
    buffer = pa.allocate_buffer(counter.size())
    with pa.ipc.new_stream(pa.FixedSizeBufferWriter(buffer), table.schema) as writer:
        writer.write_table(table)
    return buffer.to_pybytes()  # type: ignore[no-any-return]


def _json_rows(table: pa.Table, max_bytes: int | None = None) -> list[bytes | memoryview]:
    """The rows as JSON arrays, comma-separated, in pieces (none for no rows, and for no columns as before).

    Each batch's text is its rows, each followed by ``],[``, back to back: the batches follow one
    another as they are, and only the last row's ``],[`` gives way to the closing ``]``.
    """
    if table.num_rows == 0 or table.num_columns == 0:
        return []
    pieces: list[bytes | memoryview] = [b"["]
    total = 0
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        if batch.num_rows:
            pieces.append(_text(_json_batch(batch)))
            total += len(pieces[-1])
            if max_bytes is not None and total > max_bytes:
                raise ResultTooLarge(max_bytes)
    pieces[-1] = pieces[-1][: -len(_ROW_END)]
    return [*pieces, b"]"]


def _json_batch(batch: pa.RecordBatch) -> pa.Array:
    """The batch's rows, each as ``v1,v2,...],[``: one value per row, in one data buffer.

    One join writes every row; the commas, the quotes around strings and timestamps and the
    ``],[`` after each row are arguments of that join too (constant arrays: faster than scalars
    there). Its cost grows with the number of arguments more than with their bytes.
    """
    rows = batch.num_rows
    arguments: list[pa.Array] = []
    literal = ""
    for column in batch.columns:
        text, opener, closer, _ = _json_text(column)
        if text.null_count and (opener or closer):
            text = _call("binary_join_element_wise", _constant(opener, rows), text, _constant(closer, rows), _EMPTY)
            opener = closer = ""
        if literal + opener:
            arguments.append(_constant(literal + opener, rows))
        arguments.append(text)
        literal = closer + ","
    arguments.append(_constant(literal[:-1] + _ROW_END, rows))
    return _call("binary_join_element_wise", *arguments, _EMPTY, options=_NULL_AS_TEXT)


def _constant(text: str, rows: int) -> pa.Array:
    """``text`` ``rows`` times (made once per text for a whole batch; shorter ones are slices of it)."""
    full = _CONSTANTS.get(text)
    if full is None:
        full = _CONSTANTS[text] = pa.repeat(_large(text), _BATCH_ROWS)
    return full if rows == _BATCH_ROWS else full.slice(0, rows)


def _call(name: str, *arguments: Any, options: _compute.FunctionOptions | None = None) -> Any:
    return _compute.call_function(name, list(arguments), options)


def _cast(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return _call("cast", values, options=_compute.CastOptions.safe(kind))


def _large(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _text(strings: pa.Array) -> memoryview:
    """The concatenated values of a large string array, without copying them."""
    offsets = memoryview(strings.buffers()[1]).cast("q")
    start, end = offsets[strings.offset], offsets[strings.offset + len(strings)]
    data = strings.buffers()[2]
    return memoryview(data)[start:end] if data is not None else memoryview(b"")


def _json_text(column: pa.Array, native: ctypes.CDLL | None = None) -> JsonText:
    """The column's values as JSON text (a large string array, NULL for null), and what goes around each.

    With ``native``, integers and timestamps are formatted by its loops instead of Arrow's casts.
    """
    kind = column.type
    if pa.types.is_dictionary(kind):
        return _json_text(_cast(column, kind.value_type), native)
    if pa.types.is_null(kind):
        return JsonText(pa.nulls(len(column), pa.large_string()), "", "")
    if native is not None and pa.types.is_integer(kind) and kind != pa.uint64():  # every other fits an int64
        return JsonText(_native_integers(native, _cast(column, pa.int64())), "", "")
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        return JsonText(_cast(column, pa.large_string()), "", "")
    if pa.types.is_floating(kind):
        # A float32 is shown as the double it is, as before.
        return JsonText(_floats(_cast(column, pa.float64())), "", "")
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        if native is not None:
            return JsonText(_cast(column, pa.large_string()), '"', '"', escape=True)
        return JsonText(_escaped(_cast(column, pa.large_string())), '"', '"')
    if pa.types.is_timestamp(kind):
        return _timestamps(column, native)
    if pa.types.is_date32(kind):
        # Python's dates end at 0001 and 9999 (the former rendering failed beyond): Arrow's ISO text for all.
        return JsonText(_cast(column, pa.large_string()), '"', '"')
    fragments = [None if v is None else _fragment(v) for v in _python_values(column)]
    return JsonText(pa.array(fragments, pa.large_string()), "", "")


def _floats(values: pa.Array) -> pa.Array:
    """Shortest round-trip text; integral values keep a fraction ("3.0"), NaN and infinities are NULL."""
    text = _cast(values, pa.large_string())
    integral = _call("equal", _call("floor", values), values)
    if _call("any", integral).as_py():
        bare = _call(
            "and", integral, _call("invert", _call("match_substring", text, options=_EXPONENT))
        )  # "3", not "1e+16"
        text = _call("if_else", bare, _call("binary_join_element_wise", text, _large(".0"), _EMPTY), text)
    finite = _call("is_finite", values)
    if _call("all", finite).as_py():
        return text
    # Only the validity changes: the bitmap of "finite and not null" over the same offsets and data.
    shown = _call("and_kleene", finite, _call("is_valid", values))
    if shown.offset or text.offset or shown.null_count:
        return _call("if_else", shown, text, pa.scalar(None, pa.large_string()))
    return pa.Array.from_buffers(pa.large_string(), len(text), [shown.buffers()[1], *text.buffers()[1:]])


def _escaped(strings: pa.Array) -> pa.Array:
    """JSON string contents: quotes, backslashes and control characters escaped, the rest as is (UTF-8).

    The values' bytes are checked at once (a vectorized minimum, two ``memchr``). When some need
    escaping, the rows holding them are found in the bytes and only those rows are rewritten, unless
    they are many: then the whole column is, by one vectorized replacement per character present.
    """
    raw = _text(strings)
    if not raw:
        return strings
    lowest = _call("min", pa.Array.from_buffers(pa.uint8(), len(raw), [None, pa.py_buffer(raw)])).as_py()
    data = raw.tobytes()
    if lowest >= 0x20 and b'"' not in data and b"\\" not in data:
        return strings
    flags = data.translate(_SPECIAL_BYTES)  # 0 where a byte needs escaping
    offsets = memoryview(strings.buffers()[1]).cast("q")[strings.offset : strings.offset + len(strings) + 1]
    base, dirty, budget = offsets[0], bytearray(len(strings)), len(strings) // 8
    at = flags.find(0)
    while at >= 0:
        if not budget:  # many rows: rewriting the whole column is cheaper
            return _escape_all(strings, data)
        row = bisect.bisect_right(offsets, base + at) - 1
        dirty[row], budget = 1, budget - 1
        at = flags.find(0, offsets[row + 1] - base)
    mask = _cast(pa.Array.from_buffers(pa.uint8(), len(strings), [None, pa.py_buffer(dirty)]), pa.bool_())
    subset = _call("filter", strings, mask)
    return _call("replace_with_mask", strings, mask, _escape_all(subset, _text(subset).tobytes()))


def _escape_all(strings: pa.Array, data: bytes) -> pa.Array:
    """Every value escaped; ``data`` (the values' bytes) tells which characters occur."""
    if b"\\" in data:
        strings = _replace(strings, "\\", "\\\\")
    if b'"' in data:
        strings = _replace(strings, '"', '\\"')
    for code in sorted(set(data.translate(None, _NOT_CONTROL))):
        strings = _replace(strings, chr(code), _CONTROL_ESCAPES[code])
    return strings


def _replace(strings: pa.Array, pattern: str, replacement: str, most: int | None = None) -> pa.Array:
    return _call(
        "replace_substring",
        strings,
        options=_compute.ReplaceSubstringOptions(pattern, replacement, max_replacements=most),
    )


def _timestamps(column: pa.Array, native: ctypes.CDLL | None) -> JsonText:
    """RFC 3339 in UTC with the unit's fraction: a zone-less timestamp is UTC, a zoned one is shown in UTC."""
    unit = column.type.unit
    column = _cast(column, pa.timestamp(unit))  # the UTC wall clock; no copy
    counts = _cast(column, pa.int64())  # no copy either
    low, high = _bounds(counts)
    per_second = _PER_SECOND[unit]
    if not (_FIRST_SECOND * per_second <= low and high < _END_SECOND * per_second):
        options = _compute.StrftimeOptions("%Y-%m-%dT%H:%M:%SZ")
        text = _call("strftime", _cast(column, pa.timestamp(unit, tz="UTC")), options=options)
        return JsonText(_cast(text, pa.large_string()), '"', '"')
    if native is not None:
        return JsonText(_native_timestamps(native, counts, _FRACTION_DIGITS[unit]), '"', 'Z"')
    text = _cast(column, pa.large_string())  # "YYYY-MM-DD HH:MM:SS.ffffff"
    width = _TIMESTAMP_WIDTH[unit]
    raw = _text(text)
    starts_at_zero = memoryview(text.buffers()[1]).cast("q")[0] == 0
    if text.null_count == 0 and text.offset == 0 and starts_at_zero and raw.nbytes == width * len(text):
        # Every value is as wide as the format (none is shorter), back to back from the buffer's
        # start: the T goes in with one strided write, the offsets stay.
        data = bytearray(raw)
        data[10::width] = b"T" * len(text)
        text = pa.LargeStringArray.from_buffers(len(text), text.buffers()[1], pa.py_buffer(data))
    else:
        text = _replace(text, " ", "T", 1)
    return JsonText(text, '"', 'Z"')


def _native_integers(native: ctypes.CDLL, values: pa.Array) -> pa.Array:
    """An int64 array's decimal text, by ``arcs.native``."""
    count = len(values)
    offsets, data = pa.allocate_buffer(8 * (count + 1)), pa.allocate_buffer(_INT64_WIDTH * count)
    native.arcs_format_int64(_address(values), count, offsets.address, data.address)
    return _with_validity_of(values, offsets, data)


def _native_timestamps(native: ctypes.CDLL, counts: pa.Array, fraction_digits: int) -> pa.Array:
    """RFC 3339 text without the zone of int64 counts since the epoch (years 0 to 9999), by ``arcs.native``."""
    count = len(counts)
    offsets = pa.allocate_buffer(8 * (count + 1))
    data = pa.allocate_buffer(native.arcs_timestamp_width(fraction_digits) * count)
    if native.arcs_format_timestamps(_address(counts), count, fraction_digits, offsets.address, data.address) < 0:
        raise ValueError(f"no timestamp format with {fraction_digits} fraction digits")
    return _with_validity_of(counts, offsets, data)


def _address(values: pa.Array) -> int:
    """Where the first value of a fixed-width array is."""
    return values.buffers()[1].address + values.offset * values.type.bit_width // 8  # type: ignore[no-any-return]


def _with_validity_of(values: pa.Array, offsets: pa.Buffer, data: pa.Buffer) -> pa.Array:
    """Text of ``values``, one per value, null where they are (a fresh bitmap: the text starts at offset 0)."""
    validity = _call("is_valid", values).buffers()[1] if values.null_count else None
    return pa.LargeStringArray.from_buffers(len(values), offsets, data, validity, values.null_count)


def _bounds(values: pa.Array) -> tuple[int, int]:
    extremes = _call("min_max", values)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    return (0, 0) if low is None else (low, high)


def _python_values(column: pa.Array) -> list[Any]:
    """Rare types, value by value: dates and times ISO, decimals as floats, binary as hex, the rest JSON."""
    kind = column.type
    values: list[Any] = column.to_pylist()
    if pa.types.is_date(kind) or pa.types.is_time(kind):
        return [None if v is None else v.isoformat() for v in values]
    if pa.types.is_decimal(kind):
        return [None if v is None else float(v) for v in values]
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return [None if v is None else v.hex() for v in values]
    if pa.types.is_binary_view(kind):
        return [None if v is None else v.hex() for v in values]
    return values  # nested, durations, intervals...: JSON, with str() for what JSON has no form for


def _fragment(value: Any) -> str:
    try:
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere inside
        return json.dumps(_finite(value), default=str, ensure_ascii=False, separators=(",", ":"))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
