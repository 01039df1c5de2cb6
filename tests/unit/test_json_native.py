"""JSON columnar bodies read by arcs.native: the same tables, or the same errors, as the Python decoders.

The JSON reader (json_columns.c) takes only the common columnar document, strictly as JSON spells
it, and hands every other body back (``None``); ``decode_json`` must answer every body as the
Python decoders alone (``ARCS_NATIVE=0``) do, numbers read exactly as they read them.
"""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.envvars import NATIVE
from arcs.errors import BadRequest
from arcs.names import MAX_COLUMNS
from arcs.write.decoders import json_format
from arcs.write.decoders.msgpack_native import JSON, decode_columnar

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


def _outcome(body: bytes, with_native: bool) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NATIVE, "1" if with_native else "0")
        native.library.cache_clear()
        try:
            parts = json_format.decode_json(body, NOW, None)
        except BadRequest as exc:
            return ("error", exc.message)
        finally:
            native.library.cache_clear()
    return [(p.measurement, p.tags, p.table.schema, p.table.to_pylist()) for p in parts]


def _same_either_way(body: bytes) -> Any:
    with_native = _outcome(body, True)
    # By repr: -0.0 differs from 0.0 there.
    assert repr(with_native) == repr(_outcome(body, False)), body[:300]
    return with_native


def _native(library: Any, body: bytes) -> Any:
    return decode_columnar(library, body, NOW, None, reader=JSON)


def _json(document: Any, **options: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False, **options).encode()


def test_the_common_body_takes_the_native_path(library: Any) -> None:
    body = _json(GOOD)
    [part] = _native(library, body)
    assert part.measurement == "cpu"
    assert part.tags == ("host",)
    assert [str(t) for t in part.table.schema.types] == ["timestamp[ns]", "string", "double", "int64", "bool"]
    assert part.table.column("host").to_pylist() == ["a", "b", "ü"]
    assert part.table.column("up").to_pylist() == [True, False, True]
    _same_either_way(body)
    # Whitespace anywhere JSON allows it, none at all, and keys in another order.
    spaced = _json(GOOD, indent="\t").replace(b"\n", b"\r\n")
    assert _native(library, spaced) is not None
    _same_either_way(spaced)
    assert _native(library, _json(GOOD, separators=(",", ":"))) is not None
    reordered = {"precision": "ns", "tags": ["host"], "columns": GOOD["columns"], "m": "cpu"}
    assert _native(library, _json(reordered)) is not None
    # "\u00fc" is an escape: that body is the Python decoders', with the same outcome.
    assert _native(library, json.dumps(GOOD).encode()) is None
    _same_either_way(json.dumps(GOOD).encode())


def _with_column(values: str, **extra: str) -> bytes:
    """A document whose one column ``v`` is the JSON text ``values`` (an array)."""
    keys = "".join(f', "{key}": {value}' for key, value in extra.items())
    return f'{{"m": "cpu", "columns": {{"v": {values}}}{keys}}}'.encode()


@pytest.mark.parametrize(
    "values",
    [
        "[0, -0, 1, -1, 9223372036854775807, -9223372036854775808]",
        "[1, 2.5, -3e2, 4E-1, 0.0, -0.0, 1e308, 5e-324, 123456789012345]",
        '["", "a b", "ü", "\u00ff", "x\\u0000"]'.replace("\\u0000", ""),
        "[true, false, true, true, false, false, true, true, false, true]",
        "[76.57482765617637, 11.503805593416416, 900719925474099, 1.7976931348623157e308]",
    ],
)
def test_every_form_of_a_kind(library: Any, values: str) -> None:
    body = _with_column(values)
    assert _native(library, body) is not None
    _same_either_way(body)


def test_many_floats_are_read_bit_for_bit_as_python_reads_them(library: Any) -> None:
    rng = random.Random(3)
    numbers = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(5_000)]
    numbers = [n for n in numbers if math.isfinite(n)]
    numbers += [rng.random() * 10 ** rng.randint(-20, 20) for _ in range(5_000)]
    body = _with_column(json.dumps(numbers))
    [part] = _native(library, body)
    read = part.table.column("v").to_pylist()
    assert [struct.pack("<d", v) for v in read] == [struct.pack("<d", n) for n in numbers]


