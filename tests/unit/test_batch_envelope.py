"""The queued form of a write: WriteBatch to_bytes/from_bytes round-trips; poison is a BadRequest."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.decoders import WireFormat, decode
from arcs.errors import BadRequest


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


def _envelope(**changes: Any) -> bytes:
    envelope = msgpack.unpackb(WriteBatch("id", "db", (MEM,)).to_bytes(), raw=False)
    envelope.update(changes)
    return msgpack.packb(envelope, use_bin_type=True)


def _part(**changes: Any) -> bytes:
    envelope = msgpack.unpackb(WriteBatch("id", "db", (MEM,)).to_bytes(), raw=False)
    envelope["parts"][0].update(changes)
    return msgpack.packb(envelope, use_bin_type=True)


GOOD = WriteBatch("id", "db", (CPU,)).to_bytes()
POISON = {
    "empty": b"",
    "garbage": b"\xc1\xc1\xc1",
    "not msgpack": b"hello world",
    "truncated": GOOD[:-10],
    "trailing bytes": GOOD + b"\x00",
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
    "ipc truncated": _part(ipc=msgpack.unpackb(GOOD)["parts"][0]["ipc"][:-20]),
    "ipc a string": _part(ipc="text"),
    "measurement a number": _part(m=5),
    "tags a string": _part(tags="host"),
    "tags with numbers": _part(tags=[1]),
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
