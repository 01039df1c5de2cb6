"""Wire decoders: a registry from content kind to a function body -> measurement tables."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from arcs.write.batch import MeasurementRows
from arcs.write.decoders.json_format import decode_json
from arcs.write.decoders.line_protocol import decode_line_protocol
from arcs.write.decoders.msgpack_format import decode_msgpack

Decoder = Callable[[bytes, int, "str | None"], list[MeasurementRows]]


class WireFormat(Enum):
    MSGPACK = "msgpack"
    LINE_PROTOCOL = "line-protocol"
    JSON = "json"


DECODERS: dict[WireFormat, Decoder] = {
    WireFormat.MSGPACK: decode_msgpack,
    WireFormat.LINE_PROTOCOL: decode_line_protocol,
    WireFormat.JSON: decode_json,
}


def decode(kind: WireFormat, body: bytes, now_micros: int, precision: str | None) -> list[MeasurementRows]:
    """Decompressed body -> validated tables, one per measurement part; raises BadRequest."""
    return DECODERS[kind](body, now_micros, precision)
