"""The column-wise fast path agrees with the exact line parser on every body it accepts."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs.decoders import line_protocol
from arcs.decoders.line_protocol_columnar import decode_uniform

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
