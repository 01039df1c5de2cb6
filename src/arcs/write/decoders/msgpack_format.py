"""MessagePack bodies (Arc's fast path).

The common columnar body is read by ``arcs.native`` straight into Arrow (``msgpack_native``)
when the library is there. Otherwise, and for every body it leaves, two decoders: msgspec,
about twice as fast on row-shaped bodies, decodes first; msgpack, the reference, decodes
whatever msgspec refuses or would read differently, and every body that turns out to be a bad
request, so errors are worded the same whichever decoder saw the body first.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

import msgpack
import msgspec

from arcs.errors import BadRequest
from arcs.native import library
from arcs.write.batch import MeasurementRows
from arcs.write.decoders.columns import shorten
from arcs.write.decoders.msgpack_native import decode_columnar
from arcs.write.decoders.repeated_keys import keys_distinct, unique_map
from arcs.write.decoders.shapes import rows_from_objects


def _ext(code: int, data: memoryview) -> msgpack.ExtType:
    return msgpack.ExtType(code, bytes(data))


_FAST = msgspec.msgpack.Decoder(ext_hook=_ext)
_UNIQUE_MAP = unique_map("MessagePack")


def decode_msgpack(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    native = library()
    if native is not None:
        rows = decode_columnar(native, body, now_micros, precision)
        if rows is not None:
            return rows
    try:
        # msgspec keeps the last value of a repeated key: it reads only bodies known not to have one.
        document = _FAST.decode(body) if keys_distinct(body, "msgpack") else None
    except (msgspec.DecodeError, ValueError, TypeError, RecursionError):
        document = None
    if document is not None and string_keys(document):
        try:
            # msgspec rounds the timestamp extension's nanoseconds to the nearest microsecond
            # where msgpack drops them: datetime values are left to msgpack.
            return rows_from_objects(document, now_micros, precision, datetimes=False)
        except BadRequest:
            pass  # decoded again below, so the message is the reference decoder's
    return rows_from_objects(reference(body), now_micros, precision)


# The keys items use: a subset test against these (in C) clears most items without a loop.
_ITEM_KEYS = frozenset({"m", "columns", "tags", "precision", "fields", "t", "time", "batch"})


def string_keys(document: Any) -> bool:
    """msgpack refuses any map key but a string or bytes; msgspec takes integers too.

    Only the keys of the document and its items are read without being checked downstream
    (column, tag and field names are, and nested maps are never valid values), so only those
    need looking at.
    """
    if isinstance(document, dict):
        if not _plain(document):
            return False
        items = document.get("batch", [document])
    else:
        items = document
    if not isinstance(items, list):
        return True
    if all(map(isinstance, items, repeat(dict))) and all(map(_ITEM_KEYS.issuperset, items)):
        return True  # the common body, checked without a Python loop per item
    return all(not isinstance(item, dict) or _plain(item) for item in items)


def _plain(item: dict[Any, Any]) -> bool:
    return item.keys() <= _ITEM_KEYS or all(isinstance(key, (str, bytes)) for key in item)


def reference(body: bytes) -> Any:
    """msgpack's reading of ``body``, the one errors are worded by."""
    try:
        # timestamp=3: MessagePack's timestamp extension arrives as an aware UTC datetime, which
        # makes a TIMESTAMP column (microseconds; finer digits are dropped).
        return msgpack.unpackb(
            body, raw=False, strict_map_key=True, use_list=True, timestamp=3, object_pairs_hook=_UNIQUE_MAP
        )
    except msgpack.ExtraData as exc:
        raise BadRequest(f"MessagePack body has {len(exc.extra)} trailing bytes after the first object") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest(f"MessagePack body holds a string that is not valid UTF-8 (byte {exc.start})") from exc
    except OverflowError as exc:
        raise BadRequest("MessagePack body holds a timestamp outside the years 1..9999") from exc
    except msgpack.StackError as exc:
        raise BadRequest("MessagePack body is nested too deeply") from exc
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        detail = shorten(str(exc)) or type(exc).__name__
        raise BadRequest(f"MessagePack body is malformed or truncated: {detail}") from exc
