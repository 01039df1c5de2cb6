"""A few of the sandbox corpus (tests/functional/test_sandbox_corpus.py) over HTTP, on both runtimes.

On the "local" runtime DuckDB reads S3 through httpfs with a secret, the setting where
``duckdb_secrets()`` and http(s) URLs would otherwise be reachable.
"""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.servers import Client

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000

HOSTILE = [
    ("read_parquet", "SELECT * FROM read_parquet('s3://any-bucket/x.parquet')", "read_parquet() is not allowed"),
    ("string scan", "SELECT * FROM '/etc/passwd'", "files and URLs cannot be read"),
    ("metadata endpoint", "SELECT * FROM read_text('http://169.254.169.254/latest/meta-data/')", "not allowed"),
    ("secrets", "SELECT * FROM duckdb_secrets()", "duckdb_secrets() is not allowed"),
    ("settings", "SELECT current_setting('allowed_directories')", "current_setting() is not allowed"),
    ("copy", "COPY (SELECT 1) TO '/tmp/arcs-e2e-sandbox.csv'", "COPY statements are refused"),
    ("attach", "ATTACH ':memory:' AS m", "ATTACH statements are refused"),
    ("set", "SET enable_external_access = true", "SET statements are refused"),
    ("two statements", "SELECT 1; SELECT 2", "exactly one statement"),
    ("process killer", "FROM enable_logging(storage = 'file', storage_path = '/tmp/x')", "enable_logging()"),
]


@pytest.mark.parametrize(("case", "sql", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_query_is_400_with_a_message(client: Client, case: str, sql: str, message: str) -> None:
    response = client.query(sql)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["success"] is False and message in body["error"]


def test_the_server_still_answers_after_the_hostile_queries(client: Client) -> None:
    m = f"sbx_{uuid.uuid4().hex[:8]}"
    for _case, sql, _message in HOSTILE:
        assert client.query(sql).status_code == 400
    assert client.write("/api/v1/write/line-protocol", f"{m},host=a v=1 {T0}000000000".encode()).status_code == 204
    assert client.wait_count(m, 1) == 1
    assert client.rows(f"WITH t AS (SELECT * FROM {m}) SELECT host, sum(range) FROM t, range(3) GROUP BY host") == [
        ["a", 3]
    ]
