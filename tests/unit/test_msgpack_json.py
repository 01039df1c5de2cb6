"""The MessagePack and JSON shapes: columnar, row, batch, bare array; and every hostile body."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arcs.errors import ArcsError, BadRequest
from arcs.names import MAX_COLUMNS
from arcs.write.batch import TIME_TYPE, MeasurementRows
from arcs.write.decoders import WireFormat, decode
from arcs.write.decoders import columns as columns_module

NOW = 1_700_000_000_123_456  # the edge's clock, in microseconds
NOW_NS = NOW * 1000
FORMATS = [WireFormat.MSGPACK, WireFormat.JSON]


def encode(kind: WireFormat, document: Any) -> bytes:
    if kind is WireFormat.MSGPACK:
        return msgpack.packb(document, use_bin_type=True)
    return json.dumps(document).encode()


def decoded(kind: WireFormat, document: Any, precision: str | None = None) -> list[MeasurementRows]:
    parts = decode(kind, encode(kind, document), NOW, precision)
    for part in parts:
        assert part.table.schema.field(0).name == "time"
        assert part.table.schema.field(0).type == TIME_TYPE
    return parts


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.set_column(0, "time", table.column("time").cast(pa.int64())).to_pylist()


def rows(kind: WireFormat, document: Any, precision: str | None = None) -> list[dict[str, Any]]:
    (part,) = decoded(kind, document, precision)
    return table_rows(part.table)


# --- shapes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", FORMATS)
def test_columnar_with_tags(kind: WireFormat) -> None:
    document = {
        "m": "cpu",
        "tags": ["host"],
        "columns": {
            "time": [1_700_000_000_000, 1_700_000_001_000],
            "host": ["a", "b"],
            "usage": [45.5, 46.0],
            "count": [1, 2],
            "ok": [True, False],
            "note": ["x", "y"],
        },
    }
    (part,) = decoded(kind, document)
    assert part.measurement == "cpu"
    assert part.tags == ("host",)
    assert part.table.schema == pa.schema(
        [
            ("time", TIME_TYPE),
            ("host", pa.string()),
            ("usage", pa.float64()),
            ("count", pa.int64()),
            ("ok", pa.bool_()),
            ("note", pa.string()),
        ]
    )
    assert table_rows(part.table) == [
        {"time": 1_700_000_000_000_000_000, "host": "a", "usage": 45.5, "count": 1, "ok": True, "note": "x"},
        {"time": 1_700_000_001_000_000_000, "host": "b", "usage": 46.0, "count": 2, "ok": False, "note": "y"},
    ]


@pytest.mark.parametrize("kind", FORMATS)
def test_rows_group_by_measurement_and_pad_absent_keys_with_null(kind: WireFormat) -> None:
    document = [
        {"m": "cpu", "t": 1_700_000_000_000_000, "tags": {"host": "a"}, "fields": {"usage": 1.5}},
        {"m": "mem", "t": 1_700_000_000_000_000, "fields": {"free": 10}},
        {"m": "cpu", "t": 1_700_000_000_000_001, "tags": {"dc": "x"}, "fields": {"usage": 2.5, "idle": 3}},
    ]
    cpu, mem = decoded(kind, document)
    assert cpu.measurement == "cpu"
    assert set(cpu.tags) == {"host", "dc"}
    assert table_rows(cpu.table) == [
        {"time": 1_700_000_000_000_000_000, "host": "a", "usage": 1.5, "dc": None, "idle": None},
        {"time": 1_700_000_000_000_001_000, "host": None, "usage": 2.5, "dc": "x", "idle": 3},
    ]
    assert table_rows(mem.table) == [{"time": 1_700_000_000_000_000_000, "free": 10}]


@pytest.mark.parametrize("kind", FORMATS)
def test_batch_object_bare_array_and_mixed_shapes(kind: WireFormat) -> None:
    columnar = {"m": "cpu", "columns": {"time": [1], "v": [1.0]}}
    row = {"m": "cpu", "t": 2, "fields": {"v": 2.0}}
    for document in ({"batch": [columnar, row]}, [columnar, row]):
        first, second = decoded(kind, document)
        assert (first.measurement, second.measurement) == ("cpu", "cpu")
        assert table_rows(first.table) == [{"time": 1_000_000_000, "v": 1.0}]
        assert table_rows(second.table) == [{"time": 2_000_000_000, "v": 2.0}]


@pytest.mark.parametrize("kind", FORMATS)
def test_row_time_may_be_called_time(kind: WireFormat) -> None:
    assert rows(kind, {"m": "cpu", "time": 5, "fields": {"v": 1}}) == [{"time": 5_000_000_000, "v": 1}]


@pytest.mark.parametrize("kind", FORMATS)
def test_nulls_are_kept(kind: WireFormat) -> None:
    document = {
        "m": "cpu",
        "tags": ["host"],
        "columns": {"time": [1, 2, 3], "host": ["a", None, "c"], "v": [1.5, None, 2.5], "n": [None, 2, None]},
    }
    assert rows(kind, document) == [
        {"time": 1_000_000_000, "host": "a", "v": 1.5, "n": None},
        {"time": 2_000_000_000, "host": None, "v": None, "n": 2},
        {"time": 3_000_000_000, "host": "c", "v": 2.5, "n": None},
    ]


@pytest.mark.parametrize("kind", FORMATS)
def test_a_column_of_nulls_only_adds_nothing(kind: WireFormat) -> None:
    assert rows(kind, {"m": "cpu", "columns": {"time": [1], "v": [1], "empty": [None]}}) == [
        {"time": 1_000_000_000, "v": 1}
    ]
    (part,) = decoded(kind, {"m": "cpu", "tags": ["t"], "columns": {"time": [1], "v": [1], "t": [None]}})
    assert part.table.schema.field("t").type == pa.string()
    assert part.tags == ("t",)


@pytest.mark.parametrize("kind", FORMATS)
def test_ints_and_floats_in_one_column_widen_to_float(kind: WireFormat) -> None:
    (part,) = decoded(kind, {"m": "cpu", "columns": {"time": [1, 2], "v": [1, 2.5]}})
    assert part.table.column("v").type == pa.float64()
    assert part.table.column("v").to_pylist() == [1.0, 2.5]
    (part,) = decoded(kind, [{"m": "cpu", "fields": {"v": 1}}, {"m": "cpu", "fields": {"v": 0.5}}])
    assert part.table.column("v").to_pylist() == [1.0, 0.5]


@pytest.mark.parametrize("kind", FORMATS)
def test_integer_extremes(kind: WireFormat) -> None:
    values = [-(2**63), 2**63 - 1, 0]
    assert decoded(kind, {"m": "m", "columns": {"v": values}})[0].table.column("v").to_pylist() == values


@pytest.mark.parametrize("kind", FORMATS)
def test_missing_time_is_now(kind: WireFormat) -> None:
    assert rows(kind, {"m": "cpu", "columns": {"v": [1, 2]}}) == [{"time": NOW_NS, "v": 1}, {"time": NOW_NS, "v": 2}]
    document = [
        {"m": "cpu", "fields": {"v": 1}},
        {"m": "cpu", "t": 7, "fields": {"v": 2}},
        {"m": "cpu", "fields": {"v": 3}},
    ]
    assert rows(kind, document) == [
        {"time": NOW_NS, "v": 1},
        {"time": 7_000_000_000, "v": 2},
        {"time": NOW_NS, "v": 3},
    ]
    assert rows(kind, [{"m": "cpu", "fields": {"v": 1}}, {"m": "cpu", "fields": {"v": 2}}]) == [
        {"time": NOW_NS, "v": 1},
        {"time": NOW_NS, "v": 2},
    ]


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize(
    ("value", "nanos"),
    [
        (1_700_000_000, 1_700_000_000_000_000_000),  # seconds
        (9_000_000_000, 9_000_000_000_000_000_000),
        (10_000_000_000, 10_000_000_000_000_000),  # milliseconds from here
        (1_700_000_000_123, 1_700_000_000_123_000_000),
        (9_000_000_000_000, 9_000_000_000_000_000_000),
        (10_000_000_000_000, 10_000_000_000_000_000),  # microseconds from here
        (1_700_000_000_123_456, 1_700_000_000_123_456_000),
        (9_000_000_000_000_000, 9_000_000_000_000_000_000),
        (10_000_000_000_000_000, 10_000_000_000_000_000),  # nanoseconds from here
        (1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
        (0, 0),
        (-1, -1_000_000_000),
        (-1_700_000_000_123, -1_700_000_000_123_000_000),
        (-1_700_000_000_123_456_789, -1_700_000_000_123_456_789),  # nanoseconds as written
        (1.5, 1_500_000_000),
        (1_700_000_000.25, 1_700_000_000_250_000_000),
        (1_700_000_000_123.5, 1_700_000_000_123_500_000),
    ],
)
def test_time_unit_by_magnitude(kind: WireFormat, value: float, nanos: int) -> None:
    assert rows(kind, {"m": "cpu", "columns": {"time": [value], "v": [1]}}) == [{"time": nanos, "v": 1}]


@pytest.mark.parametrize("kind", FORMATS)
def test_precision_per_item_and_per_request(kind: WireFormat) -> None:
    document = [
        {"m": "a", "precision": "s", "columns": {"time": [2], "v": [1]}},
        {"m": "b", "columns": {"time": [2], "v": [1]}},
        {"m": "c", "precision": "ns", "t": 2_500, "fields": {"v": 1}},
    ]
    a, b, c = decoded(kind, document, precision="ms")
    assert table_rows(a.table)[0]["time"] == 2_000_000_000
    assert table_rows(b.table)[0]["time"] == 2_000_000
    assert table_rows(c.table)[0]["time"] == 2_500
    # Without a request precision, b's unit follows the magnitude of 2: seconds.
    assert table_rows(decoded(kind, document)[1].table)[0]["time"] == 2_000_000_000


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("2023-11-14T22:13:20Z", 1_700_000_000_000_000_000),
        ("2023-11-14T22:13:20.123456Z", 1_700_000_000_123_456_000),
        ("2023-11-14T22:13:20.123456789Z", 1_700_000_000_123_456_789),
        ("2023-11-15T00:13:20+02:00", 1_700_000_000_000_000_000),
        ("2023-11-14T21:13:20.5-01:00", 1_700_000_000_500_000_000),
        ("1969-12-31T23:59:59.9999995Z", -500),
        ("1677-09-22T00:00:00Z", -9_223_286_400_000_000_000),
    ],
)
def test_rfc3339_times(kind: WireFormat, text: str, nanos: int) -> None:
    assert rows(kind, {"m": "cpu", "columns": {"time": [text], "v": [1]}}) == [{"time": nanos, "v": 1}]
    assert rows(kind, {"m": "cpu", "t": text, "fields": {"v": 1}}) == [{"time": nanos, "v": 1}]


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("name", ["cpu", "A", "select", "time", "system", "a-b_C-9", "x" * 128])
def test_odd_but_valid_measurement_names(kind: WireFormat, name: str) -> None:
    assert decoded(kind, {"m": name, "columns": {"v": [1]}})[0].measurement == name


@pytest.mark.parametrize("kind", FORMATS)
def test_odd_but_valid_column_names(kind: WireFormat) -> None:
    names = ["with space", "dot.ted", "quote'd", 'dq"', "ünï", "😀", "select", "k" * 128, "-", "1"]
    (part,) = decoded(kind, {"m": "cpu", "columns": {name: [1] for name in names}})
    assert part.table.column_names == ["time", *names]


@pytest.mark.parametrize("kind", FORMATS)
def test_up_to_the_column_limit(kind: WireFormat) -> None:
    columns = {f"c{n}": [n] for n in range(MAX_COLUMNS)}
    assert decoded(kind, {"m": "cpu", "columns": columns})[0].table.num_columns == MAX_COLUMNS + 1


# --- hostile input -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    name: str
    formats: tuple[WireFormat, ...]
    body: Callable[[WireFormat], bytes]
    message: str
    error: type[ArcsError] = BadRequest
    precision: str | None = None


def doc(document: Any) -> Callable[[WireFormat], bytes]:
    return lambda kind: encode(kind, document)


def raw(body: bytes) -> Callable[[WireFormat], bytes]:
    return lambda kind: body


def deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


MP = (WireFormat.MSGPACK,)
JS = (WireFormat.JSON,)
BOTH = (WireFormat.MSGPACK, WireFormat.JSON)
GOOD = {"m": "cpu", "columns": {"time": [1, 2], "v": [1.5, 2.5]}}


def columns(**values: Any) -> Callable[[WireFormat], bytes]:
    return doc({"m": "cpu", "columns": values})


HOSTILE = [
    # MessagePack framing
    Hostile("mp truncated", MP, lambda k: encode(k, GOOD)[:-3], "MessagePack body is malformed or truncated"),
    Hostile(
        "mp trailing bytes", MP, lambda k: encode(k, GOOD) + b"\x00\x01", "2 trailing bytes after the first object"
    ),
    Hostile("mp empty body", MP, raw(b""), "MessagePack body is malformed or truncated"),
    Hostile("mp never-used byte", MP, raw(b"\xc1"), "MessagePack body is malformed or truncated"),
    Hostile("mp text as msgpack", MP, raw(b"cpu v=1"), "trailing bytes"),
    Hostile("mp random garbage", MP, raw(bytes(range(256))), "MessagePack body"),
    Hostile("mp non-utf8 string", MP, raw(b"\x81\xa1m\xa2\xff\xfe"), "string that is not valid UTF-8"),
    Hostile(
        "mp non-utf8 value",
        MP,
        raw(b"\x82\xa1m\xa3cpu\xa7columns\x81\xa1v\x91\xa2\xc3\x28"),
        "string that is not valid UTF-8",
    ),
    Hostile("mp int map key", MP, raw(b"\x81\x01\x02"), "int is not allowed for map key"),
    Hostile("mp huge array header", MP, raw(b"\xdd\xff\xff\xff\xff"), "exceeds max_array_len"),
    Hostile("mp huge map header", MP, raw(b"\xdf\xff\xff\xff\xff"), "exceeds max_map_len"),
    Hostile("mp huge string header", MP, raw(b"\xdb\xff\xff\xff\xff"), "malformed or truncated"),
    Hostile("mp nesting 100k deep", MP, raw(b"\x91" * 100_000 + b"\x01"), "nested too deeply"),
    Hostile("mp bin value", MP, columns(v=[b"\x00\x01"]), "column 'v': unsupported value type binary"),
    Hostile(
        "mp bin column name", MP, doc({"m": "cpu", "columns": {b"v": [1]}}), "column names must be non-empty strings"
    ),
    Hostile("mp bin measurement", MP, doc({"m": b"cpu", "columns": {"v": [1]}}), "invalid measurement name b'cpu'"),
    Hostile("mp ext value", MP, columns(v=[msgpack.ExtType(5, b"x")]), "column 'v': values must share one type"),
    Hostile("mp timestamp and int", MP, columns(v=[msgpack.Timestamp(1, 0), 1]), "got int, timestamp"),
    Hostile("mp timestamp past 9999", MP, columns(v=[msgpack.Timestamp(10**12, 0)]), "years 1..9999"),
    Hostile("mp uint64 value", MP, columns(v=[2**64 - 1]), "column 'v': integer out of the int64 range"),
    Hostile("mp uint64 just past int64", MP, columns(v=[1, 2**63]), "column 'v': integer out of the int64 range"),
    Hostile("mp uint64 time", MP, columns(time=[2**63], v=[1]), "column 'time': integer out of the int64 range"),
    Hostile("mp int64 min time", MP, columns(time=[-(2**63)], v=[1]), "timestamp -9223372036854775808 at row 0"),
    Hostile("mp nan time", MP, columns(time=[1.0, math.nan], v=[1, 2]), "time is NaN or infinite at row 1"),
    Hostile("mp infinite time", MP, columns(time=[math.inf], v=[1]), "time is NaN or infinite at row 0"),
    # JSON text
    Hostile("json NaN", JS, raw(b'{"m":"cpu","columns":{"v":[NaN]}}'), "NaN is not JSON"),
    Hostile("json Infinity", JS, raw(b'{"m":"cpu","columns":{"v":[Infinity]}}'), "Infinity is not JSON"),
    Hostile("json -Infinity", JS, raw(b'{"m":"cpu","columns":{"v":[-Infinity]}}'), "-Infinity is not JSON"),
    Hostile("json float overflow", JS, raw(b'{"m":"cpu","columns":{"v":[1e400]}}'), "outside the float64 range"),
    Hostile("json huge integer", JS, raw(b'{"m":"cpu","columns":{"v":[' + b"9" * 30 + b"]}}"), "int64 range"),
    Hostile("json 5000-digit integer", JS, raw(b'{"m":"cpu","columns":{"v":[' + b"9" * 5000 + b"]}}"), "JSON body"),
    Hostile("json lone surrogate value", JS, raw(b'{"m":"cpu","columns":{"v":["\\ud800"]}}'), "not valid UTF-8"),
    Hostile("json lone surrogate key", JS, raw(b'{"m":"cpu","columns":{"\\udc00":[1]}}'), "not valid UTF-8"),
    Hostile("json lone surrogate tag", JS, raw(b'{"m":"c","t":1,"tags":{"h":"\\ud800"},"fields":{"v":1}}'), "UTF-8"),
    Hostile("json lone surrogate name", JS, raw(b'{"m":"cpu\\ud800","columns":{"v":[1]}}'), "invalid measurement name"),
    Hostile("json non-utf8", JS, raw(b'{"m":"cpu\xff","columns":{"v":[1]}}'), "JSON body is not valid UTF-8 (byte 9)"),
    Hostile("json truncated", JS, lambda k: encode(k, GOOD)[:-2], "JSON body is malformed"),
    Hostile("json trailing data", JS, lambda k: encode(k, GOOD) + b" x", "JSON body is malformed: Extra data"),
    Hostile("json empty body", JS, raw(b""), "JSON body is malformed"),
    Hostile("json byte order mark", JS, lambda k: b"\xef\xbb\xbf" + encode(k, GOOD), "JSON body is malformed"),
    Hostile("json nesting 100k deep", JS, raw(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
    # Shapes (both formats)
    Hostile("top level number", BOTH, doc(5), "expected an object or an array at the top level, got int"),
    Hostile("top level string", BOTH, doc("cpu"), "expected an object or an array at the top level, got str"),
    Hostile("top level null", BOTH, doc(None), "expected an object or an array at the top level"),
    Hostile("empty array", BOTH, doc([]), "the request holds no rows"),
    Hostile("empty batch", BOTH, doc({"batch": []}), "the request holds no rows"),
    Hostile("batch not a list", BOTH, doc({"batch": {"m": "cpu"}}), "'batch' must be an array"),
    Hostile("item not an object", BOTH, doc([GOOD, 5]), "item 1: expected an object, got int"),
    Hostile("item without columns or fields", BOTH, doc([GOOD, {"m": "cpu"}]), "item 1: expected a columnar object"),
    Hostile("nested list value", BOTH, columns(v=[[1, 2]]), "column 'v': unsupported value type list<item: int64>"),
    Hostile("nested map value", BOTH, columns(v=[{"a": 1}]), "column 'v': unsupported value type struct"),
    Hostile("deeply nested value", BOTH, columns(v=[deep(500)]), "column 'v': unsupported value type list"),
    Hostile("mixed list and scalar", BOTH, columns(v=[1, [1]]), "column 'v': values must share one type"),
    Hostile(
        "string and int",
        BOTH,
        columns(v=["a", 1]),
        "column 'v': values must share one type of int, float, string or bool; got int, string",
    ),
    Hostile("bool and int", BOTH, columns(v=[True, 1]), "got bool, int"),
    Hostile("bool and float", BOTH, columns(v=[1.5, False]), "got bool, float"),
    Hostile("float int and bool", BOTH, columns(v=[None, 1, 2.5, True]), "got bool, float, int, null"),
    Hostile(
        "row float then bool",
        BOTH,
        doc([{"m": "c", "fields": {"v": 1.0}}, {"m": "c", "fields": {"v": True}}]),
        "got bool, float",
    ),
    Hostile(
        "magnitude beyond 2262 in s",
        BOTH,
        columns(time=[9_999_999_999], v=[1]),
        "timestamp 9999999999 at row 0 is out of the range",
    ),
    Hostile(
        "magnitude beyond 2262 in us",
        BOTH,
        columns(time=[9_999_999_999_999_999], v=[1]),
        "at row 0 is out of the range",
    ),
    Hostile(
        "mismatched lengths", BOTH, columns(time=[1, 2], v=[1]), "columns have different lengths ('time'=2, 'v'=1)"
    ),
    Hostile("empty columns object", BOTH, columns(), "item 0: 'columns' must be a non-empty object of arrays"),
    Hostile("columns a list", BOTH, doc({"m": "cpu", "columns": [[1]]}), "'columns' must be a non-empty object"),
    Hostile("empty column arrays", BOTH, columns(time=[], v=[]), "measurement 'cpu': no rows"),
    Hostile("column not a list", BOTH, columns(v=5), "item 0: column 'v' must be an array"),
    Hostile("column a map", BOTH, columns(v={"a": 1}), "item 0: column 'v' must be an array"),
    Hostile("only time", BOTH, columns(time=[1]), "no field or tag columns besides time"),
    Hostile("only nulls", BOTH, columns(v=[None]), "no field or tag columns besides time"),
    Hostile("missing measurement", BOTH, doc({"columns": {"v": [1]}}), "invalid measurement name None"),
    Hostile("measurement a number", BOTH, doc({"m": 5, "columns": {"v": [1]}}), "invalid measurement name 5"),
    Hostile("measurement empty", BOTH, doc({"m": "", "columns": {"v": [1]}}), "invalid measurement name ''"),
    Hostile("measurement with digit first", BOTH, doc({"m": "1cpu", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement underscore first", BOTH, doc({"m": "_internal", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement with dot", BOTH, doc({"m": "db.cpu", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement path", BOTH, doc({"m": "../etc/passwd", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement newline", BOTH, doc({"m": "cpu\n", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement space", BOTH, doc({"m": "cpu usage", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement non-ascii", BOTH, doc({"m": "c\u0440u", "columns": {"v": [1]}}), "must match"),
    Hostile("measurement too long", BOTH, doc({"m": "x" * 129, "columns": {"v": [1]}}), "must match"),
    Hostile("measurement huge", BOTH, doc({"m": "x" * 1_000_000, "columns": {"v": [1]}}), "..."),
    Hostile("row measurement invalid", BOTH, doc({"m": "1x", "fields": {"v": 1}}), "item 0: invalid measurement name"),
    Hostile(
        "row measurement not a string",
        BOTH,
        doc({"m": ["x"], "fields": {"v": 1}}),
        "item 0: 'm' (the measurement) must be a string",
    ),
    Hostile(
        "too many columns",
        BOTH,
        doc({"m": "cpu", "columns": {f"c{n}": [1] for n in range(MAX_COLUMNS + 1)}}),
        f"the limit is {MAX_COLUMNS}",
    ),
    Hostile("empty column name", BOTH, columns(**{"": [1]}), "column names must be non-empty strings"),
    Hostile("column name too long", BOTH, columns(**{"k" * 129: [1]}), "is longer than 128 bytes"),
    Hostile("column name control char", BOTH, columns(**{"a\x00b": [1]}), "contains control characters"),
    Hostile("column name Time", BOTH, columns(Time=[1], v=[1]), "column 'Time' would shadow 'time'"),
    Hostile(
        "columns differ in case", BOTH, columns(Value=[1], value=[2]), "columns 'Value' and 'value' differ only in case"
    ),
    Hostile(
        "time as tag",
        BOTH,
        doc({"m": "cpu", "tags": ["time"], "columns": {"time": [1], "v": [1]}}),
        "'time' cannot be a tag",
    ),
    Hostile(
        "tag naming no column",
        BOTH,
        doc({"m": "cpu", "tags": ["host"], "columns": {"v": [1]}}),
        "tags ['host'] name no column",
    ),
    Hostile(
        "tags not a list",
        BOTH,
        doc({"m": "cpu", "tags": "host", "columns": {"v": [1]}}),
        "'tags' must be an array of column names",
    ),
    Hostile(
        "tags with a number",
        BOTH,
        doc({"m": "cpu", "tags": [1], "columns": {"v": [1]}}),
        "'tags' must be an array of column names",
    ),
    Hostile(
        "tag values numbers",
        BOTH,
        doc({"m": "cpu", "tags": ["h"], "columns": {"h": [1], "v": [1]}}),
        "tag 'h': tag values must be strings, got int64",
    ),
    Hostile(
        "tag value control char",
        BOTH,
        doc({"m": "cpu", "tags": ["h"], "columns": {"h": ["ok", "a\nb"], "v": [1, 2]}}),
        "tag 'h': tag value at row 1 contains control characters",
    ),
    Hostile(
        "row tag value control char",
        BOTH,
        doc([{"m": "c", "fields": {"v": 1}}, {"m": "c", "tags": {"h": "\x7f"}, "fields": {"v": 1}}]),
        "tag 'h': tag value at item 1 contains control characters",
    ),
    Hostile("null time in columns", BOTH, columns(time=[1, None], v=[1, 2]), "time is null at row 1"),
    Hostile("bool time", BOTH, columns(time=[True], v=[1]), "time must be integers, got bool"),
    Hostile(
        "time without zone",
        BOTH,
        columns(time=["2024-01-01T00:00:00"], v=[1]),
        "time strings must be RFC 3339 with a zone",
    ),
    Hostile("time not a date", BOTH, columns(time=["yesterday"], v=[1]), "time strings must be RFC 3339"),
    Hostile(
        "time string out of range",
        BOTH,
        columns(time=["3000-01-01T00:00:00Z"], v=[1]),
        "outside 1677-09-21 .. 2262-04-11",
    ),
    Hostile(
        "time mixed types",
        BOTH,
        columns(time=[1, "2024-01-01T00:00:00Z"], v=[1, 2]),
        "column 'time': values must share one type",
    ),
    Hostile(
        "time out of range for precision",
        BOTH,
        doc({"m": "c", "precision": "s", "columns": {"time": [10**13], "v": [1]}}),
        "timestamp 10000000000000 at row 0 is out of the range",
    ),
    Hostile(
        "float time out of range",
        BOTH,
        doc({"m": "c", "precision": "h", "columns": {"time": [1e12], "v": [1]}}),
        "at row 0 is out of the range",
    ),
    Hostile(
        "row time out of range",
        BOTH,
        doc([{"m": "c", "fields": {"v": 1}}, {"m": "c", "t": 1e300, "fields": {"v": 1}}]),
        "at item 1 is out of the range",
    ),
    Hostile(
        "item precision unknown",
        BOTH,
        doc({"m": "c", "precision": "xs", "columns": {"v": [1]}}),
        "item 0: invalid precision 'xs'",
    ),
    Hostile(
        "item precision a list",
        BOTH,
        doc({"m": "c", "precision": ["s"], "columns": {"v": [1]}}),
        "item 0: invalid precision ['s']",
    ),
    Hostile(
        "row precision unknown",
        BOTH,
        doc({"m": "c", "precision": 5, "fields": {"v": 1}}),
        "item 0: invalid precision 5",
    ),
    Hostile("request precision unknown", BOTH, doc(GOOD), "invalid precision 'xs'", precision="xs"),
    Hostile(
        "rows mix precisions",
        BOTH,
        doc([{"m": "c", "fields": {"v": 1}}, {"m": "c", "precision": "s", "fields": {"v": 1}}]),
        "item 1: rows of 'c' mix precisions",
    ),
    Hostile(
        "row fields not a map", BOTH, doc({"m": "c", "fields": [1]}), "item 0: 'tags' and 'fields' must be objects"
    ),
    Hostile(
        "row tags a list",
        BOTH,
        doc({"m": "c", "tags": ["h"], "fields": {"v": 1}}),
        "item 0: 'tags' and 'fields' must be objects",
    ),
    Hostile("row no fields", BOTH, doc({"m": "c", "fields": {}}), "item 0: a row needs at least one field"),
    Hostile(
        "row key tag and field",
        BOTH,
        doc({"m": "c", "tags": {"v": "a"}, "fields": {"v": 1}}),
        "item 0: 'v' is both a tag and a field",
    ),
    Hostile("row time field", BOTH, doc({"m": "c", "fields": {"time": 1}}), "item 0: 'time' cannot be a tag or field"),
    Hostile("row Time field", BOTH, doc({"m": "c", "fields": {"Time": 1}}), "column 'Time' would shadow 'time'"),
    Hostile(
        "row types conflict",
        BOTH,
        doc([{"m": "c", "fields": {"v": 1}}, {"m": "c", "fields": {"v": "x"}}]),
        "column 'v': values must share one type",
    ),
    Hostile(
        "row nested value",
        BOTH,
        doc({"m": "c", "fields": {"v": {"x": [1]}}}),
        "column 'v': unsupported value type struct",
    ),
    Hostile("row bin key", MP, doc({"m": "c", "fields": {b"v": 1}}), "item 0: keys must be strings, got b'v'"),
]


@pytest.mark.parametrize(
    ("case", "kind"),
    [pytest.param(case, kind, id=f"{case.name}-{kind.value}") for case in HOSTILE for kind in case.formats],
)
def test_hostile_input_is_a_clear_client_error(case: Hostile, kind: WireFormat) -> None:
    with pytest.raises(ArcsError) as caught:
        decode(kind, case.body(kind), NOW, case.precision)
    assert type(caught.value) is case.error
    assert case.message in caught.value.message
    assert len(caught.value.message) < 400


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


# --- MessagePack's timestamp extension ---------------------------------------------------------------


def _msgpack_rows(document: Any) -> list[dict[str, Any]]:
    (part,) = decode(WireFormat.MSGPACK, msgpack.packb(document, use_bin_type=True, datetime=False), NOW, None)
    return table_rows(part.table)


def test_msgpack_timestamps_make_a_timestamp_column() -> None:
    document = {
        "m": "visits",
        "columns": {
            "time": [1_700_000_000_000_000, 1_700_000_001_000_000],
            "seen": [msgpack.Timestamp(1_600_000_000, 123_456_789), None],
        },
    }
    (part,) = decode(WireFormat.MSGPACK, msgpack.packb(document), NOW, None)
    assert part.table.schema.field("seen").type == TIME_TYPE
    # Nanoseconds beyond the microsecond are dropped.
    assert part.table.column("seen").cast(pa.int64()).to_pylist() == [1_600_000_000_123_456_000, None]


def test_msgpack_timestamps_can_be_the_time_column() -> None:
    document = {"m": "cpu", "t": msgpack.Timestamp(-2, 500_000_000), "fields": {"v": 1}}
    assert _msgpack_rows(document) == [{"time": -1_500_000_000, "v": 1}]
    columnar = {"m": "cpu", "columns": {"time": [msgpack.Timestamp(1, 0)], "v": [1.5]}}
    assert _msgpack_rows(columnar) == [{"time": 1_000_000_000, "v": 1.5}]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([msgpack.Timestamp(1, 0), 5], "share one type"),
        ([5, msgpack.Timestamp(1, 0)], "share one type"),
        ([msgpack.Timestamp(1, 0), "2020-01-01T00:00:00Z"], "share one type"),
        ([msgpack.Timestamp(10**12, 0)], "years 1..9999"),
        ([msgpack.Timestamp(-(10**12), 0)], "years 1..9999"),
        ([msgpack.Timestamp(9_300_000_000, 0)], "out of the range"),
    ],
)
def test_hostile_msgpack_timestamps(values: list[Any], message: str) -> None:
    body = msgpack.packb({"m": "cpu", "columns": {"time": [1, 2][: len(values)], "seen": values}})
    with pytest.raises(BadRequest, match=message):
        decode(WireFormat.MSGPACK, body, NOW, "s")
    time_body = msgpack.packb({"m": "cpu", "columns": {"time": values, "v": [1] * len(values)}})
    with pytest.raises(BadRequest):
        decode(WireFormat.MSGPACK, time_body, NOW, None)


def test_column_names_checked_once_are_remembered_and_refused_ones_never(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = columns_module._NameSets(max_names=4)
    monkeypatch.setattr(columns_module, "_CHECKED_NAMES", memory)
    checks: list[tuple[str, ...]] = []
    real = columns_module._check_distinct
    monkeypatch.setattr(columns_module, "_check_distinct", lambda names, m: (checks.append(names), real(names, m)))
    for _ in range(3):
        columns_module.check_distinct({"time": 1_000, "host": 2, "v": 3}, "cpu")
    assert checks == [("time", "host", "v")]  # checked once, then known
    for _ in range(2):
        with pytest.raises(BadRequest, match="differ only in case"):
            columns_module.check_distinct({"Value": 1, "value": 2}, "cpu")
    assert checks[1:] == [("Value", "value")] * 2  # a refused set is checked (and refused) each time
    columns_module.check_distinct({"a": 1}, "cpu")  # four names held: full
    columns_module.check_distinct({"b": 1}, "cpu")  # one more: the memory starts over
    assert list(memory.sets) == [("b",)] and memory.names == 1
    columns_module.check_distinct({f"c{i}": i for i in range(5)}, "cpu")  # more names than it holds: not kept
    assert list(memory.sets) == [("b",)] and memory.names == 1
