"""Points of one series and time merge field by field (InfluxDB's rule), and a query gives the same
answer before and after compaction: the standalone server over HTTP, its real write path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import Client
from tests.e2e.test_compaction import file_count, server, wait_for

pytestmark = pytest.mark.e2e

T = 1_700_000_000 * 10**9  # nanoseconds, an hour long past


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    process = server(tmp_path / "data", interval_s="0").start()  # one file per write; compaction on trigger
    http = Client(process.url)
    yield http
    http.http.close()
    process.stop()


def write(client: Client, *lines: str) -> None:
    """One request; returns once its file is listed (each write is its own file here)."""
    measurements = {line.split(",")[0].split(" ")[0] for line in lines}
    counts = {m: _files(client, m) for m in measurements}
    response = client.write("/api/v1/write/line-protocol", "\n".join(lines).encode())
    assert response.status_code == 204, response.text
    deadline = time.monotonic() + 30
    while any(_files(client, m) <= counts[m] for m in measurements):
        assert time.monotonic() < deadline, "the write was not ingested"
        time.sleep(0.05)


def _files(client: Client, measurement: str) -> int:
    listing = client.http.get("/api/v1/databases/default/measurements").json()
    return next((int(m["file_count"]) for m in listing.get("measurements", []) if m["name"] == measurement), 0)


def table(client: Client, sql: str) -> list[dict[str, Any]]:
    response = client.query(sql)
    assert response.status_code == 200, response.text
    answer = response.json()
    return [dict(zip(answer["columns"], row, strict=True)) for row in answer["data"]]


def compact(client: Client, jobs: int) -> None:
    assert client.http.post("/api/v1/compaction/trigger", json={"database": "default"}).status_code == 202
    wait_for(client, "/api/v1/compaction/history", lambda a: [j["status"] for j in a["jobs"]] == ["done"] * jobs)


def test_fields_of_one_point_written_apart_are_all_kept_before_and_after_compaction(client: Client) -> None:
    write(client, f"sem,host=a usage=1 {T}")
    write(client, f"sem,host=a idle=5 {T}")
    for n in range(2, 5):  # enough files to compact
        write(client, f"sem,host=b usage={n} {T + n * 1000}")
    sql = "SELECT time, host, usage, idle FROM sem ORDER BY time, host"
    before = table(client, sql)
    assert before[0] == {"time": "2023-11-14T22:13:20.000000000Z", "host": "a", "usage": 1.0, "idle": 5.0}
    assert len(before) == 4
    compact(client, jobs=1)
    assert file_count(client, "sem") == 1
    assert table(client, sql) == before


def test_every_shape_of_duplicate_answers_the_same_before_and_after_compaction(client: Client) -> None:
    writes = [
        # the same row twice, in two requests
        [f'dup,host=a,dc=x v=1,s="p" {T}'],
        [f'dup,host=a,dc=x v=1,s="p" {T}'],
        # one series and time, fields apart, then overlapping: the later non-null wins, a field
        # the later write lacks keeps its value
        [f"dup,host=b,dc=x v=1,w=10i {T}"],
        [f"dup,host=b,dc=x v=2,flag=true {T}"],
        [f'dup,host=b,dc=x s="late" {T}'],
        # a point twice within one request, the second one later
        [f"dup,host=c,dc=x v=1,w=1i {T + 1000}", f"dup,host=c,dc=x v=3 {T + 1000}"],
        # tag values null: a series without the dc tag, written twice with other fields
        [f"dup,host=d v=4 {T + 2000}"],
        [f"dup,host=d w=7i {T + 2000}"],
        # neighbours one microsecond apart, or one nanosecond, stay two points
        [f"dup,host=e v=1 {T + 3000}", f"dup,host=e v=2 {T + 4000}"],
        [f"dup,host=e v=3 {T + 4001}"],
        # another series at the same time is another point
        [f"dup,host=a,dc=y v=9 {T}"],
        # a measurement without tags keeps every row, even the same one twice
        [f"plain v=1 {T}", f"plain v=1 {T}"],
        [f"plain v=2 {T}"],
        [f"plain v=3 {T + 1000}"],
        [f"plain v=4 {T + 2000}"],
    ]
    for lines in writes:
        write(client, *lines)
    points = "SELECT time, host, dc, v, w, s, flag FROM dup ORDER BY time, host, dc"
    rows = "SELECT time, v FROM plain ORDER BY time, v"
    counted = "SELECT count(*) AS n, count(DISTINCT host) AS hosts, sum(v) AS v FROM dup"
    before = (table(client, points), table(client, rows), table(client, counted))
    at = "2023-11-14T22:13:20.000"
    assert before[0] == [
        {"time": f"{at}000000Z", "host": "a", "dc": "x", "v": 1.0, "w": None, "s": "p", "flag": None},
        {"time": f"{at}000000Z", "host": "a", "dc": "y", "v": 9.0, "w": None, "s": None, "flag": None},
        {"time": f"{at}000000Z", "host": "b", "dc": "x", "v": 2.0, "w": 10, "s": "late", "flag": True},
        {"time": f"{at}001000Z", "host": "c", "dc": "x", "v": 3.0, "w": 1, "s": None, "flag": None},
        {"time": f"{at}002000Z", "host": "d", "dc": None, "v": 4.0, "w": 7, "s": None, "flag": None},
        {"time": f"{at}003000Z", "host": "e", "dc": None, "v": 1.0, "w": None, "s": None, "flag": None},
        {"time": f"{at}004000Z", "host": "e", "dc": None, "v": 2.0, "w": None, "s": None, "flag": None},
        {"time": f"{at}004001Z", "host": "e", "dc": None, "v": 3.0, "w": None, "s": None, "flag": None},
    ]
    assert [row["v"] for row in before[1]] == [1.0, 1.0, 2.0, 3.0, 4.0]
    compact(client, jobs=2)
    assert (file_count(client, "dup"), file_count(client, "plain")) == (1, 1)
    assert (table(client, points), table(client, rows), table(client, counted)) == before


def test_points_a_nanosecond_apart_stay_distinct_before_and_after_compaction(client: Client) -> None:
    for part in range(5):  # 5,000 points of one series 1 ns apart, in five requests (five files)
        write(client, *(f"ns,host=a v={n}i {T + n}" for n in range(part * 1000, (part + 1) * 1000)))
    sql = (
        "SELECT count(*) AS n, count(DISTINCT time) AS times, sum(v) AS v, "
        "min(epoch_ns(time)) AS first, max(epoch_ns(time)) AS last FROM ns"
    )
    expected = [{"n": 5000, "times": 5000, "v": sum(range(5000)), "first": T, "last": T + 4999}]
    assert table(client, sql) == expected
    last = table(client, "SELECT time FROM ns ORDER BY time DESC LIMIT 1")
    assert last == [{"time": "2023-11-14T22:13:20.000004999Z"}]
    compact(client, jobs=1)
    assert file_count(client, "ns") == 1
    assert table(client, sql) == expected
