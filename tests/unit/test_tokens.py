from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from arcs.adapters.sqlite_catalog import SqliteDatabase, SqliteTokenStore
from arcs.errors import BadRequest, Forbidden, Unauthorized
from arcs.tokens import Principal, TokenService, check_permissions, check_scopes, extract_token, parse_expiry


@pytest.fixture
def service(tmp_path: Path) -> TokenService:
    return TokenService(SqliteTokenStore(SqliteDatabase(tmp_path / "t.sqlite")), cache_ttl_s=60)


def test_tokens_are_hashed_at_rest_and_verify(service: TokenService, tmp_path: Path) -> None:
    record, secret = service.create("ci", permissions=("read",))
    assert len(base64.urlsafe_b64decode(secret + "=")) == 32
    raw = (tmp_path / "t.sqlite").read_bytes()
    assert secret.encode() not in raw
    assert record.secret_hash != secret.encode()
    principal = service.verify(secret)
    assert principal.permissions == frozenset({"read"})
    with pytest.raises(Unauthorized):
        service.verify(secret + "x")


def test_a_short_bootstrap_token_is_refused(service: TokenService) -> None:
    with pytest.raises(BadRequest, match="16"):
        service.bootstrap("short")


def test_bootstrap_only_on_an_empty_store(service: TokenService) -> None:
    token = service.bootstrap("configured-token-0123456789")
    assert token == "configured-token-0123456789"
    assert "admin" in service.verify(token).permissions
    assert service.bootstrap(None) is None


def test_revocation_is_seen_after_the_cache_ttl(tmp_path: Path) -> None:
    service = TokenService(SqliteTokenStore(SqliteDatabase(tmp_path / "t.sqlite")), cache_ttl_s=0)
    record, secret = service.create("temp")
    service.verify(secret)
    service.revoke(record.token_id)
    with pytest.raises(Unauthorized, match="revoked"):
        service.verify(secret)


def test_expired_tokens_are_refused(service: TokenService) -> None:
    _record, secret = service.create("old", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(Unauthorized, match="expired"):
        service.verify(secret)


def test_scopes_and_permissions() -> None:
    scoped = Principal("id", "n", frozenset({"read"}), ("prod", "team-*"))
    assert scoped.may_use("prod") and scoped.may_use("team-a") and not scoped.may_use("production")
    with pytest.raises(Forbidden):
        scoped.require_database("other")
    with pytest.raises(Forbidden):
        scoped.require("write")
    admin = Principal("id", "n", frozenset({"admin"}), ())
    admin.require("delete")
    assert Principal.from_context(scoped.to_context()) == scoped


@pytest.mark.parametrize(
    ("headers", "query", "expected"),
    [
        ({"Authorization": "Bearer abc"}, {}, "abc"),
        ({"authorization": "Token abc"}, {}, "abc"),
        ({"Authorization": "Basic " + base64.b64encode(b"user:abc").decode()}, {}, "abc"),
        ({"X-Api-Key": "abc"}, {}, "abc"),
        ({}, {"p": "abc"}, "abc"),
    ],
)
def test_token_sources(headers: dict[str, str], query: dict[str, str], expected: str) -> None:
    assert extract_token(headers, query) == expected


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Basic !!!"}, {"Authorization": "Basic " + base64.b64encode(b"nopassword").decode()}],
)
def test_missing_or_malformed_tokens(headers: dict[str, str]) -> None:
    with pytest.raises(Unauthorized):
        extract_token(headers, {})


def test_parsers() -> None:
    now = datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_expiry("24h", now) == now + timedelta(hours=24)
    assert parse_expiry("7d", now) == now + timedelta(days=7)
    assert parse_expiry(None, now) is None
    for bad in ["1y", "-1h", 5]:
        with pytest.raises(BadRequest):
            parse_expiry(bad, now)
    assert check_permissions(None) == ("read", "write")
    with pytest.raises(BadRequest):
        check_permissions(["root"])
    assert check_scopes(["a", "b*"]) == ("a", "b*")
    with pytest.raises(BadRequest):
        check_scopes(["../x"])
