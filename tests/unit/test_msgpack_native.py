"""MessagePack columnar bodies read by arcs.native: the same tables, or the same errors, as the Python decoders.

The native reader takes only the common body and hands every other one back (``None``); these
tests check that it takes what it should, leaves what it must, never reads past a body, and that
``decode_msgpack`` answers every body as the Python decoders alone (``ARCS_NATIVE=0``) do.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.envvars import NATIVE
from arcs.errors import BadRequest
from arcs.names import MAX_COLUMNS
from arcs.write.decoders import msgpack_format
from arcs.write.decoders.columns import MAX_NANOS
from arcs.write.decoders.msgpack_native import decode_columnar

NOW = 1_700_000_000_000_000
GOOD = {
    "m": "cpu",
    "columns": {
        "time": [1_700_000_000_000_000_000 + i for i in range(3)],
        "host": ["a", "b", "ü"],
        "usage": [0.5, 1.5, -2.25],
        "count": [1, -200, 70_000],
        "up": [True, False, True],
    },
    "tags": ["host"],
    "precision": "ns",
}


def _decoded(body: bytes, with_native: bool, precision: str | None = None) -> Any:
    """The body's parts as ``decode_msgpack`` gives them with or without the library, or its error."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NATIVE, "1" if with_native else "0")
        native.library.cache_clear()
        try:
            return msgpack_format.decode_msgpack(body, NOW, precision)
        except BadRequest as exc:
            return ("error", exc.message)
        finally:
            native.library.cache_clear()


def _outcome(body: bytes, with_native: bool) -> Any:
    parts = _decoded(body, with_native)
    if isinstance(parts, tuple):
        return parts
    return [(p.measurement, p.tags, p.table.schema, p.table.to_pylist()) for p in parts]


def _same_either_way(body: bytes) -> Any:
    with_native = _outcome(body, True)
    # By repr: a NaN equals a NaN there (not under ==), and -0.0 differs from 0.0.
    assert repr(with_native) == repr(_outcome(body, False))
    return with_native


def test_the_common_body_takes_the_native_path(library: Any) -> None:
    body = msgpack.packb(GOOD)
    rows = decode_columnar(library, body, NOW, None)
    assert rows is not None
    [part] = rows
    assert part.measurement == "cpu"
    assert part.tags == ("host",)
    assert [str(t) for t in part.table.schema.types] == [
        "timestamp[ns]",
        "string",
        "double",
        "int64",
        "bool",
    ]
    assert part.table.column("host").to_pylist() == ["a", "b", "ü"]
    assert part.table.column("count").to_pylist() == [1, -200, 70_000]
    _same_either_way(body)


def _with_column(values: list[Any], **extra: Any) -> dict[str, Any]:
    return {"m": "cpu", "columns": {"time": [1, 2, 3][: len(values)], "v": values}, **extra}


@pytest.mark.parametrize(
    "values",
    [
        [0, 127, -1, -32],  # fixints
        [128, 255, 256, 65_535],  # uint8, uint16
        [65_536, 2**32 - 1, 2**32, 2**63 - 1],  # uint32, uint64
        [-33, -128, -129, -32_768],  # int8, int16
        [-32_769, -(2**31), -(2**31) - 1, -(2**63)],  # int32, int64
        [0.1, -0.0, 1e308, 5e-324],
        ["", "x" * 31, "y" * 32, "z" * 300, "w" * 70_000],  # fixstr, str8, str16, str32
        [True, False],
    ],
)
def test_every_encoding_of_a_kind(library: Any, values: list[Any]) -> None:
    document = {"m": "cpu", "columns": {"v": values}}
    body = msgpack.packb(document)
    assert decode_columnar(library, body, NOW, None) is not None
    [(_m, _tags, _schema, rows)] = _same_either_way(body)
    assert [row["v"] for row in rows] == values


