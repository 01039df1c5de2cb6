"""Load hits.parquet into the storage layout, as a measurement our query path serves.

    python -m clickbench.load hits.parquet --data-dir ./data [--database clickbench]

The input is ClickBench's ``hits.parquet`` (or files in its physical layout: INT64 Unix seconds,
UINT16 days, binary strings). Four layouts. ``api`` is a user's: the rows go through a running
``arcs serve``'s MessagePack write API in requests of at most 4 MB, in the input's order, and the
product's compaction then runs through its route until nothing is a candidate; the server has
ClickBench's sort keys and the month tier set (``API_SETTINGS``), ``api-default`` the same with
the defaults. The other two put
the schema and the file records in the catalog of the standalone server (SQLite) directly:

- ``placed`` (the default, what the benchmark measures): the file is placed as ClickBench's entries
  place it. Its rows keep their order (ClickHouse's primary key) and are written by DuckDB, with
  the input's compression, into files of up to ``rows_per_file`` rows in one hour partition, the
  load's; ``time`` is the load's time, as for points written without a timestamp. EventTime stays
  a column, as in the official file. A query then opens a few large files, as duckdb-parquet does,
  instead of one per hour of data.
- ``hourly``: each row's ``time`` is its EventTime (UTC); the rows are split by hour and each hour
  is written as one time-sorted Parquet file under ``{database}/hits/YYYY/MM/DD/HH/``: what the
  ingest path would have written had the rows come in through the API.

Values keep to our storage types (docs/usage.md "Writing"): integers are ``int64``, strings ``string``, EventDate
a ``timestamp`` at UTC midnight (so ``EventDate >= '2013-07-01'`` compares as a date does);
EventTime, ClientEventTime and LocalEventTime stay Unix seconds, which the engine's
``toDateTime`` macro reads as ClickBench's DuckDB view does.

Both stream (the 14 GB file loads on a 32 GB machine): ``placed`` as one DuckDB ``COPY``;
``hourly`` as one DuckDB pass into hour partitions, then one sort and write per hour.
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arcs import layout
from arcs.names import TIME_COLUMN
from arcs.ports import Catalog, FileRecord, MeasurementSchema, ObjectStore
from arcs.write.batch import type_name
from arcs.write.file_writers import MIN_ROW_GROUP_ROWS, TARGET_ROW_GROUPS_PER_FILE

if TYPE_CHECKING:
    from clickbench.server import ArcsServer

MEASUREMENT = "hits"
#: Changed whenever what the loader stores changes: the harness loads its cached data again.
LOADER_VERSION = "5"
DEFAULT_DATABASE = "clickbench"
_SECONDS_COLUMNS = ("EventTime", "ClientEventTime", "LocalEventTime")


@dataclass(frozen=True, slots=True)
class LoadReport:
    rows: int
    files: int
    bytes: int
    seconds: float


Layout = Literal["placed", "hourly", "api", "api-default"]
#: The server settings of the ``api`` layout: ClickBench's entries declare ClickHouse's
#: ``ORDER BY (CounterID, EventDate, UserID, EventTime, WatchID)``, which a user sets through
#: ``ARCS_SORT_KEYS``; and month files, which a month of data fits. ``api-default`` keeps the defaults.
API_SETTINGS = {
    "ARCS_SORT_KEYS": f"{MEASUREMENT}:CounterID,EventDate,UserID,EventTime,WatchID",
    "ARCS_COMPACTION_TIERS": "hour,day,month",
}
#: About the compaction target (512 MB) at hits' ~140 bytes a row: a few large files per query.
ROWS_PER_FILE = 4_000_000


def _select_list(con: duckdb.DuckDBPyConnection, source: str, load_time: datetime | None = None) -> str:
    """The input's columns in storage types, then ``time`` (EventTime, or the load's time) and its hour."""
    described = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
    items = []
    for name, kind, *_ in described:
        quoted = '"' + str(name).replace('"', '""') + '"'
        kind = str(kind).upper()
        if name == "EventDate":
            # Days since 1970 -> midnight UTC: date literals compare with it as with a DATE.
            items.append(f"CAST(make_date(CAST({quoted} AS INTEGER)) AS TIMESTAMPTZ) AS {quoted}")
        elif kind in ("TINYINT", "SMALLINT", "INTEGER", "UTINYINT", "USMALLINT", "UINTEGER"):
            items.append(f"CAST({quoted} AS BIGINT) AS {quoted}")
        elif kind == "BLOB":
            items.append(f"CAST({quoted} AS VARCHAR) AS {quoted}")
        elif name in _SECONDS_COLUMNS and kind.startswith("TIMESTAMP"):
            items.append(f"epoch({quoted})::BIGINT AS {quoted}")
        else:
            items.append(quoted)
    if load_time is not None:
        items.append(f"TIMESTAMPTZ '{load_time.isoformat()}' AS \"{TIME_COLUMN}\"")
        return ", ".join(items)
    items.append(f'make_timestamptz(CAST("EventTime" AS BIGINT) * 1000000) AS "{TIME_COLUMN}"')
    items.append('CAST("EventTime" AS BIGINT) // 3600 AS __hour')
    return ", ".join(items)


def load_hits(
    sources: Sequence[Path],
    catalog: Catalog,
    store: ObjectStore,
    database: str = DEFAULT_DATABASE,
    prefix: str = "",
    row_group_rows: int = 122_880,
    threads: int | None = None,
    layout_kind: Layout = "placed",
    rows_per_file: int = ROWS_PER_FILE,
) -> LoadReport:
    started = time.perf_counter()
    paths = ", ".join("'" + str(path).replace("'", "''") + "'" for path in sources)
    source = f"read_parquet([{paths}], binary_as_string = true)"
    if layout_kind == "placed":
        placed = _place(sources, store, prefix, database, row_group_rows, threads, rows_per_file)
        if not placed:
            raise ValueError("the input has no rows")
        _register(catalog, database, placed, _schema_of(store, placed[0]))
        return LoadReport(
            sum(f.rows for f in placed), len(placed), sum(f.size for f in placed), time.perf_counter() - started
        )
    scratch = Path(tempfile.mkdtemp(prefix="clickbench-load-"))
    try:
        con = duckdb.connect(":memory:", config={"threads": threads} if threads else {})
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET temp_directory = '{scratch / 'spill'}'")
        con.execute(
            f"COPY (SELECT {_select_list(con, source)} FROM {source}) TO '{scratch / 'hours'}' "
            "(FORMAT parquet, PARTITION_BY (__hour), COMPRESSION zstd)"
        )
        con.close()
        commit_id = uuid.uuid4().hex
        files: list[FileRecord] = []
        schema: pa.Schema | None = None
        for index, hour_dir in enumerate(
            sorted((scratch / "hours").iterdir(), key=lambda p: int(p.name.split("=")[1]))
        ):
            table = pq.read_table(hour_dir, partitioning=None)  # the partition column is not in the files
            # Stable: rows of the same second keep the input's (ClickHouse primary key) order.
            table = table.take(pc.sort_indices(table, [(TIME_COLUMN, "ascending")]))
            schema = schema or table.schema
            files.append(_write_file(store, prefix, database, commit_id, index, table.cast(schema), row_group_rows))
        if schema is None:
            raise ValueError("the input has no rows")
        _register(catalog, database, files, schema)
        return LoadReport(
            sum(f.rows for f in files), len(files), sum(f.size for f in files), time.perf_counter() - started
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _place(
    sources: Sequence[Path],
    store: ObjectStore,
    prefix: str,
    database: str,
    row_group_rows: int,
    threads: int | None,
    rows_per_file: int,
) -> list[FileRecord]:
    """The rows in their input order, in files of ``rows_per_file`` rows, all in the load's hour.

    DuckDB writes them with the input's compression: the bytes a query decodes are then the kind
    the input's readers decode (re-encoding with another writer or codec changed scan speed by
    10-40 % on some queries), in our storage types and with ``time`` added. One ``COPY`` per file,
    each reading only its rows (``file_row_number`` ranges skip the other row groups) in order.
    """
    load_time = datetime.now(UTC).replace(microsecond=0)
    micros = int(load_time.timestamp()) * 1_000_000
    hour = layout.hour_from_micros(micros)
    commit_id = uuid.uuid4().hex
    files: list[FileRecord] = []
    scratch = Path(tempfile.mkdtemp(prefix="clickbench-place-"))
    con = duckdb.connect(":memory:", config={"threads": threads} if threads else {})
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = true")  # the input's order is the point
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET temp_directory = '{scratch / 'spill'}'")
        for source in sources:
            quoted = "'" + str(source).replace("'", "''") + "'"
            columns = _select_list(con, f"read_parquet({quoted}, binary_as_string = true)", load_time)
            scan = f"read_parquet({quoted}, binary_as_string = true, file_row_number = true)"
            total = pq.ParquetFile(source).metadata.num_rows
            for first in range(0, total, rows_per_file):
                path = scratch / "part.parquet"
                con.execute(
                    f"COPY (SELECT {columns} FROM {scan} WHERE file_row_number >= {first} "
                    f"AND file_row_number < {first + rows_per_file}) TO '{path}' "
                    f"(FORMAT parquet, COMPRESSION {input_codec(source)}, ROW_GROUP_SIZE {row_group_rows})"
                )
                rows = pq.ParquetFile(path).metadata.num_rows
                key = layout.data_key(prefix, database, MEASUREMENT, hour, f"{commit_id}-{len(files):04d}.parquet")
                data = path.read_bytes()
                store.put_if_absent(key, data)
                files.append(FileRecord(database, MEASUREMENT, hour, key, rows, len(data), micros, micros, commit_id))
        return files
    finally:
        con.close()
        shutil.rmtree(scratch, ignore_errors=True)


#: Parquet's codec names (the input's metadata) as DuckDB's COPY spells them.
_DUCKDB_CODECS = {
    "SNAPPY": "snappy",
    "ZSTD": "zstd",
    "GZIP": "gzip",
    "LZ4": "lz4_raw",
    "LZ4_RAW": "lz4_raw",
    "BROTLI": "brotli",
    "UNCOMPRESSED": "uncompressed",
}


def input_codec(path: Path) -> str:
    """The compression of the input's first column chunk, as DuckDB's COPY names it (zstd if unknown)."""
    metadata = pq.ParquetFile(path).metadata
    if metadata.num_row_groups == 0 or metadata.num_columns == 0:
        return "zstd"
    return _DUCKDB_CODECS.get(str(metadata.row_group(0).column(0).compression).upper(), "zstd")


def _schema_of(store: ObjectStore, record: FileRecord) -> pa.Schema:
    return pq.read_schema(pa.BufferReader(store.get(record.key)))


def _register(catalog: Catalog, database: str, files: list[FileRecord], schema: pa.Schema) -> None:
    catalog.create_database(database)
    columns = {field.name: type_name(field.type) for field in schema}
    stored = catalog.get_schema(database, MEASUREMENT)
    if not catalog.put_schema(
        MeasurementSchema(database, MEASUREMENT, columns), None if stored is None else stored.version
    ):
        raise RuntimeError("the hits schema changed while loading")
    catalog.put_files(files)


def _write_file(
    store: ObjectStore, prefix: str, database: str, commit_id: str, index: int, table: pa.Table, row_group_rows: int
) -> FileRecord:
    """One hour's rows as the ingest path writes them (same row groups, compression, statistics)."""
    micros = table.column(TIME_COLUMN).cast(pa.int64())
    first, last = micros[0].as_py(), micros[-1].as_py()
    hour = layout.hour_from_micros(first)
    key = layout.data_key(prefix, database, MEASUREMENT, hour, f"{commit_id}-{index:04d}.parquet")
    row_group = max(MIN_ROW_GROUP_ROWS, math.ceil(table.num_rows / TARGET_ROW_GROUPS_PER_FILE))
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        row_group_size=min(row_group, row_group_rows),
        compression="zstd",
        compression_level=1,
        use_dictionary=True,
        write_statistics=True,
    )
    data = memoryview(sink.getvalue())
    store.put_if_absent(key, data)
    return FileRecord(database, MEASUREMENT, hour, key, table.num_rows, len(data), first, last, commit_id)


