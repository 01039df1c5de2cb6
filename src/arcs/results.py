"""Query results on the wire: the JSON document of API.md and the Arrow IPC stream.

JSON is built column-wise with Arrow's vectorized kernels, never value by value in Python: each
column becomes the JSON text of its values (numbers cast to text, strings escaped only where a
quote, backslash or control character occurs), then one ``binary_join_element_wise`` per batch
of rows writes every row as ``[a,"b",...],`` with the brackets, commas and quotes as literals,
and the rows' data buffers are spliced into the document as they are.

The JSON contract (API.md): ``{"success": true, "columns": [...], "data": [[...], ...],
"row_count": N, "execution_time_ms": F, "timestamp": "RFC3339"}``; timestamps are RFC 3339 UTC
strings with the column's precision (``2023-11-14T22:13:20.000000Z`` for microseconds), NaN and
infinities are ``null``, dates ISO strings, decimals numbers, binary lowercase hex, nested values
JSON; non-ASCII text is sent as UTF-8. Rare types (decimals, times, binary, durations, intervals,
nested values, out-of-range dates and timestamps) are rendered value by value in Python.
"""

from __future__ import annotations

import bisect
import json
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from arcs.query import QueryResult

#: Rows rendered per step: small enough for the caches and for 32-bit offsets, large enough to amortize.
_BATCH_ROWS = 1 << 16
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
#: Arrow's cast writes ``YYYY-MM-DD HH:MM:SS[.fff...]`` with a 4-digit year from year 0 to 9999.
_FIRST_SECOND = -62_167_219_200  # 0000-01-01T00:00:00Z
_END_SECOND = 253_402_300_800  # 10000-01-01T00:00:00Z
_TIMESTAMP_WIDTH = {"s": 19, "ms": 23, "us": 26, "ns": 29}
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
_ROW_SEPARATOR = pa.scalar("],[", pa.large_string())
_CONSTANTS: dict[str, pa.Array] = {}


def to_json_document(result: QueryResult) -> bytes:
    """The query result as the UTF-8 JSON document of API.md."""
    table = result.table
    head = b'{"success":true,"columns":' + json.dumps(table.column_names, separators=(",", ":")).encode() + b',"data":['
    tail = (
        f'],"row_count":{table.num_rows},'
        f'"execution_time_ms":{json.dumps(round(result.execution_time_ms, 3))},'
        f'"timestamp":"{datetime.now(UTC).isoformat().replace("+00:00", "Z")}"}}'
    ).encode()
    return b"".join([head, *_json_rows(table), tail])


def to_arrow_stream(table: pa.Table) -> bytes:
    """The table as an Arrow IPC stream: sized first (nothing is copied), then written once."""
    counter = pa.MockOutputStream()
    with pa.ipc.new_stream(counter, table.schema) as writer:
        writer.write_table(table)
    buffer = pa.allocate_buffer(counter.size())
    with pa.ipc.new_stream(pa.FixedSizeBufferWriter(buffer), table.schema) as writer:
        writer.write_table(table)
    return buffer.to_pybytes()  # type: ignore[no-any-return]


def _json_rows(table: pa.Table) -> list[bytes | memoryview]:
    """The rows as JSON arrays, comma-separated, in pieces (none for no rows, and for no columns as before)."""
    if table.num_rows == 0 or table.num_columns == 0:
        return []
    pieces: list[bytes | memoryview] = []
    for batch in table.to_batches(max_chunksize=_BATCH_ROWS):
        if batch.num_rows:
            pieces += [b"],[" if pieces else b"[", _text(_json_batch(batch))]
    return [*pieces, b"]"]


def _json_batch(batch: pa.RecordBatch) -> pa.Array:
    """The batch's rows, each as ``v1,v2,...`` between ``],[``, in a single value.

    One join per batch writes every row; the commas and the quotes around strings and
    timestamps are arguments of that join too (constant arrays: faster than scalars there).
    """
    rows = batch.num_rows
    arguments: list[pa.Array] = []
    literal = ""
    for column in batch.columns:
        text, opener, closer = _json_text(column)
        if text.null_count and (opener or closer):
            parts = [_constant(opener, rows), text, _constant(closer, rows)]
            text, opener, closer = pc.binary_join_element_wise(*parts, _EMPTY), "", ""
        if literal + opener:
            arguments.append(_constant(literal + opener, rows))
        arguments.append(text)
        literal = closer + ","
    if literal[:-1]:
        arguments.append(_constant(literal[:-1], rows))
    lines = pc.binary_join_element_wise(*arguments, _EMPTY, null_handling="replace", null_replacement="null")
    whole = pa.LargeListArray.from_arrays(pa.array([0, rows], pa.int64()), lines)
    return pc.binary_join(whole, _ROW_SEPARATOR)


