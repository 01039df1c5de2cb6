"""The columnar lane: it takes only bodies the general path stores unchanged, and ingest's fill of
many of them makes the same table as decoding each and putting the tables one after another."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import msgpack
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.queue import Spool
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.envvars import NATIVE
from arcs.errors import BadRequest
from arcs.write.batch import MeasurementRows, WriteBatch
from arcs.write.decoders import WireFormat, columnar_lane
from arcs.write.decoders.columnar_lane import ScannedBody
from arcs.write.decoders.msgpack_format import decode_msgpack
from arcs.write.edge import WriteRequest, WriteService
from arcs.write.parquet_encoding import TagDictionary
from tests.helpers import plain_strings

NOW = 1_700_000_000_000_000

_values = st.sampled_from(
    [
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),  # mostly not printable ASCII: the lane declines
        st.sampled_from(["a", "bb", "server01", ""]),
        st.booleans(),
    ]
)


def _document(data: st.DataObject) -> dict[str, Any]:
    rows = data.draw(st.integers(1, 30))
    names = data.draw(st.lists(st.sampled_from(["a", "b", "host", "v", "x y", "ok"]), min_size=1, unique=True))
    columns: dict[str, Any] = {
        name: data.draw(st.lists(data.draw(_values), min_size=rows, max_size=rows)) for name in names
    }
    if data.draw(st.integers(0, 4)):  # mostly with times, as the lane needs
        start = data.draw(st.integers(0, 2**61))
        steps = data.draw(st.lists(st.integers(0, 10**9), min_size=rows, max_size=rows))
        times = [start + sum(steps[: i + 1]) for i in range(rows)]
        if not data.draw(st.integers(0, 5)):
            times.reverse()  # out of order: the lane declines
        columns["time"] = times
    items = list(columns.items())
    data.draw(st.randoms()).shuffle(items)
    measurement = data.draw(st.sampled_from(["cpu", "mem", "cpu", "mem", "1bad"]))
    document: dict[str, Any] = {"m": measurement, "columns": dict(items)}
    if data.draw(st.booleans()):
        document["tags"] = data.draw(st.lists(st.sampled_from([*names, "time"]), unique=True))
    if data.draw(st.booleans()):
        document["precision"] = data.draw(st.sampled_from(["ns", "us", "ms", "s"]))
    return document


def _assert_tags_are_dictionaries(rows: MeasurementRows) -> None:
    """The fill hands tags over as dictionaries (each value once, in order of first appearance);
    other columns as they are."""
    for field, column in zip(rows.table.schema, rows.table.columns, strict=True):
        if field.name not in rows.tags or not pa.types.is_dictionary(field.type):
            assert not pa.types.is_dictionary(field.type)
            continue
        (chunk,) = column.chunks
        values = chunk.dictionary.to_pylist()
        assert values == list(dict.fromkeys(chunk.dictionary_decode().to_pylist()))


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
    _assert_tags_are_dictionaries(filled)
    assert plain_strings(filled.table).schema == expected.table.schema
    assert plain_strings(filled.table).equals(expected.table)
    assert filled.time_range == expected.time_range


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_corrupted_body_the_lane_takes_is_one_the_general_path_stores_alike(data: st.DataObject) -> None:
    columns = {"time": [NOW + i for i in range(4)], "host": ["a", "bb", "a", "c"], "v": [0.5, 1.0, -2.0, 3e9]}
    body = bytearray(msgpack.packb({"m": "cpu", "columns": columns, "tags": ["host"], "precision": "us"}))
    assert columnar_lane.scan(bytes(body), None) is not None  # whole, the lane takes it
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    scanned = columnar_lane.scan(bytes(body), None)
    event(f"lane took it: {scanned is not None}")
    if scanned is None:
        return
    general = _general(bytes(body), None)
    assert not isinstance(general, BadRequest), f"the lane took a body the general path refuses: {general}"
    (filled,) = columnar_lane.fill([scanned])
    assert plain_strings(filled.table).equals(general[0].table) and filled.tags == general[0].tags


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
            "v": data.draw(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=rows, max_size=rows)),
        }
        items = list(columns.items())
        data.draw(st.randoms()).shuffle(items)  # any column order: the fill maps them by name
        body = msgpack.packb({"m": "cpu", "columns": dict(items), "tags": ["host"], "precision": "us"})
        scanned = columnar_lane.scan(body, None)
        assert scanned is not None
        bodies.append(scanned)
        expected.append(decode_msgpack(body, NOW, None)[0].table)
    tables = [plain_strings(rows.table) for rows in columnar_lane.fill(bodies)]
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
    assert plain_strings(rows.table).equals(decode_msgpack(body, NOW, "s")[0].table)
    changed = envelope.replace(b"\xa1a\xa1b", b"\xa1a\xa1\x01")  # a tag made a control character
    with pytest.raises(BadRequest, match="does not read as it did"):
        columnar_lane.scanned(WriteBatch.from_bytes(changed))


def _body(**columns: Any) -> bytes:
    return cast(bytes, msgpack.packb({"m": "cpu", "columns": columns, "tags": ["host"], "precision": "ms"}))


def test_an_envelope_mixes_bodies_and_tables_and_keeps_them_aligned() -> None:
    odd = _body(time=[1, 2, 3], host=["a", "bb", "c"], v=[1, 2, 3])  # a body of odd length first
    assert len(odd) % 8
    scanned = columnar_lane.scan(odd, None)
    assert scanned is not None
    (table_part,) = decode_msgpack(_body(time=[4], host=["d"], v=[4]), NOW, None)
    envelope = WriteBatch("id", "db", (scanned, table_part)).to_bytes()
    read = columnar_lane.scanned(WriteBatch.from_bytes(envelope))
    assert read.row_count == 4
    tables = [plain_strings(rows.table) for _database, rows in columnar_lane.tables([read])]
    assert pa.concat_tables(tables).column("v").to_pylist() == [1, 2, 3, 4]


def test_a_part_of_an_unknown_form_is_poison() -> None:
    scanned = columnar_lane.scan(_body(time=[1], host=["a"], v=[1.5]), None)
    assert scanned is not None
    envelope = WriteBatch("id", "db", (scanned,)).to_bytes()
    with pytest.raises(BadRequest, match="unknown form"):
        WriteBatch.from_bytes(envelope.replace(b"msgpack-columns", b"msgpack-columnz"))


def test_string_columns_past_32_bit_offsets_are_split_into_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = [columnar_lane.scan(_body(time=[i], host=["x" * 50], v=[i]), None) for i in range(5)]
    assert all(body is not None for body in bodies)
    monkeypatch.setattr(columnar_lane, "_MAX_STRING_BYTES", 120)  # two bodies' strings fit, not three
    filled = columnar_lane.fill([body for body in bodies if body is not None])
    assert [rows.table.num_rows for rows in filled] == [2, 2, 1]
    assert pa.concat_tables([rows.table for rows in filled]).column("v").to_pylist() == [0, 1, 2, 3, 4]


def test_an_ingest_without_the_native_library_reads_queued_bodies_with_the_general_decoders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _body(time=[1, 2], host=["a", "b"], v=[0.5, 1.5])
    scanned = columnar_lane.scan(body, None)
    assert scanned is not None
    envelope = WriteBatch("id", "db", (scanned,)).to_bytes()
    monkeypatch.setenv(NATIVE, "0")
    native.library.cache_clear()
    try:
        read = columnar_lane.scanned(WriteBatch.from_bytes(envelope))
    finally:
        monkeypatch.undo()
        native.library.cache_clear()
    (part,) = read.parts
    assert isinstance(part, MeasurementRows)
    assert part.table.equals(decode_msgpack(body, NOW, None)[0].table)


def test_the_edge_queues_a_body_once_its_shape_is_accepted_and_only_on_a_local_spool(tmp_path: Path) -> None:
    catalog = SqliteCatalog(SqliteDatabase(tmp_path / "catalog.sqlite"))
    spool = Spool(tmp_path / "spool")
    edge = WriteService(catalog, spool, 1 << 20, 1 << 20)
    shapes = [
        edge.accept(WriteRequest(WireFormat.MSGPACK, _body(time=[i], host=["a"], v=[0.5]), "db")) for i in range(3)
    ]
    other = edge.accept(WriteRequest(WireFormat.MSGPACK, _body(time=[3], host=["c"], v=[3]), "db"))  # v an int
    # A shape's first write records it, its second finds it stored as it is; from then on the lane
    # takes it. Another shape (an integer where a float is stored) is the general path's to widen.
    kinds = [type(batch.parts[0]) for batch in [*shapes, other]]
    assert kinds == [MeasurementRows, MeasurementRows, ScannedBody, MeasurementRows]
    widened = other.parts[0]
    assert isinstance(widened, MeasurementRows) and widened.table.schema.field("v").type == pa.float64()
    compressed = WriteService(catalog, Spool(tmp_path / "spool2"), 1 << 20, 1 << 20, envelope_compression="zstd")
    for _ in range(2):
        queued = compressed.accept(WriteRequest(WireFormat.MSGPACK, _body(time=[4], host=["d"], v=[4.5]), "db"))
        assert isinstance(queued.parts[0], MeasurementRows)


def test_the_requests_precision_is_checked_even_when_the_body_has_its_own() -> None:
    body = _body(time=[1], host=["a"], v=[1.5])  # its own precision: ms
    assert columnar_lane.scan(body, "fortnight") is None
    scanned = columnar_lane.scan(body, "s")
    assert scanned is not None and scanned.precision == "ms" and scanned.time_range == (1_000_000, 1_000_000)


def test_tag_columns_come_as_dictionaries_and_a_tag_of_many_values_grows_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(columnar_lane, "DICTIONARY_SIZES", ((2, 128), (4, 128)))
    monkeypatch.setattr(columnar_lane, "_tag_sizes", {})
    hosts = ["a", "b", "a", "c", "d", "c"]  # four values: past the first size, within the second
    body = cast(
        bytes,
        msgpack.packb(
            {
                "m": "cpu",
                "columns": {"time": list(range(6)), "host": hosts, "dc": ["x"] * 6, "v": [0.5] * 6},
                "tags": ["host", "dc"],
            }
        ),
    )
    scanned = columnar_lane.scan(body, None)
    assert scanned is not None
    (filled,) = columnar_lane.fill([scanned, scanned])
    _assert_tags_are_dictionaries(filled)
    assert filled.table.column("host").chunk(0).dictionary.to_pylist() == ["a", "b", "c", "d"]
    assert filled.table.column("host").chunk(0).indices.to_pylist() == [0, 1, 0, 2, 3, 2] * 2
    assert columnar_lane._tag_sizes[("cpu", ("host", "dc"))] == {"host": 1}  # dc kept the first size
    # Beyond the largest size: plain strings, and the next batch goes straight there.
    monkeypatch.setattr(columnar_lane, "DICTIONARY_SIZES", ((2, 128),))
    monkeypatch.setattr(columnar_lane, "_tag_sizes", {})
    (filled,) = columnar_lane.fill([scanned])
    assert filled.table.schema.field("host").type == pa.string()
    assert filled.table.column("host").to_pylist() == hosts
    assert pa.types.is_dictionary(filled.table.schema.field("dc").type)
    assert columnar_lane._tag_sizes[("cpu", ("host", "dc"))] == {"host": 1}
    (again,) = columnar_lane.fill([scanned])
    assert again.table.equals(filled.table)


def test_a_tag_longer_than_its_dictionary_holds_grows_it() -> None:
    long_value = "h" * 100  # more than the first size's bytes allow (64 a value)
    scanned = columnar_lane.scan(_body(time=[1, 2], host=[long_value, "b"], v=[1, 2]), None)
    assert scanned is not None
    (filled,) = columnar_lane.fill([scanned])
    assert plain_strings(filled.table).column("host").to_pylist() == [long_value, "b"]


def test_the_fill_refuses_a_dictionary_for_a_column_that_is_not_strings() -> None:
    scanned = columnar_lane.scan(_body(time=[1, 2], host=["a", "b"], v=[1.5, 2.5]), None)
    assert scanned is not None
    numbers = scanned.schema.get_field_index("v")
    with pytest.raises(BadRequest, match="does not read as it did"):
        columnar_lane._fill_with([scanned], {numbers: TagDictionary(4, 64)})


def test_bodies_that_do_not_overlap_fill_in_time_order_and_others_as_they_came() -> None:
    def body(times: list[int], first_value: int) -> ScannedBody:
        values = list(range(first_value, first_value + len(times)))
        scanned = columnar_lane.scan(_body(time=times, host=["a"] * len(times), v=values), None)
        assert scanned is not None
        return scanned

    early, middle, late = body([1, 2], 0), body([3, 4], 2), body([5, 6], 4)
    (filled,) = columnar_lane.fill([middle, late, early])  # as interleaved writers' requests come
    assert filled.table.column("v").to_pylist() == [0, 1, 2, 3, 4, 5]
    assert filled.time_range == (1_000_000, 6_000_000)  # in order: ingest sorts no row
    # Overlapping bodies, and one that starts when an earlier-arrived one ends: as they came, and
    # no range, so ingest's stable sort orders the rows (equal times keep their arrival order).
    for bodies in ([body([1, 5], 0), body([2, 3], 2)], [body([2, 3], 0), body([1, 2], 2)]):
        (filled,) = columnar_lane.fill(bodies)
        assert filled.table.column("v").to_pylist() == [0, 1, 2, 3]
        assert filled.time_range is None
