"""Concurrent callers over real HTTP never see or change each other's requests.

For a bounded time, on every runtime that serves requests at once: writers of every format and
precision (each with a write token scoped to its own database, large bodies, some gzip), readers
with read tokens scoped to one database, an admin creating, checking, rotating and revoking scoped
tokens, a read-only caller trying to reach what its token does not, and compaction triggered
again and again. Then, once compaction is done, every acknowledged row is found exactly once,
with its own values and time, in its own database and nowhere else, and every refusal was the
one expected.
"""

from __future__ import annotations

import gzip
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgpack
import pytest

from tests.e2e.servers import TOKEN, ServerProcess, runtime_fixture

pytestmark = pytest.mark.e2e

TOKENS = "/api/v1/auth/tokens"
BASE_US = 1_750_000_000_000_000  # 2025-06-15
#: A time value in each precision from microseconds (integers: ns times are beyond a float's 53 bits),
#: and the spacing of a writer's rows (µs), whole units of its precision.
TO_PRECISION: dict[str, Callable[[int], int]] = {
    "ns": lambda us: us * 1000,
    "us": lambda us: us,
    "ms": lambda us: us // 1000,
    "s": lambda us: us // 1_000_000,
}
STEP_US = {"ns": 1000, "us": 1000, "ms": 1000, "s": 1_000_000}


@dataclass
class Writer:
    name: str
    kind: str  # line-protocol, influx-v1, influx-v2, msgpack-columnar, msgpack-rows, json
    precision: str
    gzip: bool = False
    database: str = ""
    token: str = ""
    acknowledged: dict[int, int] = field(default_factory=dict)  # request number -> rows
    failures: list[str] = field(default_factory=list)

    def time_value(self, request: int, row: int) -> int:
        micros = BASE_US + (request * 10_000 + row) * STEP_US[self.precision]
        return TO_PRECISION[self.precision](micros)

    def rows(self, request: int, count: int) -> list[tuple[int, int, float]]:
        return [(row, self.time_value(request, row), request * 100_000 + row + 0.25) for row in range(count)]

    def columnar(self, request: int, rows: list[tuple[int, int, float]]) -> dict[str, object]:
        """Request ``request``'s rows in the columnar shape MessagePack and JSON share."""
        return {
            "m": "stress",
            "tags": ["w", "req"],
            "columns": {
                "time": [t for _row, t, _v in rows],
                "w": [self.name] * len(rows),
                "req": [str(request)] * len(rows),
                "seq": [row for row, _t, _v in rows],
                "v": [v for _row, _t, v in rows],
            },
        }

    def body(self, request: int, count: int) -> tuple[str, dict[str, str], dict[str, str], bytes]:
        """(path, query parameters, headers, body) of request number ``request``."""
        rows = self.rows(request, count)
        headers = {"x-arc-database": self.database}
        params = {"precision": self.precision}
        if self.kind in ("line-protocol", "influx-v1", "influx-v2"):
            lines = [f"stress,w={self.name},req={request} seq={row}i,v={value!r} {t}" for row, t, value in rows]
            payload = "\n".join(lines).encode()
            path = {"line-protocol": "/api/v1/write/line-protocol", "influx-v1": "/write", "influx-v2": "/api/v2/write"}
            if self.kind == "influx-v1":
                params["db"] = self.database
            elif self.kind == "influx-v2":
                params["bucket"] = self.database
                params["org"] = "any"
            route = path[self.kind]
        elif self.kind == "msgpack-columnar":
            payload, route = msgpack.packb(self.columnar(request, rows)), "/api/v1/write/msgpack"
        elif self.kind == "msgpack-rows":
            items = [
                {"m": "stress", "t": t, "tags": {"w": self.name, "req": str(request)}, "fields": {"seq": row, "v": v}}
                for row, t, v in rows
            ]
            payload, route = msgpack.packb(items), "/api/v1/write/msgpack"
        else:
            payload, route = json.dumps(self.columnar(request, rows)).encode(), "/api/v1/write/json"
        if self.gzip:
            payload = gzip.compress(payload, 1)
            headers["Content-Encoding"] = "gzip"
        return route, params, headers, payload


