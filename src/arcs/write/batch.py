"""The normalized form of a write: what the edge queues and what ingest turns into Parquet."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import msgpack
import pyarrow as pa

from arcs.errors import BadRequest

#: Times are nanoseconds since 1970 UTC, stored without a zone: DuckDB reads a zoned (UTC) Parquet
#: timestamp as TIMESTAMPTZ, which holds microseconds, and would make times 1 ns apart equal.
TIME_TYPE = pa.timestamp("ns")
STORAGE_TYPES: dict[str, pa.DataType] = {
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "timestamp": TIME_TYPE,
}
_IPC_OPTIONS = {
    None: pa.ipc.IpcWriteOptions(),
    "zstd": pa.ipc.IpcWriteOptions(compression="zstd"),
    "lz4": pa.ipc.IpcWriteOptions(compression="lz4"),
}
# Envelope v2: this magic (0xc1 never starts MessagePack, so no v1 envelope is mistaken for it), a
# little-endian u32 header length, a MessagePack header {"id", "db", "parts": [{"m", "tags", "n"}]},
# zero padding to 8 bytes, then each part's Arrow IPC stream of "n" bytes, back to back. The streams
# are not copied into a MessagePack bin: ingest reads the tables straight out of the bytes.
_MAGIC_V2 = b"\xc1AE2"
_HEADER_LENGTH = struct.Struct("<I")
_END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # an IPC stream's end: continuation marker, zero length
_ALIGN = 8
# A part may instead hold a MessagePack columnar body as its client sent it: "f" names that form,
# "p" is the precision its times are in and "r" its rows; zero padding to 8 bytes follows it (not
# counted in "n"). A build without this form refuses such a write as poison (it waits in the DLQ).
_MSGPACK_COLUMNS = "msgpack-columns"
# Envelope v1 (a MessagePack map holding each IPC stream as a bin) is still read: writes queued by
# an earlier version may be waiting when this one starts.
_ENVELOPE_V1 = 1


def type_name(arrow_type: pa.DataType) -> str:
    if pa.types.is_dictionary(arrow_type):  # tags, as ingest holds them: stored as their values
        return type_name(arrow_type.value_type)
    for name, candidate in STORAGE_TYPES.items():
        if arrow_type == candidate:
            return name
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    return str(arrow_type)


@dataclass(frozen=True, slots=True)
class MeasurementRows:
    """Rows of one measurement: ``time`` (TIMESTAMP ns, UTC) plus int64/float64/string/bool columns."""

    measurement: str
    table: pa.Table
    tags: tuple[str, ...] = ()
    # The first and last time (ns) when the reader knew the rows to be in time order; None when
    # not known (ingest then checks). Not kept in the envelope: only in-process hand-over has it.
    time_range: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class ColumnarBody:
    """A MessagePack columnar body queued as its client sent it (``arcs.write.decoders.columnar_lane``):
    the edge checked it from a scan of its bytes, and ingest fills it, with the other bodies of its
    shape, into one table. ``precision`` is the one its times are in (the body's, else the request's).
    """

    measurement: str
    tags: tuple[str, ...]
    body: bytes | pa.Buffer  # a queued one is a slice of its envelope, not a copy
    precision: str | None
    rows: int


@dataclass(frozen=True, slots=True)
class WriteBatch:
    """One accepted request: all of it is stored or none of it."""

    write_id: str
    database: str
    parts: tuple[MeasurementRows | ColumnarBody, ...]

    @property
    def row_count(self) -> int:
        return sum(part.rows if isinstance(part, ColumnarBody) else part.table.num_rows for part in self.parts)

    def to_bytes(self, compression: str | None = None) -> bytes:
        streams: list[pa.Buffer | bytes] = []
        parts = []
        for part in self.parts:
            if isinstance(part, ColumnarBody):
                # The body as sent, padded so the parts after it stay aligned.
                streams += [part.body, b"\0" * (-len(part.body) % _ALIGN)]
                parts.append(
                    {
                        "m": part.measurement,
                        "tags": list(part.tags),
                        "n": len(part.body),
                        "f": _MSGPACK_COLUMNS,
                        "p": part.precision,
                        "r": part.rows,
                    }
                )
                continue
            stream = _ipc_stream(part.table, compression)
            streams += stream
            parts.append({"m": part.measurement, "tags": list(part.tags), "n": sum(len(piece) for piece in stream)})
        header: bytes = msgpack.packb({"id": self.write_id, "db": self.database, "parts": parts}, use_bin_type=True)
        prefix = len(_MAGIC_V2) + _HEADER_LENGTH.size + len(header)
        padding = b"\0" * (-prefix % _ALIGN)
        # One copy of the IPC bytes, into the envelope (joined straight from Arrow's buffers).
        return b"".join([_MAGIC_V2, _HEADER_LENGTH.pack(len(header)), header, padding, *streams])

    @classmethod
    def from_bytes(cls, data: bytes) -> WriteBatch:
        """Raises ``BadRequest`` for anything that is not an envelope we wrote (a poison message).

        The tables refer to ``data`` without copying it.
        """
        try:
            if data.startswith(_MAGIC_V2):
                return cls._from_v2(data)
            return cls._from_v1(data)
        except (
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            OSError,
            struct.error,
            msgpack.UnpackException,
            pa.ArrowException,
        ) as exc:
            raise BadRequest(f"queued write is not a valid envelope: {type(exc).__name__}: {str(exc)[:200]}") from exc

    @classmethod
    def _from_v2(cls, data: bytes) -> WriteBatch:
        (length,) = _HEADER_LENGTH.unpack_from(data, len(_MAGIC_V2))
        start = len(_MAGIC_V2) + _HEADER_LENGTH.size
        if start + length > len(data):
            raise BadRequest("queued write is not a valid envelope: the header runs past the end")
        header = msgpack.unpackb(memoryview(data)[start : start + length], raw=False)
        if not isinstance(header, dict):
            raise BadRequest(f"queued write is not a valid envelope: a {type(header).__name__} header, not a map")
        write_id, database, raw_parts = _top(header)
        offset = start + length + (-(start + length) % _ALIGN)
        whole = pa.py_buffer(data)
        parts: list[MeasurementRows | ColumnarBody] = []
        for raw in raw_parts:
            if not isinstance(raw, dict):
                raise BadRequest("queued write is not a valid envelope: a part is not a map")
            size = raw["n"]
            if not isinstance(size, int) or size < 0 or offset + size > len(data):
                raise BadRequest("queued write is not a valid envelope: a part's length is wrong")
            kind = raw.get("f")
            if kind == _MSGPACK_COLUMNS:
                parts.append(_columnar_body(raw, whole.slice(offset, size)))
                offset += size + (-size % _ALIGN)
                continue
            if kind is not None:
                raise BadRequest(f"queued write is not a valid envelope: a part of unknown form {str(kind)[:40]!r}")
            parts.append(_part(raw["m"], raw["tags"], whole.slice(offset, size)))
            offset += size
        if offset != len(data):
            raise BadRequest(f"queued write is not a valid envelope: {len(data) - offset} bytes after the last part")
        return cls(write_id=write_id, database=database, parts=tuple(parts))

    @classmethod
    def _from_v1(cls, data: bytes) -> WriteBatch:
        envelope = msgpack.unpackb(data, raw=False)
        if not isinstance(envelope, dict):
            raise BadRequest(f"queued write is not a valid envelope: a {type(envelope).__name__}, not a map")
        if envelope.get("v") != _ENVELOPE_V1:
            raise BadRequest(f"unknown queued-write version {str(envelope.get('v'))[:40]!r}")
        write_id, database, raw_parts = _top(envelope)
        parts = []
        for raw in raw_parts:
            if not isinstance(raw, dict):
                raise BadRequest("queued write is not a valid envelope: a part is not a map")
            if not isinstance(raw["ipc"], bytes):
                raise BadRequest("queued write is not a valid envelope: a part's 'ipc' is not bytes")
            parts.append(_part(raw["m"], raw["tags"], pa.py_buffer(raw["ipc"])))
        return cls(write_id=write_id, database=database, parts=tuple(parts))


def _ipc_stream(table: pa.Table, compression: str | None) -> list[pa.Buffer | bytes]:
    """``table`` as an Arrow IPC stream, in pieces.

    Uncompressed, the stream is made of its messages directly (the schema's, each batch's, the end
    marker): the same bytes a stream writer gives, for about half the cost.
    """
    if compression is None:
        return [table.schema.serialize(), *(batch.serialize() for batch in table.to_batches()), _END_OF_STREAM]
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS[compression]) as writer:
        writer.write_table(table)
    return [sink.getvalue()]


def _top(envelope: dict[str, object]) -> tuple[str, str, list[object]]:
    write_id, database, raw_parts = envelope["id"], envelope["db"], envelope["parts"]
    if not isinstance(write_id, str) or not isinstance(database, str) or not isinstance(raw_parts, list):
        raise BadRequest("queued write is not a valid envelope: 'id', 'db' or 'parts' has the wrong type")
    return write_id, database, raw_parts


def _names(measurement: object, tags: object) -> tuple[str, tuple[str, ...]]:
    if not (isinstance(measurement, str) and isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
        raise BadRequest("queued write is not a valid envelope: a part's 'm', 'tags' or 'ipc' has the wrong type")
    return measurement, tuple(tags)


def _columnar_body(raw: dict[object, object], body: pa.Buffer) -> ColumnarBody:
    """A body part's description; ingest checks the body itself as the edge did."""
    measurement, tags = _names(raw["m"], raw["tags"])
    precision, rows = raw["p"], raw["r"]
    if not (precision is None or isinstance(precision, str)) or not isinstance(rows, int) or rows < 1:
        raise BadRequest("queued write is not a valid envelope: a body part's 'p' or 'r' has the wrong type")
    return ColumnarBody(measurement, tags, body, precision, rows)


