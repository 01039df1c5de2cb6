"""JSON bodies: the MessagePack shapes spelled as JSON."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from arcs.batch import MeasurementRows
from arcs.decoders.columns import shorten
from arcs.decoders.msgpack_native import JSON, decode_columnar
from arcs.decoders.shapes import rows_from_objects
from arcs.errors import BadRequest
from arcs.native import library


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
    # request go through json, so the errors read the same.
    try:
        document = msgspec.json.decode(body)
    except (msgspec.DecodeError, ValueError, TypeError, RecursionError):
        pass
    else:
        try:
            return rows_from_objects(document, now_micros, precision)
        except BadRequest:
            pass  # decoded again below, so the message is the reference decoder's
    return rows_from_objects(reference(body), now_micros, precision)


def reference(body: bytes) -> Any:
    """The json module's reading of ``body``, the one errors are worded by."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError as exc:
        raise BadRequest("JSON body is nested too deeply") from exc
    except ValueError as exc:
        raise BadRequest(f"JSON body is malformed: {shorten(str(exc))}") from exc
