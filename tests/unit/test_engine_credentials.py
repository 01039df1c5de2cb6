"""The S3 secret is re-made from fresh credentials, so a warm container never keeps expired keys."""

from __future__ import annotations

from pathlib import Path

from arcs.query.engine import Engine, S3Access


def test_the_secret_follows_the_credentials_provider(tmp_path: Path) -> None:
    issued: list[str] = []

    def credentials() -> S3Access:
        issued.append(f"key-{len(issued)}")
        return S3Access("us-east-1", "127.0.0.1:9", False, "path", issued[-1], "secret", "token")

    engine = Engine(["s3://bucket/"], tmp_path, s3=credentials, secret_refresh_s=0)
    try:
        engine.query_arrow("SELECT 1")
        secret = engine.query_arrow("SELECT secret_string FROM duckdb_secrets()").column(0)[0].as_py()
        assert f"key_id={issued[-1]}" in secret
        assert len(issued) >= 3  # made at connect, then re-made before each query
        assert "secret=redacted" in secret
    finally:
        engine.close()


def test_a_fresh_secret_is_not_remade_before_its_time(tmp_path: Path) -> None:
    calls = []

    def credentials() -> S3Access:
        calls.append(1)
        return S3Access("us-east-1", None, True, "vhost", "k", "s", None)

    engine = Engine(["s3://bucket/"], tmp_path, s3=credentials, secret_refresh_s=3600)
    try:
        for _ in range(3):
            engine.query_arrow("SELECT 1")
        assert len(calls) == 1
    finally:
        engine.close()
