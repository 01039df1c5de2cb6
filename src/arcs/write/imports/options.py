"""What an import is asked to do: the file's format and Arc's query parameters, checked."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from arcs.errors import BadRequest, NotFound
from arcs.names import TIME_COLUMN, check_database, check_measurement
from arcs.write.decoders.columns import check_precision, shorten


class ImportFormat(Enum):
    LINE_PROTOCOL = "lp"
    MSGPACK = "msgpack"
    CSV = "csv"
    PARQUET = "parquet"


TIME_FORMATS = {"epoch_s": "s", "epoch_ms": "ms", "epoch_us": "us", "epoch_ns": "ns"}


@dataclass(frozen=True)
class ImportOptions:
    """What an import is asked to do: Arc's query parameters, and ``tag_columns`` of ours."""

    format: ImportFormat
    database: str
    measurement: str | None = None  # line protocol / MessagePack: a filter; CSV / Parquet: required
    precision: str | None = None
    time_column: str = TIME_COLUMN
    time_format: str | None = None  # epoch_s|ms|us|ns; None: by magnitude, or timestamps
    delimiter: str = ","
    skip_rows: int = 0
    tag_columns: tuple[str, ...] = ()

    @classmethod
    def parse(cls, kind: str, database: str | None, param: Callable[[str], str | None]) -> ImportOptions:
        """The options a request's parameters give, or a 400 naming the one that is wrong."""
        try:
            fmt = ImportFormat(kind)
        except ValueError:
            raise NotFound(f"no import format {kind!r}: use lp, msgpack, csv or parquet") from None
        if not database:
            raise BadRequest("database is required (set the x-arc-database header or the db query parameter)")
        measurement = param("measurement") or None
        if measurement is not None:
            check_measurement(measurement)
        elif fmt in (ImportFormat.CSV, ImportFormat.PARQUET):
            raise BadRequest("measurement query parameter is required")
        time_format = param("time_format") or None
        if time_format is not None and time_format not in TIME_FORMATS:
            raise BadRequest(
                f"invalid time_format {shorten(repr(time_format), 40)}: use epoch_s, epoch_ms, epoch_us or epoch_ns"
            )
        delimiter = param("delimiter") or ","
        if len(delimiter) != 1 or delimiter in '\r\n"':
            raise BadRequest(f"delimiter must be a single character, got {shorten(repr(delimiter), 40)}")
        skip = param("skip_rows") or "0"
        if not skip.isascii() or not skip.isdigit() or int(skip) > 1_000_000:
            raise BadRequest(f"skip_rows must be a whole number up to 1000000, got {shorten(repr(skip), 40)}")
        tags = tuple(t.strip() for t in (param("tag_columns") or "").split(",") if t.strip())
        time_column = param("time_column") or TIME_COLUMN
        if time_column in tags:
            raise BadRequest(f"the time column {time_column!r} cannot be a tag column")
        precision = check_precision(param("precision"))
        if fmt is ImportFormat.LINE_PROTOCOL:
            precision = precision or "ns"  # line protocol's default, named so a retry reads the same
        return cls(
            fmt,
            check_database(database),
            measurement,
            precision,
            time_column,
            time_format,
            delimiter,
            int(skip),
            tags,
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "format": self.format.value, "tag_columns": list(self.tag_columns)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ImportOptions:
        return cls(**{**data, "format": ImportFormat(data["format"]), "tag_columns": tuple(data["tag_columns"])})
