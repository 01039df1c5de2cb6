"""Line protocol bodies of one shape read by arcs.native: the same tables, or errors, as the Python decoders.

The native reader takes a body whose every line has the first line's shape and hands every other
one back (``None``); ``decode_line_protocol`` must answer every body as the Python decoders alone
(``ARCS_NATIVE=0``) do, and numbers must be read exactly as Python reads them.
"""

from __future__ import annotations

import math
import random
import struct
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.envvars import NATIVE
from arcs.errors import BadRequest
from arcs.write.decoders.line_protocol import decode_line_protocol
from arcs.write.decoders.line_protocol_native import decode_one_shape

NOW = 1_700_000_000_000_000
GOOD = "\n".join(
    f"cpu,host=h{i % 3},region=eu usage={i * 0.37!r},count={i * 1000 - 7}i,ok={'t' if i % 2 else 'False'} "
    f"{1_700_000_000_000_000_000 + i}"
    for i in range(20)
)


def _outcome(body: bytes, with_native: bool, precision: str | None = None) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NATIVE, "1" if with_native else "0")
        native.library.cache_clear()
        try:
            parts = decode_line_protocol(body, NOW, precision)
        except BadRequest as exc:
            return ("error", exc.message)
        finally:
            native.library.cache_clear()
    return [(p.measurement, p.tags, p.table.schema, p.table.to_pylist()) for p in parts]


def _same_either_way(body: bytes, precision: str | None = None) -> Any:
    with_native = _outcome(body, True, precision)
    # By repr: a NaN equals a NaN there (not under ==), and -0.0 differs from 0.0.
    assert repr(with_native) == repr(_outcome(body, False, precision)), body[:300]
    return with_native


def _native(library: Any, body: bytes, precision: str = "ns") -> Any:
    return decode_one_shape(library, body, NOW, precision)


def test_the_common_body_takes_the_native_path(library: Any) -> None:
    body = GOOD.encode()
    [part] = _native(library, body)
    assert part.measurement == "cpu"
    assert part.tags == ("host", "region")
    assert [str(t) for t in part.table.schema.types] == [
        "timestamp[ns]",
        "string",
        "string",
        "double",
        "int64",
        "bool",
    ]
    assert part.table.column("count").to_pylist()[:3] == [-7, 993, 1993]
    assert part.table.column("ok").to_pylist()[:3] == [False, True, False]
    _same_either_way(body)
    _same_either_way(body + b"\n")


@pytest.mark.parametrize(
    "text",
    [
        *("0", "-0", "+1.5", "1.", ".5", "-.5", "007.25", "1e5", "1E-5", "-1.5e+3", "2.5e0"),
        *("0.1", "0.3", "76.57482765617637", "11.503805593416416", "9007199254740993", "123456789012345678901"),
        *("1e22", "1e23", "1.7976931348623157e308", "4.9e-324", "2.2250738585072014e-308", "1e-400"),
        *("0.000000000000000000000000001", "3.14159265358979323846264338327950288"),
        # Halfway and near-halfway between two doubles, the largest and smallest normal ones, and
        # 19-digit mantissas at the ends of the exponent range.
        *("9007199254740995", "9007199254740993e-5", "9007199254740993e30", "1.7976931348623158e308"),
        *("2.2250738585072011e-308", "5e-324", "8.988465674311579e307", "9999999999999999999e288"),
        *("1234567890123456789e-340", "4503599627370497.5", "1e-22", "7.2057594037927933e16"),
    ],
)
def test_floats_are_read_as_python_reads_them(library: Any, text: str) -> None:
    body = f"m v={text} 1".encode()
    [part] = _native(library, body)
    value = part.table.column("v")[0].as_py()
    assert value == float(text)
    assert str(value) == str(float(text))  # the sign of zero too
    _same_either_way(body)


@pytest.mark.parametrize("stray", [b"/", b":", b";", b"<", b"?", b"_", b"\x00", b"\xb9"])
def test_a_byte_next_to_the_digits_in_a_run_of_eight_is_not_a_digit(stray: bytes) -> None:
    """The fraction's digits are read eight at a time: a byte just outside '0'..'9' anywhere among
    them leaves the line to the exact parser, as a byte by byte reading would."""
    for at in range(10):
        fraction = bytearray(b"1234567890")
        fraction[at] = stray[0]
        _same_either_way(b"m v=1.5 1\nm v=76." + bytes(fraction) + b" 2")