WRITERS = [
    Writer("lp_ns", "line-protocol", "ns"),
    Writer("v1_ms", "influx-v1", "ms", gzip=True),
    Writer("v2_s", "influx-v2", "s"),
    Writer("mp_us", "msgpack-columnar", "us"),
    Writer("mr_ms", "msgpack-rows", "ms", gzip=True),
    Writer("js_ns", "json", "ns"),
]


@dataclass
class Plan:
    seconds: float
    rows: tuple[int, int]  # rows per request, drawn between these
    readers: int


#: Threads switch every 20 µs instead of 5 ms, so requests interleave at many more points.
SWITCH_INTERVAL_S = 0.00002
PLANS = {"standalone": Plan(12.0, (3_000, 6_000), 2), "local": Plan(10.0, (1_500, 3_000), 2)}


#: Compaction may take any hour with two files or more, while the writers run and after.
stressed = runtime_fixture(
    switch_interval_s=SWITCH_INTERVAL_S, ARCS_COMPACTION_MIN_FILES="2", ARCS_COMPACTION_MIN_AGE_S="0"
)


@pytest.fixture(scope="module")
def runtime(stressed: ServerProcess) -> tuple[str, str]:
    return stressed.runtime, stressed.url


def _client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _create_token(admin: httpx.Client, permissions: list[str], databases: list[str]) -> tuple[str, str]:
    name = f"t{uuid.uuid4().hex[:10]}"
    response = admin.post(TOKENS, json={"name": name, "permissions": permissions, "databases": databases})
    assert response.status_code in (200, 201), response.text
    body = response.json()
    return body["token"], str(body["id"])


def _loop(until: float, failures: list[str], step: Callable[[int], None]) -> None:
    number = 0
    while time.monotonic() < until:
        try:
            step(number)
        except Exception as exc:  # a failure is reported, not raised, so the other callers go on
            failures.append(f"{type(exc).__name__}: {exc}")
        number += 1


def _writer(url: str, writer: Writer, others: list[str], plan: Plan, until: float) -> None:
    rng = random.Random(writer.name)
    with _client(url, writer.token) as http:

        def step(number: int) -> None:
            if number % 7 == 3:  # a database its token does not reach
                foreign = others[number % len(others)]
                route, params, headers, payload = writer.body(900_000 + number, 10)
                headers["x-arc-database"] = foreign
                params = {**params, "db": foreign, "bucket": foreign} if writer.kind.startswith("influx") else params
                response = http.post(route, params=params, headers=headers, content=payload)
                if response.status_code != 403:
                    writer.failures.append(f"write into {foreign}: {response.status_code} {response.text[:200]}")
                return
            count = rng.randint(*plan.rows)
            route, params, headers, payload = writer.body(number, count)
            response = http.post(route, params=params, headers=headers, content=payload)
            if response.status_code == 204:
                writer.acknowledged[number] = count
            else:
                writer.failures.append(f"request {number}: {response.status_code} {response.text[:300]}")

        _loop(until, writer.failures, step)


def _reader(url: str, token: str, database: str, own: str, until: float, failures: list[str]) -> None:
    with _client(url, token) as http:

        def step(number: int) -> None:
            response = http.post(
                "/api/v1/query", json={"sql": "SELECT DISTINCT w FROM stress"}, headers={"x-arc-database": database}
            )
            if response.status_code == 200:
                seen = {row[0] for row in response.json()["data"]}
                if seen - {own}:
                    failures.append(f"reader of {database} saw writers {sorted(seen)}")
            elif response.status_code not in (400, 404):  # before the first ingest: no such measurement
                failures.append(f"reader of {database}: {response.status_code} {response.text[:200]}")
            other = "stress_db_" + ("1" if database.endswith("0") else "0")
            refused = http.post("/api/v1/query", json={"sql": f"SELECT count(*) FROM {other}.stress"})
            if refused.status_code != 403:
                failures.append(f"reader of {database} read {other}: {refused.status_code} {refused.text[:200]}")
            time.sleep(0.05)

        _loop(until, failures, step)


