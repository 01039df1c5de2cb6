"""Time conversion to nanoseconds: precisions, magnitudes, strings, nulls and range limits."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.errors import BadRequest
from arcs.write.batch import TIME_TYPE
from arcs.write.decoders.columns import MAX_NANOS, MIN_NANOS, PRECISIONS, check_precision, to_nanos

NOW = 1_700_000_000_123_456  # the edge's clock, in microseconds
NOW_NS = NOW * 1000
UNIT_NANOS = {
    "ns": 1,
    "n": 1,
    "us": 1_000,
    "u": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}


def nanos(
    values: list[Any], precision: str | None, now: int | None = None, kind: pa.DataType | None = None
) -> list[int]:
    result = to_nanos(pa.array(values, kind), precision, "here", now)
    assert result.type == TIME_TYPE
    return result.cast(pa.int64()).to_pylist()


def test_precisions_are_influxdbs() -> None:
    assert {"ns", "us", "ms", "s", "n", "u", "m", "h"} == PRECISIONS
    for precision in PRECISIONS:
        assert check_precision(precision) == precision
    assert check_precision(None) is None
    assert check_precision("") is None


@pytest.mark.parametrize("value", ["x", "NS", "sec", 1, 1.5, ["s"], {"s": 1}, b"s", True])
def test_unknown_precisions(value: object) -> None:
    with pytest.raises(BadRequest, match="invalid precision"):
        check_precision(value)


def test_long_precision_values_are_shortened() -> None:
    with pytest.raises(BadRequest) as caught:
        check_precision("x" * 10_000)
    assert len(caught.value.message) < 200


@pytest.mark.parametrize("precision", ["ns", "n"])
def test_nanoseconds_are_kept_as_written(precision: str) -> None:
    values = [0, 1, 999, 1000, 1_700_000_000_123_456_789, -1, -1001]
    assert nanos(values, precision) == values


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(sorted(UNIT_NANOS)))
def test_units_multiply_exactly(data: st.DataObject, precision: str) -> None:
    limit = MAX_NANOS // UNIT_NANOS[precision]
    value = data.draw(st.integers(-limit, limit))
    assert nanos([value], precision) == [value * UNIT_NANOS[precision]]


@pytest.mark.parametrize("precision", sorted(UNIT_NANOS))
def test_units_one_past_the_limit(precision: str) -> None:
    limit = MAX_NANOS // UNIT_NANOS[precision]
    for value in (limit + 1, -limit - 1, 2**63 - 1, -(2**63)):
        with pytest.raises(BadRequest, match=rf"^here: timestamp {value} at row 1 is out of the range"):
            nanos([0, value], precision)


def test_the_range_is_what_int64_nanoseconds_hold() -> None:
    assert nanos([MIN_NANOS, MAX_NANOS], "ns") == [MIN_NANOS, MAX_NANOS]
    with pytest.raises(BadRequest, match=r"at row 0 is out of the range 1677-09-21 \.\. 2262-04-11"):
        nanos([MAX_NANOS + 1], "ns")
    with pytest.raises(BadRequest, match="at row 1 is out of the range"):
        nanos([0, MIN_NANOS - 1], "ns")
    with pytest.raises(BadRequest, match="at row 0"):
        nanos([-(2**63)], "ns")  # DuckDB reads the int64 extremes as -infinity and infinity


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1_000_000_000),
        (-1, -1_000_000_000),
        (9_000_000_000, 9_000_000_000_000_000_000),
        (10_000_000_000, 10_000_000_000_000_000),
        (-10_000_000_000, -10_000_000_000_000_000),
        (9_000_000_000_000, 9_000_000_000_000_000_000),
        (10_000_000_000_000, 10_000_000_000_000_000),
        (9_000_000_000_000_000, 9_000_000_000_000_000_000),
        (10_000_000_000_000_000, 10_000_000_000_000_000),
        (-10_000_000_000_000_001, -10_000_000_000_000_001),
        (MAX_NANOS, MAX_NANOS),
    ],
)
def test_magnitude_picks_the_unit(value: int, expected: int) -> None:
    assert nanos([value], None) == [expected]


def test_magnitude_is_judged_per_value() -> None:
    assert nanos([1, 1_000_000_000_000, 1_000_000_000_000_000, 1_000_000_000_000_000_000], None) == [
        1_000_000_000,
        1_000_000_000_000_000_000,
        1_000_000_000_000_000_000,
        1_000_000_000_000_000_000,
    ]


@pytest.mark.parametrize("value", [-(2**63), 9_999_999_999, 9_999_999_999_999, 9_999_999_999_999_999, 2**63 - 1])
def test_magnitude_past_the_range_is_out_of_range_not_a_crash(value: int) -> None:
    with pytest.raises(BadRequest, match=f"timestamp {value} at row 1 is out of the range"):
        nanos([1, value], None)


@pytest.mark.parametrize(
    ("values", "precision", "expected"),
    [
        ([1.5], None, [1_500_000_000]),
        ([1.5], "s", [1_500_000_000]),
        ([1.0000004], "s", [1_000_000_000]),
        ([2.5], "ms", [2_500_000]),
        ([1_700_000_000_123.25], None, [1_700_000_000_123_250_000]),
        ([1_500.0], "ns", [2_000]),
        ([0.5], "m", [30_000_000_000]),
        ([1.000003], "s", [1_000_003_000]),
    ],
)
def test_floats_round_to_the_nearest_microsecond(
    values: list[float], precision: str | None, expected: list[int]
) -> None:
    assert nanos(values, precision) == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_floats_must_be_finite(value: float) -> None:
    with pytest.raises(BadRequest, match="time is NaN or infinite at row 1"):
        nanos([1.0, value], None)


@pytest.mark.parametrize("value", [1e300, -1e300, 9.3e18])
def test_huge_floats_are_out_of_range(value: float) -> None:
    with pytest.raises(BadRequest, match="at row 0 is out of the range"):
        nanos([value], "us")


def test_floats_just_past_the_range_after_rounding() -> None:
    with pytest.raises(BadRequest, match="out of the range"):
        nanos([float(MAX_NANOS // 1000 + 1)], "us")


def test_nulls_become_now_when_allowed() -> None:
    assert nanos([None, 5, None], "s", now=NOW, kind=pa.int64()) == [NOW_NS, 5_000_000_000, NOW_NS]
    assert nanos([None, None], None, now=NOW) == [NOW_NS, NOW_NS]
    assert nanos([None, "1970-01-01T00:00:01Z"], None, now=NOW) == [NOW_NS, 1_000_000_000]
    assert nanos([1.5, None], None, now=NOW) == [1_500_000_000, NOW_NS]


def test_nulls_are_errors_otherwise() -> None:
    with pytest.raises(BadRequest, match="here: time is null at row 2"):
        nanos([1, 2, None], None)


def test_nulls_do_not_hide_a_bad_value() -> None:
    with pytest.raises(BadRequest, match="at row 2 is out of the range"):
        nanos([None, 1, 10**15], "s", now=NOW, kind=pa.int64())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T00:00:00.000001Z", 1_000),
        ("1970-01-01T00:00:00.0000019Z", 1_900),
        ("1969-12-31T23:59:59.999999999Z", -1),
        ("2023-11-14T22:13:20.123456789+00:00", 1_700_000_000_123_456_789),
        ("2023-11-14T23:13:20+01:00", 1_700_000_000_000_000_000),
        ("2262-04-11T23:47:16.854775Z", MAX_NANOS),
        ("1677-09-21T00:12:43.145225Z", MIN_NANOS),
    ],
)
def test_rfc3339_strings(text: str, expected: int) -> None:
    assert nanos([text], None) == [expected]
    assert nanos([text], "s") == [expected]  # a precision applies to numbers only


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2024-01-01T00:00:00", "must be RFC 3339 with a zone"),
        ("2024-01-01", "must be RFC 3339 with a zone"),
        ("yesterday", "must be RFC 3339 with a zone"),
        ("", "must be RFC 3339 with a zone"),
        ("2024-13-01T00:00:00Z", "must be RFC 3339 with a zone"),
        ("2262-04-12T00:00:00Z", "outside 1677-09-21 .. 2262-04-11"),
        ("1677-09-20T00:00:00Z", "outside 1677-09-21 .. 2262-04-11"),
        ("9999-12-31T23:59:59Z", "outside 1677-09-21 .. 2262-04-11"),
    ],
)
def test_bad_time_strings(text: str, problem: str) -> None:
    with pytest.raises(BadRequest, match=problem):
        nanos(["1970-01-01T00:00:00Z", text], None)


@pytest.mark.parametrize(
    ("values", "kind"), [([True], pa.bool_()), ([b"1"], pa.binary()), ([[1]], pa.list_(pa.int64()))]
)
def test_time_must_be_numbers_or_strings(values: list[Any], kind: pa.DataType) -> None:
    with pytest.raises(BadRequest, match="time must be integers"):
        nanos(values, None, kind=kind)


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint32(), pa.float32()])
def test_narrow_numeric_types(kind: pa.DataType) -> None:
    assert nanos([1, 100], "s", kind=kind) == [1_000_000_000, 100_000_000_000]