#: The largest request the ``api`` layout sends (what a client of the write API would keep under).
MAX_REQUEST_BYTES = 4 * 1024 * 1024


def api_select(con: duckdb.DuckDBPyConnection, source: str) -> str:
    """The input's columns in storage types, ``time`` the EventTime's whole seconds (sent as ``precision: s``)."""
    return (
        f'SELECT * EXCLUDE (__hour, "{TIME_COLUMN}"), CAST("EventTime" AS BIGINT) AS "{TIME_COLUMN}" '
        f"FROM (SELECT {_select_list(con, source)} FROM {source})"
    )


def msgpack_requests(table: pa.Table, max_bytes: int = MAX_REQUEST_BYTES) -> Iterator[bytes]:
    """``table`` as MessagePack columnar bodies of at most ``max_bytes`` each, in its row order.

    Rows per body follow the bytes a row took in the body before (90 % of the room, so few bodies
    are packed twice); a body over the limit is packed again with half the rows."""
    import msgpack

    rows_per_body = 1000
    first = 0
    while first < table.num_rows:
        rows = min(rows_per_body, table.num_rows - first)
        columns = table.slice(first, rows).to_pydict()
        body = msgpack.packb({"m": MEASUREMENT, "precision": "s", "columns": columns}, datetime=True)
        if len(body) > max_bytes:
            if rows == 1:
                raise ValueError(f"row {first} alone packs to {len(body):,} bytes, over {max_bytes:,}")
            rows_per_body = max(1, rows // 2)
            continue
        yield body
        first += rows
        rows_per_body = max(1, int(rows * max_bytes * 0.9 / len(body)))


def load_through_api(sources: Sequence[Path], data_dir: Path, settings: Mapping[str, str] | None = None) -> LoadReport:
    """The user's path: a running ``arcs serve`` on ``data_dir`` (with ``settings`` in its
    environment) gets the rows in MessagePack requests of at most 4 MB through the write API, in
    the input's order; once every row is queryable, the product's compaction runs (its route)
    until no partition is a candidate."""
    from clickbench.server import DATABASE, ArcsServer

    started = time.perf_counter()
    server = ArcsServer(data_dir, settings)
    server.start()
    try:
        rows = 0
        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = true")  # the input's order, as a client sends it
        for path in sources:
            source = "read_parquet('" + str(path).replace("'", "''") + "', binary_as_string = true)"
            reader = con.execute(api_select(con, source)).to_arrow_reader(100_000)
            for batch in reader:
                for body in msgpack_requests(pa.Table.from_batches([batch])):
                    status, answer = server.request(
                        "POST", "/api/v1/write/msgpack", body, {"Content-Type": "application/msgpack"}
                    )
                    if status != 204:
                        raise RuntimeError(f"write: HTTP {status}: {answer[:300].decode(errors='replace')}")
                rows += batch.num_rows
        con.close()
        count = 0
        while count < rows:
            time.sleep(0.2)
            answer = server.json("POST", "/api/v1/query", {"sql": f"SELECT count(*) FROM {MEASUREMENT}"})
            count = int(answer["data"][0][0])
        _compact(server, DATABASE)
        measurements = server.json("GET", f"/api/v1/measurements?database={DATABASE}")
    finally:
        server.stop()
    listed = [m for m in measurements["measurements"] if m["measurement"] == MEASUREMENT]
    files = int(listed[0]["file_count"]) if listed else 0
    stored = sum(f.stat().st_size for f in data_dir.joinpath("storage").rglob("*.parquet"))
    return LoadReport(rows, files, stored, time.perf_counter() - started)


def _compact(server: ArcsServer, database: str) -> None:
    """Trigger compaction through its route and wait for each run, until nothing is a candidate."""
    for _ in range(50):
        runs = int(server.json("GET", "/api/v1/compaction/status")["runs"])
        server.json("POST", "/api/v1/compaction/trigger", {"database": database})
        while True:
            status = server.json("GET", "/api/v1/compaction/status")
            if int(status["runs"]) > runs and not status["running"]:
                break
            time.sleep(0.5)
        if not server.json("GET", f"/api/v1/compaction/candidates?database={database}")["count"]:
            return
    raise RuntimeError("compaction still has candidates after 50 runs")


def load_into_data_dir(
    sources: Sequence[Path], data_dir: Path, database: str = DEFAULT_DATABASE, layout_kind: Layout = "placed"
) -> LoadReport:
    """Load into the standalone server's data directory (``arcs serve --data-dir``)."""
    from arcs.runtime import local_runtime
    from arcs.settings import Settings

    if layout_kind in ("api", "api-default"):
        if database != DEFAULT_DATABASE:
            raise ValueError(f"the api layouts load into the database {DEFAULT_DATABASE!r}")
        return load_through_api(sources, data_dir, API_SETTINGS if layout_kind == "api" else None)
    runtime = local_runtime(Settings().with_(backend="local", data_dir=data_dir))
    try:
        return load_hits(
            sources,
            runtime.catalog,
            runtime.store,
            database,
            row_group_rows=runtime.settings.row_group_rows,
            layout_kind=layout_kind,
        )
    finally:
        runtime.sqlite.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m clickbench.load", description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="hits.parquet, or hits_*.parquet")
    parser.add_argument("--data-dir", type=Path, default=Path("./data"))
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    parser.add_argument("--layout", choices=["placed", "hourly", "api", "api-default"], default="placed")
    args = parser.parse_args(argv)
    report = load_into_data_dir(args.sources, args.data_dir, args.database, args.layout)
    print(
        f"loaded {report.rows:,} rows into {report.files} files ({report.bytes:,} bytes) in {report.seconds:.1f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
