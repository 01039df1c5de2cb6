"""The queued form of a write: WriteBatch to_bytes/from_bytes round-trips; poison is a BadRequest."""

from __future__ import annotations

import math
import struct
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.errors import BadRequest
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.decoders import WireFormat, decode


def _table(**columns: pa.Array) -> pa.Table:
    return pa.table(columns)


def _time(values: list[int | None]) -> pa.Array:
    return pa.array(values, pa.int64()).cast(TIME_TYPE)


CPU = MeasurementRows(
    "cpu",
    _table(
        time=_time([1, 2, 3]),
        host=pa.array(["a", None, "ü😀"], pa.string()),
        usage=pa.array([1.5, None, -0.0], pa.float64()),
        count=pa.array([-(2**63), 2**63 - 1, None], pa.int64()),
        ok=pa.array([True, None, False], pa.bool_()),
    ),
    ("host",),
)
MEM = MeasurementRows("mem", _table(time=_time([10]), free=pa.array([7], pa.int64())))


def _same(left: WriteBatch, right: WriteBatch) -> None:
    assert (left.write_id, left.database) == (right.write_id, right.database)
    assert len(left.parts) == len(right.parts)
    for a, b in zip(left.parts, right.parts, strict=True):
        assert (a.measurement, a.tags) == (b.measurement, b.tags)
        assert a.table.schema == b.table.schema
        assert a.table.equals(b.table)


def test_round_trip_is_exact() -> None:
    batch = WriteBatch("0123abcd", "default", (CPU, MEM, CPU))
    again = WriteBatch.from_bytes(batch.to_bytes())
    _same(batch, again)
    assert again.row_count == 7
    assert math.copysign(1, again.parts[0].table.column("usage")[2].as_py()) == -1.0


def test_round_trip_of_nan_and_chunked_tables() -> None:
    chunked = pa.concat_tables([CPU.table, CPU.table])
    assert chunked.column(0).num_chunks == 2
    nan = _table(time=_time([1]), v=pa.array([math.nan]))
    batch = WriteBatch("id", "db", (MeasurementRows("cpu", chunked, ("host",)), MeasurementRows("n", nan)))
    again = WriteBatch.from_bytes(batch.to_bytes())
    assert again.parts[0].table.equals(chunked)
    assert math.isnan(again.parts[1].table.column("v")[0].as_py())


def test_round_trip_of_an_empty_batch() -> None:
    _same(WriteBatch("id", "db", ()), WriteBatch.from_bytes(WriteBatch("id", "db", ()).to_bytes()))


def test_round_trip_of_decoded_requests() -> None:
    body = b'cpu,host=a v=1i,s="x\\"y",b=t 1\ncpu,host=b v=2i 2\nmem free=1.5\n'
    parts = decode(WireFormat.LINE_PROTOCOL, body, 1_700_000_000_000_000, None)
    batch = WriteBatch("w", "telegraf", tuple(parts))
    _same(batch, WriteBatch.from_bytes(batch.to_bytes()))


_column_values = {
    "int64": st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=5),
    "float64": st.lists(st.one_of(st.none(), st.floats(allow_nan=False)), min_size=1, max_size=5),
    "string": st.lists(st.one_of(st.none(), st.text(max_size=5)), min_size=1, max_size=5),
    "bool": st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=5),
}
_TYPES = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_()}


@st.composite
def _parts(draw: Any) -> MeasurementRows:
    kinds = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=4))
    rows = draw(st.integers(1, 5))
    columns: dict[str, pa.Array] = {
        "time": _time(draw(st.lists(st.integers(-(10**15), 10**15), min_size=rows, max_size=rows)))
    }
    for index, kind in enumerate(kinds):
        values = draw(_column_values[kind])
        values = (values * rows)[:rows]
        columns[f"c{index}"] = pa.array(values, _TYPES[kind])
    tags = tuple(name for name, array in columns.items() if array.type == pa.string())
    return MeasurementRows(draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True)), pa.table(columns), tags)


@settings(max_examples=100, deadline=None)
@given(st.lists(_parts(), max_size=3), st.text(max_size=10), st.text(max_size=10))
def test_round_trip_property(parts: list[MeasurementRows], write_id: str, database: str) -> None:
    batch = WriteBatch(write_id, database, tuple(parts))
    _same(batch, WriteBatch.from_bytes(batch.to_bytes()))


def _v1(batch: WriteBatch) -> dict[str, Any]:
    """The envelope an earlier version queued: a MessagePack map with each IPC stream as a bin."""
    parts = []
    for part in batch.parts:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, part.table.schema) as writer:
            writer.write_table(part.table)
        parts.append({"m": part.measurement, "tags": list(part.tags), "ipc": sink.getvalue().to_pybytes()})
    return {"v": 1, "id": batch.write_id, "db": batch.database, "parts": parts}


def _envelope(**changes: Any) -> bytes:
    envelope = _v1(WriteBatch("id", "db", (MEM,)))
    envelope.update(changes)
    return msgpack.packb(envelope, use_bin_type=True)


def _part(**changes: Any) -> bytes:
    envelope = _v1(WriteBatch("id", "db", (MEM,)))
    envelope["parts"][0].update(changes)
    return msgpack.packb(envelope, use_bin_type=True)


def _v2(header: Any, *streams: bytes, declared: int | None = None) -> bytes:
    packed = msgpack.packb(header, use_bin_type=True)
    prefix = b"\xc1AE2" + struct.pack("<I", len(packed) if declared is None else declared) + packed
    return prefix + b"\0" * (-len(prefix) % 8) + b"".join(streams)


