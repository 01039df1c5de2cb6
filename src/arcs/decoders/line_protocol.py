"""InfluxDB line protocol: ``measurement[,tag=v...] field=v[,field=v...] [timestamp]``.

Escapes follow InfluxDB: in the measurement ``\\,`` and ``\\ ``; in tag keys, tag values and field
keys ``\\,``, ``\\=`` and ``\\ ``; in string field values ``\\"`` and ``\\\\``. Field types: float
(bare number), ``i`` integer, ``u`` unsigned integer, quoted string, ``t/T/true/True/TRUE`` and
``f/F/false/False/FALSE``. A request is all or nothing: the first bad lines are named.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from arcs.batch import MeasurementRows
from arcs.decoders.columns import build_rows
from arcs.errors import BadRequest
from arcs.names import TIME_COLUMN

MAX_ERRORS_SHOWN = 5
_INT64_MAX = (1 << 63) - 1
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TIMESTAMP = re.compile(r"-?\d+")
_TRUE = frozenset({"t", "T", "true", "True", "TRUE"})
_FALSE = frozenset({"f", "F", "false", "False", "FALSE"})
_MEASUREMENT = re.compile(r"(?:[^,\s\\]|\\.)+")
_TAG = re.compile(r",((?:[^,=\s\\]|\\.)+)=((?:[^,\s\\]|\\.)+)")
_FIELD = re.compile(r"((?:[^,=\s\\]|\\.)+)=(\"(?:[^\"\\]|\\.)*\"|[^,\s\"]+)")
_SPACES = re.compile(r"[ \t]+")
_KEY_ESCAPE = re.compile(r"\\([,= ])")
_MEASUREMENT_ESCAPE = re.compile(r"\\([, ])")
_STRING_ESCAPE = re.compile(r"\\([\"\\])")

# Value kinds, as the accumulator tracks them per column.
FLOAT, INT, STRING, BOOL, TAG = "float", "integer", "string", "boolean", "tag"

Parsed = tuple[str, list[tuple[str, str]], list[tuple[str, Any, str]], int | None]


class LineError(ValueError):
    pass


def decode_line_protocol(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise BadRequest(f"line {line}: not valid UTF-8") from exc
    measurements: dict[str, _Accumulator] = {}
    errors: list[str] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip(" \t\r")
        if not line or line[0] == "#":
            continue
        try:
            measurement, tags, fields, timestamp = (
                _parse_general(line) if "\\" in line or '"' in line else _parse_simple(line)
            )
            accumulator = measurements.get(measurement)
            if accumulator is None:
                accumulator = measurements[measurement] = _Accumulator(measurement)
            accumulator.add(tags, fields, timestamp)
        except LineError as exc:
            errors.append(f"line {number}: {exc}")
            if len(errors) >= MAX_ERRORS_SHOWN:
                break
    if errors:
        raise BadRequest("; ".join(errors))
    if not measurements:
        raise BadRequest("the request holds no lines")
    return [acc.build(now_micros, precision or "ns") for acc in measurements.values()]


def _parse_simple(line: str) -> Parsed:
    """Lines without backslashes or quotes: plain splits, the common and fast case."""
    parts = line.split(" ")
    if len(parts) != 2 and len(parts) != 3:
        parts = [part for part in _SPACES.split(line) if part]
        if len(parts) not in (2, 3):
            raise LineError("expected 'measurement[,tags] fields [timestamp]'")
    key = parts[0].split(",")
    measurement = key[0]
    if not measurement:
        raise LineError("missing measurement")
    tags = []
    for tag in key[1:]:
        name, eq, value = tag.partition("=")
        if not eq or not name or not value:
            raise LineError(f"bad tag {tag!r}: expected key=value")
        tags.append((name, value))
    fields = []
    for field in parts[1].split(","):
        name, eq, value = field.partition("=")
        if not eq or not name or not value:
            raise LineError(f"bad field {field!r}: expected key=value")
        fields.append(_field_value(name, value))
    return measurement, tags, fields, _timestamp(parts[2]) if len(parts) == 3 else None


def _parse_general(line: str) -> Parsed:
    match = _MEASUREMENT.match(line)
    if match is None:
        raise LineError("missing measurement")
    measurement = _MEASUREMENT_ESCAPE.sub(r"\1", match.group())
    pos = match.end()
    tags = []
    while pos < len(line) and line[pos] == ",":
        match = _TAG.match(line, pos)
        if match is None:
            raise LineError(f"bad tag at column {pos + 1}: expected ,key=value")
        tags.append((_KEY_ESCAPE.sub(r"\1", match[1]), _KEY_ESCAPE.sub(r"\1", match[2])))
        pos = match.end()
    match = _SPACES.match(line, pos)
    if match is None:
        raise LineError(f"expected a space before the fields at column {pos + 1}")
    pos = match.end()
    fields = []
    while True:
        match = _FIELD.match(line, pos)
        if match is None:
            raise LineError(f"bad field at column {pos + 1}: expected key=value")
        fields.append(_field_value(_KEY_ESCAPE.sub(r"\1", match[1]), match[2]))
        pos = match.end()
        if pos < len(line) and line[pos] == ",":
            pos += 1
            continue
        break
    timestamp = None
    if pos < len(line):
        match = _SPACES.match(line, pos)
        if match is None:
            raise LineError(f"unexpected {line[pos]!r} at column {pos + 1}")
        timestamp = _timestamp(line[match.end() :])
    return measurement, tags, fields, timestamp


def _field_value(name: str, raw: str) -> tuple[str, Any, str]:
    last = raw[-1]
    if raw[0] == '"':
        if len(raw) < 2 or last != '"':
            raise LineError(f"field {name!r}: unterminated string")
        return name, _STRING_ESCAPE.sub(r"\1", raw[1:-1]), STRING
    if last == "i" or last == "u":
        digits = raw[:-1]
        unsigned = last == "u"
        body = digits[1:] if digits.startswith("-") and not unsigned else digits
        if not (body.isascii() and body.isdigit()):
            raise LineError(f"field {name!r}: bad integer {raw!r}")
        value = int(digits)
        if value > _INT64_MAX or value < -_INT64_MAX - 1:
            raise LineError(f"field {name!r}: {raw!r} is outside the int64 range")
        return name, value, INT
    if raw in _TRUE:
        return name, True, BOOL
    if raw in _FALSE:
        return name, False, BOOL
    if _FLOAT.fullmatch(raw) is None:
        raise LineError(f'field {name!r}: bad value {raw!r} (numbers, 1i, 1u, "strings", true/false)')
    return name, float(raw), FLOAT


def _timestamp(raw: str) -> int:
    if _TIMESTAMP.fullmatch(raw) is None:
        raise LineError(f"bad timestamp {raw!r}: expected an integer")
    value = int(raw)
    if value > _INT64_MAX or value < -_INT64_MAX - 1:
        raise LineError(f"timestamp {raw} is outside the int64 range")
    return value


class _Accumulator:
    def __init__(self, measurement: str) -> None:
        self.measurement = measurement
        self.times: list[int | None] = []
        self.columns: dict[str, list[Any]] = {}
        self.kinds: dict[str, str] = {}
        self.rows = 0

    def add(self, tags: list[tuple[str, str]], fields: list[tuple[str, Any, str]], ts: int | None) -> None:
        rows = self.rows
        columns = self.columns
        kinds = self.kinds
        for name, value in tags:
            self._put(name, value, TAG, rows, columns, kinds)
        for name, value, kind in fields:
            self._put(name, value, kind, rows, columns, kinds)
        self.times.append(ts)
        self.rows = rows + 1
        if len(columns) != len(tags) + len(fields):
            for values in columns.values():
                if len(values) == rows:
                    values.append(None)

    def _put(
        self,
        name: str,
        value: Any,
        kind: str,
        rows: int,
        columns: dict[str, list[Any]],
        kinds: dict[str, str],
    ) -> None:
        values = columns.get(name)
        if values is None:
            if name == TIME_COLUMN:
                raise LineError("'time' cannot be a tag or field key")
            values = columns[name] = [None] * rows
            kinds[name] = kind
        elif len(values) > rows:
            raise LineError(f"{name!r} appears twice in the line")
        else:
            known = kinds[name]
            if known != kind:
                if {known, kind} == {INT, FLOAT}:
                    kinds[name] = FLOAT  # int into float widens, as with stored schemas
                else:
                    raise LineError(f"{name!r} is {kind} here but {known} in an earlier line")
        values.append(value)

    def build(self, now_micros: int, precision: str) -> MeasurementRows:
        columns: dict[str, Any] = {TIME_COLUMN: pa.array(self.times, pa.int64())}
        for name, values in self.columns.items():
            kind = self.kinds[name]
            if kind == FLOAT:
                columns[name] = pa.array(values, pa.float64())
            elif kind == INT:
                columns[name] = pa.array(values, pa.int64())
            elif kind == BOOL:
                columns[name] = pa.array(values, pa.bool_())
            else:
                columns[name] = pa.array(values, pa.string())
        tags = [name for name, kind in self.kinds.items() if kind == TAG]
        return build_rows(self.measurement, columns, tags, precision, now_micros, null_time_is_now=True)
