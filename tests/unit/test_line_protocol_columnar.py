"""The column-wise fast path agrees with the exact line parser on every body it accepts."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.errors import BadRequest
from arcs.write.decoders import line_protocol
from arcs.write.decoders import line_protocol_columnar as columnar
from arcs.write.decoders.line_protocol_columnar import decode_uniform

NOW = 1_700_000_000_000_000


def exact(body: str, precision: str = "ns") -> list[object]:
    saved = line_protocol.decode_uniform
    line_protocol.decode_uniform = lambda *_args: None  # type: ignore[assignment]
    try:
        return line_protocol.decode_line_protocol(body.encode(), NOW, precision)  # type: ignore[return-value]
    finally:
        line_protocol.decode_uniform = saved


def same(body: str) -> None:
    fast = decode_uniform(body, NOW, "ns")
    if fast is None:
        return
    slow = exact(body)
    assert [(p.measurement, p.tags) for p in fast] == [(p.measurement, p.tags) for p in slow]  # type: ignore[attr-defined]
    for a, b in zip(fast, slow, strict=True):
        assert a.table.equals(b.table), (a.table, b.table)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "body",
    [
        "cpu,host=a,region=eu usage=1.5,n=3i,ok=t 1700000000000000000\n"
        "cpu,host=b,region=us usage=2,n=4i,ok=F 1700000000000001000",
        "cpu v=1\nmem free=2u\ncpu v=3 5",  # two measurements, missing time
        "cpu v=1 1\ncpu,host=a v=2i 2",  # an integer column of one shape widens into a float one
        "cpu,host=a v=1 1\ncpu,host=a,dc=x v=2 2\ncpu v=3,w=true 3",  # sparse columns by shape
        "a v=1\n\n\nb w=2",
        "cpu,host=a=b v=1",
        "cpu,host=a,dc=b v=1 1\ncpu,dc=c,host=d v=2 2",  # the same keys in another order
        "cpu,host=a v=1 1\ncpu,dc=a v=2 2",
        "cpu v=1 1\n\ncpu v=2 2\n",
    ],
)
def test_known_bodies_agree(body: str) -> None:
    assert decode_uniform(body, NOW, "ns") is not None
    same(body)


@pytest.mark.parametrize(
    "body",
    [
        "cpu v=1 x",
        "cpu,host= v=1",
        "cpu v=",
        "cpu v=1e400",
        "cpu v=99999999999999999999i",
        "cpu  v=1",
        " cpu v=1",
        "cpu v=1i\ncpu v=t",
        "cpu time=1",
        "cpu v=1,V=2",
        "cpu v=1 99999999999999999999",
        "1cpu v=1",
        "cpu v=nan",
        # Later lines that break the first line's shape (the one-shape path reads line 1 first).
        "cpu,host=a v=1 1\ncpu,host= v=2 2",
        "cpu,host=a v=1 1\ncpu,host=b v= 2",
        "cpu,host=a v=1 1\ncpu,host=b v=1 ",
        "cpu v=1 1\ncpu v=0x10 2",
        "cpu v=1i 1\ncpu v=0x10i 2",
        "cpu v=1 1\ncpu v=1 0x10",
        "cpu v=1i 1\ncpu v=0X10i 2",
        "cpu,host=xeon v=1i 1\ncpu,host=xeon v=0x10i 2",  # an x elsewhere too
        "cpu,host=XEON v=1 1\ncpu,host=XEON v=1 0X10",
        "cpu v=1 1\ncpu v=inf 2",
        "cpu v=1 1\ncpu v=NaN 2",
        "cpu v=1u 1\ncpu v=18446744073709551615u 2",
        "cpu,host=a v=1 1\ncpu host=a,v=1 2",  # the same words, other separators
        "cpu,host=a v=1,w=2 1\ncpu,host=a,v=1 w=2 2",
    ],
)
def test_anything_doubtful_falls_back_to_the_exact_parser(body: str) -> None:
    assert decode_uniform(body, NOW, "ns") is None


NAMES = st.text(alphabet=string.ascii_letters + "_-", min_size=1, max_size=6).filter(lambda s: s[0].isalpha())
VALUES = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(lambda v: f"{v}i"),
    st.integers(0, 2**63 - 1).map(lambda v: f"{v}u"),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["t", "f", "true", "FALSE", "T"]),
    st.text(alphabet="0123456789.eE+-", min_size=1, max_size=6),
)
LINE = st.tuples(
    st.sampled_from(["cpu", "mem"]),
    st.lists(st.tuples(st.sampled_from(["host", "dc"]), st.text(alphabet="abc=", min_size=0, max_size=3)), max_size=2),
    st.lists(st.tuples(st.sampled_from(["v", "w", "x"]), VALUES), min_size=1, max_size=3),
    st.one_of(st.none(), st.integers(-(10**18), 10**18)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=8))
def test_random_bodies_agree(lines: list[tuple[str, list[tuple[str, str]], list[tuple[str, str]], int | None]]) -> None:
    rendered = []
    for measurement, tags, fields, ts in lines:
        key = ",".join([measurement, *(f"{k}={v}" for k, v in tags)])
        body = ",".join(f"{k}={v}" for k, v in fields)
        rendered.append(f"{key} {body}" + ("" if ts is None else f" {ts}"))
    text = "\n".join(rendered)
    try:
        slow = exact(text)
    except Exception:
        slow = None
    fast = decode_uniform(text, NOW, "ns")
    if fast is None:
        return
    assert slow is not None, f"fast path accepted what the exact parser refuses: {text!r}"
    same(text)


ODD_VALUES = st.sampled_from(
    ["nan", "inf", "-inf", "Infinity", "0x10", "0X1f", "+1.5", "1.", ".5", "-0", "007", "1e5", "1e", "", "t", "x"]
)


@st.composite
def one_shape_bodies(draw: st.DrawFn) -> str:
    """Bodies whose lines share the first line's keys, now and then with one thing wrong."""
    tags = draw(st.lists(st.sampled_from(["host", "dc", "Host"]), max_size=2, unique=True))
    fields = draw(st.lists(st.sampled_from(["v", "w", "x", "v", "w", "time"]), min_size=1, max_size=3, unique=True))
    kinds = {name: draw(st.sampled_from(["int", "uint", "float", "bool"])) for name in fields}
    typed = {
        "int": st.integers(-(2**63), 2**63 - 1).map(lambda v: f"{v}i"),
        "uint": st.integers(0, 2**64 - 1).map(lambda v: f"{v}u"),
        "float": st.floats(allow_nan=False, allow_infinity=False).map(repr),
        "bool": st.sampled_from(["t", "f", "true", "FALSE", "T"]),
    }
    rows = draw(st.integers(1, 6))
    # At most one flaw per body, so most bodies are ones the fast path should take.
    flaw = draw(st.sampled_from(["none", "none", "value", "stamp", "tag", "order"]))
    flawed_row = draw(st.integers(0, rows - 1))
    lines = []
    for row in range(rows):
        flawed = row == flawed_row
        names = tags[::-1] if flawed and flaw == "order" else tags
        tag_values = {k: draw(st.text(alphabet="ab", min_size=1, max_size=2)) for k in names}
        if flawed and flaw == "tag" and names:
            tag_values[names[0]] = draw(st.sampled_from(["", "a=b", "a,b"]))
        tag_text = "".join(f",{k}={v}" for k, v in tag_values.items())
        values = [f"{name}={draw(typed[kinds[name]])}" for name in fields]
        if flawed and flaw == "value":
            values[0] = f"{fields[0]}={draw(ODD_VALUES)}"
        stamp = draw(ODD_VALUES) if flawed and flaw == "stamp" else str(draw(st.integers(-(10**18), 10**18)))
        lines.append(f"cpu{tag_text} {','.join(values)} {stamp}")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=300, deadline=None)
@given(one_shape_bodies())
def test_one_shape_bodies_agree(text: str) -> None:
    fast = decode_uniform(text, NOW, "ns")
    if fast is None:
        return
    try:
        exact(text)
    except BadRequest as exc:
        raise AssertionError(f"fast path accepted what the exact parser refuses ({exc.message}): {text!r}") from exc
    same(text)


def test_one_shape_bodies_take_the_csv_path(monkeypatch: pytest.MonkeyPatch) -> None:
    body = "cpu,host=a,dc=x v=1.5,n=3i,ok=t,u=7u 1700000000000000000\ncpu,host=b,dc=y v=2,n=-4i,ok=F,u=0u 17\n"

    def no_general_path(*_args: object) -> None:
        raise AssertionError("the general column-wise path ran")

    monkeypatch.setattr(columnar, "_decode", no_general_path)
    (part,) = decode_uniform(body, NOW, "ns") or []
    assert part.table.column("n").to_pylist() == [3, -4]
    assert part.table.column("ok").to_pylist() == [True, False]
    same(body)
