"""JSON bodies: the MessagePack shapes spelled as JSON."""

from __future__ import annotations

import json

from arcs.batch import MeasurementRows
from arcs.decoders.shapes import rows_from_objects
from arcs.errors import BadRequest


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def decode_json(body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"JSON body is not valid UTF-8 (byte {exc.start})") from exc
    try:
        document = json.loads(text, parse_constant=_no_constants)
    except RecursionError as exc:
        raise BadRequest("JSON body is nested too deeply") from exc
    except ValueError as exc:
        raise BadRequest(f"JSON body is malformed: {exc}") from exc
    return rows_from_objects(document, now_micros, precision)
