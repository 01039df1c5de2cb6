"""Write bodies as the tests build them: a MessagePack or JSON body from a document, what the edge
decodes it into at its clock (``NOW``), and rows with time as integer nanoseconds. The helpers of
tests/unit/test_msgpack_json_*.py; line protocol's are in line_protocol_bodies.py.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pyarrow as pa

from arcs.write.batch import TIME_TYPE, MeasurementRows
from arcs.write.decoders import WireFormat, decode

NOW = 1_700_000_000_123_456  # the edge's clock, in microseconds
NOW_NS = NOW * 1000
FORMATS = [WireFormat.MSGPACK, WireFormat.JSON]


def encode(kind: WireFormat, document: Any) -> bytes:
    if kind is WireFormat.MSGPACK:
        return msgpack.packb(document, use_bin_type=True)
    return json.dumps(document).encode()


def decoded(kind: WireFormat, document: Any, precision: str | None = None) -> list[MeasurementRows]:
    parts = decode(kind, encode(kind, document), NOW, precision)
    for part in parts:
        assert part.table.schema.field(0).name == "time"
        assert part.table.schema.field(0).type == TIME_TYPE
    return parts


def table_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.set_column(0, "time", table.column("time").cast(pa.int64())).to_pylist()


def rows(kind: WireFormat, document: Any, precision: str | None = None) -> list[dict[str, Any]]:
    (part,) = decoded(kind, document, precision)
    return table_rows(part.table)


#: A valid columnar document: the start of hostile and corrupted bodies.
GOOD = {"m": "cpu", "columns": {"time": [1, 2], "v": [1.5, 2.5]}}