def _token_admin(url: str, databases: list[str], until: float, failures: list[str]) -> None:
    rng = random.Random(7)
    with _client(url, TOKEN) as admin:

        def step(number: int) -> None:
            scope = rng.sample(databases, rng.randint(1, 2))
            permissions = rng.choice([["read"], ["write"], ["read", "write"]])
            secret, token_id = _create_token(admin, permissions, scope)
            record = admin.get(f"{TOKENS}/{token_id}").json()
            record = record.get("token", record)
            if sorted(record["databases"]) != sorted(scope) or sorted(record["permissions"]) != sorted(permissions):
                failures.append(f"token {token_id} asked {permissions} on {scope}, holds {record}")
            with _client(url, secret) as holder:
                verified = holder.get("/api/v1/auth/verify")
                if verified.status_code != 200:
                    failures.append(f"fresh token does not verify: {verified.status_code} {verified.text[:200]}")
            if number % 2:
                rotated = admin.post(f"{TOKENS}/{token_id}/rotate")
                if rotated.status_code != 200:
                    failures.append(f"rotate: {rotated.status_code} {rotated.text[:200]}")
            revoked = admin.post(f"{TOKENS}/{token_id}/revoke")
            if revoked.status_code != 200:
                failures.append(f"revoke: {revoked.status_code} {revoked.text[:200]}")

        _loop(until, failures, step)


def _intruder(url: str, token: str, until: float, failures: list[str]) -> None:
    """A read token scoped to one database, trying what it must not: manage tokens, write, read elsewhere."""
    with _client(url, token) as http:

        def step(number: int) -> None:
            attempts = [
                http.post(TOKENS, json={"name": f"x{number}", "permissions": ["admin"]}),
                http.get(TOKENS),
                http.post(
                    "/api/v1/write/line-protocol",
                    content=b"stress,w=intruder,req=0 seq=0i 1",
                    headers={"x-arc-database": "stress_db_0"},
                ),
                http.post("/api/v1/query", json={"sql": "SELECT count(*) FROM stress_db_1.stress"}),
            ]
            for response in attempts:
                if response.status_code != 403:
                    failures.append(f"intruder got {response.status_code} on {response.request.url.path}")

        _loop(until, failures, step)


def _compactor(url: str, until: float, failures: list[str]) -> None:
    with _client(url, TOKEN) as admin:

        def step(number: int) -> None:
            response = admin.post("/api/v1/compaction/trigger", json={})
            if response.status_code not in (202, 409):
                failures.append(f"compaction trigger: {response.status_code} {response.text[:200]}")
            time.sleep(1.5)

        _loop(until, failures, step)


def _compact_until_done(admin: httpx.Client, timeout_s: float) -> None:
    """Trigger compaction until nothing is left to compact (seen twice, a second apart)."""
    deadline = time.monotonic() + timeout_s
    candidates: dict[str, Any] = {}
    status: dict[str, Any] = {}
    quiet = 0
    while time.monotonic() < deadline:
        admin.post("/api/v1/compaction/trigger", json={})
        time.sleep(1.0)
        candidates = admin.get("/api/v1/compaction/candidates").json()
        status = admin.get("/api/v1/compaction/status").json()
        quiet = quiet + 1 if candidates["count"] == 0 and not status.get("running", False) else 0
        if quiet == 2:
            return
    raise AssertionError(f"compaction did not finish: {status}, {str(candidates)[:2000]}")


def _stored(admin: httpx.Client, writer: Writer) -> dict[int, tuple[str, int, int, int, int, int]]:
    """Per request found in the writer's database: (writer tag, rows, distinct seq, min, max, exact rows)."""
    step = STEP_US[writer.precision]
    sql = f"""
        SELECT req, any_value(w), count(*), count(DISTINCT seq), min(seq), max(seq),
               count(*) FILTER (
                   WHERE v = CAST(req AS BIGINT) * 100000 + seq + 0.25
                     AND epoch_us(time) = {BASE_US} + (CAST(req AS BIGINT) * 10000 + seq) * {step})
        FROM {writer.database}.stress GROUP BY req"""
    response = admin.post("/api/v1/query", json={"sql": sql})
    assert response.status_code == 200, response.text
    return {int(row[0]): tuple(row[1:]) for row in response.json()["data"]}