def test_float32_is_the_double_it_widens_to(library: Any) -> None:
    body = msgpack.packb({"m": "cpu", "columns": {"v": [0.1, 3.5]}}, use_single_float=True)
    assert body.count(b"\xca") == 2
    assert decode_columnar(library, body, NOW, None) is not None
    [(_m, _t, _s, rows)] = _same_either_way(body)
    assert rows[0]["v"] == struct.unpack(">f", struct.pack(">f", 0.1))[0]


def test_wide_containers(library: Any) -> None:
    """map16/array16 heads (16 keys or more; 16 values or more)."""
    columns = {f"c{i}": list(range(20)) for i in range(17)}
    body = msgpack.packb({"m": "cpu", "columns": columns})
    assert b"\xde\x00\x11" in body
    assert b"\xdc\x00\x14" in body
    assert decode_columnar(library, body, NOW, None) is not None
    _same_either_way(body)


def _invalid_utf8() -> bytes:
    # {"m": "cpu", "columns": {"v": ["\xff"]}} with a raw, invalid string byte
    return b"\x82\xa1m\xa3cpu\xa7columns\x81\xa1v\x91\xa1\xff"


LEFT_TO_PYTHON = {
    "nil in a column": msgpack.packb(_with_column([1, None, 3])),
    "mixed kinds": msgpack.packb(_with_column([1, 2.5, 3])),
    "bool among ints": msgpack.packb(_with_column([1, True])),
    "beyond int64": msgpack.packb(_with_column([2**63, 1])),
    "binary values": msgpack.packb(_with_column([b"\x00"]), use_bin_type=True),
    "timestamp extension": msgpack.packb(_with_column([msgpack.Timestamp(1, 0)]), datetime=False),
    "nested values": msgpack.packb(_with_column([[1], [2]])),
    "an empty column": msgpack.packb(_with_column([])),
    "no columns": msgpack.packb({"m": "cpu", "columns": {}}),
    "a row body": msgpack.packb({"m": "cpu", "fields": {"v": 1}}),
    "a batch": msgpack.packb({"batch": [_with_column([1])]}),
    "an array": msgpack.packb([_with_column([1])]),
    "another key": msgpack.packb(_with_column([1], extra=1)),
    "measurement not a string": msgpack.packb({"m": 5, "columns": {"v": [1]}}),
    "tags not strings": msgpack.packb(_with_column([1], tags=[1])),
    "precision not a string": msgpack.packb(_with_column([1], precision=3)),
    "a bad precision": msgpack.packb(_with_column([1], precision="fortnight")),
    "a bad measurement name": msgpack.packb({"m": "bad name", "columns": {"v": [1]}}),
    "a tag naming no column": msgpack.packb(_with_column([1], tags=["nope"])),
    "columns of different lengths": msgpack.packb({"m": "cpu", "columns": {"a": [1], "b": [1, 2]}}),
    "an integer key": msgpack.packb({"m": "cpu", "columns": {"v": [1]}, 1: 2}),
    "a repeated key": b"\x83\xa1m\xa3cpu\xa1m\xa3mem\xa7columns\x81\xa1v\x91\x01",
    "a repeated column": b"\x82\xa1m\xa3cpu\xa7columns\x82\xa1v\x91\x01\xa1v\x91\x02",
    "trailing bytes": msgpack.packb(_with_column([1])) + b"\x00",
    "invalid UTF-8": _invalid_utf8(),
    "a count beyond the body": b"\x82\xa1m\xa3cpu\xa7columns\x81\xa1v\xdd\xff\xff\xff\xff\x01",
    "more tags than columns can be": msgpack.packb(_with_column([1], tags=["v"] * (MAX_COLUMNS + 1))),
    "too many columns": msgpack.packb({"m": "cpu", "columns": {f"c{i}": [1] for i in range(MAX_COLUMNS + 2)}}),
}


@pytest.mark.parametrize("body", LEFT_TO_PYTHON.values(), ids=LEFT_TO_PYTHON.keys())
def test_what_it_leaves_is_answered_as_before(library: Any, body: bytes) -> None:
    assert decode_columnar(library, body, NOW, None) is None
    _same_either_way(body)