def _constant(text: str, rows: int) -> pa.Array:
    """``text`` ``rows`` times (made once per text for a whole batch; shorter ones are slices of it)."""
    full = _CONSTANTS.get(text)
    if full is None:
        full = _CONSTANTS[text] = pa.nulls(_BATCH_ROWS, pa.large_string()).fill_null(_large(text))
    return full if rows == _BATCH_ROWS else full.slice(0, rows)


def _large(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _text(strings: pa.Array) -> memoryview:
    """The concatenated values of a large string array, without copying them."""
    offsets = memoryview(strings.buffers()[1]).cast("q")
    start, end = offsets[strings.offset], offsets[strings.offset + len(strings)]
    data = strings.buffers()[2]
    return memoryview(data)[start:end] if data is not None else memoryview(b"")


def _json_text(column: pa.Array) -> tuple[pa.Array, str, str]:
    """The column's values as JSON text (a large string array, NULL for null), and what goes around each."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        return _json_text(column.cast(kind.value_type))
    if pa.types.is_null(kind):
        return pa.nulls(len(column), pa.large_string()), "", ""
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        return column.cast(pa.large_string()), "", ""
    if pa.types.is_floating(kind):
        return _floats(column.cast(pa.float64())), "", ""  # a float32 is shown as the double it is, as before
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return _escaped(column.cast(pa.large_string())), '"', '"'
    if pa.types.is_timestamp(kind):
        return _timestamps(column)
    if pa.types.is_date32(kind):
        # Python's dates end at 0001 and 9999 (the former rendering failed beyond): Arrow's ISO text for all.
        return column.cast(pa.large_string()), '"', '"'
    fragments = [None if v is None else _fragment(v) for v in _python_values(column)]
    return pa.array(fragments, pa.large_string()), "", ""


def _floats(values: pa.Array) -> pa.Array:
    """Shortest round-trip text; integral values keep a fraction ("3.0"), NaN and infinities are NULL."""
    text = values.cast(pa.large_string())
    integral = pc.equal(pc.floor(values), values)
    if pc.any(integral).as_py():
        bare = pc.and_(integral, pc.invert(pc.match_substring(text, "e")))  # "3", not "1e+16"
        text = pc.if_else(bare, pc.binary_join_element_wise(text, _large(".0"), _EMPTY), text)
    finite = pc.is_finite(values)
    if not pc.all(finite).as_py():
        text = pc.if_else(finite, text, pa.scalar(None, pa.large_string()))
    return text


def _escaped(strings: pa.Array) -> pa.Array:
    """JSON string contents: quotes, backslashes and control characters escaped, the rest as is (UTF-8).

    The values' bytes are checked at once (a vectorized minimum, two ``memchr``). When some need
    escaping, the rows holding them are found in the bytes and only those rows are rewritten, unless
    they are many: then the whole column is, by one vectorized replacement per character present.
    """
    raw = _text(strings)
    if not raw:
        return strings
    lowest = pc.min(pa.Array.from_buffers(pa.uint8(), len(raw), [None, pa.py_buffer(raw)])).as_py()
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
    mask = pa.Array.from_buffers(pa.uint8(), len(strings), [None, pa.py_buffer(dirty)]).cast(pa.bool_())
    subset = strings.filter(mask)
    return pc.replace_with_mask(strings, mask, _escape_all(subset, _text(subset).tobytes()))


def _escape_all(strings: pa.Array, data: bytes) -> pa.Array:
    """Every value escaped; ``data`` (the values' bytes) tells which characters occur."""
    if b"\\" in data:
        strings = pc.replace_substring(strings, "\\", "\\\\")
    if b'"' in data:
        strings = pc.replace_substring(strings, '"', '\\"')
    for code in sorted(set(data.translate(None, _NOT_CONTROL))):
        strings = pc.replace_substring(strings, chr(code), _CONTROL_ESCAPES[code])
    return strings


def _timestamps(column: pa.Array) -> tuple[pa.Array, str, str]:
    """RFC 3339 in UTC with the unit's fraction: a zone-less timestamp is UTC, a zoned one is shown in UTC."""
    unit = column.type.unit
    column = column.cast(pa.timestamp(unit))  # the UTC wall clock; no copy
    low, high = _bounds(column.cast(pa.int64()))
    per_second = _PER_SECOND[unit]
    if not (_FIRST_SECOND * per_second <= low and high < _END_SECOND * per_second):
        text = pc.strftime(column.cast(pa.timestamp(unit, tz="UTC")), format="%Y-%m-%dT%H:%M:%SZ")
        return text.cast(pa.large_string()), '"', '"'
    text = column.cast(pa.large_string())  # "YYYY-MM-DD HH:MM:SS.ffffff"
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
        text = pc.replace_substring(text, " ", "T", max_replacements=1)
    return text, '"', 'Z"'


def _bounds(values: pa.Array) -> tuple[int, int]:
    extremes = pc.min_max(values)
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
