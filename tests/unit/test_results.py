"""The JSON result document: equal, after parsing, to the former value-by-value implementation.

Every test runs on both paths of ``results``: rows interleaved by the C library of
``arcs.native``, and by Arrow's kernels alone (where the library is missing); and the two give the
same bytes.

``legacy_json_document`` is that implementation, kept here as the reference (and for the
benchmark): Python values per column, zipped into rows, serialized by Powertools' ``json.dumps``.
The comparison keeps types apart (an int is not a float) and compares floats by ``repr``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from decimal import Decimal
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.envvars import NATIVE
from arcs.errors import ResultTooLarge
from arcs.query import results
from arcs.query.results import to_arrow_stream, to_json_document, utc_zoned
from arcs.query.service import QueryResult


@pytest.fixture(scope="module", autouse=True, params=["native", "arrow"])
def json_path(request: pytest.FixtureRequest) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NATIVE, "1" if request.param == "native" else "0")
        native.library.cache_clear()
        assert (native.library() is not None) == (request.param == "native"), "run `make setup` to build it"
        yield request.param
    native.library.cache_clear()


def _both_paths(table: pa.Table) -> tuple[bytes, bytes]:
    """The document from each path, with the one field that differs between calls (the clock) blanked."""
    documents = []
    for setting in ("1", "0"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(NATIVE, setting)
            native.library.cache_clear()
            document = to_json_document(QueryResult(table, 1.5))
        documents.append(re.sub(rb'"timestamp":"[^"]*"', b'"timestamp":""', document))
    native.library.cache_clear()
    return documents[0], documents[1]


# --- the reference: the implementation results.py replaced ---------------------------------------


def _legacy_column(column: pa.ChunkedArray) -> list[Any]:
    kind = column.type
    if pa.types.is_timestamp(kind):
        if kind.tz is None:
            column = column.cast(pa.timestamp(kind.unit, tz="UTC"))
        return pc.strftime(column, format="%Y-%m-%dT%H:%M:%SZ").to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_floating(kind):
        return [None if v is not None and not math.isfinite(v) else v for v in column.to_pylist()]
    values = column.to_pylist()
    if pa.types.is_date(kind) or pa.types.is_time(kind):
        return [None if v is None else v.isoformat() for v in values]
    if pa.types.is_decimal(kind):
        return [None if v is None else float(v) for v in values]
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return [None if v is None else v.hex() for v in values]
    if pa.types.is_nested(kind) or pa.types.is_interval(kind) or pa.types.is_duration(kind):
        return [None if v is None else json.loads(json.dumps(v, default=str)) for v in values]
    return values  # type: ignore[no-any-return]


def legacy_json_document(result: QueryResult) -> dict[str, Any]:
    table = result.table
    columns = [_legacy_column(table.column(i)) for i in range(table.num_columns)]
    return {
        "success": True,
        "columns": table.column_names,
        "data": [list(row) for row in zip(*columns, strict=True)] if columns else [],
        "row_count": table.num_rows,
        "execution_time_ms": round(result.execution_time_ms, 3),
        "timestamp": dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
    }


#: What Powertools did with the dict the route returned.
legacy_serialize = partial(json.dumps, separators=(",", ":"))


# --- helpers ------------------------------------------------------------------------------------


def _strict_loads(text: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text.decode("utf-8"), parse_constant=refuse)


def _typed(value: Any) -> Any:
    """A form in which equal means same JSON types and same values (floats by repr)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, dict):
        return ("dict", sorted((k, _typed(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def assert_same_as_legacy(table: pa.Table, elapsed_ms: float = 12.3456) -> dict[str, Any]:
    result = QueryResult(table, elapsed_ms)
    new = _strict_loads(to_json_document(result))
    old = json.loads(legacy_serialize(legacy_json_document(result)))
    assert list(new) == ["success", "columns", "data", "row_count", "execution_time_ms", "timestamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", new.pop("timestamp"))
    old.pop("timestamp")
    assert _typed(new) == _typed(old)
    return new  # type: ignore[no-any-return]


# --- properties ---------------------------------------------------------------------------------

HOSTILE = ['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f", "\u2028", "\u2029", "/", "é"]
HOSTILE += ["😀", "\ufeff", "\uffff", "a", " ", "'", "<", "\u0085", "\U0010ffff", '\\"', "\\u0000"]
texts = st.lists(st.sampled_from(HOSTILE), max_size=8).map("".join) | st.text(max_size=12)

_S = 1
_DAY = 86_400
# Arrow's strftime and DuckDB's agree from year 0 on; beyond 9999 (and before 0) the Arrow path is taken.
_SECONDS = st.integers(-62_167_219_200 - 400 * 365 * _DAY, 253_402_300_800 + 400 * 365 * _DAY) | st.sampled_from(
    [0, -1, 1_700_000_000, -62_167_219_200, -62_167_219_201, -62_135_596_800, 253_402_300_799, 253_402_300_800]
)


def _timestamps(unit: str) -> st.SearchStrategy[int]:
    per = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    if unit == "ns":
        return st.integers(-(2**63) + 1, 2**63 - 1) | st.sampled_from([0, -1, 1_700_000_000 * per])
    return st.builds(lambda s, f: s * per + f, _SECONDS, st.integers(0, per - 1))


KINDS = (
    *("int8", "int16", "int32", "int64", "uint8", "uint64", "bool", "float64", "float32"),
    *("string", "large_string", "string_view", "dictionary", "timestamp", "date32", "date64"),
    *("binary", "large_binary", "decimal", "decimal_big", "time", "list", "struct", "map", "duration", "null"),
)


@st.composite
def columns(draw: st.DrawFn, rows: int) -> pa.ChunkedArray:
    kind = draw(st.sampled_from(KINDS))
    maybe = partial(_maybe_list, draw, rows)
    if kind.startswith(("int", "uint")):
        bits = int(kind.removeprefix("u").removeprefix("int"))
        low, high = (0, 2**bits - 1) if kind.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return _chunked(maybe(st.integers(low, high) | st.sampled_from([low, high, 0])), getattr(pa, kind)())
    if kind == "bool":
        return _chunked(maybe(st.booleans()), pa.bool_())
    if kind == "float64":
        special = st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e20, 1e21, 1e-7, 5e-324, 1.7976931348623157e308, math.nan])
        return _chunked(maybe(st.floats() | special), pa.float64())
    if kind == "float32":
        return _chunked(maybe(st.floats(width=32)), pa.float32())
    if kind in ("string", "large_string", "string_view"):
        return _chunked(maybe(texts), getattr(pa, kind)())
    if kind == "dictionary":
        return _chunked(maybe(texts), pa.string()).dictionary_encode()
    if kind == "timestamp":
        unit = draw(st.sampled_from(["s", "ms", "us", "ns"]))
        tz = draw(st.sampled_from([None, "UTC"]))
        return _chunked(maybe(_timestamps(unit)), pa.int64()).cast(pa.timestamp(unit, tz=tz))
    if kind == "date32":
        days = st.integers(-719_162, 2_932_896) | st.sampled_from([-719_162, 2_932_896, 0, -1])
        return _chunked(maybe(days), pa.int32()).cast(pa.date32())
    if kind == "date64":
        return _chunked(maybe(st.integers(-719_162, 2_932_896).map(lambda d: d * _DAY * 1000)), pa.date64())
    if kind in ("binary", "large_binary"):
        return _chunked(maybe(st.binary(max_size=10)), getattr(pa, kind)())
    if kind in ("decimal", "decimal_big"):
        precision, scale = (9, 3) if kind == "decimal" else (38, 10)
        numbers = st.decimals(
            min_value=-(10 ** (precision - scale)) + 1, max_value=10 ** (precision - scale) - 1, places=scale
        )
        return _chunked(maybe(numbers), pa.decimal128(precision, scale))
    if kind == "time":
        return _chunked(maybe(st.times()), pa.time64("us"))
    if kind == "list":
        return _chunked(maybe(st.lists(st.none() | st.integers(-(2**63), 2**63 - 1), max_size=3)), pa.list_(pa.int64()))
    if kind == "struct":
        fields = st.fixed_dictionaries({"a": st.none() | st.floats(allow_nan=False, allow_infinity=False), "b": texts})
        return _chunked(maybe(fields), pa.struct([("a", pa.float64()), ("b", pa.string())]))
    if kind == "map":
        pairs = st.lists(st.tuples(texts, st.none() | st.integers(-5, 5)), max_size=3)
        return _chunked(maybe(pairs), pa.map_(pa.string(), pa.int64()))
    if kind == "duration":
        return _chunked(maybe(st.integers(-(10**12), 10**12)), pa.int64()).cast(pa.duration("us"))
    return pa.chunked_array([pa.nulls(rows)])


def _maybe_list(draw: st.DrawFn, rows: int, values: st.SearchStrategy[Any]) -> list[Any]:
    return draw(st.lists(st.none() | values, min_size=rows, max_size=rows))


def _chunked(values: list[Any], kind: pa.DataType) -> pa.ChunkedArray:
    """In two chunks, the second a slice, so offsets and chunk boundaries are exercised too."""
    cut = len(values) // 2
    first = pa.array(values[:cut], kind)
    second = pa.array([None, *values[cut:]], kind).slice(1)
    return pa.chunked_array([first, second], kind)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(0, 12))
    width = draw(st.integers(0, 6))
    arrays = [draw(columns(rows)) for _ in range(width)]
    names = draw(st.lists(texts, min_size=width, max_size=width))
    return pa.Table.from_arrays(arrays, names=names)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_equal_to_the_former_implementation(table: pa.Table) -> None:
    assert_same_as_legacy(table)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(1, 4))
def test_batch_boundaries_anywhere(table: pa.Table, batch_rows: int) -> None:
    """Rows rendered a few at a time: every batch ends in a row separator, spliced into one array."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(results, "_BATCH_ROWS", batch_rows)
        patch.setattr(results, "_CONSTANTS", {})
        assert_same_as_legacy(table)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables(), st.integers(0, 3), st.integers(0, 3))
def test_both_paths_write_the_same_bytes(table: pa.Table, skip: int, cut: int) -> None:
    """Also over a slice of the table: every column's arrays then start at an offset."""
    assert len(set(_both_paths(table))) == 1
    part = table.slice(min(skip, table.num_rows), max(table.num_rows - skip - cut, 0))
    assert len(set(_both_paths(part))) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | texts, max_size=20))
