"""What the query routes read from a request's body (README "Querying"; docs/api.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arcs.auth.tokens import Principal
from arcs.http.api import build_app
from arcs.http.gateway import _LambdaContext
from arcs.http.proxy import http_response, proxy_event
from arcs.runtime import local_runtime
from arcs.settings import Settings


@pytest.mark.parametrize("path", ["/api/v1/query", "/api/v1/query/arrow", "/api/v1/query/estimate"])
@pytest.mark.parametrize("database", [5, True, {}, [], {"a": 1}])
def test_a_query_naming_its_database_with_anything_but_text_is_a_400(
    tmp_path: Path, path: str, database: object
) -> None:
    """The document says `database` is a name; a number or an object was read as its text (or, when
    empty, as no database at all) and answered as if a name had been sent."""
    runtime = local_runtime(Settings(data_dir=tmp_path, bootstrap_token="bootstrap-token-0123456789"))
    app = build_app(runtime, "query")
    reader = Principal("t-reader", "reader", frozenset({"read"}), ())
    body = json.dumps({"sql": "SELECT 1 AS one", "database": database}).encode()
    event = proxy_event("POST", path, "", {"content-type": "application/json"}, body, reader.to_context())
    answer = http_response(app.resolve(event, _LambdaContext()))
    assert answer.status == 400, answer.body[:200]
    assert "'database' must be a database name" in json.loads(answer.body)["error"]
