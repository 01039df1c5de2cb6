"""msgspec decodes MessagePack and JSON bodies first; the result is always the reference decoder's.

For any document — valid or not — ``decode_msgpack``/``decode_json`` must give the same tables as
msgpack/json followed by the same shape rules, or the same error message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.errors import BadRequest
from arcs.write.decoders import json_format, msgpack_format, shapes
from arcs.write.decoders.shapes import rows_from_objects

NOW = 1_700_000_000_000_000


def _scalars(low: int, high: int) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), st.integers(low, high), st.floats(allow_nan=False), st.text(max_size=4))


# What each format can carry: MessagePack integers are int64 or uint64; JSON's have no bound.
_msgpack_scalars = _scalars(-(2**63), 2**64 - 1)
_json_scalars = _scalars(-(2**70), 2**70)
_common_kinds = [st.booleans(), st.floats(allow_nan=False), st.text(max_size=4), st.none()]
_msgpack_kinds = [st.integers(-(2**63), 2**64 - 1), *_common_kinds]
_json_kinds = [st.integers(-(2**70), 2**70), *_common_kinds]
_msgpack_only = st.one_of(
    st.binary(max_size=3),
    st.builds(msgpack.Timestamp, st.integers(-(2**34), 2**34), st.integers(0, 999_999_999)),
    st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=3)),
    st.dictionaries(st.integers(0, 3), st.integers(0, 3), max_size=2),
)
_names = st.sampled_from(["time", "t", "v", "w", "host", "Host", "m", "columns", "fields", "tags"])


def _documents(values: st.SearchStrategy[Any], kinds: list[st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Mostly well-formed documents (so the fast path's successes are compared too), some not."""

    @st.composite
    def columnar(draw: st.DrawFn) -> dict[Any, Any]:
        rows = draw(st.integers(1, 4))
        names = draw(st.lists(_names.filter(lambda n: n != "time"), min_size=1, max_size=3, unique=True))
        columns: dict[str, list[Any]] = {}
        for name in names:
            # One kind per column usually; now and then any value at all.
            kind = values if draw(st.integers(0, 3)) == 0 else draw(st.sampled_from(kinds))
            columns[name] = draw(st.lists(kind, min_size=rows, max_size=rows))
        if draw(st.booleans()):
            stamps = st.one_of(st.integers(0, 10**18), st.integers(-(10**18), 10**18), st.none())
            columns["time"] = draw(st.lists(stamps, min_size=rows, max_size=rows))
        item: dict[Any, Any] = {"m": draw(st.sampled_from(["cpu", "mem", "cpu", "bad name"])), "columns": columns}
        if draw(st.booleans()):
            item["tags"] = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
        if draw(st.integers(0, 3)) == 0:
            item["precision"] = draw(st.sampled_from(["ns", "us", "s", "h", "x"]))
        return item

    row = st.fixed_dictionaries(
        {"m": st.sampled_from(["cpu", "mem"]), "fields": st.dictionaries(_names, st.one_of(*kinds), max_size=3)},
        optional={"tags": st.dictionaries(_names, st.text(max_size=3), max_size=2), "t": values},
    )
    item = st.one_of(columnar(), row, values)
    return st.one_of(item, st.lists(item, max_size=3), st.fixed_dictionaries({"batch": st.lists(item, max_size=3)}))


def _outcome(decode: Callable[[], Any]) -> Any:
    try:
        parts = decode()
    except BadRequest as exc:
        return ("error", exc.message)
    return [(p.measurement, p.tags, p.table.schema, p.table.to_pydict()) for p in parts]


def _same(left: Any, right: Any) -> None:
    if isinstance(left, tuple) or isinstance(right, tuple):
        assert left == right
        return
    assert len(left) == len(right)
    for a, b in zip(left, right, strict=True):
        assert a[:3] == b[:3]
        assert json.dumps(a[3], default=str, sort_keys=True) == json.dumps(b[3], default=str, sort_keys=True)


@settings(max_examples=400, deadline=None)
@given(_documents(st.one_of(_msgpack_scalars, _msgpack_only), _msgpack_kinds))
def test_msgpack_fast_path_matches_the_reference(document: Any) -> None:
    body = msgpack.packb(document, use_bin_type=True, strict_types=False)
    fast = _outcome(lambda: msgpack_format.decode_msgpack(body, NOW, None))
    reference = _outcome(lambda: rows_from_objects(msgpack_format.reference(body), NOW, None))
    _same(fast, reference)


@settings(max_examples=400, deadline=None)
@given(_documents(_json_scalars, _json_kinds))
def test_json_fast_path_matches_the_reference(document: Any) -> None:
    body = json.dumps(document).encode()
    fast = _outcome(lambda: json_format.decode_json(body, NOW, None))
    reference = _outcome(lambda: rows_from_objects(json_format.reference(body), NOW, None))
    _same(fast, reference)


@pytest.mark.parametrize(
    "body",
    [
        msgpack.packb({"m": "cpu", "columns": {"v": [1]}, 1: 2}),  # an int key msgspec would take
        msgpack.packb([{"m": "cpu", "columns": {"v": [1]}, 7: 0}]),
        msgpack.packb({"batch": [{"m": "cpu", "fields": {"v": 1}, 3: 3}]}),
    ],
)
def test_int_keys_msgspec_would_take_are_refused_as_before(body: bytes) -> None:
    with pytest.raises(BadRequest, match="int is not allowed for map key"):
        msgpack_format.decode_msgpack(body, NOW, None)


