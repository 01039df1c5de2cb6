"""Line protocol bodies become tables: measurements, columns and types, all-or-nothing errors that
name their lines, and the names and sizes refused.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from arcs.names import MAX_COLUMNS
from arcs.write.batch import TIME_TYPE
from tests.unit.line_protocol_bodies import error, parts, rows
from tests.unit.wire_documents import table_rows

# --- tables -------------------------------------------------------------------------------------


def test_several_measurements_in_one_body_keep_order_and_tags() -> None:
    decoded = parts("cpu,host=a usage=1 1000\nmem,host=b free=2i 2000\ncpu,host=c usage=3 3000\n")
    assert list(decoded) == ["cpu", "mem"]
    assert table_rows(decoded["cpu"].table) == [
        {"time": 1000, "host": "a", "usage": 1.0},
        {"time": 3000, "host": "c", "usage": 3.0},
    ]
    assert table_rows(decoded["mem"].table) == [{"time": 2000, "host": "b", "free": 2}]
    assert decoded["cpu"].tags == ("host",)


def test_columns_absent_in_some_lines_are_null() -> None:
    table = parts('m,a=x f=1i 1000\nm,b=y g=true 2000\nm h="s" 3000').popitem()[1].table
    assert table.schema == pa.schema(
        [
            ("time", TIME_TYPE),
            ("a", pa.string()),
            ("f", pa.int64()),
            ("b", pa.string()),
            ("g", pa.bool_()),
            ("h", pa.string()),
        ]
    )
    assert table_rows(table) == [
        {"time": 1000, "a": "x", "f": 1, "b": None, "g": None, "h": None},
        {"time": 2000, "a": None, "f": None, "b": "y", "g": True, "h": None},
        {"time": 3000, "a": None, "f": None, "b": None, "g": None, "h": "s"},
    ]


def test_integers_and_floats_widen_to_float_within_a_request() -> None:
    table = parts("m v=1i 1\nm v=2.5 2\nm v=3u 3\nm w=1.5 4\nm w=-7i 5").popitem()[1].table
    assert table.schema.field("v").type == pa.float64()
    assert table.schema.field("w").type == pa.float64()
    assert table.column("v").to_pylist() == [1.0, 2.5, 3.0, None, None]
    assert table.column("w").to_pylist() == [None, None, None, 1.5, -7.0]


def test_integers_stay_integers() -> None:
    assert parts("m v=1i 1\nm v=2u 2").popitem()[1].table.schema.field("v").type == pa.int64()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('m v=1i\nm v="x"', "line 2: 'v' is string here but integer in an earlier line"),
        ("m v=true\nm v=1", "line 2: 'v' is float here but boolean in an earlier line"),
        ("m,v=a x=1\nm v=1", "line 2: 'v' is float here but tag in an earlier line"),
        ("m v=1\nm,v=a x=1", "line 2: 'v' is tag here but float in an earlier line"),
        ('m s="a"\nm s=t', "line 2: 's' is boolean here but string in an earlier line"),
    ],
)
def test_conflicting_types_name_the_line(body: str, expected: str) -> None:
    assert error(body) == expected


def test_a_bad_line_does_not_poison_the_lines_after_it() -> None:
    # Line 2 fails after its tag was taken: line 3 must not see 'host' twice.
    assert error('m,host=a v=1i\nm,host=b v="x"\nm,host=c v=2i\nm,host=d,new=1 v=3i') == (
        "line 2: 'v' is string here but integer in an earlier line"
    )


def test_a_failed_line_leaves_no_column_behind() -> None:
    # 'z' came only from the bad line 2; line 3 may give it a different type.
    assert error('m v=1i\nm z=1i,v="x"\nm z="s"') == "line 2: 'v' is string here but integer in an earlier line"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("m v=1,v=2", "'v' appears twice in the line"),
        ("m,t=a,t=b v=1", "'t' appears twice in the line"),
        ("m,k=a k=1", "'k' appears twice in the line"),
        ('m v="a",v="b"', "'v' appears twice in the line"),
    ],
)
def test_duplicate_keys_in_a_line(line: str, expected: str) -> None:
    assert error(f"m ok=1\n{line}") == f"line 2: {expected}"


@pytest.mark.parametrize("line", ["m time=1", "m,time=a v=1", "m Time=1", "m,TIME=a v=1", 'm time="x"'])
def test_time_is_not_a_key(line: str) -> None:
    message = error(line)
    assert message.startswith("line 1: ")
    assert "timestamp column" in message


def test_keys_differing_only_in_case_are_refused() -> None:
    assert error("m Value=1\nm value=2") == (
        "line 2: keys 'Value' and 'value' differ only in case; SQL cannot tell them apart"
    )


def test_errors_name_the_first_five_lines() -> None:
    body = "\n".join(["cpu v=1 1"] + [f"cpu v=bad{n} 1" for n in range(2, 12)])
    message = error(body)
    assert [int(n) for n in re.findall(r"line (\d+):", message)] == [2, 3, 4, 5, 6]


def test_all_or_nothing_even_for_one_bad_line_among_many() -> None:
    good = "\n".join(f"cpu v={n} {n}" for n in range(1000))
    assert error(good + "\ncpu v=?").startswith("line 1001: ")


def test_non_utf8_names_the_line() -> None:
    assert error(b"cpu v=1\ncpu v=2\ncpu,host=\xff\xfe v=3\n") == "line 3: not valid UTF-8 at byte 10 of the line"
    assert error(b"\xc3") == "line 1: not valid UTF-8 at byte 1 of the line"


@pytest.mark.parametrize("value", ["a\x00b", "a\x01", "\x1fx", "x\x7f", "a\x1bb", "a\rb"])
def test_control_characters_in_tag_values(value: str) -> None:
    message = error(f"cpu,host=ok v=1\ncpu,host={value} v=2")
    assert "tag 'host'" in message
    assert "line 2" in message
    assert "control characters" in message


@pytest.mark.parametrize("key", ["a\x00b", "a\x01", "x\x7f", "a\x1bb"])
def test_control_characters_in_keys(key: str) -> None:
    assert "control characters" in error(f"cpu,{key}=a v=1")
    assert "control characters" in error(f"cpu {key}=1")


def test_control_characters_are_fine_inside_string_fields() -> None:
    assert rows('cpu s="a\x01\x00\tb" 1') == [{"time": 1, "s": "a\x01\x00\tb"}]


@pytest.mark.parametrize(
    "measurement", ["1cpu", "_cpu", "cpu.mem", "cpu/x", "..", "cp\u00fc", "c" * 129, "cpu\x00", "\u0441pu"]
)
def test_invalid_measurement_names_name_the_line(measurement: str) -> None:
    message = error(f"ok v=1\n{measurement} v=1")
    assert message.startswith("line 2: invalid measurement name ")
    assert len(message) < 300


def test_long_measurement_names_up_to_the_limit() -> None:
    name = "c" + "x" * 127
    assert list(parts(f"{name} v=1 1")) == [name]


def test_too_many_columns() -> None:
    fields = ",".join(f"f{n}=1" for n in range(MAX_COLUMNS))
    assert error(f"m {fields}") == f"line 1: measurement 'm' has more than {MAX_COLUMNS - 1} tags and fields"
    fields = ",".join(f"f{n}=1" for n in range(MAX_COLUMNS - 1))
    assert parts(f"m {fields}")["m"].table.num_columns == MAX_COLUMNS


def test_column_names_longer_than_128_bytes() -> None:
    assert "longer than 128 bytes" in error(f"m {'k' * 129}=1")
    accented = "\u00e9" * 65
    assert "longer than 128 bytes" in error(f"m,{accented}=a v=1")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("cpu", "line 1: expected 'measurement[,tags] fields [timestamp]'"),
        ("cpu,host=a", "line 1: expected 'measurement[,tags] fields [timestamp]'"),
        ("cpu v=1 2 3", "line 1: expected 'measurement[,tags] fields [timestamp]'"),
        (",host=a v=1", "line 1: missing measurement"),
        ("cpu,host v=1", "line 1: bad tag 'host': expected key=value"),
        ("cpu,host= v=1", "line 1: bad tag 'host=': expected key=value"),
        ("cpu,=a v=1", "line 1: bad tag '=a': expected key=value"),
        ("cpu,,h=a v=1", "line 1: bad tag '': expected key=value"),
        ("cpu v", "line 1: bad field 'v': expected key=value"),
        ("cpu v=", "line 1: bad field 'v=': expected key=value"),
        ("cpu =1", "line 1: bad field '=1': expected key=value"),
        ("cpu v=1,", "line 1: bad field '': expected key=value"),
        ("cpu v=1,,w=2", "line 1: bad field '': expected key=value"),
        ('cpu,h=\\, v=""x', "line 1: unexpected 'x' at column 14: expected ' timestamp' or the end"),
        ('cpu s="x"5', "line 1: unexpected '5' at column 10: expected ' timestamp' or the end"),
        ('cpu s="x" 5 6', "line 1: unexpected ' 5 6' at column 10: expected ' timestamp' or the end"),
        ('cpu,h=a\\ s="x"', "line 1: expected a space before the fields at column 15"),
        ('cpu,h s="x"', "line 1: bad tag at column 4: expected ,key=value"),
        ("cpu s=", "line 1: bad field 's=': expected key=value"),
        ('cpu s="x",', "line 1: bad field at column 11: expected key=value"),
        ('cpu s="x",t=', "line 1: field 't': missing value at column 13"),
        ('cpu s="x" abc', "line 1: bad timestamp 'abc': expected an integer"),
        ("", "the request holds no lines"),
        ("# only a comment\n\n", "the request holds no lines"),
    ],
)
def test_malformed_lines(body: str, expected: str) -> None:
    assert error(body) == expected


def test_huge_values_are_shortened_in_messages() -> None:
    message = error("cpu v=" + "x" * 100_000)
    assert len(message) < 300
