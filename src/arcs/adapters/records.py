"""How catalog records are spelled as plain data, shared by the SQLite and DynamoDB catalogs."""

from __future__ import annotations

from datetime import UTC, datetime

from arcs.ports import FileRecord

HOUR_FORMAT = "%Y-%m-%dT%H"


def hour_text(hour: datetime) -> str:
    """The hour as fixed-width text, so text order is time order."""
    return hour.astimezone(UTC).strftime(HOUR_FORMAT)


def hour_value(text: str) -> datetime:
    return datetime.strptime(text, HOUR_FORMAT).replace(tzinfo=UTC)


def file_to_json(record: FileRecord) -> dict[str, object]:
    return {
        "database": record.database,
        "measurement": record.measurement,
        "hour": hour_text(record.hour),
        "key": record.key,
        "rows": record.rows,
        "size": record.size,
        "min_time_us": record.min_time_us,
        "max_time_us": record.max_time_us,
        "commit_id": record.commit_id,
    }


def _int(value: object) -> int:
    # JSON gives int, DynamoDB gives Decimal; both are exact for int64.
    return int(value)  # type: ignore[call-overload,no-any-return]


def file_from_json(data: dict[str, object]) -> FileRecord:
    return FileRecord(
        database=str(data["database"]),
        measurement=str(data["measurement"]),
        hour=hour_value(str(data["hour"])),
        key=str(data["key"]),
        rows=_int(data["rows"]),
        size=_int(data["size"]),
        min_time_us=_int(data["min_time_us"]),
        max_time_us=_int(data["max_time_us"]),
        commit_id=str(data["commit_id"]),
    )
