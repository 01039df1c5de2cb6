"""The columnar lane: MessagePack columnar bodies checked from a scan of their bytes, queued as sent,
and filled into tables many at a time by ingest.

Decoding a request into Arrow costs the edge far more than reading it: every array and table is a
handful of C++ and Python objects, made per request. A body in the common shape (the one
``msgpack_native`` reads) whose scan shows it valid needs none of them at the edge: the scan's
facts (kinds, lengths, integer bounds and order, printable strings) settle every rule
``build_rows`` applies, so the edge checks those, finds the shape among those its schema registry
took as they are, and queues the body itself. Ingest scans it again (it trusts nothing queued), then
fills all the bodies of one shape into one block: one table per shape and batch, not per request.

Anything the lane is unsure of it declines (``None``), and the request takes the general path,
which stores the same rows or words the error: the lane takes only bodies the general path would
store unchanged, and makes the same table of them (a property test checks both).
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from arcs.errors import ArcsError, BadRequest
from arcs.names import MAX_COLUMNS, TIME_COLUMN, check_measurement
from arcs.native import (
    MSGPACK_INT64,
    MSGPACK_NONDECREASING,
    MSGPACK_PRINTABLE_ASCII,
    MSGPACK_STRING,
    MsgpackColumn,
    MsgpackDocument,
    MsgpackSpan,
    library,
)
from arcs.write.batch import TIME_TYPE, ColumnarBody, MeasurementRows, WriteBatch, time_order
from arcs.write.decoders.columns import check_distinct, check_precision, one_unit_scale
from arcs.write.decoders.msgpack_format import decode_msgpack
from arcs.write.decoders.msgpack_native import ARROW_TYPES, column_slots, text
from arcs.write.parquet_encoding import DICTIONARY_FULL, DICTIONARY_SIZES, TagDictionary

_ALIGNMENT = 64  # Arrow's buffer alignment


@dataclass(frozen=True, slots=True)
class ScannedBody(ColumnarBody):
    """A body the lane takes, with what its scan found."""

    schema: pa.Schema  # of the table it makes: time (nanoseconds) first, then the others in body order
    names: tuple[str, ...]  # its columns in body order
    columns: ctypes.Array[MsgpackColumn]  # the scan's description of each, in body order
    scale: tuple[int, int]  # (multiply, divide) making its times nanoseconds
    time_range: tuple[int, int]  # its first and last time, in nanoseconds (they are in order)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a document's shape settles for every body of it (``_check_shape``)."""

    measurement: str
    tags: tuple[str, ...]
    names: tuple[str, ...]
    schema: pa.Schema
    item_precision: str | None
    time_at: int  # the time column's place in the body


