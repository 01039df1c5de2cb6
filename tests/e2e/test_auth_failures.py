"""Refused tokens over HTTP on the standalone server: every refusal costs alike, and an address
that keeps failing is answered 429 with Retry-After while other callers are served."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import TOKEN, ServerProcess, standalone

pytestmark = pytest.mark.e2e

VERIFY = "/api/v1/auth/verify"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = standalone(tmp_path / "data", ARCS_AUTH_FAILURES_PER_MINUTE="20", ARCS_TOKEN_CACHE_TTL_S="60").start()
    yield process
    process.stop()


def from_address(server: ServerProcess, address: str) -> httpx.Client:
    """A client whose requests come from ``address`` (any of 127.0.0.0/8 reaches the server)."""
    return httpx.Client(base_url=server.url, transport=httpx.HTTPTransport(local_address=address), timeout=30)


def new_token(admin: httpx.Client, **fields: object) -> dict[str, str]:
    response = admin.post("/api/v1/auth/tokens", json={"name": f"t{time.time_ns()}", **fields})
    assert response.status_code == 201, response.text
    created: dict[str, str] = response.json()
    return created


def first_refusal_ms(client: httpx.Client, secret: str) -> float:
    started = time.perf_counter()
    response = client.get(VERIFY, headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 401, response.text
    return (time.perf_counter() - started) * 1000


def test_revoked_and_expired_tokens_are_refused_as_fast_as_unknown_ones(server: ServerProcess) -> None:
    with from_address(server, "127.0.0.1") as admin, from_address(server, "127.0.0.4") as caller:
        admin.headers["Authorization"] = f"Bearer {TOKEN}"
        refusals_cost_alike(admin, caller)


def refusals_cost_alike(admin: httpx.Client, caller: httpx.Client) -> None:
    revoked = [new_token(admin)["token"] for _ in range(5)]
    for secret in revoked:
        token_id = admin.get(VERIFY, headers={"Authorization": f"Bearer {secret}"}).json()["token_id"]
        assert admin.post(f"/api/v1/auth/tokens/{token_id}/revoke").status_code == 200
    expired = [new_token(admin, expires_in="1s")["token"] for _ in range(5)]
    time.sleep(1.2)
    # Each secret once: a refusal is cached, so only a first attempt could cost a hash (~40+ ms).
    unknown_ms = statistics.median(first_refusal_ms(caller, f"unknown-{i}-" + "x" * 30) for i in range(5))
    revoked_ms = statistics.median(first_refusal_ms(caller, secret) for secret in revoked)
    expired_ms = statistics.median(first_refusal_ms(caller, secret) for secret in expired)
    assert revoked_ms < unknown_ms + 15 and expired_ms < unknown_ms + 15, (unknown_ms, revoked_ms, expired_ms)


def test_an_address_that_keeps_failing_gets_429_and_others_are_served(server: ServerProcess) -> None:
    with (
        from_address(server, "127.0.0.1") as admin,
        from_address(server, "127.0.0.2") as guesser,
        from_address(server, "127.0.0.3") as other,
    ):
        admin.headers["Authorization"] = f"Bearer {TOKEN}"
        failing_address_is_limited(new_token(admin)["token"], guesser, other)


def failing_address_is_limited(valid: str, guesser: httpx.Client, other: httpx.Client) -> None:
    assert guesser.get(VERIFY, headers={"Authorization": f"Bearer {valid}"}).status_code == 200
    statuses = [
        guesser.get(VERIFY, headers={"Authorization": f"Bearer guess-{i}-0123456789"}).status_code for i in range(25)
    ]
    # One failure comes back every 3 s: a slow machine may see a 401 among the 429s, never a 429 early.
    assert statuses[:20] == [401] * 20 and statuses.count(429) >= 3 and statuses[-1] == 429, statuses
    limited = guesser.post("/api/v1/write/line-protocol", content=b"m v=1", headers={"Authorization": "Bearer xxx"})
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1, limited.text
    assert "too many failed" in limited.json()["error"]
    # The valid token the address already used is still served; other addresses are not limited.
    assert guesser.get(VERIFY, headers={"Authorization": f"Bearer {valid}"}).status_code == 200
    assert other.get(VERIFY, headers={"Authorization": f"Bearer {valid}"}).status_code == 200
    assert other.get(VERIFY, headers={"Authorization": "Bearer guess-other-0123456789"}).status_code == 401


def test_a_forwarded_for_header_does_not_make_a_new_address(server: ServerProcess) -> None:
    # From 127.0.0.1, the one peer whose X-Forwarded-For uvicorn would believe by default.
    with from_address(server, "127.0.0.1") as guesser:
        statuses = [
            guesser.get(
                VERIFY,
                headers={"Authorization": f"Bearer guess-{i}-0123456789", "X-Forwarded-For": f"203.0.113.{i}"},
            ).status_code
            for i in range(25)
        ]
    assert statuses[:20] == [401] * 20 and statuses[-1] == 429, statuses
