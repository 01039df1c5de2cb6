"""The query timeout: a query running too long is interrupted and answered 503, the engine lives on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from arcs import envvars
from arcs.auth.tokens import Principal
from arcs.errors import QueryTimeout
from arcs.http.api import build_app
from arcs.query import service as query_module
from arcs.query.engine import Engine
from arcs.runtime import local_runtime
from arcs.settings import ConfigError, Settings

#: A trillion-row cross join: minutes of work, unless something stops it.
ADMIN = Principal("t", "t", frozenset({"admin"}), ())
ENDLESS = "SELECT sum(a.range * b.range) AS s FROM range(1000000) a, range(1000000) b"


def test_a_long_query_is_interrupted_and_the_next_query_runs(tmp_path: Path) -> None:
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work", threads=2, query_timeout_s=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(QueryTimeout) as caught:
            engine.query_arrow(ENDLESS)
        assert time.monotonic() - started < 10
        assert caught.value.status == 503
        assert "0.3 s" in caught.value.message
        # Same connection, new cursor: nothing of the interrupted query is left behind.
        assert engine.query_arrow("SELECT 42 AS answer").to_pylist() == [{"answer": 42}]
        with pytest.raises(QueryTimeout):
            engine.query_arrow(ENDLESS)
        assert engine.query_arrow("SELECT 43 AS answer").to_pylist() == [{"answer": 43}]
    finally:
        engine.close()


def test_a_quick_query_is_never_interrupted_after_it_ends(tmp_path: Path) -> None:
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work", threads=2, query_timeout_s=0.05)
    try:
        for _ in range(5):
            assert engine.query_arrow("SELECT 1 AS one").num_rows == 1
        time.sleep(0.1)  # any timer left armed would have fired by now
        assert engine.query_arrow("SELECT count(*) AS n FROM range(1000)").to_pylist() == [{"n": 1000}]
    finally:
        engine.close()


def test_no_timeout_lets_a_query_run(tmp_path: Path) -> None:
    engine = Engine([str(tmp_path) + "/"], tmp_path / "work", threads=2)
    try:
        sql = "SELECT count(*) AS n FROM range(3000) a, range(3000) b"
        assert engine.query_arrow(sql).to_pylist() == [{"n": 9_000_000}]
    finally:
        engine.close()


def _query_event(sql: str) -> dict[str, Any]:
    return {
        "resource": "/{proxy+}",
        "path": "/api/v1/query",
        "httpMethod": "POST",
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {"Content-Type": ["application/json"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": "api/v1/query"},
        "requestContext": {
            "path": "/prod/api/v1/query",
            "httpMethod": "POST",
            "stage": "prod",
            "requestId": "timeout-test",
            "authorizer": {"token_id": "t", "token_name": "t", "permissions": "read", "databases": ""},
        },
        "body": json.dumps({"sql": sql}),
        "isBase64Encoded": False,
    }


def test_the_api_answers_a_timed_out_query_with_a_json_503(tmp_path: Path) -> None:
    runtime = local_runtime(Settings(data_dir=tmp_path, query_timeout_s=0.3, duckdb_threads=2))
    app = build_app(runtime, "query")
    try:
        response = app.resolve(_query_event(ENDLESS), None)  # type: ignore[arg-type]
        assert response["statusCode"] == 503
        assert "Retry-After" not in (response.get("multiValueHeaders") or {})
        assert "Retry-After" not in (response.get("headers") or {})
        body = json.loads(response["body"])
        assert body["success"] is False
        assert "ran longer than 0.3 s" in body["error"]
        after = app.resolve(_query_event("SELECT 7 AS seven"), None)  # type: ignore[arg-type]
        assert after["statusCode"] == 200, after
        assert json.loads(after["body"])["data"] == [[7]]
    finally:
        runtime.engine.close()


def test_the_timeout_setting() -> None:
    assert Settings.from_env({}).query_timeout_s == 30.0
    assert Settings.from_env({envvars.QUERY_TIMEOUT_S: "2.5"}).query_timeout_s == 2.5
    assert Settings.from_env({envvars.QUERY_TIMEOUT_S: "0"}).query_timeout_s == 0
    with pytest.raises(ConfigError):
        Settings.from_env({envvars.QUERY_TIMEOUT_S: "-1"})
    with pytest.raises(ConfigError):
        Settings.from_env({envvars.QUERY_TIMEOUT_S: "soon"})


def test_reading_and_mapping_the_sql_counts_against_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What is left of the budget once the SQL is read and mapped is all the engine gets."""
    runtime = local_runtime(Settings(data_dir=tmp_path, query_timeout_s=1.5, duckdb_threads=2))
    check = query_module.check_read_only

    def slow_check(sql: str) -> object:
        time.sleep(1.0)
        return check(sql)

    monkeypatch.setattr(query_module, "check_read_only", slow_check)
    try:
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            runtime.queries.run(ENDLESS, "default", ADMIN)
        assert time.monotonic() - started < 2.2  # 1.5 s in all, not 1 s and then 1.5 s more
        runtime.engine.query_timeout_s = 0.5
        with pytest.raises(QueryTimeout, match="to prepare"):
            runtime.queries.run("SELECT 1", "default", ADMIN)
    finally:
        runtime.engine.close()
