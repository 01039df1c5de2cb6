"""Whatever arrives, the answer is a table or a client error, and a small body may not become a
huge table.
"""

from __future__ import annotations

import json
import time
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arcs.errors import ArcsError, BadRequest
from arcs.names import MAX_COLUMNS
from arcs.write.decoders import WireFormat, decode
from arcs.write.decoders import columns as columns_module
from tests.unit.wire_documents import FORMATS, GOOD, NOW, decoded, encode

# --- fuzz: whatever arrives, the answer is a table or a client error -------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.floats(),
    st.text(max_size=5),
    st.sampled_from(["time", "m", "cpu", "columns", "fields", "tags", "2024-01-01T00:00:00Z", "s", "ns"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12,
)
_names = st.sampled_from(["cpu", "mem", "1x", "time", "Time", "v", "host", ""])
_documents = st.one_of(
    _values,
    st.fixed_dictionaries(
        {"m": _names, "columns": st.dictionaries(_names, st.lists(_scalars, max_size=3), max_size=4)},
        optional={"tags": st.lists(_names, max_size=2), "precision": st.sampled_from(["s", "ms", "x", None])},
    ),
    st.fixed_dictionaries(
        {"m": _names, "fields": st.dictionaries(_names, _scalars, max_size=3)},
        optional={"t": _scalars, "tags": st.dictionaries(_names, _scalars, max_size=2)},
    ),
)


def _check_table_or_client_error(kind: WireFormat, body: bytes) -> None:
    try:
        parts = decode(kind, body, NOW, None)
    except ArcsError as exc:
        status = exc.status
    else:
        status = 204
    assert status in (204, 400, 413, 415)
    if status != 204:
        return
    for part in parts:
        assert part.table.column_names[0] == "time"
        assert part.table.num_rows > 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_documents, st.lists(_documents, max_size=3)))
def test_any_document_gives_a_table_or_a_client_error(document: Any) -> None:
    try:
        packed = msgpack.packb(document, use_bin_type=True)
    except OverflowError:  # an integer MessagePack cannot carry
        pass
    else:
        _check_table_or_client_error(WireFormat.MSGPACK, packed)
    try:
        body = json.dumps(document).encode("utf-8", "surrogatepass")
    except ValueError:
        return
    _check_table_or_client_error(WireFormat.JSON, body)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_give_a_table_or_a_client_error(body: bytes) -> None:
    for kind in (WireFormat.MSGPACK, WireFormat.JSON, WireFormat.LINE_PROTOCOL):
        _check_table_or_client_error(kind, body)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_corruption_of_a_good_body_gives_a_table_or_a_client_error(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(FORMATS))
    body = bytearray(encode(kind, [GOOD, {"m": "cpu", "t": 5, "tags": {"h": "x"}, "fields": {"s": "text"}}]))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(body) - 1))
        body[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    _check_table_or_client_error(kind, bytes(body[:cut]))


# --- limits: a small body may not become a huge table ---------------------------------------------


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns_module, "MAX_PARTS", 20)
    monkeypatch.setattr(columns_module, "MAX_REQUEST_COLUMNS", 300)
    monkeypatch.setattr(columns_module, "MAX_EMPTY_CELLS", 5000)


def _error(kind: WireFormat, document: Any) -> str:
    with pytest.raises(BadRequest) as caught:
        decode(kind, encode(kind, document), NOW, None)
    return caught.value.message


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("kind", FORMATS)
def test_too_many_tables(kind: WireFormat) -> None:
    assert _error(kind, [{"m": "c", "columns": {"v": [1]}}] * 21) == (
        "item 20: the request makes more than 20 tables (measurements or items); split it"
    )
    assert _error(kind, [{"m": f"m{n}", "fields": {"v": 1}} for n in range(21)]) == (
        "item 20: the request makes more than 20 tables (measurements or items); split it"
    )
    assert len(decoded(kind, [{"m": "c", "columns": {"v": [1]}}] * 20)) == 20


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("kind", FORMATS)
def test_too_many_columns_over_all_tables(kind: WireFormat) -> None:
    wide = {"m": "c", "columns": {f"c{n}": [1] for n in range(100)}}
    assert _error(kind, [wide] * 4) == "item 3: the request makes more than 300 columns over all its tables; split it"
    rows = [{"m": f"m{n}", "fields": {f"f{k}": 1 for k in range(100)}} for n in range(3)]
    assert _error(kind, rows) == "item 2: the request makes more than 300 columns over all its tables; split it"


@pytest.mark.usefixtures("small_limits")
@pytest.mark.parametrize("kind", FORMATS)
def test_sparse_rows_cannot_blow_up(kind: WireFormat) -> None:
    rows = [{"m": "c", "fields": {f"f{n % 100}": 1}} for n in range(200)]
    assert "the request leaves more than 5000 cells empty" in _error(kind, rows)
    (part,) = decoded(kind, rows[:60])
    assert part.table.num_rows == 60


def test_sparse_rows_at_the_real_limit_fail_fast() -> None:
    rows = [{"m": "c", "fields": {f"f{n % 1000}": 1}} for n in range(2 * columns_module.MAX_EMPTY_CELLS // 1000)]
    body = msgpack.packb(rows)
    started = time.perf_counter()
    with pytest.raises(BadRequest, match="cells empty"):
        decode(WireFormat.MSGPACK, body, NOW, None)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("kind", FORMATS)
def test_rows_with_too_many_keys(kind: WireFormat) -> None:
    rows = [{"m": "c", "fields": {f"f{n}": 1 for n in range(start, start + 100)}} for start in range(0, 1100, 100)]
    assert _error(kind, rows) == f"item 10: measurement 'c' has more than {MAX_COLUMNS - 1} tags and fields"