LEFT_TO_PYTHON = {
    "null in a column": _with_column("[1, null, 3]"),
    "bool among ints": _with_column("[1, true]"),
    "string among ints": _with_column('[1, "2"]'),
    "beyond int64": _with_column("[9223372036854775808, 1]"),
    "a long integer among floats": _with_column("[1.5, 12345678901234567]"),
    "a float beyond float64": _with_column("[1e400]"),
    "an escaped string": _with_column('["a\\"b", "c"]'),
    "an escape in a name": b'{"m": "c\\u0070u", "columns": {"v": [1]}}',
    "a raw control character": _with_column('["a\tb"]'),
    "nested values": _with_column("[[1], [2]]"),
    "objects as values": _with_column('[{"a": 1}]'),
    "an empty column": _with_column("[]"),
    "no columns": b'{"m": "cpu", "columns": {}}',
    "a row body": b'{"m": "cpu", "fields": {"v": 1}}',
    "a batch": b'{"batch": [{"m": "cpu", "columns": {"v": [1]}}]}',
    "an array": b'[{"m": "cpu", "columns": {"v": [1]}}]',
    "another key": _with_column("[1]", extra="1"),
    "measurement not a string": b'{"m": 5, "columns": {"v": [1]}}',
    "tags not strings": _with_column("[1]", tags="[1]"),
    "precision not a string": _with_column("[1]", precision="3"),
    "a bad precision": _with_column("[1]", precision='"fortnight"'),
    "a bad measurement name": b'{"m": "bad name", "columns": {"v": [1]}}',
    "a tag naming no column": _with_column("[1]", tags='["nope"]'),
    "columns of different lengths": b'{"m": "cpu", "columns": {"a": [1], "b": [1, 2]}}',
    "a repeated key": b'{"m": "cpu", "m": "mem", "columns": {"v": [1]}}',
    "a repeated column": b'{"m": "cpu", "columns": {"v": [1], "v": [2]}}',
    "trailing bytes": _with_column("[1]") + b"x",
    "a trailing comma": _with_column("[1, 2,]"),
    "leading zeros": _with_column("[01]"),
    "a bare fraction": _with_column("[.5]"),
    "a bare point": _with_column("[1.]"),
    "a plus sign": _with_column("[+1]"),
    "NaN": _with_column("[NaN]"),
    "Infinity": _with_column("[Infinity]"),
    "single quotes": b"{'m': 'cpu', 'columns': {'v': [1]}}",
    "invalid UTF-8": b'{"m": "cpu", "columns": {"v": ["\xff"]}}',
    "invalid UTF-8 in a name": b'{"m": "cp\xff", "columns": {"v": [1]}}',
    "a byte order mark": b"\xef\xbb\xbf" + _with_column("[1]"),
    "more tags than columns can be": _with_column("[1]", tags=json.dumps(["v"] * (MAX_COLUMNS + 1))),
    "too many columns": json.dumps({"m": "cpu", "columns": {f"c{i}": [1] for i in range(MAX_COLUMNS + 2)}}).encode(),
}


@pytest.mark.parametrize("body", LEFT_TO_PYTHON.values(), ids=LEFT_TO_PYTHON.keys())
def test_what_it_leaves_is_answered_as_before(library: Any, body: bytes) -> None:
    assert _native(library, body) is None
    _same_either_way(body)


def test_every_truncation_is_left_and_answered_as_before(library: Any) -> None:
    body = _json(GOOD)
    for end in range(len(body)):
        assert _native(library, body[:end]) is None
        assert _same_either_way(body[:end])[0] == "error"


_JSON_BYTES = b'0123456789.,:[]{}"\\ -+eEtfnx\xff'


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_corruption_is_answered_as_before(data: st.DataObject) -> None:
    body = bytearray(_json(GOOD))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.sampled_from(_JSON_BYTES))
    _same_either_way(bytes(body))


_kinds = st.sampled_from(
    [
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        # integers mixed with floats: up to 15 digits, as the reader takes them
        st.one_of(st.integers(-(10**15) + 1, 10**15 - 1), st.floats(allow_nan=False, allow_infinity=False)),
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
    body = json.dumps(document, ensure_ascii=data.draw(st.booleans())).encode()
    outcome = _same_either_way(body)
    library = native.library()
    assert library is not None
    escaped = b"\\" in body
    if outcome[0] != "error" and not escaped:
        assert _native(library, body) is not None  # every body it may take and validation accepts


@pytest.mark.parametrize(
    "change",
    [
        {"count": 1 << 61},  # sizes computed from it would wrap
        {"count": 0},
        {"count": 101},  # more values than the array holds
        {"array_offset": -1},
        {"array_offset": 1 << 40},
        {"array_offset": 3},  # not where the array starts
        {"values_at": 3},  # misaligned
        {"values_at": 400},  # runs past the block
        {"values_at": -8},
        {"data_at": 1 << 62},  # strings: outside the block
        {"string_bytes": 1},  # not what the strings hold
        {"string_bytes": -1},
        {"kind": 9},
    ],
)
def test_fill_refuses_a_layout_or_description_that_does_not_fit(library: Any, change: dict[str, int]) -> None:
    import ctypes

    import pyarrow as pa

    body = _json({"m": "cpu", "columns": {"s": ["abc", "de"] * 50}})
    document, slots = native.MsgpackDocument(), (native.MsgpackColumn * 4)()
    assert library.arcs_json_scan(body, len(body), ctypes.byref(document), slots, len(slots)) == 0
    column = slots[0]
    block = pa.allocate_buffer(1024)
    column.values_at, column.data_at = 0, 512  # 404 bytes of offsets, then 250 of strings
    assert library.arcs_json_fill(body, len(body), slots, 1, block.address, block.size) == 0
    for field, value in change.items():
        setattr(column, field, value)
    assert library.arcs_json_fill(body, len(body), slots, 1, block.address, 768) == 1