def _wait_for_rows(admin: httpx.Client, databases: list[str], expected: int, timeout_s: float) -> int:
    union = " UNION ALL ".join(f"SELECT count(*) AS n FROM {db}.stress" for db in databases)
    deadline = time.monotonic() + timeout_s
    total = -1
    while time.monotonic() < deadline:
        response = admin.post("/api/v1/query", json={"sql": f"SELECT sum(n) FROM ({union})"})
        if response.status_code == 200:
            total = int(response.json()["data"][0][0] or 0)
            if total >= expected:
                time.sleep(1.0)  # a wrongly repeated batch would show up now
                return int(
                    admin.post("/api/v1/query", json={"sql": f"SELECT sum(n) FROM ({union})"}).json()["data"][0][0]
                )
        time.sleep(0.25)
    return total


def test_concurrent_writers_readers_and_token_managers_never_mix(runtime: tuple[str, str]) -> None:
    kind, url = runtime
    plan = PLANS[kind]
    writers = [Writer(w.name, w.kind, w.precision, w.gzip) for w in WRITERS]
    databases = [f"stress_db_{i}" for i in range(len(writers))]
    failures: list[str] = []
    with _client(url, TOKEN) as admin:
        for writer, database in zip(writers, databases, strict=True):
            writer.database = database
            writer.token, _ = _create_token(admin, ["write"], [database])
        readers = [(_create_token(admin, ["read"], [databases[i]])[0], databases[i], writers[i].name) for i in (0, 1)]
        intruder, _ = _create_token(admin, ["read"], [databases[0]])

        until = time.monotonic() + plan.seconds
        threads = [
            threading.Thread(target=_writer, args=(url, w, [d for d in databases if d != w.database], plan, until))
            for w in writers
        ]
        threads += [threading.Thread(target=_reader, args=(url, *r, until, failures)) for r in readers[: plan.readers]]
        threads.append(threading.Thread(target=_token_admin, args=(url, databases, until, failures)))
        threads.append(threading.Thread(target=_intruder, args=(url, intruder, until, failures)))
        threads.append(threading.Thread(target=_compactor, args=(url, until, failures)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=plan.seconds + 120)
        assert not any(thread.is_alive() for thread in threads)

        failures += [f"{w.name}: {f}" for w in writers for f in w.failures]
        assert not failures, "\n".join(failures[:20])

        expected = sum(sum(w.acknowledged.values()) for w in writers)
        requests = sum(len(w.acknowledged) for w in writers)
        assert requests >= 3 * len(writers), "too little was written to prove anything"
        assert _wait_for_rows(admin, databases, expected, timeout_s=180) == expected
        _compact_until_done(admin, timeout_s=180)

        damaged: list[str] = []
        for writer in writers:
            stored = _stored(admin, writer)
            if set(stored) != set(writer.acknowledged):
                lost = sorted(set(writer.acknowledged) - set(stored))
                extra = sorted(set(stored) - set(writer.acknowledged))
                damaged.append(f"{writer.name}: requests lost {lost[:10]}, not acknowledged but stored {extra[:10]}")
            for number, rows in writer.acknowledged.items():
                found = stored.get(number)
                if found is not None and found != (writer.name, rows, rows, 0, rows - 1, rows):
                    damaged.append(f"{writer.name} request {number} ({rows} rows) stored as {found}")
        compacted = admin.get("/api/v1/compaction/stats").json()["files_compacted"]
        print(f"{kind}: {requests} requests, {expected} rows acknowledged, {compacted} files compacted")
        print(f"{kind}: damaged: {len(damaged)}")
        assert compacted > 0, "compaction never ran, so it was not put to the test"
        assert not damaged, "\n".join(damaged[:20])
