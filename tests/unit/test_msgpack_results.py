"""The MessagePack query answer: Arc's columnar document, every type, nulls, chunks and slices."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import msgpack
import pyarrow as pa
import pytest

from arcs.errors import ResultTooLarge
from arcs.query.msgpack_results import error_document, msgpack_body, to_msgpack, wire_type
from arcs.query.service import QueryResult


def document(table: pa.Table) -> dict[str, object]:
    return msgpack.unpackb(to_msgpack(QueryResult(table, 1.0)))  # type: ignore[no-any-return]


def test_each_type_keeps_its_msgpack_form_and_nulls_are_nil() -> None:
    table = pa.table(
        {
            "t_us": pa.array([0, -1500, None, 1_700_000_000_123_456], pa.timestamp("us")),
            "t_ns": pa.array([1, None, -1, 5], pa.timestamp("ns", tz="UTC")),
            "t_s": pa.array([-1, None, 0, 2**40], pa.timestamp("s")),
            "i64": pa.array([1, None, -(2**63), 2**63 - 1], pa.int64()),
            "i8": pa.array([1, None, -128, 127], pa.int8()),
            "u64": pa.array([1, None, 0, 2**64 - 1], pa.uint64()),
            "u16": pa.array([1, None, 0, 65535], pa.uint16()),
            "f64": pa.array([1.5, None, float("nan"), -math.inf]),
            "f32": pa.array([1.5, None, 2.25, -2.0], pa.float32()),
            "b": pa.array([True, None, False, True]),
            "s": pa.array(["a", None, "é" * 40, "x" * 70000]),
            "bin": pa.array([b"\x00", None, b"", b"xy"]),
            "d": pa.array([dt.date(2024, 1, 2), None, dt.date(1969, 12, 31), dt.date(1, 1, 1)]),
            "dec2": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-2.25"), 0], pa.decimal128(10, 2)),
            "dec0": pa.array([decimal.Decimal("15"), None, decimal.Decimal("-2"), 0], pa.decimal128(38, 0)),
            "n": pa.nulls(4),
            "l": pa.array([[1, 2], None, [], [3]]),
            "tm": pa.array([dt.time(1, 2, 3), None, dt.time(0), dt.time(23, 59)]),
            "dict": pa.array(["x", None, "y", "x"]).dictionary_encode(),
        }
    )
    got = document(table)
    assert list(got) == ["success", "columns", "types", "data", "row_count", "execution_time_ms", "timestamp"]
    assert got["types"] == [
        "timestamp[us]",
        "timestamp[ns]",
        "timestamp[s]",
        "int64",
        "int8",
        "uint64",
        "uint16",
        "float64",
        "float32",
        "bool",
        "utf8",
        "binary",
        "date32",
        "float64",
        "int64",
        "null",
        "list",
        "string_encoded",
        "utf8",
    ]
    data = dict(zip(table.column_names, got["data"], strict=True))  # type: ignore[call-overload]
    ts = msgpack.Timestamp
    assert data["t_us"] == [ts(0, 0), ts(-1, 998_500_000), None, ts(1_700_000_000, 123_456_000)]
    assert data["t_ns"] == [ts(0, 1), None, ts(-1, 999_999_999), ts(0, 5)]
    assert data["t_s"] == [ts(-1, 0), None, ts(0, 0), ts(2**40, 0)]
    assert data["i64"] == [1, None, -(2**63), 2**63 - 1]
    assert data["i8"] == [1, None, -128, 127]
    assert data["u64"] == [1, None, 0, 2**64 - 1]
    assert data["u16"] == [1, None, 0, 65535]
    assert data["f64"][:2] == [1.5, None] and math.isnan(data["f64"][2]) and data["f64"][3] == -math.inf
    assert data["f32"] == [1.5, None, 2.25, -2.0]
    assert data["b"] == [True, None, False, True]
    assert data["s"] == ["a", None, "é" * 40, "x" * 70000]
    assert data["bin"] == [b"\x00", None, b"", b"xy"]
    assert data["d"] == [ts(1704153600, 0), None, ts(-86400, 0), ts(-62135596800, 0)]
    assert data["dec2"] == [1.5, None, -2.25, 0.0] and data["dec0"] == [15, None, -2, 0]
    assert data["n"] == [None] * 4
    assert data["l"] == ["[1,2]", None, "[]", "[3]"]
    assert data["tm"] == ["01:02:03", None, "00:00:00", "23:59:00"]
    assert data["dict"] == ["x", None, "y", "x"]
    assert got["row_count"] == 4 and isinstance(got["execution_time_ms"], int)


def test_chunks_and_slices_are_one_column_each() -> None:
    chunks = pa.chunked_array([pa.array([1, None, 3]), pa.array([None, 5])])
    table = pa.table({"v": chunks, "t": pa.chunked_array([pa.array([1, 2, 3], pa.timestamp("ms")), [4, None]])})
    got = document(table.slice(1, 3))
    times = [msgpack.Timestamp(0, 2_000_000), msgpack.Timestamp(0, 3_000_000), msgpack.Timestamp(0, 4_000_000)]
    assert got["data"] == [[None, 3, None], times]
    assert got["row_count"] == 3


def test_an_empty_result_keeps_its_columns() -> None:
    got = document(pa.table({"v": pa.array([], pa.float64()), "s": pa.array([], pa.string())}))
    assert got["columns"] == ["v", "s"] and got["types"] == ["float64", "utf8"] and got["data"] == [[], []]


def test_the_size_is_known_first_and_the_limit_refuses() -> None:
    table = pa.table({"s": pa.array(["x" * 1000] * 100)})
    body = msgpack_body(QueryResult(table, 0.0))
    assert body.size == len(b"".join(body.pieces))
    with pytest.raises(ResultTooLarge):
        msgpack_body(QueryResult(table, 0.0), max_bytes=50_000)


def test_errors_are_arcs_error_shape() -> None:
    got = msgpack.unpackb(error_document("boom", 12.7))
    assert got["success"] is False and got["error"] == "boom" and got["execution_time_ms"] == 12
    assert set(got) == {"success", "error", "execution_time_ms", "timestamp"}


def test_wire_type_of_large_and_view_types() -> None:
    assert wire_type(pa.large_string()) == "large_utf8"
    assert wire_type(pa.large_binary()) == "large_binary"
    assert wire_type(pa.duration("s")) == "string_encoded"
    assert wire_type(pa.struct([("a", pa.int64())])) == "struct"
    assert wire_type(pa.map_(pa.string(), pa.int64())) == "map"


def test_a_decimal_past_int64_is_a_float_not_an_error() -> None:
    # DuckDB's sum of BIGINT is a HUGEINT, read as decimal128(38, 0): its values may not fit int64.
    huge = pa.array([decimal.Decimal(2**63), None], pa.decimal128(38, 0))
    small = pa.array([decimal.Decimal(-(2**63)), decimal.Decimal(7)], pa.decimal128(38, 0))
    got = document(pa.table({"huge": huge, "small": small}))
    assert got["types"] == ["float64", "int64"]
    assert got["data"] == [[float(2**63), None], [-(2**63), 7]]
