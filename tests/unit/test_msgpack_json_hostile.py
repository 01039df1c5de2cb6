"""Every hostile MessagePack or JSON body is a clear client error."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack
import pytest

from arcs.errors import ArcsError, BadRequest
from arcs.names import MAX_COLUMNS
from arcs.write.decoders import WireFormat, decode
from tests.unit.wire_documents import GOOD, NOW, encode

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
