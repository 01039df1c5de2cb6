"""A continuous query's ``retention_days`` and ``delete_source_after_days``, applied by each runtime's
own retention schedule: the standalone server's timer, and ``arcs local``'s emulated rule invoking
the tasks function. Exact row counts of source and destination after each step."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.e2e.servers import Client, ServerProcess, runtime_fixture

pytestmark = pytest.mark.e2e

BASE = "/api/v1/continuous_queries"
HOUR_S = 3600
DAY_S = 24 * HOUR_S
POINTS_PER_HOUR = 60  # one a minute
BUCKETS_PER_HOUR = 6  # the query's 10-minute buckets
QUERY = (
    "SELECT time_bucket(INTERVAL '10 minutes', time) AS time, count(*) AS n, avg(v) AS v "
    "FROM cpu WHERE time >= {start_time} AND time < {end_time} GROUP BY ALL"
)


#: Continuous queries and retention every second or so; a short grace for late rows.
server = runtime_fixture(
    standalone_env={"ARCS_CQ_TIMER_S": "0.5", "ARCS_RETENTION_INTERVAL_S": "1"},
    local_env={"ARCS_LOCAL_CQ_SCHEDULE_S": "1", "ARCS_LOCAL_RETENTION_SCHEDULE_S": "1"},
    ARCS_CQ_DELAY_S="1",
)


@pytest.fixture
def admin(server: ServerProcess) -> Iterator[Client]:
    client = Client(server.url)
    yield client
    client.http.close()


def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    document: dict[str, Any] = response.json()
    return document


def count(client: Client, database: str, measurement: str) -> int:
    return int(client.rows(f"SELECT count(*) FROM {measurement}", database)[0][0])


def eventually(condition: Callable[[], bool], timeout: float = 40) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def processed_time(client: Client, query_id: int) -> str:
    mark: str = ok(client.http.get(f"{BASE}/{query_id}"))["continuous_query"]["last_processed_time"]
    return mark


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def rfc3339(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def test_destination_retention_and_source_deletion_never_pass_what_active_queries_processed(admin: Client) -> None:
    database = f"cqret_{uuid.uuid4().hex[:8]}"
    now_s = int(time.time())
    # Three whole hour partitions: ten days old, three days old, and two hours old.
    hours = [(now_s - days_s) // HOUR_S * HOUR_S for days_s in (10 * DAY_S, 3 * DAY_S, 2 * HOUR_S)]
    lines = [f"cpu,host=a v={m}i {hour + m * 60}" for hour in hours for m in range(POINTS_PER_HOUR)]
    written = admin.write(
        "/api/v1/write/line-protocol?precision=s", "\n".join(lines).encode(), headers={"x-arc-database": database}
    )
    assert written.status_code == 204, written.text
    assert admin.wait_count("cpu", len(lines), database) == len(lines)

    common = {"database": database, "source_measurement": "cpu", "query": QUERY, "tag_columns": []}
    # Reads the same source, and its year-long window never closes here: it has processed nothing.
    holder = ok(
        admin.http.post(
            BASE, json={**common, "name": "holder", "destination_measurement": "cpu_year", "interval": "366d"}
        ),
        201,
    )["continuous_query"]
    rollup = ok(
        admin.http.post(
            BASE, json={**common, "name": "rollup", "destination_measurement": "cpu_10m", "interval": "2s"}
        ),
        201,
    )["continuous_query"]
    # Backfill the three hours by hand (they precede the schedule's mark), before any deletion is set.
    backfill = {"start_time": rfc3339(hours[0]), "end_time": rfc3339(hours[2] + HOUR_S)}
    done = ok(admin.http.post(f"{BASE}/{rollup['id']}/execute", json=backfill))
    assert done["records_written"] == 3 * BUCKETS_PER_HOUR
    assert admin.wait_count("cpu_10m", 3 * BUCKETS_PER_HOUR, database) == 3 * BUCKETS_PER_HOUR

    settings = {"retention_days": 1, "delete_source_after_days": 2}
    ok(admin.http.patch(f"{BASE}/{rollup['id']}", json=settings))
    # retention_days 1 + the 7-day buffer: the ten-day-old hour of the destination goes, the rest stays.
    assert eventually(lambda: count(admin, database, "cpu_10m") == 2 * BUCKETS_PER_HOUR)
    # The rollup's own schedule has run past its creation, so only the holder can keep the source.
    assert eventually(lambda: moment(processed_time(admin, rollup["id"])) > moment(rollup["created_at"]))
    time.sleep(2.5)  # more scheduled runs: the holder keeps the whole source
    assert count(admin, database, "cpu") == 3 * POINTS_PER_HOUR
    dry = ok(admin.http.post("/api/v1/retention/run", json={"dry_run": True, "database": database}))
    by_rule = {rule["rule"]: rule for rule in dry["rules"]}
    assert (dry["dry_run"], dry["policies"]) == (True, 0)
    assert set(by_rule) == {"retention_days", "delete_source_after_days"}
    held = by_rule["delete_source_after_days"]
    assert (held["measurement"], held["continuous_query_ids"], held["cutoff_time"], held["partitions_deleted"]) == (
        "cpu",
        [rollup["id"]],
        None,
        0,
    )
    assert held["limited_by"] == f"continuous query {holder['id']} has not processed a window yet"
    destination = by_rule["retention_days"]
    assert (destination["measurement"], destination["partitions_deleted"]) == ("cpu_10m", 0)

    # An inactive query holds nothing back: the source's hours older than two days go, the recent one stays.
    ok(admin.http.patch(f"{BASE}/{holder['id']}", json={"is_active": False}))
    assert eventually(lambda: count(admin, database, "cpu") == POINTS_PER_HOUR)
    time.sleep(2.5)
    assert count(admin, database, "cpu") == POINTS_PER_HOUR
    assert admin.rows("SELECT CAST(epoch(min(time)) AS BIGINT) FROM cpu", database) == [[hours[2]]]
    assert count(admin, database, "cpu_10m") == 2 * BUCKETS_PER_HOUR
    after = ok(admin.http.post("/api/v1/retention/run", json={"dry_run": True, "database": database}))
    source = next(rule for rule in after["rules"] if rule["rule"] == "delete_source_after_days")
    assert (source["limited_by"], source["partitions_deleted"]) == ("delete_source_after_days 2", 0)
    assert "confirm" in ok(admin.http.post("/api/v1/retention/run", json={}), 400)["error"]