def test_hostile_strings_round_trip(values: list[str | None]) -> None:
    document = assert_same_as_legacy(pa.table({"s": pa.array(values, pa.string())}))
    assert [row[0] for row in document["data"]] == values


# --- examples -----------------------------------------------------------------------------------


def test_the_documented_shape() -> None:
    table = pa.table(
        {
            "time": pa.array([1_700_000_000_000_000, None], pa.timestamp("us", tz="UTC")),
            "host": ['a"b\\c\n\u2028😀', None],
            "value": [1.5, math.nan],
            "n": pa.array([2**63 - 1, None], pa.int64()),
        }
    )
    text = to_json_document(QueryResult(table, 1.23456))
    document = _strict_loads(text)
    assert document["success"] is True
    assert document["columns"] == ["time", "host", "value", "n"]
    assert document["data"] == [["2023-11-14T22:13:20.000000Z", 'a"b\\c\n\u2028😀', 1.5, 2**63 - 1], [None] * 4]
    assert document["row_count"] == 2
    assert document["execution_time_ms"] == 1.235
    assert text.startswith(b'{"success":true,"columns":["time","host","value","n"],"data":[["2023-11-14T22:13:20')


@pytest.mark.parametrize(
    ("unit", "text"),
    [
        ("s", "2023-11-14T22:13:20Z"),
        ("ms", "2023-11-14T22:13:20.000Z"),
        ("us", "2023-11-14T22:13:20.000000Z"),
        ("ns", "2023-11-14T22:13:20.000000000Z"),
    ],
)
def test_timestamps_carry_their_precision(unit: str, text: str) -> None:
    per = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    for tz in (None, "UTC"):
        table = pa.table({"t": pa.array([1_700_000_000 * per], pa.timestamp(unit, tz=tz))})
        assert assert_same_as_legacy(table)["data"] == [[text]]