MEM_IPC = _v1(WriteBatch("id", "db", (MEM,)))["parts"][0]["ipc"]
V2_PART = {"m": "mem", "tags": [], "n": len(MEM_IPC)}


def test_envelopes_queued_by_an_earlier_version_are_read() -> None:
    batch = WriteBatch("id", "db", (CPU, MEM))
    _same(batch, WriteBatch.from_bytes(msgpack.packb(_v1(batch), use_bin_type=True)))


def test_the_tables_refer_to_the_envelope_without_copying() -> None:
    data = WriteBatch("id", "db", (CPU,)).to_bytes()
    before = pa.total_allocated_bytes()
    again = WriteBatch.from_bytes(data)
    assert pa.total_allocated_bytes() == before
    assert again.parts[0].table.equals(CPU.table)


def test_v2_by_hand_is_read() -> None:
    # The layout documented in batch.py, built without WriteBatch.to_bytes.
    batch = WriteBatch.from_bytes(_v2({"id": "id", "db": "db", "parts": [V2_PART]}, MEM_IPC))
    _same(batch, WriteBatch("id", "db", (MEM,)))


GOOD = WriteBatch("id", "db", (CPU,)).to_bytes()
V1_GOOD = msgpack.packb(_v1(WriteBatch("id", "db", (CPU,))), use_bin_type=True)
POISON = {
    "empty": b"",
    "garbage": b"\xc1\xc1\xc1",
    "not msgpack": b"hello world",
    "truncated": GOOD[:-10],
    "trailing bytes": GOOD + b"\x00",
    "v1 truncated": V1_GOOD[:-10],
    "v1 trailing bytes": V1_GOOD + b"\x00",
    "a list": msgpack.packb([1, 2, 3]),
    "a number": msgpack.packb(5),
    "a string": msgpack.packb("v"),
    "nil": msgpack.packb(None),
    "non-utf8 string": b"\x81\xa1v\xa2\xff\xfe",
    "deep nesting": b"\x91" * 100_000,
    "no version": msgpack.packb({"id": "x", "db": "d", "parts": []}),
    "future version": _envelope(v=2),
    "version a list": _envelope(v=[1]),
    "id missing": msgpack.packb({"v": 1, "db": "d", "parts": []}),
    "id a number": _envelope(id=5),
    "db a map": _envelope(db={"a": 1}),
    "parts a map": _envelope(parts={"m": "x"}),
    "part a string": _envelope(parts=["x"]),
    "part without ipc": _part(ipc=None),
    "ipc garbage": _part(ipc=b"\x00" * 64),
    "ipc truncated": _part(ipc=MEM_IPC[:-20]),
    "ipc a string": _part(ipc="text"),
    "measurement a number": _part(m=5),
    "tags a string": _part(tags="host"),
    "tags with numbers": _part(tags=[1]),
    "v2 magic only": b"\xc1AE2",
    "v2 header past the end": _v2({"id": "id", "db": "db", "parts": []}, declared=1000),
    "v2 header a list": _v2([1, 2]),
    "v2 header not msgpack": _v2({}, declared=0) + b"\xc1" * 8,
    "v2 id missing": _v2({"db": "db", "parts": []}),
    "v2 part a number": _v2({"id": "id", "db": "db", "parts": [5]}),
    "v2 length missing": _v2({"id": "id", "db": "db", "parts": [{"m": "mem", "tags": []}]}, MEM_IPC),
    "v2 length negative": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "n": -8}]}, MEM_IPC),
    "v2 length a string": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "n": "8"}]}, MEM_IPC),
    "v2 length past the end": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "n": len(MEM_IPC) + 8}]}, MEM_IPC),
    "v2 length short": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "n": len(MEM_IPC) - 8}]}, MEM_IPC),
    "v2 bytes after the parts": _v2({"id": "id", "db": "db", "parts": [V2_PART]}, MEM_IPC, b"\0" * 8),
    "v2 stream garbage": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "n": 64}]}, b"\x07" * 64),
    "v2 measurement a number": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "m": 5}]}, MEM_IPC),
    "v2 tags a string": _v2({"id": "id", "db": "db", "parts": [{**V2_PART, "tags": "host"}]}, MEM_IPC),
}


@pytest.mark.parametrize("data", list(POISON.values()), ids=list(POISON))
def test_poison_messages_are_bad_requests(data: bytes) -> None:
    with pytest.raises(BadRequest, match=r"queued write|queued-write") as caught:
        WriteBatch.from_bytes(data)
    assert len(caught.value.message) < 400


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_corruption_is_a_bad_request_or_a_valid_batch(data: st.DataObject) -> None:
    body = bytearray(GOOD)
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        batch = WriteBatch.from_bytes(bytes(body[: data.draw(st.integers(0, len(body)))]))
    except BadRequest:
        return
    for part in batch.parts:
        part.table.validate(full=True)


@settings(max_examples=50, deadline=None)
@given(parts=st.lists(_parts(), min_size=1, max_size=3))
def test_an_uncompressed_stream_is_the_stream_writer_s_bytes(parts: list[MeasurementRows]) -> None:
    from arcs.write.batch import _ipc_stream

    for part in parts:
        table = pa.concat_tables([part.table, part.table])  # two batches
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        made = b"".join(bytes(piece) for piece in _ipc_stream(table, None))
        assert made == sink.getvalue().to_pybytes()
