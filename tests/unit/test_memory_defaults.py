"""DuckDB's memory limit and the largest result, by default, fit the runtime's memory."""

from __future__ import annotations

import os

import pytest

from arcs import envvars
from arcs.runtime import ingest_file_writers
from arcs.settings import LAMBDA_MEMORY_MB, MAX_DEFAULT_RESULT_BYTES, ConfigError, Settings, memory_bytes

MB = 1024 * 1024


@pytest.mark.parametrize(
    ("function_mb", "duckdb", "result_bytes"),
    [(4096, "2048MB", 128 * MB), (1024, "512MB", 32 * MB), (10240, "5120MB", MAX_DEFAULT_RESULT_BYTES)],
)
def test_a_lambda_function_gets_limits_from_its_memory(function_mb: int, duckdb: str, result_bytes: int) -> None:
    settings = Settings.from_env({LAMBDA_MEMORY_MB: str(function_mb)})
    assert settings.duckdb_memory_limit == duckdb
    assert settings.query_max_result_bytes == result_bytes


def test_the_standalone_server_gets_limits_from_the_machine() -> None:
    memory = memory_bytes({})
    settings = Settings.from_env({})
    assert settings.duckdb_memory_limit == f"{memory // 2 // MB}MB"
    assert settings.query_max_result_bytes == min(memory // 32, MAX_DEFAULT_RESULT_BYTES)


def test_settings_override_the_defaults() -> None:
    settings = Settings.from_env(
        {LAMBDA_MEMORY_MB: "4096", envvars.DUCKDB_MEMORY_LIMIT: "1GB", envvars.QUERY_MAX_RESULT_BYTES: "1000"}
    )
    assert (settings.duckdb_memory_limit, settings.query_max_result_bytes) == ("1GB", 1000)
    with pytest.raises(ConfigError, match=envvars.QUERY_MAX_RESULT_BYTES):
        Settings.from_env({envvars.QUERY_MAX_RESULT_BYTES: "0"})


@pytest.mark.parametrize(("function_mb", "group_bytes"), [(2048, 256 * MB), (256, 64 * MB), (10240, 1024 * MB)])
def test_an_ingest_attempt_holds_an_eighth_of_the_function_memory(function_mb: int, group_bytes: int) -> None:
    assert Settings.from_env({LAMBDA_MEMORY_MB: str(function_mb)}).ingest_group_bytes == group_bytes
    assert Settings.from_env({envvars.INGEST_GROUP_BYTES: "1000"}).ingest_group_bytes == 1000
    with pytest.raises(ConfigError, match=envvars.INGEST_GROUP_BYTES):
        Settings.from_env({envvars.INGEST_GROUP_BYTES: "0"})


def test_ingest_file_writers_is_a_setting_within_bounds() -> None:
    assert Settings.from_env({}).ingest_file_writers is None
    assert Settings.from_env({envvars.INGEST_FILE_WRITERS: "2"}).ingest_file_writers == 2
    for refused in ("0", "65", "x"):
        with pytest.raises(ConfigError, match=envvars.INGEST_FILE_WRITERS):
            Settings.from_env({envvars.INGEST_FILE_WRITERS: refused})


@pytest.mark.parametrize(
    ("backend", "cpus", "configured", "processes", "writers"),
    [
        ("local", 2, None, False, 4),
        ("local", 1, None, False, 2),
        ("local", 16, None, False, 8),
        ("aws", 2, None, False, 8),
        ("local", 2, 3, False, 3),
        ("local", 2, None, True, 2),
        ("local", 16, None, True, 8),
        ("local", 2, 3, True, 3),
    ],
)
def test_ingest_file_writers_default_by_the_store(
    monkeypatch: pytest.MonkeyPatch, backend: str, cpus: int, configured: int | None, processes: bool, writers: int
) -> None:
    """A local disk gets two threads a core or a worker process a core (at most eight); S3's
    network waits get eight threads."""
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    settings = Settings(backend=backend, ingest_file_writers=configured)
    assert ingest_file_writers(settings, processes) == writers


def test_the_standalone_server_writes_files_on_processes_unless_told_not_to() -> None:
    assert Settings.from_env({}).ingest_file_processes
    for off in ("false", "0", "FALSE"):
        assert not Settings.from_env({envvars.INGEST_FILE_PROCESSES: off}).ingest_file_processes
    assert Settings.from_env({envvars.INGEST_FILE_PROCESSES: "true"}).ingest_file_processes
    with pytest.raises(ConfigError, match=envvars.INGEST_FILE_PROCESSES):
        Settings.from_env({envvars.INGEST_FILE_PROCESSES: "yes please"})
