"""DuckDB's spill is capped at what the deployment gives it (the query function's /tmp)."""

from __future__ import annotations

from pathlib import Path

from arcs import envvars
from arcs.query.engine import Engine
from arcs.settings import Settings


def _setting(engine: Engine, name: str) -> str:
    rows = engine.query_arrow(f"SELECT value FROM duckdb_settings() WHERE name = '{name}'").to_pylist()
    return str(rows[0]["value"])


def test_the_spill_limit_reaches_duckdb_from_the_environment(tmp_path: Path) -> None:
    settings = Settings.from_env({envvars.DUCKDB_MAX_TEMP_SIZE: "300MiB", envvars.DATA_DIR: str(tmp_path)})
    assert settings.duckdb_max_temp_size == "300MiB"
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work", max_temp_size=settings.duckdb_max_temp_size)
    try:
        assert _setting(engine, "max_temp_directory_size") == "300.0 MiB"
        assert _setting(engine, "temp_directory") == str(tmp_path / "work" / "duckdb_tmp")
    finally:
        engine.close()


def test_without_a_limit_duckdb_keeps_its_default(tmp_path: Path) -> None:
    assert Settings.from_env({envvars.DATA_DIR: str(tmp_path)}).duckdb_max_temp_size is None