def scan(body: bytes | pa.Buffer, precision: str | None) -> ScannedBody | None:
    """``body`` as the lane takes it, or None for the general path (so also without arcs.native).

    A queued body is a slice of its envelope (a ``pa.Buffer``), read where it lies.
    """
    native = library()
    if native is None or not isinstance(body, bytes | pa.Buffer):
        return None
    document = MsgpackDocument()
    slots = column_slots()
    at = _address(body)
    if native.arcs_msgpack_scan(at, len(body), ctypes.byref(document), slots, len(slots)):
        return None
    # Equal lengths and printable strings (so UTF-8 without control characters) for every column;
    # the general path checks and words anything else.
    if document.rows < 1 or not document.flags & MSGPACK_PRINTABLE_ASCII or document.column_count > MAX_COLUMNS:
        return None
    shape = _shape_of(native, body, at, document, slots)
    if shape is None:
        return None
    time = slots[shape.time_at]
    if not time.flags & MSGPACK_NONDECREASING:
        return None
    try:
        request_precision = check_precision(precision)  # checked even when the body has its own, as ever
    except ArcsError:
        return None
    precision = shape.item_precision or request_precision
    scale = one_unit_scale((time.minimum, time.maximum), precision)
    if scale is None:
        return None
    multiply, divide = scale
    kept = (MsgpackColumn * document.column_count)()
    ctypes.memmove(kept, slots, ctypes.sizeof(kept))
    return ScannedBody(
        measurement=shape.measurement,
        tags=shape.tags,
        body=body,
        precision=precision,
        rows=document.rows,
        schema=shape.schema,
        names=shape.names,
        columns=kept,
        scale=scale,
        # In order, so the first and last times are the bounds, scaled alike.
        time_range=(time.minimum * multiply // divide, time.maximum * multiply // divide),
    )


class _KeyScratch(threading.local):
    """Each thread's buffer for the shape key the scan writes."""

    def __init__(self) -> None:
        self.key = ctypes.create_string_buffer(_MAX_SHAPE_KEY)


_MAX_SHAPE_KEY = 64 * 1024  # a thousand columns with 48-byte names; wider documents take the general path
_MAX_SHAPE_BYTES = 4 * 1024 * 1024  # of keys held, before the cache starts over
_scratch = _KeyScratch()
_shapes: dict[bytes, _Shape | None] = {}  # None: a shape the lane declines
_UNKNOWN = _Shape("", (), (), pa.schema([]), None, -1)
_shape_bytes = 0


def _shape_of(
    native: ctypes.CDLL,
    body: bytes | pa.Buffer,
    at: bytes | int,
    document: MsgpackDocument,
    slots: ctypes.Array[MsgpackColumn],
) -> _Shape | None:
    """The body's shape, checked once per distinct shape (clients repeat theirs); None: declined."""
    global _shape_bytes
    buffer = _scratch.key
    length = native.arcs_msgpack_shape(at, len(body), ctypes.byref(document), slots, buffer, len(buffer))
    if length < 0:
        return None
    key = ctypes.string_at(buffer, length)
    known = _shapes.get(key, _UNKNOWN)  # one look-up: another thread may clear the cache meanwhile
    if known is not _UNKNOWN:
        return known
    shape = _check_shape(native, body if isinstance(body, bytes) else body.to_pybytes(), document, slots)
    if _shape_bytes + length > _MAX_SHAPE_BYTES:
        _shapes.clear()
        _shape_bytes = 0
    _shapes[key] = shape
    _shape_bytes += length
    return shape


def _check_shape(
    native: ctypes.CDLL, body: bytes, document: MsgpackDocument, slots: ctypes.Array[MsgpackColumn]
) -> _Shape | None:
    """The rules of ``build_rows`` that depend only on names and kinds."""
    if document.measurement.offset < 0 or document.tag_count > MAX_COLUMNS:
        return None
    tag_spans = (MsgpackSpan * document.tag_count)()
    if document.tag_count and native.arcs_msgpack_tags(body, len(body), ctypes.byref(document), tag_spans):
        return None
    columns = slots[: document.column_count]
    try:
        names = tuple(text(body, column.name) for column in columns)
        measurement = check_measurement(text(body, document.measurement))
        tags = tuple(text(body, span) for span in tag_spans)
        item_precision = check_precision(text(body, document.precision)) if document.precision.offset >= 0 else None
        check_distinct(dict.fromkeys(names), measurement)
    except (UnicodeDecodeError, ArcsError):
        return None
    kinds = {name: column.kind for name, column in zip(names, columns, strict=True)}
    if len(names) < 2 or kinds.get(TIME_COLUMN) != MSGPACK_INT64:
        return None  # no integer time, or nothing besides it
    if len(set(tags)) != len(tags) or TIME_COLUMN in tags or any(kinds.get(tag) != MSGPACK_STRING for tag in tags):
        return None
    schema = _schema(names, tuple(kinds.values()))
    return _Shape(measurement, tags, names, schema, item_precision, names.index(TIME_COLUMN))


def scanned(batch: WriteBatch) -> WriteBatch:
    """``batch`` with each queued body scanned again (a queued write is checked, never trusted);
    raises BadRequest (a poison message) for a body the lane would not take."""
    if all(not isinstance(part, ColumnarBody) or isinstance(part, ScannedBody) for part in batch.parts):
        return batch
    parts: list[MeasurementRows | ColumnarBody] = []
    for part in batch.parts:
        if isinstance(part, ColumnarBody) and not isinstance(part, ScannedBody):
            again = scan(part.body, part.precision)
            if again is None and library() is None:
                parts.extend(_decoded(part))  # this build reads it without arcs.native
                continue
            if again is None or (again.measurement, again.tags, again.rows) != (part.measurement, part.tags, part.rows):
                raise BadRequest("queued write is not a valid envelope: a queued body does not read as it did")
            part = again
        parts.append(part)
    return WriteBatch(batch.write_id, batch.database, tuple(parts))


def _decoded(part: ColumnarBody) -> list[MeasurementRows]:
    body = part.body if isinstance(part.body, bytes) else part.body.to_pybytes()
    return decode_msgpack(body, 0, part.precision)


def tables(batches: Sequence[WriteBatch]) -> list[tuple[str, MeasurementRows]]:
    """Every part of ``batches`` as (database, rows), the scanned bodies of each shape filled into
    one table (``fill``), in the order the parts came."""
    # A shape's table takes the place of its first body, so parts keep their arrival order.
    order: list[tuple[str, MeasurementRows | list[ScannedBody]]] = []
    shapes: dict[tuple[str, str, tuple[str, ...], int], list[ScannedBody]] = {}
    for batch in batches:
        for part in batch.parts:
            if isinstance(part, ScannedBody):
                # The schema by identity (the scan hands out one object per shape): hashing an Arrow
                # schema costs more than filling a body. Equal schemas that are other objects only
                # make separate tables.
                key = (batch.database, part.measurement, part.tags, id(part.schema))
                if key not in shapes:
                    order.append((batch.database, shapes.setdefault(key, [])))
                shapes[key].append(part)
            elif isinstance(part, MeasurementRows):
                order.append((batch.database, part))
            else:
                raise TypeError("a queued body reached ingest unscanned")
    out: list[tuple[str, MeasurementRows]] = []
    for database, item in order:
        if isinstance(item, list):
            out.extend((database, rows) for rows in fill(item))
        else:
            out.append((database, item))
    return out


def fill(bodies: Sequence[ScannedBody]) -> list[MeasurementRows]:
    """Bodies of one measurement, tags and schema as tables: one, unless a string column would
    pass Arrow's 32-bit offsets (then as few as keep each under them).

    Bodies whose times do not overlap are filled in time order (concurrent writers' requests
    arrive interleaved): the rows then come out as ingest's stable sort would put them, and no row
    needs sorting. Other bodies are filled in the order they came."""
    ordered = time_order([body.time_range for body in bodies])
    if ordered is not None:
        bodies = [bodies[index] for index in ordered[0]]
    if sum(len(body.body) for body in bodies) <= _MAX_STRING_BYTES:
        return [_fill_one(bodies)]  # a body holds fewer string bytes than it has bytes
    chunks: list[list[ScannedBody]] = [[]]
    totals: dict[str, int] = {}
    for body in bodies:
        sizes = {name: column.string_bytes for name, column in zip(body.names, body.columns, strict=True)}
        if chunks[-1] and any(totals.get(name, 0) + size > _MAX_STRING_BYTES for name, size in sizes.items()):
            chunks.append([])
            totals = {}
        chunks[-1].append(body)
        for name, size in sizes.items():
            totals[name] = totals.get(name, 0) + size
    return [_fill_one(chunk) for chunk in chunks]


_MAX_STRING_BYTES = (1 << 31) - 1


def _fill_one(bodies: Sequence[ScannedBody]) -> MeasurementRows:
    """The bodies' rows as one table, tag columns as dictionary arrays: the fill hashes each tag
    where it lies in the body (``dictionary.h``), so the Parquet writer gets indices and no string
    is copied. A tag with more distinct values than its dictionary holds makes the fill start again
    with a larger one (remembered for the measurement's next batches), or past the largest with
    plain strings."""
    first = bodies[0]
    key = (first.measurement, first.tags)
    while True:
        sizes = _tag_sizes.get(key, {})
        dictionaries = {
            index: TagDictionary(*DICTIONARY_SIZES[size])
            for index, field in enumerate(first.schema)
            if field.name in first.tags and field.type == pa.string()
            for size in (sizes.get(field.name, 0),)
            if size < len(DICTIONARY_SIZES)
        }
        filled = _fill_with(bodies, dictionaries)
        if filled is not None:
            return filled
        grown = dict(sizes)
        for index, dictionary in dictionaries.items():
            if dictionary.refused:
                name = first.schema.field(index).name
                grown[name] = grown.get(name, 0) + 1
        if grown == sizes:
            raise RuntimeError("the fill found a dictionary full, yet none refused a value")
        if len(_tag_sizes) >= _MAX_TAG_SIZES:
            _tag_sizes.clear()
        _tag_sizes[key] = grown


# Per (measurement, tags): the dictionary size each tag needed, as an index into DICTIONARY_SIZES
# (past its end: plain strings), so a tag of many values makes only its first batch fill twice.
_tag_sizes: dict[tuple[str, tuple[str, ...]], dict[str, int]] = {}
_MAX_TAG_SIZES = 1024


def _fill_with(bodies: Sequence[ScannedBody], dictionaries: dict[int, TagDictionary]) -> MeasurementRows | None:
    """``_fill_one`` with these dictionaries (by block column); None when one had no room."""
    native = library()
    assert native is not None, "a scanned body implies arcs.native"
    first = bodies[0]
    schema, rows = first.schema, sum(body.rows for body in bodies)
    targets = {name: index for index, name in enumerate(schema.names)}
    string_bytes = [0] * len(targets)
    for body in bodies:
        for name, column in zip(body.names, body.columns, strict=True):
            string_bytes[targets[name]] += column.string_bytes
    # Each column's buffers, one after another, as the scan lays out one body's.
    per_column = ctypes.c_int64 * len(targets)
    values_at, data_at, data_bases = per_column(), per_column(), per_column()
    size = 0
    for index, field in enumerate(schema):
        values_at[index] = size
        if index in dictionaries:
            string_bytes[index] = 0
            size += _aligned(4 * rows)  # int32 indices
        else:
            size += _aligned(_values_bytes(field.type, rows))
        data_at[index] = size
        size += _aligned(string_bytes[index])
    block = pa.allocate_buffer(max(size, _ALIGNMENT))
    by_column = (ctypes.c_void_p * len(targets))(
        *(ctypes.addressof(dictionaries[i].description) if i in dictionaries else None for i in range(len(targets)))
    )
    orders: dict[tuple[str, ...], ctypes.Array[ctypes.c_int64]] = {}  # body column -> block column
    row_base = 0
    for body in bodies:
        order = orders.get(body.names)
        if order is None:
            order = orders[body.names] = (ctypes.c_int64 * len(body.names))(*(targets[n] for n in body.names))
        multiply, divide = body.scale
        outcome = native.arcs_msgpack_fill_into(
            _address(body.body),
            len(body.body),
            body.columns,
            len(body.names),
            block.address,
            block.size,
            order,
            len(targets),
            values_at,
            data_at,
            data_bases,
            by_column,
            row_base,
            body.names.index(TIME_COLUMN),
            multiply,
            divide,
        )
        if outcome == DICTIONARY_FULL:
            return None
        if outcome:
            raise BadRequest("queued write is not a valid envelope: a queued body does not read as it did")
        row_base += body.rows
    arrays = [
        dictionaries[index].array(block.slice(values_at[index], 4 * rows), rows)
        if index in dictionaries
        else _array(block, field, rows, values_at[index], data_at[index], string_bytes[index])
        for index, field in enumerate(schema)
    ]
    table = pa.Table.from_arrays(arrays, schema=_with_dictionaries(schema, dictionaries))
    return MeasurementRows(first.measurement, table, first.tags, _time_range(bodies))


_TAG_TYPE = pa.dictionary(pa.int32(), pa.string())


def _with_dictionaries(schema: pa.Schema, dictionaries: dict[int, TagDictionary]) -> pa.Schema:
    if not dictionaries:
        return schema
    fields = [field.with_type(_TAG_TYPE) if index in dictionaries else field for index, field in enumerate(schema)]
    return pa.schema(fields)


def _time_range(bodies: Sequence[ScannedBody]) -> tuple[int, int] | None:
    """The filled rows' first and last time when the bodies came in time order (each starting no
    earlier than the one before ends), so the rows are in order; None when not."""
    for earlier, later in itertools.pairwise(bodies):
        if later.time_range[0] < earlier.time_range[1]:
            return None
    return bodies[0].time_range[0], bodies[-1].time_range[1]


def _array(block: pa.Buffer, field: pa.Field, rows: int, values_at: int, data_at: int, string_bytes: int) -> pa.Array:
    values = block.slice(values_at, _values_bytes(field.type, rows))
    if field.type == pa.string():
        return pa.StringArray.from_buffers(rows, values, block.slice(data_at, string_bytes))
    return pa.Array.from_buffers(field.type, rows, [None, values])


def _address(body: bytes | pa.Buffer) -> bytes | int:
    """What the C functions take as the body: the bytes object, or where the buffer's bytes are."""
    return body if isinstance(body, bytes) else body.address


def _values_bytes(arrow_type: pa.DataType, rows: int) -> int:
    if arrow_type == pa.string():
        return 4 * (rows + 1)
    if arrow_type == pa.bool_():
        return (rows + 7) // 8
    return 8 * rows


def _aligned(size: int) -> int:
    return -(-size // _ALIGNMENT) * _ALIGNMENT


# Schemas by (names, kinds): a writer's requests repeat theirs, and the registry compares them.
_schemas: dict[tuple[tuple[str, ...], tuple[int, ...]], pa.Schema] = {}
_MAX_SCHEMAS = 1024


def _schema(names: tuple[str, ...], kinds: tuple[int, ...]) -> pa.Schema:
    key = (names, kinds)
    schema = _schemas.get(key)
    if schema is None:
        fields = [(name, ARROW_TYPES[kind]) for name, kind in zip(names, kinds, strict=True) if name != TIME_COLUMN]
        schema = pa.schema([(TIME_COLUMN, TIME_TYPE), *fields])
        if len(_schemas) >= _MAX_SCHEMAS:
            _schemas.clear()
        _schemas[key] = schema
    return schema
