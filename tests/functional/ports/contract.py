"""What the port contract tests share: the adapters under test and the records they store."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from arcs.layout import data_key
from arcs.ports import (
    Catalog,
    FileRecord,
    MeasurementSchema,
    ObjectStore,
    TokenRecord,
    TokenStore,
)

H0 = datetime(2024, 3, 1, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@dataclass
class Ports:
    name: str
    store: ObjectStore
    catalog: Catalog
    tokens: TokenStore


def file_record(database: str, measurement: str, hour: datetime, name: str, commit_id: str = "c1") -> FileRecord:
    micros = int((hour - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)
    return FileRecord(
        database=database,
        measurement=measurement,
        hour=hour,
        key=data_key("arcs", database, measurement, hour, f"{name}.parquet"),
        rows=10,
        size=1234,
        min_time_us=micros,
        max_time_us=micros + 3_599_999_999,
        commit_id=commit_id,
    )


def fill(catalog: Catalog, database: str, measurements: tuple[str, ...], hours: int = 3) -> None:
    for measurement in measurements:
        assert catalog.put_schema(MeasurementSchema(database, measurement, {"time": "timestamp", "v": "int64"}), None)
        catalog.put_files([file_record(database, measurement, H0 + n * HOUR, f"f{n}") for n in range(hours)])


def token(token_id: str, lookup: str, minutes: int, **changes: object) -> TokenRecord:
    record = TokenRecord(
        token_id=token_id,
        name=f"name-{token_id}",
        description="",
        lookup=lookup,
        salt=b"\x00salt\xff" + token_id.encode(),
        secret_hash=bytes(range(32)),
        permissions=("read", "write"),
        databases=(),
        created_at=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes),
    )
    return replace(record, **changes)  # type: ignore[arg-type]
