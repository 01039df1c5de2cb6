"""InfluxDB line protocol: ``measurement[,tag=v...] field=v[,field=v...] [timestamp]``.

Escapes follow InfluxDB: in the measurement ``\\,`` and ``\\ ``; in tag keys, tag values and field
keys ``\\,``, ``\\=`` and ``\\ ``; in string field values ``\\"`` and ``\\\\``. Any other backslash
is a literal backslash. Field types: float (bare number), ``i`` integer, ``u`` unsigned integer
(stored as int64, so at most 2^63-1), quoted string (which, as in InfluxDB, may span lines),
``t/T/true/True/TRUE`` and ``f/F/false/False/FALSE``. Sections are separated by spaces; blank lines
and ``#`` comments are skipped; CRLF line ends are fine. A request is all or nothing: the first bad
lines are named.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

import pyarrow as pa

from arcs.errors import BadRequest
from arcs.names import MAX_COLUMNS, TIME_COLUMN, check_column, check_measurement
from arcs.native import library
from arcs.write.batch import MeasurementRows
from arcs.write.decoders.columns import Budget, build_rows, check_precision, shorten
from arcs.write.decoders.line_protocol_columnar import decode_uniform
from arcs.write.decoders.line_protocol_native import decode_one_shape

MAX_ERRORS_SHOWN = 5
_INT64_MAX = (1 << 63) - 1
_INT64_DIGITS = 19
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_TIMESTAMP = re.compile(r"-?\d+", re.ASCII)
_TRUE = frozenset({"t", "T", "true", "True", "TRUE"})
_FALSE = frozenset({"f", "F", "false", "False", "FALSE"})
# The general parser works on one line or, for strings spanning lines, on the whole body from a
# line's start: unquoted parts never cross a newline, quoted strings may.
_KEY = r"(?:[^,= \n\\]|\\.)+"
_MEASUREMENT = re.compile(r"(?:[^, \n\\]|\\.)+")
_TAG = re.compile(rf",({_KEY})=((?:[^, \n\\]|\\.)+)")
_FIELD_KEY = re.compile(rf"({_KEY})=")
_FIELD = re.compile(rf'({_KEY})=(?:"([^"\\]*(?:\\[\s\S][^"\\]*)*)"|([^, \r\n"]+))')
_SPACES = re.compile(r" +")
_TAIL = re.compile(r"(?: +([^ \r\n]+))?[ \t\r]*(?=\n|\Z)")
_KEY_ESCAPE = re.compile(r"\\([,= ])")
_MEASUREMENT_ESCAPE = re.compile(r"\\([, ])")
_STRING_ESCAPE = re.compile(r"\\([\"\\])")

# Value kinds, as the accumulator tracks them per column.
FLOAT, INT, STRING, BOOL, TAG = "float", "integer", "string", "boolean", "tag"

Parsed = tuple[str, list[tuple[str, str]], list[tuple[str, Any, str]], int | None]


class LineError(ValueError):
    pass


class _Unterminated(LineError):
    """A quoted string runs past the end of its line: it may go on in the next (InfluxDB allows it)."""


def _show(value: str) -> str:
    return shorten(repr(value), 80)


def decode_line_protocol(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    precision = check_precision(precision) or "ns"
    native = library()
    if native is not None:
        one_shape = decode_one_shape(native, body, now_micros, precision)
        if one_shape is not None:
            return one_shape
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = body.count(b"\n", 0, exc.start) + 1
        column = exc.start - body.rfind(b"\n", 0, exc.start)
        raise BadRequest(f"line {number}: not valid UTF-8 at byte {column} of the line") from exc
    uniform = decode_uniform(text, now_micros, precision)
    if uniform:
        return uniform
    return _decode_lines(text, now_micros, precision)


def _decode_lines(text: str, now_micros: int, precision: str) -> list[MeasurementRows]:
    """Any body, line by line (escapes, quoted strings, several measurements or shapes)."""
    measurements: dict[str, _Accumulator] = {}
    budget = Budget()
    errors: list[str] = []
    lines = text.split("\n")
    numbered = enumerate(lines, start=1)
    offsets = _Offsets(lines)
    for number, raw in numbered:
        line = raw.strip(" \t\r")
        if not line or line[0] == "#":
            continue
        try:
            if "\\" in line or '"' in line:
                try:
                    measurement, tags, fields, timestamp = _parse_general(line, 0)[0]
                except _Unterminated:
                    if number == len(lines):
                        raise
                    # Parse again over the body from this line's start; then skip the lines used.
                    start = offsets.start(number) + len(raw) - len(raw.lstrip(" \t\r"))
                    try:
                        (measurement, tags, fields, timestamp), end = _parse_general(text, start)
                    except LineError as exc:
                        errors.append(f"line {number}: {exc}")
                        break  # where the next line starts is unknown
                    for _ in range(text.count("\n", start, end)):
                        next(numbered)
            else:
                measurement, tags, fields, timestamp = _parse_simple(line)
            accumulator = measurements.get(measurement)
            if accumulator is None:
                accumulator = measurements[measurement] = _Accumulator.create(measurement, budget)
            accumulator.add(tags, fields, timestamp, number)
        except LineError as exc:
            errors.append(f"line {number}: {exc}")
            if len(errors) >= MAX_ERRORS_SHOWN:
                break
    if errors:
        raise BadRequest("; ".join(errors[:MAX_ERRORS_SHOWN]))
    if not measurements:
        raise BadRequest("the request holds no lines")
    return [acc.build(now_micros, precision) for acc in measurements.values()]


class _Offsets:
    """Where each line starts in the body, worked out lazily (only strings spanning lines need it)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.number = 1
        self.offset = 0

    def start(self, number: int) -> int:
        while self.number < number:
            self.offset += len(self.lines[self.number - 1]) + 1
            self.number += 1
        return self.offset


