"""A line-protocol body decoded as the edge decodes it: its tables, its rows, or its error
(the helpers of tests/unit/test_line_protocol_*.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from arcs.errors import BadRequest
from arcs.write.batch import TIME_TYPE, MeasurementRows
from arcs.write.decoders import WireFormat, decode
from tests.unit.wire_documents import NOW, table_rows


def parts(body: str | bytes, precision: str | None = None) -> dict[str, MeasurementRows]:
    raw = body.encode() if isinstance(body, str) else body
    decoded = decode(WireFormat.LINE_PROTOCOL, raw, NOW, precision)
    assert all(part.table.schema.field("time").type == TIME_TYPE for part in decoded)
    return {part.measurement: part for part in decoded}


def rows(body: str | bytes, precision: str | None = None) -> list[dict[str, Any]]:
    """The rows of a body holding one measurement, time as integer nanoseconds."""
    (part,) = parts(body, precision).values()
    return table_rows(part.table)


def error(body: str | bytes, precision: str | None = None) -> str:
    with pytest.raises(BadRequest) as caught:
        parts(body, precision)
    return caught.value.message
