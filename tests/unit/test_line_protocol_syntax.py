"""InfluxDB line protocol's syntax: escapes, value types, comments, timestamps and precisions."""

from __future__ import annotations

import pytest

from arcs.write.decoders.columns import MAX_NANOS, MIN_NANOS
from tests.unit.line_protocol_bodies import error, parts, rows
from tests.unit.wire_documents import NOW_NS, table_rows

# --- escaping -------------------------------------------------------------------------------


def test_tag_keys_values_and_field_keys_unescape_comma_equals_space() -> None:
    (part,) = parts(r"cpu,ho\ st\,x\=y=a\,b\=c\ d f\,i\=e\ ld=1i 5").values()
    assert table_rows(part.table) == [{"time": 5, "ho st,x=y": "a,b=c d", "f,i=e ld": 1}]
    assert part.tags == ("ho st,x=y",)


def test_string_fields_unescape_quote_and_backslash_only() -> None:
    assert rows(r'cpu s="say \"hi\" \\ back",t="a\nb\tc" 1') == [{"time": 1, "s": 'say "hi" \\ back', "t": "a\\nb\\tc"}]


def test_other_backslashes_are_literal() -> None:
    assert rows(r"cpu,path=C:\dir\x v\q=1 1") == [{"time": 1, "path": "C:\\dir\\x", "v\\q": 1.0}]


def test_double_backslash_then_separator_ends_the_value() -> None:
    # As in InfluxDB: '\\' is one escape pair, so the comma after it separates.
    assert rows(r"cpu,a=x\\,b=y v=1 1") == [{"time": 1, "a": "x\\\\", "b": "y", "v": 1.0}]


def test_quoted_strings_keep_commas_spaces_and_equals() -> None:
    assert rows('cpu s="a, b=c  d",n=1i 7') == [{"time": 7, "s": "a, b=c  d", "n": 1}]


def test_unescaped_quotes_in_tags_and_keys_are_literal() -> None:
    assert rows('cpu,q="x" k"=1 1') == [{"time": 1, "q": '"x"', 'k"': 1.0}]


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        (r"cp\ u v=1", "'cp u'"),
        (r"cp\,u v=1", "'cp,u'"),
        (r'"cpu" v=1', "'\"cpu\"'"),
    ],
)
def test_escaped_measurements_unescape_then_fail_the_name_rule(line: str, shown: str) -> None:
    message = error(f"ok v=1\n{line}")
    assert message.startswith("line 2: invalid measurement name")
    assert shown in message


def test_strings_may_span_lines_as_in_influxdb() -> None:
    body = 'log msg="first\nsecond\r\n third",n=1i 1\nlog msg="x" 2\r\nlog msg="y\n" 3\nlog n=x 4'
    message = error(body)
    assert message == "line 7: field 'n': bad value 'x' (numbers, 1i, 1u, \"strings\", true/false)"
    assert rows(body.rpartition("\n")[0]) == [
        {"time": 1, "msg": "first\nsecond\r\n third", "n": 1},
        {"time": 2, "msg": "x", "n": None},
        {"time": 3, "msg": "y\n", "n": None},
    ]


def test_a_string_left_open_is_an_error_naming_its_line() -> None:
    assert error('cpu v=1\ncpu s="never closed\nmore text\n') == ("line 2: field 's': unterminated string at column 7")
    assert error('cpu s="open') == "line 1: field 's': unterminated string at column 7"


# --- value types ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("1", 1.0),
        ("-1", -1.0),
        ("+2", 2.0),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        (".5", 0.5),
        ("1.", 1.0),
        ("1e3", 1000.0),
        ("1E-3", 0.001),
        ("-1.5e+10", -1.5e10),
        ("6.02214076e23", 6.02214076e23),
        ("1.7976931348623157e308", 1.7976931348623157e308),
        ("5e-324", 5e-324),
        ("0", 0.0),
    ],
)
def test_floats(raw: str, value: float) -> None:
    assert rows(f"m v={raw} 1") == [{"time": 1, "v": value}]


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("0i", 0),
        ("1i", 1),
        ("-1i", -1),
        ("9223372036854775807i", 9223372036854775807),
        ("-9223372036854775808i", -9223372036854775808),
        ("0u", 0),
        ("42u", 42),
        ("9223372036854775807u", 9223372036854775807),
        ("000000000000000000000000042i", 42),
    ],
)
def test_integers(raw: str, value: int) -> None:
    assert rows(f"m v={raw} 1") == [{"time": 1, "v": value}]


@pytest.mark.parametrize("raw", ["t", "T", "true", "True", "TRUE"])
def test_true_spellings(raw: str) -> None:
    assert rows(f"m v={raw} 1") == [{"time": 1, "v": True}]


