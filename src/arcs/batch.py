"""The normalized form of a write: what the edge queues and what ingest turns into Parquet."""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import pyarrow as pa

from arcs.errors import BadRequest

TIME_TYPE = pa.timestamp("us", tz="UTC")
STORAGE_TYPES: dict[str, pa.DataType] = {
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "timestamp": TIME_TYPE,
}
_ENVELOPE_VERSION = 1
_IPC_OPTIONS = {
    None: pa.ipc.IpcWriteOptions(),
    "zstd": pa.ipc.IpcWriteOptions(compression="zstd"),
    "lz4": pa.ipc.IpcWriteOptions(compression="lz4"),
}


def type_name(arrow_type: pa.DataType) -> str:
    for name, candidate in STORAGE_TYPES.items():
        if arrow_type == candidate:
            return name
    if pa.types.is_timestamp(arrow_type):
        return "timestamp"
    return str(arrow_type)


@dataclass(frozen=True, slots=True)
class MeasurementRows:
    """Rows of one measurement: ``time`` (TIMESTAMP us UTC) plus int64/float64/string/bool columns."""

    measurement: str
    table: pa.Table
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WriteBatch:
    """One accepted request: all of it is stored or none of it (API.md, all-or-nothing)."""

    write_id: str
    database: str
    parts: tuple[MeasurementRows, ...]

    @property
    def row_count(self) -> int:
        return sum(part.table.num_rows for part in self.parts)

    def to_bytes(self, compression: str | None = None) -> bytes:
        parts = []
        for part in self.parts:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, part.table.schema, options=_IPC_OPTIONS[compression]) as writer:
                writer.write_table(part.table)
            parts.append({"m": part.measurement, "tags": list(part.tags), "ipc": sink.getvalue().to_pybytes()})
        envelope = {"v": _ENVELOPE_VERSION, "id": self.write_id, "db": self.database, "parts": parts}
        packed: bytes = msgpack.packb(envelope, use_bin_type=True)
        return packed

    @classmethod
    def from_bytes(cls, data: bytes) -> WriteBatch:
        """Raises ``BadRequest`` for anything that is not an envelope we wrote (a poison message)."""
        try:
            envelope = msgpack.unpackb(data, raw=False)
            if not isinstance(envelope, dict):
                raise BadRequest(f"queued write is not a valid envelope: a {type(envelope).__name__}, not a map")
            if envelope.get("v") != _ENVELOPE_VERSION:
                raise BadRequest(f"unknown queued-write version {str(envelope.get('v'))[:40]!r}")
            write_id, database, raw_parts = envelope["id"], envelope["db"], envelope["parts"]
            if not isinstance(write_id, str) or not isinstance(database, str) or not isinstance(raw_parts, list):
                raise BadRequest("queued write is not a valid envelope: 'id', 'db' or 'parts' has the wrong type")
            parts = tuple(_part_from_dict(part) for part in raw_parts)
            return cls(write_id=write_id, database=database, parts=parts)
        except (
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            OSError,
            msgpack.UnpackException,
            pa.ArrowException,
        ) as exc:
            raise BadRequest(f"queued write is not a valid envelope: {type(exc).__name__}: {str(exc)[:200]}") from exc


def _part_from_dict(part: object) -> MeasurementRows:
    if not isinstance(part, dict):
        raise BadRequest("queued write is not a valid envelope: a part is not a map")
    measurement, tags, ipc = part["m"], part["tags"], part["ipc"]
    if not (
        isinstance(measurement, str)
        and isinstance(ipc, bytes)
        and isinstance(tags, list)
        and all(isinstance(tag, str) for tag in tags)
    ):
        raise BadRequest("queued write is not a valid envelope: a part's 'm', 'tags' or 'ipc' has the wrong type")
    table = pa.ipc.open_stream(ipc).read_all()
    table.validate(full=True)
    return MeasurementRows(measurement=measurement, table=table, tags=tuple(tags))
