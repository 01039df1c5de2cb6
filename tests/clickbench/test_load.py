"""The loader's two layouts: every row stored once, in the order and partitions each promises."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from clickbench.generate import generate_hits, to_parquet_layout
from clickbench.load import api_select, load_into_data_dir, msgpack_requests

from arcs import layout
from arcs.adapters.local.catalog import SqliteCatalog
from arcs.adapters.local.sqlite_database import SqliteDatabase

ROWS = 3_000


@pytest.fixture(scope="module")
def hits_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hits") / "hits.parquet"
    pq.write_table(to_parquet_layout(generate_hits(ROWS, seed=3)), path, row_group_size=500)
    return path


def _stored(data_dir: Path) -> tuple[list[str], duckdb.DuckDBPyConnection]:
    catalog = SqliteCatalog(SqliteDatabase(data_dir / "catalog.sqlite"))
    files = [str(data_dir / "storage" / f.key) for f in catalog.list_files("clickbench", "hits")]
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    paths = ", ".join(f"'{path}'" for path in files)
    con.execute(f"CREATE VIEW stored AS SELECT * FROM read_parquet([{paths}], union_by_name = true)")
    con.execute(f"CREATE VIEW source AS SELECT * FROM read_parquet('{hits_path(data_dir)}', binary_as_string = true)")
    return files, con


def hits_path(data_dir: Path) -> Path:
    return Path((data_dir / "SOURCE").read_text())


def test_every_row_is_stored_once(hits_file: Path, tmp_path: Path) -> None:
    report = load_into_data_dir([hits_file], tmp_path, layout_kind="placed")
    (tmp_path / "SOURCE").write_text(str(hits_file))
    files, con = _stored(tmp_path)
    assert report.rows == ROWS and report.files == len(files)
    differ = con.execute(
        "SELECT count(*) FROM (SELECT WatchID, EventTime, URL FROM source "
        "EXCEPT ALL SELECT WatchID, EventTime, URL FROM stored)"
    ).fetchone()
    assert differ == (0,)
    assert con.execute("SELECT count(*) FROM stored").fetchone() == (ROWS,)


def test_api_writes_every_row_once_through_the_write_api_and_compacts(hits_file: Path, tmp_path: Path) -> None:
    report = load_into_data_dir([hits_file], tmp_path, layout_kind="api")
    (tmp_path / "SOURCE").write_text(str(hits_file))
    files, con = _stored(tmp_path)
    assert report.rows == ROWS and report.files == len(files)
    columns = "WatchID, EventTime, URL, UserID"
    differ = con.execute(
        f"SELECT count(*) FROM (SELECT {columns}, make_date(EventDate::INTEGER) FROM source "
        f"EXCEPT ALL SELECT {columns}, EventDate::DATE FROM stored)"
    ).fetchone()
    assert differ == (0,)
    assert con.execute("SELECT count(*) FROM stored").fetchone() == (ROWS,)
    # time is the EventTime, so rows are in their event hour, as ingest partitions them
    assert con.execute("SELECT count(*) FROM stored WHERE epoch(time)::BIGINT <> EventTime").fetchone() == (0,)
    # The server ran with ClickBench's sort keys and the month tier (load.API_SETTINGS): the month's
    # rows end in a month file, in ClickHouse's key order.
    assert [layout.key_tier(f) for f in files] == ["month"]
    keys = "CounterID, EventDate, UserID, EventTime, WatchID"
    stored = con.execute(f"SELECT {keys} FROM read_parquet('{files[0]}')").fetchall()
    assert stored == sorted(stored)
    catalog = SqliteCatalog(SqliteDatabase(tmp_path / "catalog.sqlite"))
    # No run left half done: a settled job only waits out the grace period before deleting its inputs.
    assert all(job.status == "settled" for job in catalog.list_compaction_jobs(active=True, limit=1000))


def test_api_bodies_stay_under_the_limit_and_keep_the_order(hits_file: Path) -> None:
    import msgpack
    import pyarrow as pa

    source = duckdb.connect(":memory:")
    table = source.execute(api_select(source, f"read_parquet('{hits_file}', binary_as_string = true)")).to_arrow_table()
    bodies = list(msgpack_requests(table, max_bytes=64 * 1024))
    assert len(bodies) > 10 and all(len(body) <= 64 * 1024 for body in bodies)
    watch_ids = [w for body in bodies for w in msgpack.unpackb(body, timestamp=3)["columns"]["WatchID"]]
    assert watch_ids == table.column("WatchID").to_pylist()
    first = msgpack.unpackb(bodies[0], timestamp=3)
    assert first["m"] == "hits" and first["precision"] == "s"
    assert isinstance(pa.scalar(first["columns"]["EventDate"][0]).type, pa.TimestampType)


def test_placed_keeps_the_input_order_in_one_partition_at_the_load_time(hits_file: Path, tmp_path: Path) -> None:
    load_into_data_dir([hits_file], tmp_path, layout_kind="placed")
    (tmp_path / "SOURCE").write_text(str(hits_file))
    files, con = _stored(tmp_path)
    assert len(files) == 1  # 3,000 rows: far below a file's worth
    assert con.execute("SELECT count(DISTINCT time) FROM stored").fetchone() == (1,)
    stored = [row[0] for row in con.execute("SELECT WatchID FROM stored").fetchall()]
    source = [row[0] for row in con.execute("SELECT WatchID FROM source").fetchall()]
    assert stored == source


def test_hourly_puts_each_row_in_its_event_hour(hits_file: Path, tmp_path: Path) -> None:
    load_into_data_dir([hits_file], tmp_path, layout_kind="hourly")
    (tmp_path / "SOURCE").write_text(str(hits_file))
    files, con = _stored(tmp_path)
    assert len(files) > 100  # 30 days of hours
    assert con.execute("SELECT count(*) FROM stored").fetchone() == (ROWS,)
    assert con.execute("SELECT count(*) FROM stored WHERE epoch(time)::BIGINT <> EventTime").fetchone() == (0,)


def test_placed_splits_into_files_in_order_with_the_input_codec(hits_file: Path, tmp_path: Path) -> None:
    from clickbench.load import load_hits

    from arcs.runtime import local_runtime
    from arcs.settings import Settings

    runtime = local_runtime(Settings(data_dir=tmp_path))
    try:
        report = load_hits([hits_file], runtime.catalog, runtime.store, row_group_rows=250, rows_per_file=1000)
    finally:
        runtime.sqlite.close()
    (tmp_path / "SOURCE").write_text(str(hits_file))
    files, con = _stored(tmp_path)
    assert report.files == len(files) == ROWS // 1000
    assert [pq.ParquetFile(path).metadata.num_rows for path in files] == [1000] * (ROWS // 1000)
    stored = [row[0] for row in con.execute("SELECT WatchID FROM stored").fetchall()]
    assert stored == [row[0] for row in con.execute("SELECT WatchID FROM source").fetchall()]
    input_codec = pq.ParquetFile(hits_file).metadata.row_group(0).column(0).compression
    assert {pq.ParquetFile(path).metadata.row_group(0).column(0).compression for path in files} == {input_codec}


def test_the_narrowed_copy_keeps_the_rows_in_order_with_the_original_widths(hits_file: Path, tmp_path: Path) -> None:
    from clickbench.widths import _narrow, _original_widths

    load_into_data_dir([hits_file], tmp_path, layout_kind="placed")
    files = sorted((tmp_path / "storage").rglob("*.parquet"))
    con = duckdb.connect(config={"preserve_insertion_order": False})
    widths = _original_widths(con, hits_file)
    assert widths["RegionID"] == "INTEGER" and widths["ResolutionWidth"] == "SMALLINT" and "EventDate" not in widths
    narrowed = _narrow(con, files, widths, tmp_path / "narrowed.parquet")
    kinds = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE '{narrowed}')").fetchall())
    assert {name: kinds[name] for name in widths} == widths and kinds["UserID"] == "BIGINT"
    assert len(files) == 1  # so row numbers within the file say the order
    in_order = (
        f"SELECT * FROM read_parquet('{files[0]}', file_row_number = true)"
        f" EXCEPT ALL SELECT * FROM read_parquet('{narrowed}', file_row_number = true)"
    )
    assert con.execute(f"SELECT count(*) FROM ({in_order})").fetchone() == (0,)
