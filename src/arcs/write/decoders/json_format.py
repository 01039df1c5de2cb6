"""JSON bodies: the MessagePack shapes spelled as JSON."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from arcs.errors import BadRequest
from arcs.native import library
from arcs.write.batch import MeasurementRows
from arcs.write.decoders.columns import shorten
from arcs.write.decoders.msgpack_native import JSON, decode_columnar
from arcs.write.decoders.repeated_keys import keys_distinct, unique_map
from arcs.write.decoders.shapes import rows_from_objects

_UNIQUE_MAP = unique_map("JSON")


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def decode_json(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    # The common columnar document goes straight into Arrow (``msgpack_native``, JSON's reader).
    native = library()
    if native is not None:
        rows = decode_columnar(native, body, now_micros, precision, reader=JSON)
        if rows is not None:
            return rows
    # msgspec parses about five times faster than the json module; it refuses what json would
    # read otherwise (numbers beyond float64, lone surrogates), and those bodies and every bad
    # request go through json, so the errors read the same. msgspec keeps the last value of a
    # repeated key, so it reads only bodies known to have none.
    document = _fast(body) if keys_distinct(body, "json") else None
    if document is not None:
        try:
            return rows_from_objects(document, now_micros, precision)
        except BadRequest:
            pass  # decoded again below, so the message is the reference decoder's
    return rows_from_objects(reference(body), now_micros, precision)


def _fast(body: bytes) -> Any:
    """msgspec's reading of ``body``; None where it refuses it (``null`` is no valid body either)."""
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, ValueError, TypeError, RecursionError):
        return None


def reference(body: bytes) -> Any:
    """The json module's reading of ``body``, the one errors are worded by."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        return json.loads(text, parse_constant=_no_constants, object_pairs_hook=_UNIQUE_MAP)
    except RecursionError as exc:
        raise BadRequest("JSON body is nested too deeply") from exc
    except ValueError as exc:
        raise BadRequest(f"JSON body is malformed: {shorten(str(exc))}") from exc
