"""Turning decoded Python values into validated Arrow columns, and time into nanoseconds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from arcs.errors import BadRequest
from arcs.names import MAX_COLUMNS, TIME_COLUMN, check_column, check_measurement
from arcs.write.batch import TIME_TYPE, MeasurementRows, type_name

# Nanoseconds per unit; "m" and "h" are InfluxDB 1.x's minutes and hours.
_NANOS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "n": 1,
    "us": 1_000,
    "u": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
PRECISIONS = frozenset(_NANOS_PER_UNIT)
# The range an int64 of nanoseconds holds (1677-09-21 .. 2262-04-11), to the whole microsecond:
# DuckDB reads the two extreme int64 values as -infinity and infinity.
MIN_NANOS = -9_223_372_036_854_775_000
MAX_NANOS = 9_223_372_036_854_775_000
_NANOS_PER_MICRO = 1_000
_CONTROL_CHARS = r"[\x00-\x1f\x7f]"
_MAX_DETAIL = 200

#: What one request may make. Without these, a few MB of sparse or very wide lines or rows could
#: become gigabytes of table and minutes of work: tables, columns summed over them (each costs
#: microseconds whatever its length), and nulls made by padding rows that lack a key.
MAX_PARTS = 10_000
MAX_REQUEST_COLUMNS = 100_000
MAX_EMPTY_CELLS = 20_000_000

#: Names a row in messages: "row 3", or "line 7" when the decoder knows where the row came from.
RowLabel = Callable[[int], str]


@dataclass(frozen=True, slots=True)
class ColumnFacts:
    """What a reader learned of a column while reading it, so validation need not look again."""

    bounds: tuple[int, int] | None = None  # integers: the least and the greatest value
    printable: bool = False  # strings: printable ASCII only (so valid UTF-8 without control characters)
    ordered: bool = False  # integers: none smaller than one before it
    # times: the reader already made them nanoseconds (TIME_TYPE) and ``bounds`` are theirs
    scaled: bool = False


NO_FACTS = ColumnFacts()


def row_label(index: int) -> str:
    return f"row {index}"


def shorten(text: str, limit: int = _MAX_DETAIL) -> str:
    """Library messages and types can quote a whole hostile value; keep what we echo bounded."""
    return text if len(text) <= limit else text[:limit] + "..."


class Budget:
    """Counts what a request has made so far against MAX_PARTS, MAX_REQUEST_COLUMNS, MAX_EMPTY_CELLS."""

    def __init__(self) -> None:
        self.parts = 0
        self.columns = 0
        self.empty_cells = 0

    def add_part(self, columns: int) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise BadRequest(f"the request makes more than {MAX_PARTS} tables (measurements or items); split it")
        self.add_columns(columns)

    def add_columns(self, count: int) -> None:
        self.columns += count
        if self.columns > MAX_REQUEST_COLUMNS:
            raise BadRequest(f"the request makes more than {MAX_REQUEST_COLUMNS} columns over all its tables; split it")

    def add_empty_cells(self, count: int) -> None:
        self.empty_cells += count
        if self.empty_cells > MAX_EMPTY_CELLS:
            raise BadRequest(
                f"the request leaves more than {MAX_EMPTY_CELLS} cells empty (keys missing from rows); "
                "send sparse data in smaller requests"
            )


def check_precision(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or value not in PRECISIONS:
        raise BadRequest(f"invalid precision {shorten(repr(value), 40)}: use one of ns, us, ms, s (or n, u, m, h)")
    return value


def to_nanos(
    values: pa.Array,
    precision: str | None,
    where: str,
    now_micros: int | None = None,
    label: RowLabel = row_label,
    bounds: tuple[int, int] | None = None,
) -> pa.Array:
    """Integers (or floats, or RFC 3339 strings) in ``precision`` -> TIMESTAMP(ns), UTC.

    Without a precision, each value's unit follows from its magnitude: < 1e10 s,
    < 1e13 ms, < 1e16 us, else ns. Floats round to the nearest microsecond. Nulls become
    ``now_micros`` (the edge's clock) when it is given and are an error otherwise.
    """
    if values.null_count:
        if now_micros is None:
            first = pc.index(values.is_null(), True).as_py()
            raise BadRequest(f"{where}: time is null at {label(first)}")
        now = now_micros * _NANOS_PER_MICRO
        if values.null_count == len(values):
            return pa.array([now] * len(values), pa.int64()).view(TIME_TYPE)
        nanos = _to_nanos(values, precision, where, label)
        return pc.fill_null(nanos.view(pa.int64()), now).view(TIME_TYPE)
    return _to_nanos(values, precision, where, label, bounds)


def _to_nanos(
    values: pa.Array, precision: str | None, where: str, label: RowLabel, bounds: tuple[int, int] | None = None
) -> pa.Array:
    """``to_nanos`` for arrays whose nulls (if any) stay null; ``bounds``: of integers, if known."""
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _strings_to_nanos(values, where, label)
    if pa.types.is_timestamp(kind):
        return timestamps_to_nanos(values, where, label)
    if pa.types.is_boolean(kind) or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise BadRequest(f"{where}: time must be integers, got {shorten(type_name(kind), 60)}")
    if pa.types.is_floating(kind):
        finite = pc.is_finite(values)
        if not pc.all(finite).as_py():
            raise BadRequest(f"{where}: time is NaN or infinite at {label(pc.index(finite, False).as_py())}")
        # To the nearest microsecond: a float64 of nanoseconds since 1970 is exact only to 256 ns.
        if precision is None:
            values = _floats_by_magnitude(values)
        else:
            values = pc.multiply(values, _NANOS_PER_UNIT[precision] / _NANOS_PER_MICRO)
        values = pc.round(values)
        low, high = MIN_NANOS // _NANOS_PER_MICRO, MAX_NANOS // _NANOS_PER_MICRO
        # Roughly in range first (the cast to int64 fails beyond it), exactly after the cast.
        _check_range(values, where, label, float(low), float(high))
        micros = values.cast(pa.int64())
        _check_range(micros, where, label, low, high)
        return pc.multiply(micros, _NANOS_PER_MICRO).view(TIME_TYPE)
    if kind != pa.int64():
        values = values.cast(pa.int64())
    fast = _ints_in_one_unit(values, precision, bounds)
    if fast is not None:
        return fast
    if precision is None:
        nanos = _ints_by_magnitude(values, where, label)
    else:
        factor = _NANOS_PER_UNIT[precision]
        if factor != 1:
            limit = MAX_NANOS // factor
            _check_range(values, where, label, -limit, limit)
            nanos = pc.multiply(values, factor)
        else:
            nanos = values
    _check_range(nanos, where, label)
    return nanos.view(TIME_TYPE)


def timestamps_to_nanos(values: pa.Array, where: str, label: RowLabel = row_label) -> pa.Array:
    """Arrow timestamps of any unit and zone (a zone-less one is UTC) -> TIMESTAMP(ns), UTC; a 400
    naming the value when it is outside what nanoseconds hold."""
    values = values.cast(pa.timestamp(values.type.unit))  # the UTC wall clock; zone-less
    if values.type.unit != "ns":
        per_unit = _NANOS_PER_UNIT[values.type.unit]
        counts = values.view(pa.int64())
        _check_range(counts, where, label, -(MAX_NANOS // per_unit), MAX_NANOS // per_unit)
        return pc.multiply(counts, per_unit).view(TIME_TYPE)
    _check_range(values.view(pa.int64()), where, label)
    return values


def _strings_to_nanos(values: pa.Array, where: str, label: RowLabel) -> pa.Array:
    # RFC 3339 with up to 9 fractional digits (Go's RFC3339Nano).
    try:
        nanos = values.cast(pa.timestamp("ns", tz="UTC"))
    except pa.ArrowInvalid as exc:
        # Not a time, or beyond what nanoseconds hold (Arrow also gives up within a second of it).
        try:
            micros = values.cast(pa.timestamp("us", tz="UTC"))
        except pa.ArrowInvalid:
            raise BadRequest(f"{where}: time strings must be RFC 3339 with a zone: {shorten(str(exc))}") from exc
        try:
            return timestamps_to_nanos(micros, where, label)
        except BadRequest:
            raise BadRequest(
                f"{where}: a time string is outside 1677-09-21 .. 2262-04-11: {shorten(str(exc))}"
            ) from exc
    counts = nanos.view(pa.int64())
    _check_range(counts, where, label)
    return counts.view(TIME_TYPE)


# The magnitude bands (a time without a precision) as (upper bound, nanoseconds per unit): s, ms, us; ns beyond.
_BANDS = ((10_000_000_000, 1_000_000_000), (10_000_000_000_000, 1_000_000), (10_000_000_000_000_000, 1_000))
# The fast path's kernels and operands, made once: ``pc.multiply(values, 1000)`` looks the function
# up and converts the Python int on every call, which takes longer than multiplying 1,000 times.
_MULTIPLY = pc.get_function("multiply")
_SCALE_BY = {factor: pa.scalar(factor, pa.int64()) for factor in {*_NANOS_PER_UNIT.values()} - {1}}


def one_unit_scale(bounds: tuple[int, int], precision: str | None) -> tuple[int, int] | None:
    """``(multiply, divide)`` taking every integer time within ``bounds`` to nanoseconds, when one
    unit covers them all and none is negative; ``None`` for anything else (the general path).

    A request's times are usually close together, so they share a magnitude band and need one
    multiply (or none); checking the range on the two extremes (as exact Python integers)
    replaces the elementwise checks. ``divide`` is always 1 (the readers' scaling takes either).
    """
    lowest, highest = bounds
    if lowest < 0:
        return None  # the magnitude of negatives: the general path
    if precision is None:
        low_band = next((i for i, (bound, _f) in enumerate(_BANDS) if lowest < bound), len(_BANDS))
        high_band = next((i for i, (bound, _f) in enumerate(_BANDS) if highest < bound), len(_BANDS))
        if low_band != high_band:
            return None
        factor = _BANDS[low_band][1] if low_band < len(_BANDS) else 1
    else:
        factor = _NANOS_PER_UNIT[precision]
    if highest * factor > MAX_NANOS:
        return None  # the general path names the value out of range
    return factor, 1


def _ints_in_one_unit(
    values: pa.Array, precision: str | None, bounds: tuple[int, int] | None = None
) -> pa.Array | None:
    """The common case in one min_max (none when the reader knew the bounds): see ``one_unit_scale``."""
    if not len(values) or values.null_count:
        return None
    if bounds is None:
        extremes = pc.min_max(values)
        bounds = extremes["min"].as_py(), extremes["max"].as_py()
    scale = one_unit_scale(bounds, precision)
    if scale is None:
        return None
    multiply, _divide = scale
    if multiply != 1:
        values = _MULTIPLY.call([values, _SCALE_BY[multiply]])
    return values.view(TIME_TYPE)  # int64 nanoseconds as they are: no cast


def _ints_by_magnitude(values: pa.Array, where: str, label: RowLabel) -> pa.Array:
    try:
        magnitude = pc.abs_checked(values)
    except pa.ArrowInvalid as exc:
        row = label(pc.index(values, -(1 << 63)).as_py())
        raise BadRequest(
            f"{where}: timestamp {-(1 << 63)} at {row} is out of the range 1677-09-21 .. 2262-04-11"
        ) from exc
    factors = pc.case_when(
        pc.make_struct(
            pc.less(magnitude, 10_000_000_000),
            pc.less(magnitude, 10_000_000_000_000),
            pc.less(magnitude, 10_000_000_000_000_000),
        ),
        pa.scalar(1_000_000_000),
        pa.scalar(1_000_000),
        pa.scalar(1_000),
        pa.scalar(1),
    )
    try:
        return pc.multiply_checked(values, factors)
    except pa.ArrowInvalid:
        # Past 2262 in its unit: name the first such value (the product in floats tells which).
        product = pc.multiply(values.cast(pa.float64(), safe=False), factors.cast(pa.float64(), safe=False))
        beyond = pc.greater(pc.abs(product), float(MAX_NANOS))
        index = pc.index(beyond, True).as_py()
        raise BadRequest(
            f"{where}: timestamp {values[index].as_py()} at {label(index)} is out of the range 1677-09-21 .. 2262-04-11"
        ) from None


def _floats_by_magnitude(values: pa.Array) -> pa.Array:
    """Floats in the unit their magnitude says, as microseconds."""
    magnitude = pc.abs(values)
    return pc.case_when(
        pc.make_struct(pc.less(magnitude, 1e10), pc.less(magnitude, 1e13), pc.less(magnitude, 1e16)),
        pc.multiply(values, 1e6),
        pc.multiply(values, 1e3),
        values,
        pc.divide(values, 1e3),
    )


def _check_range(
    values: pa.Array,
    where: str,
    label: RowLabel,
    low: float = MIN_NANOS,
    high: float = MAX_NANOS,
) -> None:
    if not len(values) or values.null_count == len(values):
        return
    bounds = pc.min_max(values)
    lowest, highest = bounds["min"].as_py(), bounds["max"].as_py()
    if lowest < low or highest > high:
        bad = lowest if lowest < low else highest
        row = label(pc.index(values, bad).as_py())
        raise BadRequest(f"{where}: timestamp {bad} at {row} is out of the range 1677-09-21 .. 2262-04-11")


_WIRE_TYPES = {
    "bool": "bool",
    "int": "int",
    "float": "float",
    "str": "string",
    "NoneType": "null",
    "datetime": "timestamp",
}


def _python_types(values: Sequence[Any]) -> str:
    names = sorted({_WIRE_TYPES.get(type(value).__name__, type(value).__name__) for value in values})
    return ", ".join(names[:8])


def _has_bools(array: pa.Array, values: Sequence[Any]) -> bool:
    # Only 0.0 and 1.0 can have been booleans (x * x == x holds for just those, and -0.0):
    # look at just those Python values. Two kernels, no hash table of a value set to build.
    maybe = pc.equal(pc.multiply(array, array), array)
    if not pc.any(maybe).as_py():
        return False
    return any(values[index].__class__ is bool for index in pc.indices_nonzero(maybe).to_pylist())


def _count_datetimes(values: Sequence[Any]) -> int:
    return sum(1 for value in values if isinstance(value, datetime))


def check_finite(array: pa.Array, where: str, label: RowLabel = row_label) -> None:
    """Floats a query can answer exactly: JSON answers have no NaN or infinities (they would read
    back as null), and InfluxDB's line protocol refuses them too."""
    finite = pc.is_finite(array)
    if finite.null_count == len(finite) or pc.all(finite).as_py():
        return
    at = label(pc.index(finite, False).as_py())
    raise BadRequest(
        f"{where}: NaN or an infinite number (or one outside the float64 range) at {at}; they cannot be stored"
    )


def _widened_numbers(values: Sequence[Any], where: str) -> pa.Array:
    """Integers and floats (and nulls) as float64, each integer rounded to the nearest float."""
    if not all(value is None or value.__class__ in (int, float) for value in values):
        raise BadRequest(
            f"{where}: values must share one type of int, float, string or bool; got {_python_types(values)}"
        )
    if any(value.__class__ is int and not -(1 << 63) <= value < 1 << 63 for value in values):
        raise BadRequest(f"{where}: integer out of the int64 range")
    return pa.array([None if value is None else float(value) for value in values], pa.float64())


_AS_STORED = frozenset(kind.id for kind in (pa.int64(), pa.float64(), pa.string(), pa.bool_()))


def column_array(values: Sequence[Any] | pa.Array, measurement: str, column: str, datetimes: bool = True) -> pa.Array:
    """A list of JSON/MessagePack scalars -> an int64, float64, string or bool Arrow array.

    ``datetimes=False`` refuses datetime values (a decoder that cannot read them exactly asks
    for that, and hands such a body to one that can).
    """
    if isinstance(values, pa.Array) and values.type.id in _AS_STORED:
        return values  # what the native readers make: nothing to check or convert
    where = f"measurement {measurement!r}, column {column!r}"
    array = values if isinstance(values, pa.Array) else _python_values(values, where, datetimes)
    return _as_stored(array, where, column)


def _python_values(values: Sequence[Any], where: str, datetimes: bool) -> pa.Array:
    """Python scalars -> an Arrow array of one type, or a 400 saying why they have none."""
    try:
        array = pa.array(values, from_pandas=False)
    except OverflowError as exc:
        raise BadRequest(f"{where}: integer out of the int64 range") from exc
    except UnicodeError as exc:
        raise BadRequest(f"{where}: string is not valid UTF-8") from exc
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        if "too large" in str(exc):
            raise BadRequest(f"{where}: integer out of the int64 range") from exc
        if "exactly representable" in str(exc):
            # Integers beside floats widen as they do into a stored float column
            # (arcs.write.schema): to the nearest float64, beyond 2^53 too.
            array = _widened_numbers(values, where)
        else:
            raise BadRequest(
                f"{where}: values must share one type of int, float, string or bool; got {_python_types(values)}"
            ) from exc
    if pa.types.is_floating(array.type) and _has_bools(array, values):
        # Arrow reads [1.5, True] as [1.5, 1.0]; a client sending that means something else.
        raise BadRequest(
            f"{where}: values must share one type of int, float, string or bool; got {_python_types(values)}"
        )
    if pa.types.is_timestamp(array.type) and not datetimes:
        raise BadRequest(f"{where}: datetime values need the exact decoder")
    if pa.types.is_timestamp(array.type) and len(array) - array.null_count != _count_datetimes(values):
        # Arrow reads [timestamp, 5] as two timestamps; the 5 was meant as something else.
        raise BadRequest(f"{where}: values must share one type; got {_python_types(values)}")
    return array


def _as_stored(array: pa.Array, where: str, column: str) -> pa.Array:
    """An array of a type a column can hold, made one of the four stored types (int64, float64,
    string, bool) or null, or a 400 naming the type no column can hold."""
    kind = array.type
    if pa.types.is_integer(kind):
        if kind != pa.int64():
            try:
                array = array.cast(pa.int64())
            except pa.ArrowInvalid as exc:
                raise BadRequest(f"{where}: integer out of the int64 range") from exc
    elif pa.types.is_floating(kind):
        if kind != pa.float64():
            array = array.cast(pa.float64())
        if column != TIME_COLUMN:  # times say it in their own words (to_micros)
            check_finite(array, where)
    elif pa.types.is_large_string(kind):
        array = array.cast(pa.string())
    elif pa.types.is_timestamp(kind):
        array = timestamps_to_nanos(array, where)
    elif not (pa.types.is_string(kind) or pa.types.is_boolean(kind) or pa.types.is_null(kind)):
        raise BadRequest(
            f"{where}: unsupported value type {shorten(str(kind), 60)}; use int, float, string, bool, timestamp or null"
        )
    return array


def check_tag_values(
    array: pa.Array, measurement: str, column: str, label: RowLabel = row_label, printable: bool = False
) -> pa.Array:
    """Tag values: strings without control characters (``printable``: the reader saw none)."""
    where = f"measurement {measurement!r}, tag {column!r}"
    if pa.types.is_null(array.type):
        return array.cast(pa.string())
    if not pa.types.is_string(array.type):
        raise BadRequest(f"{where}: tag values must be strings, got {type_name(array.type)}")
    if printable or pc.all(pc.ascii_is_printable(array)).as_py():
        return array  # the common case, at a fraction of the regex's cost
    bad = pc.match_substring_regex(array, _CONTROL_CHARS)
    if pc.any(bad).as_py():
        raise BadRequest(f"{where}: tag value at {label(pc.index(bad, True).as_py())} contains control characters")
    return array


def build_rows(
    measurement: object,
    columns: Mapping[str, Sequence[Any] | pa.Array],
    tags: Sequence[str],
    precision: str | None,
    now_micros: int,
    null_time_is_now: bool = False,
    label: RowLabel = row_label,
    datetimes: bool = True,
    facts: Mapping[str, ColumnFacts] | None = None,
) -> MeasurementRows:
    """Validate names and values and assemble one measurement's table, ``time`` first.

    ``facts`` are what the reader learned of Arrow columns it made (their bounds, that they are
    printable), which spares checks the same as looking again.
    """
    known = facts or {}
    name = check_measurement(measurement)
    if len(columns) > MAX_COLUMNS:
        raise BadRequest(f"measurement {name!r}: {len(columns)} columns; the limit is {MAX_COLUMNS}")
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        detail = shorten(", ".join(f"{col!r}={len(vals)}" for col, vals in columns.items()))
        raise BadRequest(f"measurement {name!r}: columns have different lengths ({detail})")
    rows = lengths.pop() if lengths else 0
    if rows == 0:
        raise BadRequest(f"measurement {name!r}: no rows")
    tag_set = set(tags)
    unknown_tags = tag_set - set(columns)
    if unknown_tags:
        raise BadRequest(f"measurement {name!r}: tags {shorten(repr(sorted(unknown_tags)))} name no column")
    if TIME_COLUMN in tag_set:
        raise BadRequest(f"measurement {name!r}: 'time' cannot be a tag")
    check_distinct(columns, name)
    arrays: dict[str, pa.Array] = {}
    for column, values in columns.items():
        if column == TIME_COLUMN:
            continue
        array = column_array(values, name, column, datetimes)
        if column in tag_set:
            array = check_tag_values(array, name, column, label, known.get(column, NO_FACTS).printable)
        elif pa.types.is_null(array.type):
            # A column that is null throughout has no type to store; it adds nothing.
            continue
        arrays[column] = array
    time_range = None
    if TIME_COLUMN in columns:
        raw_time = columns[TIME_COLUMN]
        time_values = raw_time if isinstance(raw_time, pa.Array) else column_array(raw_time, name, "time", datetimes)
        now = now_micros if null_time_is_now else None
        fact = known.get(TIME_COLUMN, NO_FACTS)
        if fact.scaled and fact.ordered and fact.bounds is not None and time_values.type == TIME_TYPE:
            # Made nanoseconds by the reader, as ``one_unit_scale`` has it: already checked.
            time, time_range = time_values, fact.bounds
        else:
            # Times in order stay in order when all share one unit (one multiply or divide).
            in_one_unit = (
                _ints_in_one_unit(time_values, precision, fact.bounds)
                if fact.ordered and fact.bounds is not None and time_values.type == pa.int64()
                else None
            )
            if in_one_unit is not None:
                time = in_one_unit
                time_range = (time[0].value, time[-1].value)
            else:
                time = to_nanos(time_values, precision, f"measurement {name!r}", now, label, fact.bounds)
    else:
        time = pa.array([now_micros * _NANOS_PER_MICRO] * rows, pa.int64()).view(TIME_TYPE)
    if len(arrays) == 0:
        raise BadRequest(f"measurement {name!r}: no field or tag columns besides time")
    table = pa.Table.from_arrays([time, *arrays.values()], names=[TIME_COLUMN, *arrays])
    return MeasurementRows(name, table, tuple(t for t in tags if t in arrays), time_range)


class _NameSets:
    """Sets of column names found valid and distinct: a writer's requests repeat theirs.

    Bounded by the names held, not the sets (one may have 1,024 names of 128 bytes): it starts over
    when full, at most about 2 MB. Threads may race to add; the worst is a set checked twice.
    """

    def __init__(self, max_names: int) -> None:
        self.max_names = max_names
        self.sets: dict[tuple[str, ...], None] = {}
        self.names = 0

    def __contains__(self, names: tuple[str, ...]) -> bool:
        return names in self.sets

    def add(self, names: tuple[str, ...]) -> None:
        if len(names) > self.max_names:
            return
        if self.names + len(names) > self.max_names:
            self.sets.clear()
            self.names = 0
        self.sets[names] = None
        self.names += len(names)


_CHECKED_NAMES = _NameSets(max_names=8192)


def check_distinct(columns: Mapping[str, object], measurement: str) -> None:
    """Valid column names that SQL (DuckDB) can tell apart: it folds case, so 'Time' is 'time'."""
    names = tuple(columns)
    if names in _CHECKED_NAMES:
        return
    _check_distinct(names, measurement)
    _CHECKED_NAMES.add(names)


def _check_distinct(columns: tuple[str, ...], measurement: str) -> None:
    seen: dict[str, str] = {}
    for column in columns:
        check_column(column, measurement)
        folded = column.lower()
        if folded == TIME_COLUMN and column != TIME_COLUMN:
            raise BadRequest(f"measurement {measurement!r}: column {column!r} would shadow 'time'")
        other = seen.setdefault(folded, column)
        if other != column:
            raise BadRequest(
                f"measurement {measurement!r}: columns {other!r} and {column!r} differ only in case; "
                "SQL cannot tell them apart"
            )