def _parse_simple(line: str) -> Parsed:
    """Lines without backslashes or quotes: plain splits, the common and fast case."""
    parts = line.split(" ")
    if len(parts) != 2 and (len(parts) != 3 or not parts[1]):
        parts = [part for part in parts if part]
        if len(parts) != 2 and len(parts) != 3:
            raise LineError("expected 'measurement[,tags] fields [timestamp]'")
    key = parts[0].split(",")
    measurement = key[0]
    if not measurement:
        raise LineError("missing measurement")
    tags = []
    for tag in key[1:]:
        name, eq, value = tag.partition("=")
        if not eq or not name or not value:
            raise LineError(f"bad tag {_show(tag)}: expected key=value")
        tags.append((name, value))
    fields = []
    for field in parts[1].split(","):
        name, eq, value = field.partition("=")
        if not eq or not name or not value:
            raise LineError(f"bad field {_show(field)}: expected key=value")
        fields.append(_field_value(name, value))
    return measurement, tags, fields, _timestamp(parts[2]) if len(parts) == 3 else None


def _parse_general(text: str, start: int) -> tuple[Parsed, int]:
    """One line with escapes or quoted strings, read from ``start``; also returns where it ended."""
    match = _MEASUREMENT.match(text, start)
    if match is None:
        raise LineError("missing measurement")
    measurement = match.group()
    if "\\" in measurement:
        measurement = _MEASUREMENT_ESCAPE.sub(r"\1", measurement)
    pos = match.end()
    tags = []
    while text.startswith(",", pos):
        match = _TAG.match(text, pos)
        if match is None:
            raise LineError(f"bad tag at column {pos - start + 1}: expected ,key=value")
        tags.append((_unescape_key(match[1]), _unescape_key(match[2])))
        pos = match.end()
    match = _SPACES.match(text, pos)
    if match is None:
        raise LineError(f"expected a space before the fields at column {pos - start + 1}")
    pos = match.end()
    fields: list[tuple[str, Any, str]] = []
    while True:
        match = _FIELD.match(text, pos)
        if match is None:
            _bad_field(text, pos, start)
        name = _unescape_key(match[1])
        string = match[2]
        if string is None:
            fields.append(_field_value(name, match[3]))
        else:
            fields.append((name, _STRING_ESCAPE.sub(r"\1", string) if "\\" in string else string, STRING))
        pos = match.end()
        if text.startswith(",", pos):
            pos += 1
            continue
        break
    match = _TAIL.match(text, pos)
    if match is None:
        rest = text[pos : pos + 40].partition("\n")[0]
        raise LineError(f"unexpected {_show(rest)} at column {pos - start + 1}: expected ' timestamp' or the end")
    timestamp = match[1]
    return (measurement, tags, fields, None if timestamp is None else _timestamp(timestamp)), match.end()