def test_a_zoned_timestamp_is_shown_in_utc() -> None:
    table = pa.table({"t": pa.array([1_700_000_000_000_000], pa.timestamp("us", tz="America/New_York"))})
    assert _strict_loads(to_json_document(QueryResult(table, 0.0)))["data"] == [["2023-11-14T22:13:20.000000Z"]]


def test_empty_results_and_no_columns() -> None:
    assert (
        assert_same_as_legacy(pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.string())}))["data"] == []
    )
    no_columns = pa.table({"a": [1, 2, 3]}).drop_columns(["a"])
    assert no_columns.num_rows == 3
    document = assert_same_as_legacy(no_columns)
    assert (document["columns"], document["data"], document["row_count"]) == ([], [], 3)
    assert assert_same_as_legacy(pa.table({}))["row_count"] == 0


def test_non_finite_floats_are_null_everywhere() -> None:
    table = pa.table(
        {
            "f64": [math.nan, math.inf, -math.inf, 0.5],
            "f32": pa.array([math.nan, math.inf, -math.inf, 0.5], pa.float32()),
            "nested": pa.array([[math.nan], [math.inf, 1.0], None, []], pa.list_(pa.float64())),
            "struct": pa.array([{"x": math.nan}, None, {"x": 1.0}, {"x": None}], pa.struct([("x", pa.float64())])),
        }
    )
    data = _strict_loads(to_json_document(QueryResult(table, 0.0)))["data"]
    assert data == [
        [None, None, [None], {"x": None}],
        [None, None, [None, 1.0], None],
        [None, None, None, {"x": 1.0}],
        [0.5, 0.5, [], {"x": None}],
    ]


