"""Long and large queries through ``arcs local`` as they run on AWS: the query function's answers
stream through the emulated API Gateway (STREAM transfer mode), so a query computing for a minute
and an answer of 50 MB reach a client that follows no redirect, whole, with a 200.

A buffered integration would have cut the first at 29 s (504) and handed the second off (303);
the stream's own limits hold (docs/aws-limits.md): Lambda sends the first 6 MB at full speed and
the rest at 2 MB/s, so the 50 MB take some 22 s to arrive, as they would on AWS.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest
import zstandard

from tests.e2e.servers import TOKEN, ServerProcess, local

pytestmark = pytest.mark.e2e

#: Far past API Gateway's 29 s integration timeout, and Lambda's 6 MB / API Gateway's 10 MB.
LONG_S = 60
LARGE_BYTES = 50 * 1000 * 1000


@pytest.fixture(scope="module")
def api() -> Iterator[httpx.Client]:
    # Results up to 128 MiB whatever this machine's memory (the default is a 32nd of it).
    server: ServerProcess = local(ARCS_QUERY_MAX_RESULT_BYTES=str(128 * 1024 * 1024))
    server.start()
    # Follows no redirect: a 303 would fail the tests. Waits two minutes for a byte, not 30 s.
    client = httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=httpx.Timeout(30, read=120),
        follow_redirects=False,
    )
    try:
        yield client
    finally:
        client.close()
        server.stop()


def residue_sum(n: int) -> int:
    """sum(i % 7 for i in range(n)), in closed form."""
    return (n // 7) * 21 + sum(range(n % 7))


def timed_sum(api: httpx.Client, n: int) -> tuple[float, httpx.Response]:
    started = time.monotonic()
    response = api.post("/api/v1/query", json={"sql": f"SELECT sum(i % 7) AS s FROM range({n}) t(i)"})
    return time.monotonic() - started, response


@pytest.mark.timeout(900)
def test_a_query_computing_a_minute_answers_200_with_its_result(api: httpx.Client) -> None:
    # The same arithmetic over more numbers: sized on this machine to take about a minute.
    n = 50_000_000
    elapsed, response = timed_sum(api, n)
    while elapsed < 2:
        n *= 4
        elapsed, response = timed_sum(api, n)
    while elapsed < LONG_S:  # this machine's speed varies with its load: sized again if short
        n = int(n * LONG_S * 1.25 / elapsed)
        elapsed, response = timed_sum(api, n)
    assert response.status_code == 200, response.text
    assert response.history == []
    assert response.json()["data"] == [[residue_sum(n)]]
    print(f"sum over {n:,} numbers: 200 after {elapsed:.1f} s")


def test_an_answer_of_50_mb_arrives_whole_as_it_is_written(api: httpx.Client) -> None:
    rows = 1_400_000
    sql = f"SELECT i, 'row ' || i || ' of the fifty megabytes' AS s FROM range({rows}) t(i) ORDER BY i"
    started = time.monotonic()
    # Uncompressed, so that the 50 MB are what Lambda paces (compressed, they are a few MB).
    plain = {"Accept-Encoding": "identity"}
    with api.stream("POST", "/api/v1/query", json={"sql": sql}, headers=plain) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.headers.get("transfer-encoding") == "chunked"
        assert "content-encoding" not in response.headers
        pieces = response.iter_bytes()
        first = next(pieces)
        first_byte_s = time.monotonic() - started
        body = first + b"".join(pieces)
    total_s = time.monotonic() - started
    assert len(body) > LARGE_BYTES
    document = httpx.Response(200, content=body).json()
    assert document["row_count"] == rows and document["columns"] == ["i", "s"]
    assert document["data"] == [[i, f"row {i} of the fifty megabytes"] for i in range(rows)]
    print(f"{len(body):,} bytes: first byte after {first_byte_s:.1f} s, all after {total_s:.1f} s")
    # Streamed: the first bytes came long before the last; Lambda's 2 MB/s past 6 MB paced the rest.
    assert total_s - first_byte_s > (LARGE_BYTES - 6 * 1024 * 1024) / (2 * 1024 * 1024) * 0.9


def test_the_same_answer_compressed_streams_a_fraction_of_the_bytes(api: httpx.Client) -> None:
    """zstd as the query streams: Lambda paces the compressed bytes, so the answer arrives sooner."""
    rows = 1_400_000
    sql = f"SELECT i, 'row ' || i || ' of the fifty megabytes' AS s FROM range({rows}) t(i) ORDER BY i"
    started = time.monotonic()
    with api.stream("POST", "/api/v1/query", json={"sql": sql}, headers={"Accept-Encoding": "zstd"}) as response:
        assert response.status_code == 200 and response.headers["content-encoding"] == "zstd"
        assert response.headers["vary"] == "Accept-Encoding"
        sent = b"".join(response.iter_raw())
    total_s = time.monotonic() - started
    body = zstandard.ZstdDecompressor().decompressobj().decompress(sent)
    assert len(body) > LARGE_BYTES > 8 * len(sent)
    document = httpx.Response(200, content=body).json()
    assert document["row_count"] == rows and document["data"][-1] == [
        rows - 1,
        f"row {rows - 1} of the fifty megabytes",
    ]
    print(f"{len(body):,} bytes as {len(sent):,} of zstd, all after {total_s:.1f} s")
    assert total_s < (LARGE_BYTES - 6 * 1024 * 1024) / (2 * 1024 * 1024)  # the plain answer's pacing alone


def test_an_arrow_answer_of_50_mb_arrives_whole(api: httpx.Client) -> None:
    rows = 3_300_000
    sql = f"SELECT i, i * 2 AS j FROM range({rows}) t(i) ORDER BY i"
    response = api.post("/api/v1/query/arrow", json={"sql": sql})
    assert response.status_code == 200 and response.history == []
    assert len(response.content) > LARGE_BYTES
    table = pa.ipc.open_stream(response.content).read_all()
    assert table.column("i").to_pylist() == list(range(rows))
    assert table.column("j").to_pylist() == [2 * i for i in range(rows)]


def test_a_client_that_leaves_mid_stream_frees_the_function(api: httpx.Client) -> None:
    # About 60 MB: past the first 6 MB Lambda paces it at 2 MB/s, some 27 s to the end.
    sql = "SELECT i, repeat('x', 40) AS s FROM range(1200000) t(i)"
    with api.stream("POST", "/api/v1/query", json={"sql": sql}, headers={"Accept-Encoding": "identity"}) as response:
        assert response.status_code == 200
        received = 0
        for chunk in response.iter_raw():
            received += len(chunk)
            if received > 8 * 1000 * 1000:
                break  # leaving closes the connection: the rest is never read
    # The query function ran one invocation at a time before the stream was dropped with its
    # client: the next query waited for the abandoned 50 MB to trickle out to nobody.
    started = time.monotonic()
    response = api.post("/api/v1/query", json={"sql": "SELECT 1 AS one"})
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 8