def _float_texts(seed: int, count: int) -> list[str]:
    """Decimal texts across the double's range: shortest round-trip forms (up to 17 digits), the
    same with their exponent written out or moved, and random mantissas of up to 19 digits."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(count):
        bits = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if not math.isfinite(bits):
            bits = rng.uniform(-1e6, 1e6)
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 19)))
        texts += [
            repr(bits),
            f"{bits:.17e}",
            f"{rng.random() * 10 ** rng.randint(-30, 30)!r}",
            f"{digits}e{rng.randint(-340, 290)}",
            f"{digits[:1]}.{digits[1:] or '0'}",
        ]
    return texts


def test_many_floats_are_read_bit_for_bit_as_python_reads_them(library: Any) -> None:
    texts = [text for text in _float_texts(seed=2, count=2_000) if math.isfinite(float(text))]
    body = "\n".join(f"m v={text} {i}" for i, text in enumerate(texts)).encode()
    [part] = _native(library, body)
    read = part.table.column("v").to_pylist()
    wrong = [(t, v) for t, v in zip(texts, read, strict=True) if struct.pack("<d", v) != struct.pack("<d", float(t))]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9223372036854775807i", 2**63 - 1),
        ("-9223372036854775808i", -(2**63)),
        ("0i", 0),
        ("-0i", 0),
        ("9223372036854775807u", 2**63 - 1),
        ("0u", 0),
    ],
)
def test_integer_extremes(library: Any, text: str, value: int) -> None:
    body = f"m v={text} 1".encode()
    [part] = _native(library, body)
    assert part.table.column("v")[0].as_py() == value
    _same_either_way(body)


@pytest.mark.parametrize("text", ["t", "T", "true", "True", "TRUE", "f", "F", "false", "False", "FALSE"])
def test_every_spelling_of_a_boolean(library: Any, text: str) -> None:
    body = f"m v={text} 1\nm v={text} 2".encode()
    [part] = _native(library, body)
    assert part.table.column("v").to_pylist() == [text.lower().startswith("t")] * 2
    _same_either_way(body)


def test_lines_without_a_time_are_now(library: Any) -> None:
    body = b"m,t=a v=1 1700000000000000000\nm,t=b v=2\nm,t=c v=3 5"
    [part] = _native(library, body)
    micros = [stamp.timestamp() * 1_000_000 for stamp in part.table.column("time").to_pylist()]
    assert micros == [1_700_000_000_000_000, NOW, 0]
    _same_either_way(body)


LEFT = {
    "escaped space": b"m,t=a\\ b v=1 1\nm,t=c v=2 2",
    "escaped measurement": b"m\\,x v=1 1",
    "quoted string": b'm v="x" 1',
    "comment": b"m v=1 1\n# note\nm v=2 2",
    "CRLF": b"m v=1 1\r\nm v=2 2",
    "tab": b"m v=1\t1",
    "leading space": b" m v=1 1",
    "two spaces": b"m  v=1 1",
    "trailing space": b"m v=1 1 ",
    "blank line": b"m v=1 1\n\nm v=2 2",
    "another shape": b"m v=1 1\nm w=1 2",
    "another measurement": b"m v=1 1\nn v=1 2",
    "more fields": b"m v=1 1\nm v=1,w=2 2",
    "int then float": b"m v=1i 1\nm v=1.5 2",
    "float then int": b"m v=1.5 1\nm v=1i 2",
    "bool then float": b"m v=t 1\nm v=1 2",
    "equals in a value": b"m,t=a=b v=1 1",
    "empty tag value": b"m,t= v=1 1",
    "empty field value": b"m v= 1",
    "a key twice": b"m,a=b,a=c v=1",
    "a tag and a field of one name": b"m,v=x v=1",
    "keys differing in case": b"m,a=b,A=c v=1",
    "a time key": b"m time=1",
    "integer overflow": b"m v=9223372036854775808i 1",
    "unsigned beyond int64": b"m v=9223372036854775808u 1",
    "negative unsigned": b"m v=-1u 1",
    "plus on an integer": b"m v=+1i 1",
    "time overflow": b"m v=1 9223372036854775808",
    "time not a number": b"m v=1 12a",
    "infinite float": b"m v=1e999 1",
    "not a float": b"m v=abc 1",
    "hexadecimal": b"m v=0x10 1",
    "nan": b"m v=nan 1",
    "no fields": b"m 1",
    "bad measurement name": b"b\xc3\xa4d@name v=1 1",
    "non-UTF-8 tag": b"m,t=\xff v=1 1",
    "a float too long to copy": b"m v=1." + b"0" * 200 + b"1 1",
}


@pytest.mark.parametrize("body", LEFT.values(), ids=LEFT.keys())
def test_what_it_leaves_is_answered_as_before(library: Any, body: bytes) -> None:
    assert decode_one_shape(library, body, NOW, "ns") is None
    _same_either_way(body)


@pytest.mark.parametrize("special", [b",", b" ", b"=", b"\\", b'"', b"#", b"\r", b"\t", b"\n"])
def test_a_special_byte_anywhere_in_a_long_value_is_seen(special: bytes) -> None:
    """The reader looks for a value's end eight bytes at a time: a separator or a byte it leaves to
    the exact parser is found at every place in the word, and near the body's end."""
    for at in range(20):
        tag, field = bytearray(b"abcdefghijklmnopqrstuv"), bytearray(b"1234567890.123456789")
        for value in (tag, field):
            value[at] = special[0]
            line = b"m,t=" + bytes(tag) + b" v=" + bytes(field) + b" 2"
            _same_either_way(b"m,t=x v=1 1\n" + line + b"\nm,t=y v=3 3")
            _same_either_way(b"m,t=x v=1 1\n" + line)  # the value within the body's last eight bytes
            value[at] = b"abcdefghijklmnopqrstuv"[at] if value is tag else b"1234567890.123456789"[at]