def test_timestamps_keep_the_reference_rounding() -> None:
    # msgspec would round 999 ns up to the next microsecond; msgpack drops them.
    body = msgpack.packb({"m": "cpu", "columns": {"time": [msgpack.Timestamp(1, 999)], "v": [1]}})
    (part,) = msgpack_format.decode_msgpack(body, NOW, None)
    assert part.table.column("time").cast(pa.int64()).to_pylist() == [1_000_000_000]


def test_numbers_beyond_float64_in_json_are_refused_as_before() -> None:
    with pytest.raises(BadRequest, match="outside the float64 range"):
        json_format.decode_json(b'{"m": "cpu", "columns": {"v": [1e400]}}', NOW, None)
    assert math.isinf(float("1e400"))


def test_row_timestamps_keep_the_reference_rounding() -> None:
    rows = [{"m": "cpu", "t": msgpack.Timestamp(-2, 999_999_999), "fields": {"v": 1}}]
    (part,) = msgpack_format.decode_msgpack(msgpack.packb(rows), NOW, None)
    assert part.table.column("time").cast(pa.int64()).to_pylist() == [-1_000_001_000]


def test_rows_that_skip_a_key_are_padded_where_they_skip_it() -> None:
    # After a row without "w", a row with every key again must not shift "w"'s values up.
    rows = [
        {"m": "cpu", "t": 1, "fields": {"v": 1, "w": 10}},
        {"m": "cpu", "t": 2, "fields": {"v": 2}},
        {"m": "cpu", "t": 3, "fields": {"v": 3, "w": 30}},
        {"m": "cpu", "t": 4, "tags": {"h": "a"}, "fields": {"v": 4, "w": 40}},
        {"m": "cpu", "t": 5, "tags": {"h": "b"}, "fields": {"w": 50, "v": 5}},
    ]
    (part,) = msgpack_format.decode_msgpack(msgpack.packb(rows), NOW, "s")
    assert part.table.column("w").to_pylist() == [10, None, 30, 40, 50]
    assert part.table.column("v").to_pylist() == [1, 2, 3, 4, 5]
    assert part.table.column("h").to_pylist() == [None, None, None, "a", "b"]


_row_values = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=2), st.booleans(), st.none())


@st.composite
def _row_bodies(draw: st.DrawFn) -> Any:
    """Row-shaped bodies that mostly repeat the first row's keys, now and then with one change."""
    tag_keys = draw(st.lists(st.sampled_from(["host", "dc", "v"]), max_size=2, unique=True))
    field_keys = draw(st.lists(st.sampled_from(["v", "w", "x", "time"]), min_size=1, max_size=3, unique=True))
    time_key = draw(st.sampled_from(["t", "time", None]))
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        row: dict[Any, Any] = {"m": "cpu", "fields": {k: draw(_row_values) for k in field_keys}}
        if tag_keys:
            row["tags"] = {k: draw(st.one_of(st.text(max_size=2), st.none())) for k in tag_keys}
        if time_key:
            row[time_key] = draw(st.one_of(st.integers(0, 10**18), st.none()))
        rows.append(row)
    if draw(st.booleans()):
        row = rows[draw(st.integers(0, len(rows) - 1))]
        change = draw(st.sampled_from(["drop field", "add field", "tags none", "m", "precision", "t", "columns"]))
        if change == "drop field" and len(row["fields"]) > 1:
            row["fields"].pop(next(iter(row["fields"])))
        elif change == "add field":
            row["fields"]["extra"] = 1
        elif change == "tags none":
            row["tags"] = None
        elif change == "m":
            row["m"] = "mem"
        elif change == "precision":
            row["precision"] = "s"
        elif change == "t":
            row["t"] = 5
        else:
            row["columns"] = {"v": [1]}
    return rows if draw(st.booleans()) else {"batch": rows}


@settings(max_examples=400, deadline=None)
@given(_row_bodies(), st.sampled_from([None, "ns", "s"]))
def test_uniform_rows_gathered_a_column_at_a_time_match_the_row_loop(document: Any, precision: str | None) -> None:
    gathered = _outcome(lambda: rows_from_objects(document, NOW, precision))
    saved = shapes._uniform_rows
    shapes._uniform_rows = lambda *_args: None  # type: ignore[assignment]
    try:
        row_by_row = _outcome(lambda: rows_from_objects(document, NOW, precision))
    finally:
        shapes._uniform_rows = saved
    _same(gathered, row_by_row)


def test_uniform_rows_take_the_column_path() -> None:
    rows = [{"m": "cpu", "t": i, "tags": {"h": f"h{i}"}, "fields": {"v": i, "w": float(i)}} for i in range(3)]
    gathered = shapes._uniform_rows(rows, "s", True)
    assert gathered is not None and gathered.rows == 3
    (part,) = rows_from_objects(rows, NOW, "s")
    assert part.table.column("h").to_pylist() == ["h0", "h1", "h2"]
    assert part.table.column("w").to_pylist() == [0.0, 1.0, 2.0]