def _unescape_key(raw: str) -> str:
    return _KEY_ESCAPE.sub(r"\1", raw) if "\\" in raw else raw


def _bad_field(text: str, pos: int, start: int) -> NoReturn:
    match = _FIELD_KEY.match(text, pos)
    if match is None:
        raise LineError(f"bad field at column {pos - start + 1}: expected key=value")
    name = _show(_unescape_key(match[1]))
    pos = match.end()
    if text.startswith('"', pos):
        raise _Unterminated(f"field {name}: unterminated string at column {pos - start + 1}")
    raise LineError(f"field {name}: missing value at column {pos - start + 1}")


def _field_value(name: str, raw: str) -> tuple[str, Any, str]:
    """An unquoted field value: number, ``1i``, ``1u`` or boolean."""
    last = raw[-1]
    if last == "i" or last == "u":
        digits = raw[:-1]
        unsigned = last == "u"
        body = digits[1:] if digits.startswith("-") and not unsigned else digits
        if not (body.isascii() and body.isdigit()):
            raise LineError(f"field {_show(name)}: bad integer {_show(raw)}")
        if len(body) > _INT64_DIGITS and len(body.lstrip("0")) > _INT64_DIGITS:
            raise LineError(f"field {_show(name)}: {_show(raw)} is outside the int64 range")
        value = int(digits)
        if value > _INT64_MAX or value < -_INT64_MAX - 1:
            raise LineError(f"field {_show(name)}: {_show(raw)} is outside the int64 range")
        return name, value, INT
    if raw in _TRUE:
        return name, True, BOOL
    if raw in _FALSE:
        return name, False, BOOL
    if _FLOAT.fullmatch(raw) is None:
        raise LineError(f'field {_show(name)}: bad value {_show(raw)} (numbers, 1i, 1u, "strings", true/false)')
    number = float(raw)
    if number - number:  # inf - inf is NaN (truthy); a finite value gives 0.0
        raise LineError(f"field {_show(name)}: {_show(raw)} is outside the float64 range")
    return name, number, FLOAT


def _timestamp(raw: str) -> int:
    if _TIMESTAMP.fullmatch(raw) is None:
        raise LineError(f"bad timestamp {_show(raw)}: expected an integer")
    if len(raw) > _INT64_DIGITS + 1 and len(raw.lstrip("-0")) > _INT64_DIGITS:
        raise LineError(f"timestamp {_show(raw)} is outside the int64 range")
    value = int(raw)
    if value > _INT64_MAX or value < -_INT64_MAX - 1:
        raise LineError(f"timestamp {raw} is outside the int64 range")
    return value


