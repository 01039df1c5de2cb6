"""Retention and delete over HTTP, on the standalone server and on ``arcs local``: policies, dry
runs, executions, the confirmation rule, permissions and scopes, with exact row counts."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.servers import Client, local, standalone

pytestmark = pytest.mark.e2e

OLD_S = 1_700_000_000  # 2023-11-14T22:13:20Z: long expired under any policy here


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def write(client: Client, database: str, lines: list[str]) -> None:
    response = client.write(
        "/api/v1/write/line-protocol?precision=s", "\n".join(lines).encode(), headers={"x-arc-database": database}
    )
    assert response.status_code == 204, response.text


def fill(client: Client, database: str, measurement: str) -> tuple[int, int]:
    """Old rows over three hour partitions (host a and b) and recent ones; returns (old, recent) counts."""
    now_s = int(time.time())
    old = [f"{measurement},host={'ab'[i % 2]} v={i}i {OLD_S + i * 60}" for i in range(120)]  # 22:13 to 00:12
    recent = [f"{measurement},host=a v={i}i {now_s - 3600 + i}" for i in range(5)]
    write(client, database, old)
    write(client, database, recent)
    assert client.wait_count(measurement, len(old) + len(recent), database) == len(old) + len(recent)
    return len(old), len(recent)


def count(client: Client, database: str, measurement: str, where: str = "true") -> int:
    return int(client.rows(f"SELECT count(*) FROM {measurement} WHERE {where}", database)[0][0])


def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    document: dict[str, Any] = response.json()
    return document


def test_retention_policy_dry_run_execute_and_history(client: Client) -> None:
    database, measurement = unique("ret"), unique("cpu")
    old, recent = fill(client, database, measurement)
    body = {"name": "short", "database": database, "measurement": measurement, "retention_days": 1, "buffer_days": 0}
    policy = ok(client.http.post("/api/v1/retention", json=body), 201)["policy"]
    assert (policy["retention_days"], policy["buffer_days"], policy["is_active"]) == (1, 0, True)
    assert ok(client.http.post("/api/v1/retention", json=body), 409)["success"] is False
    listed = ok(client.http.get("/api/v1/retention", params={"database": database}))
    assert [p["id"] for p in listed["policies"]] == [policy["id"]]
    execute = f"/api/v1/retention/{policy['id']}/execute"
    assert "confirm" in ok(client.http.post(execute, json={}), 400)["error"]
    dry = ok(client.http.post(execute, json={"dry_run": True}))
    assert (dry["status"], dry["partitions_deleted"], dry["deleted_count"]) == ("dry_run", 3, old)
    assert count(client, database, measurement) == old + recent
    done = ok(client.http.post(execute, json={"confirm": True}))
    assert (done["status"], done["partitions_deleted"], done["deleted_count"]) == ("succeeded", 3, old)
    assert count(client, database, measurement) == recent  # nothing newer than the cutoff went
    history = ok(client.http.get(f"/api/v1/retention/{policy['id']}/executions"))["executions"]
    assert [(e["dry_run"], e["deleted_count"]) for e in history] == [(False, old), (True, old)]
    changed = ok(client.http.patch(f"/api/v1/retention/{policy['id']}", json={"is_active": False}))["policy"]
    assert (changed["is_active"], changed["retention_days"]) == (False, 1)
    assert ok(client.http.delete(f"/api/v1/retention/{policy['id']}"))["success"]
    assert client.http.get(f"/api/v1/retention/{policy['id']}").status_code == 404


def test_delete_dry_run_confirm_rule_and_exact_remaining_rows(client: Client) -> None:
    database, measurement = unique("del"), unique("cpu")
    old, recent = fill(client, database, measurement)
    b_rows = count(client, database, measurement, "host = 'b'")
    request = {"database": database, "measurement": measurement, "where": "host = 'b'"}
    dry = ok(client.http.post("/api/v1/delete", json={**request, "dry_run": True}))
    assert (dry["dry_run"], dry["deleted_count"], dry["affected_files"]) == (True, b_rows, 3)
    assert count(client, database, measurement) == old + recent
    done = ok(client.http.post("/api/v1/delete", json=request))
    assert (done["success"], done["deleted_count"], done["rewritten_files"], done["failed_files"]) == (
        True,
        b_rows,
        3,
        [],
    )
    assert count(client, database, measurement) == old + recent - b_rows
    assert count(client, database, measurement, "host = 'b'") == 0
    # Time bounds in the where: only the recent rows' hour, and only rows before now.
    bounded = {**request, "where": "time > now() - INTERVAL '1 day' AND v < 2"}
    assert ok(client.http.post("/api/v1/delete", json=bounded))["deleted_count"] == 2
    assert count(client, database, measurement) == old + recent - b_rows - 2
    # More than 10,000 rows need confirm; nothing changes without it.
    many = [f"{measurement},host=c v={i}i {OLD_S + 86_400 + i}" for i in range(10_001)]
    write(client, database, many)
    total = old + recent - b_rows - 2 + len(many)
    assert client.wait_count(measurement, total, database) == total
    big = {**request, "where": "host = 'c'"}
    refused = ok(client.http.post("/api/v1/delete", json=big), 400)
    assert "10001" in refused["error"] and "confirm" in refused["error"]
    assert count(client, database, measurement) == total
    assert ok(client.http.post("/api/v1/delete", json={**big, "confirm": True}))["deleted_count"] == len(many)
    assert count(client, database, measurement) == total - len(many)
    config = ok(client.http.get("/api/v1/delete/config"))
    assert config["confirmation_threshold"] == 10_000


def test_where_is_validated_and_permissions_and_scopes_hold(client: Client) -> None:
    database, other = unique("scope"), unique("other")
    write(client, database, [f"m,host=a v=1i {OLD_S}"])
    write(client, other, [f"m,host=a v=1i {OLD_S}"])
    assert client.wait_count("m", 1, database) == 1 and client.wait_count("m", 1, other) == 1
    base = {"database": database, "measurement": "m"}
    for where in ["", "1=1; DROP TABLE m", "v IN (SELECT 1)", "read_csv('/etc/passwd') IS NULL"]:
        assert client.http.post("/api/v1/delete", json={**base, "where": where}).status_code == 400, where
    policy = ok(
        client.http.post("/api/v1/retention", json={**base, "name": "o", "database": other, "retention_days": 9}), 201
    )
    scoped = ok(
        client.http.post(
            "/api/v1/auth/tokens",
            json={"name": unique("t"), "permissions": ["read", "write", "delete"], "databases": [database]},
        ),
        201,
    )
    reader = Client(client.url, scoped["token"])
    try:
        assert reader.http.post("/api/v1/delete", json={**base, "where": "true"}).status_code == 403  # not admin
        assert reader.http.get(f"/api/v1/retention/{policy['policy']['id']}").status_code == 404  # another database
        assert [p["database"] for p in reader.http.get("/api/v1/retention").json()["policies"]] == []
        create = {"name": "x", "database": database, "retention_days": 1}
        assert reader.http.post("/api/v1/retention", json=create).status_code == 403
    finally:
        reader.http.close()
    assert count(client, database, "m") == 1


def test_the_run_route_runs_the_named_database_or_every_one(client: Client) -> None:
    mine, other = unique("mine"), unique("other")
    for database in (mine, other):
        write(client, database, [f"m,host=a v={i}i {OLD_S + i}" for i in range(3)])
        assert client.wait_count("m", 3, database) == 3
        body = {"name": "p", "database": database, "retention_days": 1, "buffer_days": 0}
        ok(client.http.post("/api/v1/retention", json=body), 201)
    run = "/api/v1/retention/run"
    assert client.http.post(run, json={"database": mine}).status_code == 400  # neither dry_run nor confirm
    for database in ("", "a/b", 7, "_arcs"):
        assert client.http.post(run, json={"dry_run": True, "database": database}).status_code == 400, database
    dry = ok(client.http.post(run, json={"dry_run": True, "database": mine}))
    assert (dry["policies"], dry["rows_deleted"]) == (1, 3)  # the named database's policy only
    assert count(client, mine, "m") == 3  # a dry run changes nothing
    done = ok(client.http.post(run, json={"confirm": True, "database": mine}))
    assert (done["policies"], done["rows_deleted"]) == (1, 3)
    assert count(client, mine, "m") == 0
    assert count(client, other, "m") == 3  # another database's policy: not run


@pytest.mark.parametrize("runtime", ["standalone", "local"])
def test_the_schedule_applies_active_policies(runtime: str, tmp_path: Path) -> None:
    """The standalone server's timer, and ``arcs local``'s emulated rule invoking the tasks function."""
    if runtime == "local":
        process = local(ARCS_LOCAL_RETENTION_SCHEDULE_S="1", ARCS_LOCAL_CQ_SCHEDULE_S="0").start()
    else:
        process = standalone(tmp_path / "data", ARCS_RETENTION_INTERVAL_S="0.5", ARCS_CQ_TIMER_S="0").start()
    client = Client(process.url)
    try:
        database, measurement = unique("sched"), unique("cpu")
        old, recent = fill(client, database, measurement)
        body = {"name": "p", "database": database, "retention_days": 1, "buffer_days": 0, "is_active": False}
        inactive = ok(client.http.post("/api/v1/retention", json=body), 201)["policy"]
        time.sleep(2.5)  # a few scheduled runs: an inactive policy is not applied
        assert count(client, database, measurement) == old + recent
        ok(client.http.put(f"/api/v1/retention/{inactive['id']}", json={"is_active": True}))
        deadline = time.monotonic() + 30
        while count(client, database, measurement) != recent and time.monotonic() < deadline:
            time.sleep(0.2)
        assert count(client, database, measurement) == recent
        history = ok(client.http.get(f"/api/v1/retention/{inactive['id']}/executions"))["executions"]
        assert history[-1]["kind"] == "scheduled" and history[-1]["deleted_count"] == old
    finally:
        client.http.close()
        process.stop()
