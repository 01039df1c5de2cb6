"""A key said twice in one map of a MessagePack or JSON body is a 400 naming it, in every path:
the native walk (``repeated_keys.c``) that lets msgspec read a body only when its keys are
distinct, the reference decoders' hook, and the native columnar readers, which decline such bodies.
Documents are written by hand here, since a dict cannot hold a key twice."""

from __future__ import annotations

import json
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.envvars import NATIVE
from arcs.errors import BadRequest
from arcs.write.decoders import columnar_lane, json_format, msgpack_format

NOW = 1_700_000_000_000_000
T0_NS = 1_700_000_000_000_000_000


class Pairs(list[tuple[str, Any]]):
    """A map as its pairs, in order, a key perhaps more than once."""


def _repeats(value: Any) -> bool:
    if isinstance(value, Pairs):
        keys = [key for key, _v in value]
        return len(set(keys)) != len(keys) or any(_repeats(v) for _k, v in value)
    if isinstance(value, list):
        return any(_repeats(v) for v in value)
    return False


def packed(value: Any) -> bytes:
    if isinstance(value, Pairs):
        count = len(value)
        head = bytes([0x80 | count]) if count < 16 else b"\xde" + struct.pack(">H", count)
        return head + b"".join(msgpack.packb(key) + packed(v) for key, v in value)
    if isinstance(value, list):
        count = len(value)
        head = bytes([0x90 | count]) if count < 16 else b"\xdc" + struct.pack(">H", count)
        return head + b"".join(packed(v) for v in value)
    return msgpack.packb(value)


def spelled(value: Any) -> str:
    if isinstance(value, Pairs):
        return "{" + ", ".join(f"{json.dumps(key, ensure_ascii=False)}: {spelled(v)}" for key, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(spelled(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


_keys = st.sampled_from(["m", "v", "w", "host", "fields", "tags", "é", "a" * 40])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=20),
        st.lists(st.tuples(_keys, inner), max_size=20).map(Pairs),
    ),
    max_leaves=40,
)


@pytest.fixture(scope="module")
def walks(library: Any) -> dict[str, Any]:
    return {reader: getattr(library, f"arcs_{reader}_repeated_keys") for reader in ("msgpack", "json")}


@settings(max_examples=400, deadline=None)
@given(document=_values)
def test_the_native_walk_finds_exactly_the_repeated_keys(walks: dict[str, Any], document: Any) -> None:
    expected = 1 if _repeats(document) else 0
    body = packed(document)
    assert walks["msgpack"](body, len(body)) == expected
    text = spelled(document).encode()
    assert walks["json"](text, len(text)) == expected


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x81\xa1v",  # a map cut short
        b"\x81\xa1v\x01\x01",  # trailing bytes
        b"\xdf\xff\xff\xff\xff\xa1v",  # a count the body cannot hold
        b"\x91" * 100 + b"\x80",  # nested deeper than any body
        b"\xc1",  # never used
    ],
)
def test_what_the_msgpack_walk_cannot_vouch_for_goes_to_the_reference(walks: dict[str, Any], body: bytes) -> None:
    assert walks["msgpack"](body, len(body)) == 1


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b'{"v": 1',
        b'{"v": 1}}',
        b'{"\\u0076": 1, "v": 2}',  # an escaped key: the same key, told only by decoding it
        b"[" * 100 + b"]" * 100,
        b'{"v": "unterminated}',
    ],
)
def test_what_the_json_walk_cannot_vouch_for_goes_to_the_reference(walks: dict[str, Any], text: bytes) -> None:
    assert walks["json"](text, len(text)) == 1


def test_a_map_of_many_keys_is_checked_by_hash(walks: dict[str, Any]) -> None:
    distinct = Pairs((f"k{i}", i) for i in range(1000))
    repeated = Pairs([*distinct, ("k500", 0)])
    for document, expected in [(distinct, 0), (repeated, 1)]:
        body, text = packed(document), spelled(document).encode()
        assert walks["msgpack"](body, len(body)) == expected
        assert walks["json"](text, len(text)) == expected


def _decoded(decode: Any, body: bytes, with_native: bool) -> Any:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NATIVE, "1" if with_native else "0")
        native.library.cache_clear()
        try:
            return [(p.measurement, p.table.to_pylist()) for p in decode(body, NOW, None)]
        except BadRequest as exc:
            return ("error", exc.message)
        finally:
            native.library.cache_clear()


_bodies = [
    # (the key said twice, a document)
    ("v", Pairs([("m", "cpu"), ("columns", Pairs([("time", [T0_NS]), ("v", [1.0]), ("v", [2.0])]))])),
    ("m", Pairs([("m", "cpu"), ("m", "mem"), ("columns", Pairs([("v", [1.0])]))])),
    (
        "tags",
        Pairs([("m", "cpu"), ("tags", ["host"]), ("tags", []), ("columns", Pairs([("host", ["a"]), ("v", [1])]))]),
    ),
    ("v", [Pairs([("m", "cpu"), ("fields", Pairs([("v", 1.0), ("v", 2.0)]))])]),
    ("host", [Pairs([("m", "cpu"), ("fields", Pairs([("v", 1)])), ("tags", Pairs([("host", "a"), ("host", "b")]))])]),
    ("time", Pairs([("batch", [Pairs([("m", "cpu"), ("time", 1), ("time", 2), ("fields", Pairs([("v", 1)]))])])])),
]


@pytest.mark.parametrize(("key", "document"), _bodies, ids=[f"{i}-{key}" for i, (key, _d) in enumerate(_bodies)])
@pytest.mark.parametrize("fmt", ["msgpack", "json"])
def test_every_path_refuses_a_repeated_key_naming_it(library: Any, key: str, document: Any, fmt: str) -> None:
    decode = msgpack_format.decode_msgpack if fmt == "msgpack" else json_format.decode_json
    body = packed(document) if fmt == "msgpack" else spelled(document).encode()
    fast, slow = _decoded(decode, body, True), _decoded(decode, body, False)
    assert fast == slow
    assert fast[0] == "error" and f"key {key!r} twice" in fast[1], fast
    if fmt == "msgpack":
        assert columnar_lane.scan(body, None) is None  # the lane leaves it to the decoders too


@settings(max_examples=200, deadline=None)
@given(
    fields=st.lists(st.tuples(st.sampled_from(["v", "w", "x"]), st.integers(0, 9)), min_size=1, max_size=4),
    tags=st.lists(st.tuples(st.sampled_from(["host", "dc"]), st.sampled_from(["a", "b"])), max_size=3),
    fmt=st.sampled_from(["msgpack", "json"]),
)
def test_row_bodies_read_alike_with_and_without_the_library(
    library: Any, fields: list[tuple[str, int]], tags: list[tuple[str, str]], fmt: str
) -> None:
    document = [Pairs([("m", "cpu"), ("time", T0_NS), ("fields", Pairs(fields)), ("tags", Pairs(tags))])]
    decode = msgpack_format.decode_msgpack if fmt == "msgpack" else json_format.decode_json
    body = packed(document) if fmt == "msgpack" else spelled(document).encode()
    fast = _decoded(decode, body, True)
    assert fast == _decoded(decode, body, False)
    assert (fast[0] == "error" and "twice" in fast[1]) == _repeats(document)
