"""Small builders shared by the tests."""

from __future__ import annotations

import uuid
from pathlib import Path

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.objects import DirectoryStore
from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.ports import Catalog, ObjectStore
from arcs.write.batch import TIME_TYPE, MeasurementRows, WriteBatch
from arcs.write.decoders import columnar_lane
from arcs.write.ingest import QueuedWrite

HOUR_US = 3_600_000_000
BASE_US = 1_700_000_000_000_000 - 1_700_000_000_000_000 % HOUR_US  # an hour boundary in 2023
#: Both backends of a fixture parametrized over them (``indirect``), the one on moto marked slow: a
#: crash at every step of a protocol makes hundreds of moto calls per case, while the protocol is the
#: same code on both. ``make test`` runs both; ``make test-fast`` the local one.
LOCAL_AND_SLOW_AWS = ["local", pytest.param("aws", marks=pytest.mark.slow)]


def make_batch(database: str, measurement: str, times_us: list[int], host: str = "a") -> WriteBatch:
    table = pa.table(
        {
            "time": pa.array(times_us, pa.int64()).cast(pa.timestamp("us", tz="UTC")).cast(TIME_TYPE),
            "host": pa.array([host] * len(times_us)),
            "value": pa.array([float(t % 1000) for t in times_us]),
        }
    )
    return WriteBatch(uuid.uuid4().hex, database, (MeasurementRows(measurement, table, ("host",)),))


def make_body_batch(database: str, measurement: str, times_us: list[int], host: str = "a") -> WriteBatch:
    """``make_batch``'s rows as the columnar lane queues them: the MessagePack body as sent."""
    columns = {"time": times_us, "host": [host] * len(times_us), "value": [float(t % 1000) for t in times_us]}
    body = msgpack.packb({"m": measurement, "columns": columns, "tags": ["host"], "precision": "us"})
    scanned = columnar_lane.scan(body, None)
    assert scanned is not None, "the lane takes rows in time order (and needs arcs.native)"
    return WriteBatch(uuid.uuid4().hex, database, (scanned,))


def queued(batch: WriteBatch, handle: str | None = None) -> QueuedWrite:
    data = batch.to_bytes()
    return QueuedWrite(handle or batch.write_id, batch.write_id, lambda: data)


def local_ports(root: Path) -> tuple[ObjectStore, Catalog]:
    return DirectoryStore(root / "storage"), SqliteCatalog(SqliteDatabase(root / "catalog.sqlite"))


def visible_rows(catalog: Catalog, store: ObjectStore, database: str, measurement: str) -> pa.Table:
    """Every row a reader sees: the listed files, read back, every column nullable (ingest marks a
    file's columns without nulls required; queries see them nullable, as the tables ingest took)."""
    import io

    tables = [pq.read_table(io.BytesIO(store.get(f.key))) for f in catalog.list_files(database, measurement)]
    tables = [table.cast(pa.schema([field.with_nullable(True) for field in table.schema])) for table in tables]
    return pa.concat_tables(tables, promote_options="permissive") if tables else pa.table({})


def plain_strings(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns (tags, as the columnar lane's fill makes them) decoded
    to their values: comparable with the general path's tables."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(index, field.name, table.column(index).cast(field.type.value_type))
    return table