def _prefixes(body: bytes) -> Iterator[bytes]:
    for end in range(len(body)):
        yield body[:end]


def test_every_truncation_is_left_and_answered_as_before(library: Any) -> None:
    body = msgpack.packb(GOOD)
    for prefix in _prefixes(body):
        assert decode_columnar(library, prefix, NOW, None) is None
        assert _same_either_way(prefix)[0] == "error"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_corruption_is_answered_as_before(data: st.DataObject) -> None:
    body = bytearray(msgpack.packb(GOOD))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    _same_either_way(bytes(body))


_kinds = st.sampled_from(
    [
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False),
        st.floats(width=32, allow_nan=False),
        st.text(max_size=40),
        st.booleans(),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_homogeneous_columns_are_read_natively_and_alike(data: st.DataObject) -> None:
    rows = data.draw(st.integers(1, 40))
    names = data.draw(st.lists(st.sampled_from(["a", "b", "host", "Host", "v", "x y"]), min_size=1, unique=True))
    columns = {name: data.draw(st.lists(data.draw(_kinds), min_size=rows, max_size=rows)) for name in names}
    if data.draw(st.booleans()):
        columns["time"] = data.draw(st.lists(st.integers(0, 2**62), min_size=rows, max_size=rows))
    document: dict[str, Any] = {"m": "cpu", "columns": columns}
    if data.draw(st.booleans()):
        document["tags"] = data.draw(st.lists(st.sampled_from(names), unique=True))
    if data.draw(st.booleans()):
        document["precision"] = data.draw(st.sampled_from(["ns", "us", "ms", "s"]))
    body = msgpack.packb(document)
    outcome = _same_either_way(body)
    library = native.library()
    assert library is not None
    taken = decode_columnar(library, body, NOW, None) is not None
    assert taken == (outcome[0] != "error")  # every body it may take and validation accepts


def test_the_requests_precision_is_checked_even_when_the_body_has_its_own(library: Any) -> None:
    body = msgpack.packb(_with_column([1], precision="s"))
    assert decode_columnar(library, body, NOW, "fortnight") is None
    with pytest.raises(BadRequest, match="invalid precision"):
        msgpack_format.decode_msgpack(body, NOW, "fortnight")


def _scan(library: Any, body: bytes) -> tuple[Any, Any, list[Any]]:
    import ctypes

    document = native.MsgpackDocument()
    slots = (native.MsgpackColumn * 4)()
    assert library.arcs_msgpack_scan(body, len(body), ctypes.byref(document), slots, len(slots)) == 0
    return document, slots, list(slots[: document.column_count])


def test_the_scan_reports_integer_bounds_and_printable_strings_at_their_edges(library: Any) -> None:
    import pyarrow as pa

    from arcs.write.decoders.msgpack_native import _fill

    edges = {
        "n": [0, -(2**63), 2**63 - 1, 5],
        "plain": [" ", "~", "a b", ""],  # 0x20 and 0x7e are printable
        "unit": ["a", "\x1f"],
        "delete": ["\x7f"],
        "accent": ["é"],
    }
    for name, values in edges.items():
        body = msgpack.packb({"m": "cpu", "columns": {name: values}})
        document, slots, columns = _scan(library, body)
        block = _fill(library.arcs_msgpack_fill, body, document, slots)
        (column,) = columns
        if name == "n":
            assert (column.minimum, column.maximum) == (-(2**63), 2**63 - 1)
            values_buffer = block.slice(column.values_at, 8 * column.count)
            assert pa.Array.from_buffers(pa.int64(), column.count, [None, values_buffer]).to_pylist() == values
        else:
            assert bool(column.flags & native.MSGPACK_PRINTABLE_ASCII) == (name == "plain"), name


_BIG = 2**40  # encoded as uint64 (0xcf) when positive, int64 (0xd3) when below -2**31


@pytest.mark.parametrize(
    ("values", "nondecreasing"),
    [
        ([_BIG, _BIG + 1, _BIG + 1, 2**63 - 1], True),  # uint64 throughout
        ([_BIG + 5, _BIG, _BIG + 9], False),  # one step down
        ([-_BIG, -_BIG + 7, -(2**63)], False),  # int64 throughout
        ([-(2**63), -_BIG], True),
        ([_BIG] * 5 + [1], False),  # one value in another encoding: read value by value
        ([1, _BIG, _BIG], True),
    ],
)
def test_columns_of_one_nine_byte_encoding_read_as_value_by_value(
    library: Any, values: list[int], nondecreasing: bool
) -> None:
    import pyarrow as pa

    from arcs.write.decoders.msgpack_native import _fill

    body = msgpack.packb({"m": "cpu", "columns": {"n": values, "f": [float(v) for v in values]}})
    document, slots, (integers, floats) = _scan(library, body)
    assert (integers.minimum, integers.maximum) == (min(values), max(values))
    assert bool(integers.flags & native.MSGPACK_NONDECREASING) == nondecreasing
    block = _fill(library.arcs_msgpack_fill, body, document, slots)
    for column, arrow_type, expected in ((integers, pa.int64(), values), (floats, pa.float64(), map(float, values))):
        buffer = block.slice(column.values_at, 8 * column.count)
        assert pa.Array.from_buffers(arrow_type, column.count, [None, buffer]).to_pylist() == list(expected)
    _same_either_way(body)


def test_a_uint64_beyond_int64_is_refused_in_a_column_of_one_encoding(library: Any) -> None:
    import pyarrow as pa

    body = msgpack.packb({"m": "cpu", "columns": {"n": [_BIG, 2**63, _BIG]}})
    assert decode_columnar(library, body, NOW, None) is None
    assert _same_either_way(body)[0] == "error"
    # The fill checks again what the scan found: a value changed between them is refused.
    good = bytearray(msgpack.packb({"m": "cpu", "columns": {"n": [_BIG, _BIG + 1]}}))
    _document, slots, (column,) = _scan(library, bytes(good))
    good[column.array_offset + 1] = 0x80  # the first value's top byte: now beyond int64
    block = pa.allocate_buffer(1024)
    column.values_at = 0
    assert library.arcs_msgpack_fill(bytes(good), len(good), slots, 1, block.address, block.size) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"count": 1 << 61},  # sizes computed from it would wrap
        {"count": 0},
        {"array_offset": -1},
        {"array_offset": 1 << 40},
        {"values_at": 3},  # misaligned
        {"values_at": 400},  # runs past the block
        {"values_at": -8},
        {"data_at": 1 << 62},  # strings: outside the block
        {"string_bytes": 1},  # not what the strings hold
    ],
)
def test_fill_refuses_a_layout_or_description_that_does_not_fit(library: Any, change: dict[str, int]) -> None:
    import pyarrow as pa

    body = msgpack.packb({"m": "cpu", "columns": {"s": ["abc", "de"] * 50}})
    _document, slots, (column,) = _scan(library, body)
    block = pa.allocate_buffer(1024)
    column.values_at, column.data_at = 0, 512  # 404 bytes of offsets, then 250 of strings
    assert library.arcs_msgpack_fill(body, len(body), slots, 1, block.address, block.size) == 0
    for field, value in change.items():
        setattr(column, field, value)
    assert library.arcs_msgpack_fill(body, len(body), slots, 1, block.address, 768) == 1


