"""MessagePack's timestamp extension: a timestamp column, or the time column; hostile values refused."""

from __future__ import annotations

from typing import Any

import msgpack
import pyarrow as pa
import pytest

from arcs.errors import BadRequest
from arcs.write.batch import TIME_TYPE
from arcs.write.decoders import WireFormat, decode
from tests.unit.wire_documents import NOW, table_rows

# --- MessagePack's timestamp extension ---------------------------------------------------------------


def _msgpack_rows(document: Any) -> list[dict[str, Any]]:
    (part,) = decode(WireFormat.MSGPACK, msgpack.packb(document, use_bin_type=True, datetime=False), NOW, None)
    return table_rows(part.table)


def test_msgpack_timestamps_make_a_timestamp_column() -> None:
    document = {
        "m": "visits",
        "columns": {
            "time": [1_700_000_000_000_000, 1_700_000_001_000_000],
            "seen": [msgpack.Timestamp(1_600_000_000, 123_456_789), None],
        },
    }
    (part,) = decode(WireFormat.MSGPACK, msgpack.packb(document), NOW, None)
    assert part.table.schema.field("seen").type == TIME_TYPE
    # Nanoseconds beyond the microsecond are dropped.
    assert part.table.column("seen").cast(pa.int64()).to_pylist() == [1_600_000_000_123_456_000, None]


def test_msgpack_timestamps_can_be_the_time_column() -> None:
    document = {"m": "cpu", "t": msgpack.Timestamp(-2, 500_000_000), "fields": {"v": 1}}
    assert _msgpack_rows(document) == [{"time": -1_500_000_000, "v": 1}]
    columnar = {"m": "cpu", "columns": {"time": [msgpack.Timestamp(1, 0)], "v": [1.5]}}
    assert _msgpack_rows(columnar) == [{"time": 1_000_000_000, "v": 1.5}]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([msgpack.Timestamp(1, 0), 5], "share one type"),
        ([5, msgpack.Timestamp(1, 0)], "share one type"),
        ([msgpack.Timestamp(1, 0), "2020-01-01T00:00:00Z"], "share one type"),
        ([msgpack.Timestamp(10**12, 0)], "years 1..9999"),
        ([msgpack.Timestamp(-(10**12), 0)], "years 1..9999"),
        ([msgpack.Timestamp(9_300_000_000, 0)], "out of the range"),
    ],
)
def test_hostile_msgpack_timestamps(values: list[Any], message: str) -> None:
    body = msgpack.packb({"m": "cpu", "columns": {"time": [1, 2][: len(values)], "seen": values}})
    with pytest.raises(BadRequest, match=message):
        decode(WireFormat.MSGPACK, body, NOW, "s")
    time_body = msgpack.packb({"m": "cpu", "columns": {"time": values, "v": [1] * len(values)}})
    with pytest.raises(BadRequest):
        decode(WireFormat.MSGPACK, time_body, NOW, None)
