"""JSON bodies: the MessagePack shapes spelled as JSON."""

from __future__ import annotations

import json
import math
import re

from arcs.batch import MeasurementRows
from arcs.decoders.columns import shorten
from arcs.decoders.shapes import rows_from_objects
from arcs.errors import BadRequest

# Only a number with a 3-digit exponent or 300+ digits can overflow a float to infinity.
_MAYBE_HUGE_NUMBER = re.compile(r"[eE]\+?\d{3}|\d{300}")


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {shorten(text, 40)} is outside the float64 range")
    return value


def decode_json(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    parse_float = _finite_float if _MAYBE_HUGE_NUMBER.search(text) else None
    try:
        document = json.loads(text, parse_constant=_no_constants, parse_float=parse_float)
    except RecursionError as exc:
        raise BadRequest("JSON body is nested too deeply") from exc
    except ValueError as exc:
        raise BadRequest(f"JSON body is malformed: {shorten(str(exc))}") from exc
    return rows_from_objects(document, now_micros, precision)
