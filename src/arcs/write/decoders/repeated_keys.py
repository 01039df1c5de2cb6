"""Maps that say a key twice: refused with a 400 naming the key, as line protocol refuses a field
given twice, never read as the last value (which would drop the first without a word).

The reference decoders (msgpack, json) build every map through ``unique_map``. The fast general
decoder (msgspec) keeps the last value silently, so it takes a body only when the native walk
(``repeated_keys.c``) found every map's keys distinct; any other body goes to the reference
decoder, which words the error. The native columnar readers decline such bodies themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arcs.errors import BadRequest
from arcs.native import library
from arcs.write.decoders.columns import shorten


def unique_map(document: str) -> Callable[[list[tuple[Any, Any]]], dict[Any, Any]]:
    """An ``object_pairs_hook`` building a dict, refusing a key given twice (``document``: the
    body's kind, as messages name it)."""

    def build(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
        mapping = dict(pairs)
        if len(mapping) != len(pairs):
            raise BadRequest(
                f"{document} body says the key {shorten(repr(_first_repeated(pairs)), 80)} twice in one map; "
                "every key may appear once"
            )
        return mapping

    return build


def _first_repeated(pairs: list[tuple[Any, Any]]) -> Any:
    seen: set[Any] = set()
    for key, _value in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None


def keys_distinct(body: bytes, reader: str) -> bool:
    """Whether every map of ``body`` (a ``reader`` document: "msgpack" or "json") is known to have
    distinct keys; False when a key repeats or it cannot be told (no native library)."""
    native = library()
    if native is None or not isinstance(body, bytes):
        return False
    walk: Callable[[bytes, int], int] = getattr(native, f"arcs_{reader}_repeated_keys")
    return walk(body, len(body)) == 0