def _part(measurement: object, tags: object, ipc: pa.Buffer) -> MeasurementRows:
    measurement, tags = _names(measurement, tags)
    reader = pa.ipc.open_stream(ipc)
    table = reader.read_all()
    # The IPC reader checks structure as it goes; full validation (offsets in bounds, UTF-8) is
    # what makes a corrupt envelope a refusal here rather than a crash later.
    table.validate(full=True)
    return MeasurementRows(measurement=measurement, table=table, tags=tags)


def time_order(ranges: Sequence[tuple[int, int] | None]) -> tuple[list[int], tuple[int, int]] | None:
    """The order that puts the parts' rows in time order, and their first and last time; None
    unless every part's rows are known to be in order and, parts ordered by their first time, none
    starts before the one before it ends.

    Concurrent writers' requests arrive interleaved; ordering the parts spares sorting every row
    (ingest orders its tables so, and the columnar lane the bodies it fills into one).
    A part may start at the very time the one before it ends only if it arrived after that one:
    rows of equal times then keep their arrival order, as the stable sort of the rows would.
    """
    if not ranges or any(bounds is None for bounds in ranges):
        return None
    known = cast(list[tuple[int, int]], ranges)
    order = sorted(range(len(known)), key=lambda index: known[index][0])  # stable: ties keep arrival order
    for earlier, later in itertools.pairwise(order):
        end, start = known[earlier][1], known[later][0]
        if end > start or (end == start and earlier > later):
            return None
    return order, (known[order[0]][0], known[order[-1]][1])
