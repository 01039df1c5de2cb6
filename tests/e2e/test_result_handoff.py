"""Results larger than a Lambda response arrive whole over HTTP: through storage on ``arcs local``, inline standalone.

Both servers run with a 20 kB inline limit so that the data stays small; the query is the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from arc_client import ArcClient
from arc_client.exceptions import ArcQueryError

from tests.e2e.servers import TOKEN, Client, ServerProcess, runtime_fixture

pytestmark = pytest.mark.e2e

# The query function streams its results (up to 200 MB on AWS): the stream limit is lowered too.
INLINE_LIMIT = {"ARCS_QUERY_INLINE_MAX_BYTES": "20000", "ARCS_QUERY_STREAM_MAX_BYTES": "20000"}
ROWS = 2000
T0_US = 1_700_000_000_000_000
SQL = "SELECT time, host, v, s FROM wide ORDER BY time"


def expected_rows() -> list[list[Any]]:
    start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=T0_US)
    return [
        # Stored times are nanoseconds: nine fraction digits.
        [(start + timedelta(microseconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%f000Z"), f"h{i % 7}", i, f'row "{i}" é']
        for i in range(ROWS)
    ]


limited = runtime_fixture(**INLINE_LIMIT)


@pytest.fixture(scope="module")
def loaded(limited: ServerProcess) -> Iterator[tuple[str, Client]]:
    """A server with the small inline limit, holding ``ROWS`` rows of ``wide``."""
    client = Client(limited.url)
    try:
        lines = "\n".join(f'wide,host=h{i % 7} v={i}i,s="row \\"{i}\\" é" {T0_US + i}' for i in range(ROWS))
        assert client.write("/api/v1/write/line-protocol?precision=us", lines.encode()).status_code == 204
        assert client.wait_count("wide", ROWS) == ROWS
        yield limited.runtime, client
    finally:
        client.http.close()


def test_a_json_result_over_the_limit_arrives_whole(loaded: tuple[str, Client]) -> None:
    runtime, client = loaded
    response = client.http.post("/api/v1/query", json={"sql": SQL}, follow_redirects=True)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert document["columns"] == ["time", "host", "v", "s"]
    assert document["row_count"] == ROWS and document["data"] == expected_rows()
    assert len(response.content) > 20000
    if runtime == "local":
        (redirect,) = response.history
        assert redirect.status_code == 303 and redirect.json()["size_bytes"] == len(response.content)
        assert redirect.headers["x-arc-result-content-type"] == "application/json"
        # The download comes from the emulated S3, not the API, and carries no token there.
        assert response.url.port != redirect.url.port and "authorization" not in response.request.headers
    else:
        assert response.history == []  # the standalone server has no response limit


def test_an_arrow_result_over_the_limit_arrives_whole(loaded: tuple[str, Client]) -> None:
    runtime, client = loaded
    response = client.http.post("/api/v1/query/arrow", json={"sql": SQL}, follow_redirects=True)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(response.content).read_all()
    rows = expected_rows()
    assert table.num_rows == ROWS
    assert table.column("v").to_pylist() == [row[2] for row in rows]
    assert table.column("s").to_pylist() == [row[3] for row in rows]
    assert table.column("time").cast(pa.int64()).to_pylist() == [(T0_US + i) * 1000 for i in range(ROWS)]
    assert [r.status_code for r in response.history] == ([303] if runtime == "local" else [])


def test_a_msgpack_result_over_the_limit_arrives_whole(loaded: tuple[str, Client]) -> None:
    runtime, client = loaded
    response = client.http.post("/api/v1/query/msgpack", json={"sql": SQL}, follow_redirects=True)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/msgpack"
    document = msgpack.unpackb(response.content)
    assert document["row_count"] == ROWS and document["types"] == ["timestamp[ns]", "utf8", "int64", "utf8"]
    rows = expected_rows()
    assert document["data"][2] == [row[2] for row in rows] and document["data"][3] == [row[3] for row in rows]
    assert [t.to_unix_nano() for t in document["data"][0]] == [(T0_US + i) * 1000 for i in range(ROWS)]
    assert [r.status_code for r in response.history] == ([303] if runtime == "local" else [])


def test_a_small_result_is_answered_inline(loaded: tuple[str, Client]) -> None:
    _runtime, client = loaded
    response = client.http.post("/api/v1/query", json={"sql": "SELECT host, count(*) FROM wide GROUP BY host"})
    assert response.status_code == 200 and len(response.json()["data"]) == 7


def test_arcs_python_sdk_gets_its_result_inline_or_a_400_that_says_why(loaded: tuple[str, Client]) -> None:
    """Arc's Python SDK follows no redirect: below the limit it gets the result (streamed), past it
    a 400 that says what to do, never a 303 it would fail on (nor a result stored for nobody)."""
    runtime, client = loaded
    host, port = client.url.removeprefix("http://").rsplit(":", 1)
    with ArcClient(host=host, port=int(port), token=TOKEN, database="default") as sdk:
        small = sdk.query.query("SELECT host, count(*) AS n FROM wide GROUP BY host ORDER BY host")
        assert small.row_count == 7 and sum(row[1] for row in small.data) == ROWS
        if runtime == "standalone":  # no response limit: the whole result, inline
            assert sdk.query.query(SQL).data == expected_rows()
            assert sdk.query.query_arrow(SQL).num_rows == ROWS
            return
        for ask in (sdk.query.query, sdk.query.query_arrow):
            with pytest.raises(ArcQueryError, match=r"\(400\).*follows no redirect.*narrow the query"):
                ask(SQL)
    # Any other client still gets the 303.
    assert client.http.post("/api/v1/query", json={"sql": SQL}).status_code == 303