def test_the_scan_lays_columns_out_aligned_one_after_another(library: Any) -> None:
    body = msgpack.packb({"m": "cpu", "columns": {"t": [1, 2, 3], "s": ["ab", "c", ""], "b": [True] * 9, "f": [0.5]}})
    document, _slots, columns = _scan(library, body)
    regions = []
    for column in columns:
        kind, count = column.kind, column.count
        values = (
            4 * (count + 1)
            if kind == native.MSGPACK_STRING
            else (count + 7) // 8
            if kind == native.MSGPACK_BOOL
            else 8 * count
        )
        regions.append((column.values_at, values))
        if kind == native.MSGPACK_STRING:
            regions.append((column.data_at, column.string_bytes))
    assert all(start % 64 == 0 for start, _size in regions)
    assert all(a + size <= b for (a, size), (b, _) in itertools.pairwise(regions))
    last_start, last_size = regions[-1]
    assert last_start + last_size <= document.block_bytes == -(-(last_start + last_size) // 64) * 64


@settings(max_examples=300, deadline=None)
@given(
    times=st.lists(
        st.one_of(
            st.integers(0, 3_000_000_000),  # seconds
            st.integers(1_600_000_000_000_000_000, 1_600_000_000_000_100_000),  # nanoseconds
            st.integers(-(2**63), 2**63 - 1),
        ),
        min_size=1,
        max_size=30,
    ),
    precision=st.sampled_from([None, "s", "ms", "us", "ns"]),
)
def test_a_time_range_is_given_only_for_rows_in_time_order(times: list[int], precision: str | None) -> None:
    body = msgpack.packb({"m": "cpu", "columns": {"time": times, "v": [1.0] * len(times)}})
    loaded = native.library()
    assert loaded is not None
    parts = decode_columnar(loaded, body, NOW, precision)
    if parts is None:
        return  # refused (out of range, ...): the general path answers, with no range
    (part,) = parts
    micros = part.table.column("time").cast("int64").to_pylist()
    if part.time_range is not None:
        assert micros == sorted(micros)
        assert part.time_range == (micros[0], micros[-1])
    elif times == sorted(times) and min(times) >= 0:
        # In order but not given a range: only when the times span more than one unit.
        assert precision is None


def test_negative_zero_is_read_alike() -> None:
    body = msgpack.packb({"m": "cpu", "columns": {"v": [-0.0, 0.0, 1.5]}})
    [(_m, _t, _s, rows)] = _same_either_way(body)
    assert repr([row["v"] for row in rows]) == "[-0.0, 0.0, 1.5]"


@pytest.mark.parametrize("special", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("single", [False, True], ids=["float64", "float32"])
@pytest.mark.parametrize("uniform", [False, True], ids=["mixed-widths", "one-width"])
def test_nan_and_infinities_are_refused_alike(library: Any, special: float, single: bool, uniform: bool) -> None:
    """Either loop of the scan (a column of one width, or read value by value) leaves them to the
    general path, which refuses them in the same words with or without the library."""
    last = msgpack.packb(2.5, use_single_float=single if uniform else not single)
    column = b"\x93" + b"".join(msgpack.packb(v, use_single_float=single) for v in (1.5, special)) + last
    body = b"\x82" + msgpack.packb("m") + msgpack.packb("cpu") + msgpack.packb("columns") + b"\x81\xa1v" + column
    assert decode_columnar(library, body, NOW, None) is None
    outcome = _same_either_way(body)
    assert outcome[0] == "error" and "column 'v'" in outcome[1] and "NaN or an infinite number" in outcome[1]


# Where one unit stops covering the times, or multiplying them would leave the range.
_TIME_EDGES = [0, 9_999_999_999, 10_000_000_000, 9_999_999_999_999, 10_000_000_000_000, 2**63 - 1]
_TIME_EDGES += [MAX_NANOS // 1_000, MAX_NANOS // 1_000 + 1, MAX_NANOS // 10**9, MAX_NANOS // 10**9 + 1, MAX_NANOS + 1]


@settings(max_examples=300, deadline=None)
@given(
    start=st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from(_TIME_EDGES)),
    steps=st.lists(st.integers(0, 10**13), max_size=20),
    body_precision=st.sampled_from([None, "ns", "n", "us", "u", "ms", "s", "m", "h"]),
    request_precision=st.sampled_from([None, "ns", "n", "us", "u", "ms", "s", "m", "h"]),
)
def test_times_in_order_made_nanoseconds_in_place_are_those_of_the_general_path(
    start: int, steps: list[int], body_precision: str | None, request_precision: str | None
) -> None:
    times = [min(time, 2**63 - 1) for time in itertools.accumulate([start, *steps])]
    document: dict[str, Any] = {"m": "cpu", "columns": {"time": times, "v": [1.0] * len(times)}}
    if body_precision is not None:
        document["precision"] = body_precision
    body = msgpack.packb(document)
    with_native = _decoded(body, True, request_precision)
    without = _decoded(body, False, request_precision)
    if isinstance(with_native, tuple):  # an error
        assert with_native == without
        return
    # The tables are the same; only the reader in order knows the range (the general path checks).
    assert [(p.measurement, p.table) for p in with_native] == [(p.measurement, p.table) for p in without]
    (part,) = with_native
    nanos = part.table.column("time").cast("int64").to_pylist()
    if part.time_range is not None:
        assert part.time_range == (nanos[0], nanos[-1])


def test_rescale_divides_and_multiplies_in_place_and_refuses_other_factors(library: Any) -> None:
    import ctypes

    values = (ctypes.c_int64 * 5)(0, 999, 1_000, 123_456_789, 2**63 - 1)
    assert library.arcs_msgpack_rescale(ctypes.addressof(values), 5, 1, 1_000) == 0
    assert list(values) == [0, 0, 1, 123_456, (2**63 - 1) // 1_000]
    assert library.arcs_msgpack_rescale(ctypes.addressof(values), 5, 1, 7) == 0  # any other divisor
    assert list(values) == [0, 0, 0, 17_636, (2**63 - 1) // 1_000 // 7]
    seconds = (ctypes.c_int64 * 2)(1, 1_700_000_000)
    assert library.arcs_msgpack_rescale(ctypes.addressof(seconds), 2, 1_000_000, 1) == 0
    assert list(seconds) == [1_000_000, 1_700_000_000_000_000]
    for multiply, divide, count in [(1_000, 1_000, 2), (0, 1, 2), (1, 0, 2), (-1, 1, 2), (1, 1, -1)]:
        assert library.arcs_msgpack_rescale(ctypes.addressof(seconds), count, multiply, divide) != 0
    assert list(seconds) == [1_000_000, 1_700_000_000_000_000]  # refused: untouched


def test_times_in_order_are_made_nanoseconds_by_the_reader_not_arrow(
    library: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arcs.write.decoders import columns

    def no_arrow_path(*args: object) -> None:
        raise AssertionError("converted by Arrow's kernels")

    monkeypatch.setattr(columns, "_ints_in_one_unit", no_arrow_path)
    for precision, factor in (("ns", 1_000), ("s", 1)):
        times = [1_700_000_000 * factor, 1_700_000_001 * factor]
        body = msgpack.packb({"m": "cpu", "columns": {"time": times, "v": [1.0, 2.0]}, "precision": precision})
        (part,) = decode_columnar(library, body, NOW, None)
        expected = [1_700_000_000_000_000_000, 1_700_000_001_000_000_000] if precision == "s" else times
        assert part.table.column("time").cast("int64").to_pylist() == expected
        assert part.time_range == (expected[0], expected[-1])


@settings(max_examples=400, deadline=None)
@given(
    strings=st.lists(
        st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=20), min_size=1, max_size=6
    )
)
def test_scan_and_fill_call_a_column_printable_exactly_when_every_byte_is(strings: list[str]) -> None:
    # Strings shorter and longer than the eight bytes tested at a time, the last ending the body.
    body = msgpack.packb({"m": "cpu", "columns": {"s": strings}})
    library = native.library()
    assert library is not None
    document, slots, (column,) = _scan(library, body)
    expected = all(0x20 <= byte <= 0x7E for text in strings for byte in text.encode())
    assert bool(column.flags & native.MSGPACK_PRINTABLE_ASCII) == expected
    import pyarrow as pa

    block = pa.allocate_buffer(document.block_bytes)
    assert library.arcs_msgpack_fill(body, len(body), slots, 1, block.address, block.size) == 0
    assert bool(column.flags & native.MSGPACK_PRINTABLE_ASCII) == expected