@pytest.mark.parametrize("raw", ["f", "F", "false", "False", "FALSE"])
def test_false_spellings(raw: str) -> None:
    assert rows(f"m v={raw} 1") == [{"time": 1, "v": False}]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("9223372036854775808i", "outside the int64 range"),
        ("-9223372036854775809i", "outside the int64 range"),
        ("9223372036854775808u", "outside the int64 range"),
        ("18446744073709551615u", "outside the int64 range"),
        ("1" * 5000 + "i", "outside the int64 range"),
        ("-1u", "bad integer"),
        ("1.5i", "bad integer"),
        ("+1i", "bad integer"),
        ("i", "bad integer"),
        ("-i", "bad integer"),
        ("1_000i", "bad integer"),
        ("\u0661i", "bad integer"),
        ("1e400", "outside the float64 range"),
        ("-1e400", "outside the float64 range"),
        ("1" * 400, "outside the float64 range"),
        ("nan", "bad value"),
        ("NaN", "bad value"),
        ("inf", "bad value"),
        ("Infinity", "bad value"),
        ("1_000", "bad value"),
        ("0x10", "bad value"),
        ("\u0661\u0662", "bad value"),
        ("1e", "bad value"),
        ("--1", "bad value"),
        ("tRue", "bad value"),
        ("yes", "bad value"),
        ("abc", "bad value"),
        ("1\t2", "bad value"),
    ],
)
def test_bad_field_values_name_the_field_and_line(raw: str, problem: str) -> None:
    message = error(f"m v=1\nm v={raw} 1")
    assert message.startswith("line 2: field 'v': ")
    assert problem in message
    assert len(message) < 300


# --- lines, comments, timestamps ----------------------------------------------------------------


def test_comments_blank_lines_crlf_and_surrounding_whitespace() -> None:
    body = "# header\r\n\r\n   \r\ncpu v=1 1\r\n  # indented comment\r\n\tcpu v=2 2  \r\n\r\n"
    assert rows(body) == [{"time": 1, "v": 1.0}, {"time": 2, "v": 2.0}]


def test_repeated_spaces_between_sections() -> None:
    assert rows("cpu  v=1") == [{"time": NOW_NS, "v": 1.0}]
    assert rows("cpu,host=a   v=1    5000") == [{"time": 5000, "host": "a", "v": 1.0}]
    assert rows('cpu  s="x"   5000') == [{"time": 5000, "s": "x"}]


def test_tabs_do_not_separate_sections() -> None:
    assert "bad value '1\\t5'" in error("cpu v=1\t5")
    assert "bad timestamp '5\\t6'" in error("cpu v=1 5\t6")


def test_missing_timestamp_is_now() -> None:
    assert rows("cpu v=1\ncpu v=2 3000\ncpu v=3") == [
        {"time": NOW_NS, "v": 1.0},
        {"time": 3000, "v": 2.0},
        {"time": NOW_NS, "v": 3.0},
    ]


@pytest.mark.parametrize(
    ("precision", "timestamp", "nanos"),
    [
        (None, 1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
        ("ns", 1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
        ("n", 1_700_000_000_123_456_789, 1_700_000_000_123_456_789),
        ("ns", 999, 999),
        ("ns", -1, -1),
        ("ns", -1001, -1001),
        ("ns", MAX_NANOS, MAX_NANOS),
        ("ns", MIN_NANOS, MIN_NANOS),
        ("us", 1_700_000_000_123_456, 1_700_000_000_123_456_000),
        ("u", -5, -5_000),
        ("ms", 1_700_000_000_123, 1_700_000_000_123_000_000),
        ("ms", -1, -1_000_000),
        ("s", 1_700_000_000, 1_700_000_000_000_000_000),
        ("s", -1, -1_000_000_000),
        ("m", 5, 300_000_000_000),
        ("m", -1, -60_000_000_000),
        ("h", 2, 7_200_000_000_000),
        ("h", 473_000, 473_000 * 3_600_000_000_000),
        ("s", 9_223_372_036, 9_223_372_036_000_000_000),
    ],
)
def test_precisions_give_exact_nanoseconds(precision: str | None, timestamp: int, nanos: int) -> None:
    assert rows(f"cpu v=1 {timestamp}", precision) == [{"time": nanos, "v": 1.0}]


@pytest.mark.parametrize(
    ("precision", "timestamp"),
    [
        ("ns", "9223372036854775808"),
        ("ns", "-9223372036854775809"),
        ("ns", "1" * 5000),
        ("us", "9223372036854775807"),
        ("ms", "9223372036854776"),
        ("s", "9223372036855"),
        ("s", "-9223372036855"),
        ("m", "153722867281"),
        ("h", "2562047789"),
        ("ns", "-9223372036854775808"),
        ("ns", "9223372036854775807"),
        ("ns", str(MAX_NANOS + 1)),
    ],
)
def test_timestamps_out_of_range_name_the_line(precision: str, timestamp: str) -> None:
    message = error(f"cpu v=1 1\ncpu v=2 {timestamp}", precision)
    assert "line 2" in message
    assert "range" in message
    assert len(message) < 300


@pytest.mark.parametrize("timestamp", ["1.5", "abc", "1e9", "+5", "0x10", "\u0661", "5 6", "--1"])
def test_bad_timestamps(timestamp: str) -> None:
    message = error(f"cpu v=1 {timestamp}")
    assert message.startswith("line 1: ")


@pytest.mark.parametrize("precision", ["x", "NS", "sec", "nanoseconds", "µs"])
def test_unknown_precision(precision: str) -> None:
    assert "invalid precision" in error("cpu v=1 1", precision)