def test_other_types() -> None:
    table = pa.table(
        {
            "fixed": pa.array([b"\x00\xff", None], pa.binary(2)),
            "view": pa.array([b"\x01", None], pa.binary_view()),
            "decimal": pa.array([Decimal("1.50"), None], pa.decimal128(5, 2)),
            "date": pa.array([dt.date(2023, 11, 14), None]),
            "far_date": pa.array([3_000_000, None], pa.int32()).cast(pa.date32()),
            "far_time": pa.array([-(10**11), None], pa.int64()).cast(pa.timestamp("s")),
            "enum": pa.array(["x", None]).dictionary_encode(),
            "nothing": pa.nulls(2),
        }
    )
    data = _strict_loads(to_json_document(QueryResult(table, 0.0)))["data"]
    assert data[1] == [None] * 8
    fixed, view, decimal, date, far_date, far_time, enum, nothing = data[0]
    assert (fixed, view, decimal, date, enum, nothing) == ("00ff", "01", 1.5, "2023-11-14", "x", None)
    assert isinstance(far_date, str) and far_date == "10183-09-21"
    assert isinstance(far_time, str) and far_time.startswith("-") and far_time.endswith("Z")


def test_many_rows_in_many_batches() -> None:
    rows = 2 * results._BATCH_ROWS + 3  # more than one batch read back, and not a multiple of it
    table = pa.table(
        {
            "t": pa.array(range(rows), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "s": pa.array([f'h"{i % 7}\n' for i in range(rows)]),
            "f": pa.array([i / 4 for i in range(rows)]),
        }
    )
    assert assert_same_as_legacy(table)["row_count"] == rows


def test_arrow_stream_round_trips() -> None:
    table = pa.table({"t": pa.array([1, None], pa.timestamp("us", tz="UTC")), "s": ["a", None]})
    assert pa.ipc.open_stream(to_arrow_stream(table)).read_all().equals(table)


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_any_value_behind_a_null_is_harmless(unit: str) -> None:
    """Native loops format every slot, nulls too: the extremes of int64 there stay in their slots."""
    extremes = [-(2**63), 2**63 - 1, -1]
    stored = pa.array(extremes * 2 + [5], pa.int64()).buffers()[1]
    validity = pa.array([False] * 6 + [True]).buffers()[1]
    for kind in (pa.int64(), pa.timestamp(unit, tz="UTC")):
        column = pa.Array.from_buffers(kind, 7, [validity, stored], null_count=6)
        document = _strict_loads(to_json_document(QueryResult(pa.table({"v": column}), 1.0)))
        epoch = {"s": "05", "ms": "00.005", "us": "00.000005", "ns": "00.000000005"}[unit]
        shown = 5 if kind == pa.int64() else f"1970-01-01T00:00:{epoch}Z"
        assert document["data"] == [[None]] * 6 + [[shown]]
        assert len(set(_both_paths(pa.table({"v": column}).slice(1)))) == 1


def test_escapes_at_every_position_of_a_word() -> None:
    """The native scan reads 8 bytes at a time: a character to escape anywhere in or after a word."""
    values = [
        "a" * before + special + "b" * after
        for special in ('"', "\\", "\n", "\x00", "\x1f", "\x7f", " ", "é", "😀", '\\"\n')
        for before in range(18)
        for after in (0, 1, 7, 8, 9)
    ]
    document = _strict_loads(to_json_document(QueryResult(pa.table({"s": values}), 1.0)))
    assert [row[0] for row in document["data"]] == values
    text = to_json_document(QueryResult(pa.table({"s": values}), 1.0)).decode()
    assert all(json.dumps(value, ensure_ascii=False) in text for value in values)
    assert len(set(_both_paths(pa.table({"s": values})))) == 1


def test_a_document_over_the_byte_limit_is_refused_as_it_is_built() -> None:
    """Numbers and times are wider as text than in Arrow: the JSON has a limit of its own."""
    table = pa.table({"n": pa.array(range(200_000), pa.int64())})  # 1.6 MB of Arrow, ~1.3 MB of JSON
    document = to_json_document(QueryResult(table, 1.0), max_bytes=2_000_000)
    assert json.loads(document)["row_count"] == 200_000
    with pytest.raises(ResultTooLarge, match="larger than 1000000 bytes"):
        to_json_document(QueryResult(table, 1.0), max_bytes=1_000_000)


def test_an_arrow_answer_s_timestamps_are_utc_instants() -> None:
    """``time`` is a zone-less UTC wall clock in DuckDB; an Arrow client gets the UTC instants."""
    naive = pa.table(
        {
            "time": pa.array([1_700_000_000_123_456_789, None], pa.timestamp("ns")),
            "day": pa.array([1_700_000_000_000_000, 0], pa.timestamp("us")),
            "zoned": pa.array([0, 1], pa.timestamp("ms", tz="Asia/Tokyo")),
            "n": pa.array([1, 2]),
        }
    )
    answered = pa.ipc.open_stream(to_arrow_stream(utc_zoned(naive))).read_all()
    assert [str(f.type) for f in answered.schema] == [
        "timestamp[ns, tz=UTC]",
        "timestamp[us, tz=UTC]",
        "timestamp[ms, tz=Asia/Tokyo]",
        "int64",
    ]
    assert answered.column("time")[0].value == 1_700_000_000_123_456_789 and answered.column("time")[1].as_py() is None
    assert answered.column("day")[0].as_py().isoformat() == "2023-11-14T22:13:20+00:00"
    assert utc_zoned(answered) is answered  # nothing to change: the table itself