class _Accumulator:
    """One measurement's lines as columns; absent keys are null, an int column widens to float."""

    def __init__(self, measurement: str, budget: Budget) -> None:
        self.measurement = measurement
        self.budget = budget
        self.times: list[int | None] = []
        self.lines: list[int] = []
        self.columns: dict[str, list[Any]] = {}
        self.kinds: dict[str, str] = {}
        self.folded: dict[str, str] = {}
        self.born: dict[str, int] = {}
        self.rows = 0

    @classmethod
    def create(cls, measurement: str, budget: Budget) -> _Accumulator:
        try:
            check_measurement(measurement)
            budget.add_part(1)
        except BadRequest as exc:
            raise LineError(exc.message) from exc
        return cls(measurement, budget)

    def add(self, tags: list[tuple[str, str]], fields: list[tuple[str, Any, str]], ts: int | None, number: int) -> None:
        rows = self.rows
        columns = self.columns
        kinds = self.kinds
        try:
            for name, value in tags:
                values = columns.get(name)
                if values is None:
                    values = self._new_column(name, TAG)
                else:
                    if len(values) != rows:
                        self._catch_up(name, values, rows)
                    if kinds[name] != TAG:
                        self._mixed(name, TAG)
                values.append(value)
            for name, value, kind in fields:
                values = columns.get(name)
                if values is None:
                    values = self._new_column(name, kind)
                else:
                    if len(values) != rows:
                        self._catch_up(name, values, rows)
                    if kinds[name] != kind:
                        self._mixed(name, kind)
                values.append(value)
        except LineError:
            self._undo(rows)
            raise
        self.times.append(ts)
        self.lines.append(number)
        self.rows = rows + 1

    def _new_column(self, name: str, kind: str) -> list[Any]:
        folded = name.lower()
        if folded == TIME_COLUMN:
            raise LineError(f"{_show(name)} cannot be a tag or field key: it is the timestamp column")
        try:
            check_column(name, self.measurement)
        except BadRequest as exc:
            raise LineError(exc.message) from exc
        other = self.folded.get(folded)
        if other is not None:
            raise LineError(f"keys {_show(other)} and {_show(name)} differ only in case; SQL cannot tell them apart")
        if len(self.columns) >= MAX_COLUMNS - 1:
            raise LineError(f"measurement {self.measurement!r} has more than {MAX_COLUMNS - 1} tags and fields")
        try:
            self.budget.add_columns(1)
            self.budget.add_empty_cells(self.rows)
        except BadRequest as exc:
            raise LineError(exc.message) from exc
        self.folded[folded] = name
        self.born[name] = self.rows
        self.kinds[name] = kind
        values = self.columns[name] = [None] * self.rows
        return values

    def _catch_up(self, name: str, values: list[Any], rows: int) -> None:
        """Pad a column with nulls for the lines that lacked it (lazily, as lines may be sparse)."""
        if len(values) > rows:
            raise LineError(f"{_show(name)} appears twice in the line")
        try:
            self.budget.add_empty_cells(rows - len(values))
        except BadRequest as exc:
            raise LineError(exc.message) from exc
        values.extend([None] * (rows - len(values)))

    def _mixed(self, name: str, kind: str) -> None:
        known = self.kinds[name]
        if {known, kind} == {INT, FLOAT}:
            self.kinds[name] = FLOAT  # int and float mix as float, as with stored schemas
        else:
            raise LineError(f"{_show(name)} is {kind} here but {known} in an earlier line")

    def _undo(self, rows: int) -> None:
        """Forget a bad line's values, so later lines are judged against the good ones only."""
        for name, values in list(self.columns.items()):
            if len(values) > rows:
                del values[rows:]
                if self.born[name] == rows:
                    del self.columns[name], self.kinds[name], self.folded[name.lower()], self.born[name]

    def build(self, now_micros: int, precision: str) -> MeasurementRows:
        columns: dict[str, Any] = {TIME_COLUMN: pa.array(self.times, pa.int64())}
        for name, values in self.columns.items():
            if len(values) < self.rows:
                self.budget.add_empty_cells(self.rows - len(values))
                values.extend([None] * (self.rows - len(values)))
            kind = self.kinds[name]
            if kind == FLOAT:
                try:
                    columns[name] = pa.array(values, pa.float64())
                except pa.ArrowInvalid:
                    # Integers widened into this float column beyond 2**53: Arrow refuses to round them.
                    columns[name] = pa.array([v if v is None else float(v) for v in values], pa.float64())
            elif kind == INT:
                columns[name] = pa.array(values, pa.int64())
            elif kind == BOOL:
                columns[name] = pa.array(values, pa.bool_())
            else:
                columns[name] = pa.array(values, pa.string())
        tags = [name for name, kind in self.kinds.items() if kind == TAG]
        lines = self.lines
        return build_rows(
            self.measurement,
            columns,
            tags,
            precision,
            now_micros,
            null_time_is_now=True,
            label=lambda row: f"line {lines[row]}",
        )
