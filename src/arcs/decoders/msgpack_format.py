"""MessagePack bodies (Arc's fast path)."""

from __future__ import annotations

import msgpack

from arcs.batch import MeasurementRows
from arcs.decoders.columns import shorten
from arcs.decoders.shapes import rows_from_objects
from arcs.errors import BadRequest


def decode_msgpack(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    try:
        # timestamp=3: MessagePack's timestamp extension arrives as an aware UTC datetime, which
        # makes a TIMESTAMP column (microseconds; finer digits are dropped).
        document = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True, timestamp=3)
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
    return rows_from_objects(document, now_micros, precision)
