"""The columnar lane: it takes only bodies the general path stores unchanged, and ingest's fill of
many of them makes the same table as decoding each and putting the tables one after another."""

from __future__ import annotations

from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.batch import WriteBatch
from arcs.decoders import columnar_lane
from arcs.decoders.msgpack_format import decode_msgpack
from arcs.errors import BadRequest

NOW = 1_700_000_000_000_000

_values = st.sampled_from(
    [
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False),
        st.text(max_size=12),
        st.sampled_from(["a", "bb", "server01"]),
        st.booleans(),
    ]
)


def _document(data: st.DataObject) -> dict[str, Any]:
    rows = data.draw(st.integers(1, 30))
    names = data.draw(st.lists(st.sampled_from(["a", "b", "host", "v", "x y", "ok"]), min_size=1, unique=True))
    columns: dict[str, Any] = {
        name: data.draw(st.lists(data.draw(_values), min_size=rows, max_size=rows)) for name in names
    }
    if data.draw(st.booleans()):
        start = data.draw(st.integers(0, 2**61))
        steps = data.draw(st.lists(st.integers(0, 10**9), min_size=rows, max_size=rows))
        times = [start + sum(steps[: i + 1]) for i in range(rows)]
        if data.draw(st.booleans()):
            times.reverse()  # out of order: the lane declines
        columns["time"] = times
    items = list(columns.items())
    data.draw(st.randoms()).shuffle(items)
    document: dict[str, Any] = {"m": data.draw(st.sampled_from(["cpu", "mem", "1bad"])), "columns": dict(items)}
    if data.draw(st.booleans()):
        document["tags"] = data.draw(st.lists(st.sampled_from([*names, "time"]), unique=True))
    if data.draw(st.booleans()):
        document["precision"] = data.draw(st.sampled_from(["ns", "us", "ms", "s"]))
    return document


def _general(body: bytes, precision: str | None) -> Any:
    try:
        return decode_msgpack(body, NOW, precision)
    except BadRequest as exc:
        return exc


@pytest.fixture(autouse=True)
def _needs_native() -> None:
    assert native.library() is not None, "run `make setup` to build arcs.native"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_body_the_lane_takes_makes_the_table_the_general_path_makes(data: st.DataObject) -> None:
    body = msgpack.packb(_document(data))
    precision = data.draw(st.sampled_from([None, "ms", "ns"]))
    scanned = columnar_lane.scan(body, precision)
    general = _general(body, precision)
    event(f"lane took it: {scanned is not None}")
    if scanned is None:
        return
    assert not isinstance(general, BadRequest), f"the lane took a body the general path refuses: {general}"
    (expected,) = general
    (filled,) = columnar_lane.fill([scanned])
    assert (filled.measurement, filled.tags) == (expected.measurement, expected.tags)
    assert filled.table.schema == expected.table.schema
    assert filled.table.equals(expected.table)
    assert filled.time_range == expected.time_range


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_bodies_of_one_shape_fill_one_table_of_their_rows_in_order(data: st.DataObject) -> None:
    count = data.draw(st.integers(2, 6))
    bodies, expected = [], []
    for index in range(count):
        rows = data.draw(st.integers(1, 20))
        columns = {
            "time": [NOW + index * 1000 + i for i in range(rows)],
            "host": data.draw(st.lists(st.sampled_from(["a", "bb", ""]), min_size=rows, max_size=rows)),
            "up": data.draw(st.lists(st.booleans(), min_size=rows, max_size=rows)),
            "v": data.draw(st.lists(st.floats(allow_nan=False), min_size=rows, max_size=rows)),
        }
        items = list(columns.items())
        data.draw(st.randoms()).shuffle(items)  # any column order: the fill maps them by name
        body = msgpack.packb({"m": "cpu", "columns": dict(items), "tags": ["host"], "precision": "us"})
        scanned = columnar_lane.scan(body, None)
        assert scanned is not None
        bodies.append(scanned)
        expected.append(decode_msgpack(body, NOW, None)[0].table)
    tables = [rows.table for rows in columnar_lane.fill(bodies)]
    whole = pa.concat_tables(tables)
    reference = pa.concat_tables([t.select(whole.schema.names) for t in expected])
    assert whole.equals(reference)


def test_a_queued_body_round_trips_and_a_changed_one_is_poison() -> None:
    body = msgpack.packb(
        {"m": "cpu", "columns": {"time": [1, 2], "host": ["a", "b"], "v": [0.5, 1.5]}, "tags": ["host"]}
    )
    scanned = columnar_lane.scan(body, "s")
    assert scanned is not None
    envelope = WriteBatch("id", "db", (scanned,)).to_bytes()
    again = columnar_lane.scanned(WriteBatch.from_bytes(envelope))
    (rows,) = [rows for _database, rows in columnar_lane.tables([again])]
    assert rows.table.equals(decode_msgpack(body, NOW, "s")[0].table)
    changed = envelope.replace(b"\xa1a\xa1b", b"\xa1a\xa1\x01")  # a tag made a control character
    with pytest.raises(BadRequest, match="does not read as it did"):
        columnar_lane.scanned(WriteBatch.from_bytes(changed))
