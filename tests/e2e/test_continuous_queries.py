"""Continuous queries over HTTP on both runtimes: the standalone server with its timer, and
``arcs local`` with the EventBridge schedule invoking the scheduled function."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.servers import Client, ServerProcess, runtime_fixture

pytestmark = pytest.mark.e2e

BASE = "/api/v1/continuous_queries"
DELAY_S = 5
BACKFILL_HOURS = 2
HOST_COUNT = 2
# 2024-01-01T00:00:00Z: history, long before any continuous query here is created.
H0_S = 1_704_067_200
QUERY = (
    "SELECT time_bucket(INTERVAL '10 minutes', time) AS time, host, count(*) AS n, avg(usage) AS usage, "
    "sum(procs) AS procs FROM {source} WHERE time >= {{start_time}} AND time < {{end_time}} GROUP BY ALL"
)


#: Schedules that run often, and a short grace for late rows, so a window closes within the test.
cq_server = runtime_fixture(
    standalone_env={"ARCS_CQ_TIMER_S": "0.5"},
    local_env={"ARCS_LOCAL_CQ_SCHEDULE_S": "1"},
    ARCS_CQ_DELAY_S=str(DELAY_S),
)


@pytest.fixture
def admin(cq_server: ServerProcess) -> Iterator[Client]:
    client = Client(cq_server.url)
    yield client
    client.http.close()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def write_points(client: Client, database: str, measurement: str, first_s: int, seconds: list[int]) -> None:
    """One point per host at each ``first_s + s``: usage = s, procs = 1."""
    lines = [f"{measurement},host=h{h} usage={s}.0,procs=1i {first_s + s}" for s in seconds for h in range(HOST_COUNT)]
    response = client.write(
        "/api/v1/write/line-protocol?precision=s",
        "\n".join(lines).encode(),
        headers={"x-arc-database": database},
    )
    assert response.status_code == 204, response.text


def definition(database: str, source: str, **changes: object) -> dict[str, Any]:
    return {
        "name": unique("cq"),
        "database": database,
        "source_measurement": source,
        "destination_measurement": f"{source}_10m",
        "query": QUERY.format(source=source),
        "interval": "1h",
        "tag_columns": ["host"],
        "retention_days": 90,
        **changes,
    }


def create(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    response = client.http.post(BASE, json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()["continuous_query"]
    return created


def direct_aggregates(client: Client, database: str, source: str) -> list[list[Any]]:
    """What the continuous query must have written, computed straight from the source."""
    sql = (
        # time_bucket gives microseconds; the destination stores nanoseconds (and shows nine digits).
        "SELECT time_bucket(INTERVAL '10 minutes', time)::TIMESTAMP_NS AS time, host, count(*) AS n, "
        "avg(usage) AS usage, "
        f"sum(procs) AS procs FROM {source} GROUP BY ALL ORDER BY 1, 2"
    )
    return client.rows(sql, database)


def written(client: Client, database: str, destination: str) -> list[list[Any]]:
    return client.rows(f"SELECT time, host, n, usage, procs FROM {destination} ORDER BY 1, 2", database)


def test_manual_execute_dry_run_backfill_and_the_crud_around_it(admin: Client, cq_server: ServerProcess) -> None:
    database, source = unique("cqdb"), "cpu"
    write_points(admin, database, source, H0_S, list(range(0, BACKFILL_HOURS * 3600, 60)))
    assert admin.wait_count(source, BACKFILL_HOURS * 60 * HOST_COUNT, database) == BACKFILL_HOURS * 60 * HOST_COUNT
    body = definition(database, source)
    created = create(admin, body)
    query_id = created["id"]
    assert {key: created[key] for key in body} == body
    assert created["is_active"] is True and created["last_execution_time"] is None
    assert admin.http.post(BASE, json=body).status_code == 409  # the name is taken in this database
    assert admin.http.get(f"{BASE}/{query_id}").json()["continuous_query"] == created
    listed = admin.http.get(BASE, params={"database": database}).json()
    assert [q["id"] for q in listed["continuous_queries"]] == [query_id]

    window = {"start_time": "2024-01-01T00:00:00Z", "end_time": "2024-01-01T02:00:00Z"}
    buckets = BACKFILL_HOURS * 6 * HOST_COUNT
    dry = admin.http.post(f"{BASE}/{query_id}/execute", json={**window, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert (dry.json()["row_count"], dry.json()["records_written"], dry.json()["write_id"]) == (buckets, 0, None)
    assert dry.json()["columns"] == ["time", "host", "n", "usage", "procs"]
    assert "TIMESTAMPTZ '2024-01-01T00:00:00Z'" in dry.json()["executed_query"]
    assert admin.query(f"SELECT count(*) FROM {source}_10m", database).status_code == 404  # nothing written

    done = admin.http.post(f"{BASE}/{query_id}/execute", json=window)
    assert done.status_code == 200, done.text
    assert done.json()["records_written"] == buckets
    assert admin.wait_count(f"{source}_10m", buckets, database) == buckets
    assert written(admin, database, f"{source}_10m") == direct_aggregates(admin, database, source)
    assert sorted(row[4] for row in dry.json()["data"]) == [10] * buckets  # the dry run showed these rows

    executions = admin.http.get(f"{BASE}/{query_id}/executions").json()["executions"]
    assert [(e["kind"], e["status"], e["records_written"]) for e in executions] == [("manual", "succeeded", buckets)]
    beyond = admin.http.post(
        f"{BASE}/{query_id}/execute", json={"start_time": "2024-01-01T00:00:00Z", "end_time": "2999-01-01T00:00:00Z"}
    )
    assert beyond.status_code == 400 and "schedule processes this query" in beyond.json()["error"]

    changed = admin.http.patch(f"{BASE}/{query_id}", json={"interval": "30m", "description": "half-hourly"})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["continuous_query"]["interval"], changed.json()["continuous_query"]["description"]) == (
        "30m",
        "half-hourly",
    )
    assert admin.http.delete(f"{BASE}/{query_id}").status_code == 200
    assert admin.http.get(f"{BASE}/{query_id}").status_code == 404
    assert admin.http.post(f"{BASE}/{query_id}/execute", json=window).status_code == 404


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"interval": "1w"}, "invalid interval"),
        ({"query": "SELECT * FROM cpu"}, "{start_time}"),
        ({"query": "SELECT * FROM cpu WHERE time >= {start_time} AND time < {end_time} AND"}, ""),
        ({"query": "SELECT * FROM other.cpu WHERE time >= {start_time} AND time < {end_time}"}, "own database"),
        ({"destination_measurement": "cpu"}, "must differ"),
        ({"tag_columns": [1]}, "tag_columns"),
    ],
)
def test_bad_definitions_are_400(admin: Client, changes: dict[str, Any], message: str) -> None:
    response = admin.http.post(BASE, json=definition(unique("cqdb"), "cpu", **changes))
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]


def test_bad_executes_are_400_and_unknown_ids_404(admin: Client) -> None:
    query_id = create(admin, definition(unique("cqdb"), "cpu"))["id"]
    hour = {"start_time": "2024-01-01T00:00:00Z", "end_time": "2024-01-01T01:00:00Z"}
    for body, message in [
        ({"end_time": "2024-01-01T00:00:00Z"}, "start_time"),
        ({"start_time": "2024-01-01T01:00:00Z", "end_time": "2024-01-01T00:00:00Z"}, "must be before"),
        ({"start_time": "x", "end_time": "2024-01-01T00:00:00Z"}, "RFC3339"),
        ({**hour, "dry_run": "yes"}, "dry_run"),
        ({**hour, "execution_id": "a/b"}, "execution_id"),
    ]:
        response = admin.http.post(f"{BASE}/{query_id}/execute", json=body)
        assert response.status_code == 400 and message in response.json()["error"], response.text
    for path in ("999999", "abc", "-1"):
        assert admin.http.get(f"{BASE}/{path}").status_code == 404
    assert admin.http.get(f"{BASE}/{query_id}/executions", params={"limit": "0"}).status_code == 400


def token(admin: Client, permissions: list[str], databases: list[str]) -> str:
    response = admin.http.post(
        "/api/v1/auth/tokens", json={"name": unique("t"), "permissions": permissions, "databases": databases}
    )
    assert response.status_code == 201, response.text
    secret: str = response.json()["token"]
    return secret


def test_scopes_and_permissions(admin: Client, cq_server: ServerProcess) -> None:
    mine, theirs = unique("cqmine"), unique("cqtheirs")
    own = create(admin, definition(mine, "cpu"))["id"]
    other = create(admin, definition(theirs, "cpu"))["id"]
    reader = Client(cq_server.url, token(admin, ["read"], [mine]))
    writer = Client(cq_server.url, token(admin, ["read", "write", "delete"], [mine]))
    try:
        listed = reader.http.get(BASE).json()["continuous_queries"]
        assert own in [q["id"] for q in listed] and other not in [q["id"] for q in listed]
        assert reader.http.get(f"{BASE}/{own}").status_code == 200
        assert reader.http.get(f"{BASE}/{own}/executions").status_code == 200
        assert reader.http.get(f"{BASE}/{other}").status_code == 404  # never learns it exists
        assert reader.http.get(f"{BASE}/{other}/executions").status_code == 404
        assert reader.http.get(BASE, params={"database": theirs}).status_code == 403
        window = {"start_time": "2024-01-01T00:00:00Z", "end_time": "2024-01-01T01:00:00Z", "dry_run": True}
        for client in (reader, writer):
            assert client.http.post(BASE, json=definition(mine, "cpu")).status_code == 403
            assert client.http.post(f"{BASE}/{own}/execute", json=window).status_code == 403
            assert client.http.patch(f"{BASE}/{own}", json={"is_active": False}).status_code == 403
            assert client.http.delete(f"{BASE}/{own}").status_code == 403
    finally:
        reader.http.close()
        writer.http.close()


def test_the_schedule_runs_closed_windows_exactly_once(admin: Client) -> None:
    """Two-second windows: rows written into a window just ahead land in the destination once it
    has closed and the grace has passed, counted exactly, through the runtime's own schedule."""
    database, source = unique("cqdb"), "sensor"
    created = create(admin, definition(database, source, interval="2s", query=QUERY.format(source=source)))
    query_id = created["id"]
    # A window a few seconds ahead: its rows are in before it closes, and it closes soon.
    window_s = (int(time.time()) // 2 + 3) * 2
    write_points(admin, database, source, window_s, [0, 1])
    assert admin.wait_count(source, 2 * HOST_COUNT, database) == 2 * HOST_COUNT
    assert time.time() < window_s + 2 + DELAY_S, "ingest took longer than the grace: the window may have run"
    destination = f"{source}_10m"
    assert admin.wait_count(destination, HOST_COUNT, database, timeout=30) == HOST_COUNT
    assert written(admin, database, destination) == direct_aggregates(admin, database, source)
    assert [row[2] for row in written(admin, database, destination)] == [2] * HOST_COUNT

    executions = admin.http.get(f"{BASE}/{query_id}/executions", params={"limit": "1000"}).json()["executions"]
    assert {e["kind"] for e in executions} == {"scheduled"}
    assert all(e["status"] == "succeeded" for e in executions)
    ran = [e for e in executions if e["records_written"]]
    assert len(ran) == 1 and ran[0]["end_time"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(window_s + 2))
    # Later windows keep running (empty) and never write the full one again.
    time.sleep(2.5)
    assert admin.rows(f"SELECT count(*) FROM {destination}", database) == [[HOST_COUNT]]
    assert admin.http.delete(f"{BASE}/{query_id}").status_code == 200