def test_tag_values_beyond_ascii_are_checked_as_utf8(library: Any) -> None:
    valid = "m,host=zürich,dc=東京 v=1 1\nm,host=bern,dc=x v=2 2".encode()
    [part] = _native(library, valid)
    assert part.table.column("host").to_pylist() == ["zürich", "bern"]
    _same_either_way(valid)
    for bad in (b"m,host=z\xfcrich v=1 1\nm,host=bern v=2 2", b"m,host=bern v=1 1\nm,host=\xe6\x9d v=2 2"):
        assert decode_one_shape(library, bad, NOW, "ns") is None
        assert _same_either_way(bad)[0] == "error"


def test_every_truncation_is_answered_as_before() -> None:
    body = "\n".join(GOOD.split("\n")[:3]).encode()
    for end in range(len(body)):
        _same_either_way(body[:end])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_corruption_is_answered_as_before(data: st.DataObject) -> None:
    body = bytearray("\n".join(GOOD.split("\n")[:4]).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.sampled_from(b' ,=\n\\"#it.e-+0159aZ\x00'))
    _same_either_way(bytes(body))


_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-(10**20), 10**20), st.integers(-330, 330)),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 10**12), st.integers(0, 10**25)),
)
_values = {
    "float": _floats,
    "integer": st.integers(-(2**63), 2**63 - 1).map(lambda v: f"{v}i"),
    "unsigned": st.integers(0, 2**63 - 1).map(lambda v: f"{v}u"),
    "boolean": st.sampled_from(["t", "F", "true", "FALSE", "True"]),
}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_random_one_shape_bodies_are_read_natively_and_alike(data: st.DataObject) -> None:
    tags = data.draw(st.lists(st.sampled_from(["host", "dc", "rack"]), max_size=2, unique=True))
    fields = data.draw(st.lists(st.sampled_from(["a", "b", "load", "x1"]), min_size=1, max_size=3, unique=True))
    kinds = [data.draw(st.sampled_from(sorted(_values))) for _ in fields]
    lines = []
    for _ in range(data.draw(st.integers(1, 8))):
        tag_text = "".join(f",{tag}={data.draw(st.sampled_from(['a', 'b1', 'ü-é', 'x.y']))}" for tag in tags)
        field_text = ",".join(f"{name}={data.draw(_values[kind])}" for name, kind in zip(fields, kinds, strict=True))
        stamp = data.draw(st.one_of(st.none(), st.integers(-(2**62), 2**62)))
        lines.append(f"cpu{tag_text} {field_text}" + ("" if stamp is None else f" {stamp}"))
    body = "\n".join(lines).encode()
    precision = data.draw(st.sampled_from([None, "ns", "us", "ms", "s"]))
    outcome = _same_either_way(body, precision)
    library = native.library()
    assert library is not None
    taken = decode_one_shape(library, body, NOW, precision or "ns") is not None
    if outcome[0] != "error":
        assert taken  # every body of one shape that validation accepts is read natively


def test_a_float_whose_digits_cancel_a_huge_exponent_is_left(library: Any) -> None:
    """0.000...1e1000000 is 1e900000, not 1.0: long numbers go to Python."""
    body = b"cpu v=0." + b"0" * 99_999 + b"1e1000000"
    assert _native(library, body) is None
    assert _same_either_way(body)[0] == "error"


def test_a_body_of_lines_it_cannot_hold_is_left_before_anything_is_sized(library: Any) -> None:
    first = "cpu," + ",".join(f"t{i}=v" for i in range(200)) + " " + ",".join(f"f{i}=1" for i in range(200))
    body = first.encode() + b"\n" * 1_000_000
    started = time.process_time()
    assert _native(library, body) is None
    assert time.process_time() - started < 1.0


def test_integers_beyond_2_53_widen_into_a_float_column() -> None:
    body = b"m v=8082034794506534410i 1\nm v=1.5 2"
    [(_m, _t, _s, rows)] = _same_either_way(body)
    assert [row["v"] for row in rows] == [float(8082034794506534410), 1.5]


def test_the_powers_of_five_table_is_what_its_generator_writes() -> None:
    from layers import powers_of_five

    assert powers_of_five.HEADER.read_text() == powers_of_five.header_text()
    # Spot checks against exact arithmetic: 5**1 and 5**-1 scaled to 128 bits.
    assert powers_of_five.power_of_five(1) == 5 << 125
    assert powers_of_five.power_of_five(-1) == (1 << 130) // 5 + 1  # 0xcccc...cd


def test_tag_values_longer_than_the_first_lines_get_more_room(library: Any) -> None:
    """Tag buffers start sized from the first line's values; a body that needs more is read again."""
    lines = ["m,host=a v=1 1"] + [f"m,host={'x' * (100 + i)} v={i} {i + 2}" for i in range(50)]
    body = "\n".join(lines).encode()
    [part] = _native(library, body)
    assert part.table.column("host").to_pylist()[-1] == "x" * 149
    _same_either_way(body)
