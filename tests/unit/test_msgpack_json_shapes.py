"""The MessagePack and JSON shapes: columnar, row, batch, bare array; times, nulls, names."""

from __future__ import annotations

import pyarrow as pa
import pytest

from arcs.errors import BadRequest
from arcs.names import MAX_COLUMNS
from arcs.write.batch import TIME_TYPE
from arcs.write.decoders import WireFormat
from arcs.write.decoders import columns as columns_module
from tests.unit.wire_documents import FORMATS, NOW_NS, decoded, rows, table_rows

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
