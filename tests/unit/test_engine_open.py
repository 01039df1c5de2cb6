"""Opening the connection on another thread (a cold start's head start) gives the same sealed connection."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from arcs.query.engine import Engine, S3Access


def _s3() -> S3Access:
    return S3Access("us-east-1", "127.0.0.1:9", False, "path", "key", "secret", None)


@pytest.mark.parametrize("s3", [None, _s3])
def test_a_connection_opened_in_the_background_is_sandboxed_and_configured(tmp_path: Path, s3: object) -> None:
    engine = Engine([str(tmp_path / "data") + "/"], tmp_path / "work", s3=_s3 if s3 else None)
    try:
        engine.open_in_background()
        engine.open_in_background()  # a second call changes nothing
        assert engine.query_arrow("SELECT 1 AS one").to_pylist() == [{"one": 1}]
        settings = engine.query_arrow(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('enable_external_access', 'lock_configuration', 'TimeZone', 'autoload_known_extensions')"
        ).to_pylist()
        assert {row["name"]: row["value"] for row in settings} == {
            "enable_external_access": "false",
            "lock_configuration": "true",
            "TimeZone": "UTC",
            "autoload_known_extensions": "false",
        }
        httpfs = engine.query_arrow("SELECT count(*) AS n FROM duckdb_settings() WHERE name = 's3_region'")
        assert httpfs.column(0).to_pylist() == [1 if s3 is not None else 0]  # its settings come with it
        if s3 is not None:
            assert engine.query_arrow("SELECT count(*) AS n FROM duckdb_secrets()").column(0).to_pylist() == [1]
        with pytest.raises(duckdb.Error):
            engine.connection().execute("SET threads = 1")
    finally:
        engine.close()


def test_a_failed_background_open_is_raised_by_connection_then_retried(tmp_path: Path) -> None:
    blocker = tmp_path / "work"
    blocker.write_text("a file where the work directory should be")
    engine = Engine([str(tmp_path) + "/"], blocker)
    try:
        engine.open_in_background()
        with pytest.raises(FileExistsError):
            engine.connection()
        blocker.unlink()
        assert engine.query_arrow("SELECT 2 AS two").to_pylist() == [{"two": 2}]
    finally:
        engine.close()


def test_a_failed_background_load_of_httpfs_is_raised_by_connection_then_retried(tmp_path: Path) -> None:
    platform = str(duckdb.connect().execute("PRAGMA platform").fetchone()[0])  # type: ignore[index]
    laid_out = tmp_path / "work" / "duckdb_extensions" / f"v{duckdb.__version__}" / platform / "httpfs.duckdb_extension"
    laid_out.parent.mkdir(parents=True)
    laid_out.write_bytes(b"not an extension")
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work", s3=_s3)
    try:
        engine.open_in_background()
        with pytest.raises(duckdb.Error):
            engine.connection()
        laid_out.unlink()  # the next connection() lays the real one out again
        assert engine.query_arrow("SELECT 4 AS four").to_pylist() == [{"four": 4}]
    finally:
        engine.close()


def test_closing_an_engine_whose_connection_is_still_opening(tmp_path: Path) -> None:
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work", s3=_s3)
    engine.open_in_background()
    engine.close()
    assert engine.query_arrow("SELECT 3 AS three").to_pylist() == [{"three": 3}]  # opens anew
    engine.close()


def test_queries_run_with_the_engine_settings(tmp_path: Path) -> None:
    """Queries run on cursors: the settings must be the database's, not only the first session's."""
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work")
    try:
        table = engine.query_arrow(
            "SELECT current_setting('TimeZone') AS zone, current_setting('parquet_metadata_cache') AS cache, "
            "TIMESTAMPTZ '2024-01-01 23:30:00+00' AS t"
        )
        assert table.column("zone").to_pylist() == ["UTC"]
        assert table.column("cache").to_pylist() == [True]
        assert table.schema.field("t").type == pa.timestamp("us", tz="UTC")
    finally:
        engine.close()
