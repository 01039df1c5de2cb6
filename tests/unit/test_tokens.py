from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from arcs.adapters.local.sqlite_database import SqliteDatabase
from arcs.adapters.local.tokens import SqliteTokenStore
from arcs.auth.numeric_ids import numeric_id
from arcs.auth.tokens import (
    Principal,
    TokenFields,
    TokenService,
    check_permissions,
    check_scopes,
    extract_token,
    is_active_admin,
    parse_expiry,
)
from arcs.errors import BadRequest, Conflict, Forbidden, NotFound, Unauthorized


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


@pytest.mark.parametrize(
    "authorization", ["Negotiate xyz", "Bearer ", "Bearer", "Token  ", "", "\xa0", "\x85", "\x0b", "\u3000"]
)
def test_a_present_authorization_header_is_the_only_place_looked_at(authorization: str) -> None:
    # API Gateway caches the authorizer's answer on the Authorization header alone: a token taken
    # from x-api-key or ?p= beside an unusable header would be cached for that header's next sender.
    with pytest.raises(Unauthorized):
        extract_token({"Authorization": authorization, "x-api-key": "abc"}, {"p": "abc"})


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


# --- management: list, update, rotate, revoke, delete ----------------------------------------

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def admin(service: TokenService, name: str = "admin", expires_at: datetime | None = None) -> tuple[str, str]:
    record, secret = service.create(name, permissions=("admin",), expires_at=expires_at)
    return record.token_id, secret


def test_records_never_hold_the_secret(service: TokenService) -> None:
    record, secret = service.create("ci", "for CI", ("read",), ("prod",))
    stored = service.get(record.token_id)
    assert stored == record
    assert secret not in repr(stored)
    assert secret.encode() not in stored.secret_hash
    assert stored.lookup != secret[: len(stored.lookup)]
    assert [r.token_id for r in service.list()] == [record.token_id]


def test_update_changes_only_what_is_given(service: TokenService) -> None:
    record, secret = service.create("ci", "old", ("read",), ("prod",))
    now = datetime.now(UTC)
    updated = service.update(record.token_id, TokenFields.for_update({"description": "new"}, now))
    assert updated == replace(record, description="new")
    updated = service.update(
        record.token_id,
        TokenFields.for_update({"name": "ci2", "permissions": ["read", "write"], "databases": ["a", "b*"]}, now),
    )
    assert (updated.name, updated.permissions, updated.databases) == ("ci2", ("read", "write"), ("a", "b*"))
    assert updated.expires_at is None and updated.description == "new"
    updated = service.update(record.token_id, TokenFields.for_update({"expires_in": "1h"}, now))
    assert updated.expires_at == now + timedelta(hours=1)
    updated = service.update(record.token_id, TokenFields.for_update({"expires_in": None, "databases": ["*"]}, now))
    assert updated.expires_at is None and updated.databases == ()
    assert service.get(record.token_id) == updated
    # the secret is untouched by an update
    assert service.verify(secret).permissions == frozenset({"read", "write"})


def test_a_change_is_seen_at_once_in_this_process(service: TokenService) -> None:
    """The TTL is 60 s here: only dropping the cached entry can make these pass."""
    record, secret = service.create("ci", permissions=("read",), databases=("prod",))
    assert service.verify(secret).databases == ("prod",)
    service.update(record.token_id, TokenFields.for_update({"permissions": ["write"], "databases": ["dev"]}, NOW))
    assert service.verify(secret) == Principal(record.token_id, "ci", frozenset({"write"}), ("dev",))
    service.revoke(record.token_id)
    with pytest.raises(Unauthorized, match="revoked"):
        service.verify(secret)


def test_rotation_replaces_the_secret(service: TokenService) -> None:
    record, old = service.create("ci", permissions=("read",))
    service.verify(old)
    rotated, new = service.rotate(record.token_id)
    assert new != old
    assert rotated.token_id == record.token_id and rotated.permissions == record.permissions
    assert rotated.lookup != record.lookup and rotated.salt != record.salt
    with pytest.raises(Unauthorized):
        service.verify(old)
    assert service.verify(new).token_id == record.token_id
    assert service.store.find(record.lookup) == []


def test_a_revoked_token_cannot_be_rotated_back_to_life(service: TokenService) -> None:
    admin(service)
    record, _secret = service.create("ci")
    service.revoke(record.token_id)
    assert service.revoke(record.token_id).revoked  # idempotent
    with pytest.raises(Conflict, match="revoked"):
        service.rotate(record.token_id)


def test_deletion_is_seen_at_once(service: TokenService) -> None:
    record, secret = service.create("ci")
    service.verify(secret)
    service.delete(record.token_id)
    with pytest.raises(Unauthorized, match="invalid"):
        service.verify(secret)
    with pytest.raises(NotFound):
        service.get(record.token_id)


@pytest.mark.parametrize("action", ["update", "rotate", "revoke", "delete"])
def test_unknown_ids_are_not_found(service: TokenService, action: str) -> None:
    calls: dict[str, Callable[[], object]] = {
        "update": lambda: service.update("nope", TokenFields(name="x")),
        "rotate": lambda: service.rotate("nope"),
        "revoke": lambda: service.revoke("nope"),
        "delete": lambda: service.delete("nope"),
    }
    with pytest.raises(NotFound, match="nope"):
        calls[action]()


def test_a_verification_racing_a_change_does_not_cache_the_old_answer(service: TokenService) -> None:
    record, secret = service.create("ci")
    original = service._verify_slow

    def slow_then_revoked(secret: str, digest: str) -> tuple[Principal, datetime | None]:
        answer = original(secret, digest)
        service.revoke(record.token_id)  # lands while the old answer is on its way to the cache
        return answer

    service._verify_slow = slow_then_revoked  # type: ignore[method-assign]
    service.verify(secret)
    service._verify_slow = original  # type: ignore[method-assign]
    with pytest.raises(Unauthorized, match="revoked"):
        service.verify(secret)


def test_an_expiring_token_leaves_the_cache_when_it_expires(service: TokenService) -> None:
    _record, secret = service.create("short", expires_at=datetime.now(UTC) + timedelta(seconds=0.3))
    service.verify(secret)
    time.sleep(0.4)
    with pytest.raises(Unauthorized, match="expired"):
        service.verify(secret)


# --- the last admin token --------------------------------------------------------------------


def test_the_last_active_admin_token_cannot_be_removed(service: TokenService) -> None:
    only, _secret = admin(service)
    for refused in (
        lambda: service.revoke(only),
        lambda: service.delete(only),
        lambda: service.update(only, TokenFields.for_update({"permissions": ["read", "write"]}, NOW)),
        lambda: service.update(only, TokenFields.for_update({"expires_in": "1h"}, datetime.now(UTC))),
    ):
        with pytest.raises(Conflict, match="last"):
            refused()
    assert is_active_admin(service.get(only), datetime.now(UTC))
    # harmless changes to it still work, and so does rotation
    assert service.update(only, TokenFields.for_update({"name": "root"}, NOW)).name == "root"
    service.rotate(only)


def test_admin_tokens_may_go_while_another_remains(service: TokenService) -> None:
    first, _ = admin(service, "first")
    second, _ = admin(service, "second")
    service.revoke(first)
    with pytest.raises(Conflict):
        service.delete(second)
    service.delete(first)  # revoked ones are not counted and can always go
    third, _ = admin(service, "third")
    service.update(second, TokenFields.for_update({"permissions": ["read"]}, NOW))
    with pytest.raises(Conflict):
        service.revoke(third)


def test_revoked_or_expired_admins_do_not_count(service: TokenService) -> None:
    only, _ = admin(service)
    revoked, _ = admin(service, "revoked")
    service.revoke(revoked)
    admin(service, "expired", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(Conflict, match="last active admin"):
        service.delete(only)


def test_the_last_admin_that_never_expires_is_kept(service: TokenService) -> None:
    lasting, _ = admin(service)
    expiring, _ = admin(service, "expiring", expires_at=datetime.now(UTC) + timedelta(days=1))
    with pytest.raises(Conflict, match="never expires"):
        service.delete(lasting)
    with pytest.raises(Conflict, match="never expires"):
        service.update(lasting, TokenFields.for_update({"expires_in": "7d"}, datetime.now(UTC)))
    service.delete(expiring)  # the other one is not the last that never expires
    # Where only expiring admin tokens are left, they may still be replaced one by one.
    a, _ = admin(service, "a", expires_at=datetime.now(UTC) + timedelta(days=1))
    b, _ = admin(service, "b", expires_at=datetime.now(UTC) + timedelta(days=2))
    service.store.delete(lasting)  # as an installation made before this rule could be
    service.delete(a)
    with pytest.raises(Conflict, match="last active admin"):
        service.delete(b)


def test_non_admin_tokens_are_never_guarded(service: TokenService) -> None:
    record, _secret = service.create("ci")
    service.revoke(record.token_id)
    service.delete(record.token_id)


# --- request fields --------------------------------------------------------------------------


def test_create_fields_and_defaults(service: TokenService) -> None:
    fields = TokenFields.for_create({"name": "ci"}, NOW)
    record, secret = service.create_from(fields)
    assert (record.permissions, record.databases, record.expires_at, record.description) == (
        ("read", "write"),
        (),
        None,
        "",
    )
    fields = TokenFields.for_create(
        {"name": "x", "description": None, "permissions": None, "databases": ["db"], "expires_in": "7d"}, NOW
    )
    assert fields == TokenFields("x", "", ("read", "write"), ("db",), NOW + timedelta(days=7))
    assert service.verify(secret).name == "ci"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": None}, "name"),
        ({"name": "x" * 129}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"name": 5}, "name"),
        ({"name": "x", "description": 5}, "description"),
        ({"name": "x", "description": "d" * 1025}, "description"),
        ({"name": "x", "permissions": []}, "permissions"),
        ({"name": "x", "permissions": "read"}, "permissions"),
        ({"name": "x", "permissions": ["read", "root"]}, "permissions"),
        ({"name": "x", "permissions": [["admin"]]}, "permissions"),
        ({"name": "x", "databases": "prod"}, "databases"),
        ({"name": "x", "databases": ["../etc"]}, "databases"),
        ({"name": "x", "databases": ["a*b"]}, "databases"),
        ({"name": "x", "databases": [1]}, "databases"),
        ({"name": "x", "databases": ["d"] * 101}, "databases"),
        ({"name": "x", "expires_in": "1y"}, "expires_in"),
        ({"name": "x", "expires_in": "0h"}, "expires_in"),
        ({"name": "x", "expires_in": "999999w"}, "expires_in"),
        ({"name": "x", "expires_in": 3600}, "expires_in"),
        ({"name": "x", "permission": ["admin"]}, "permission"),
        ({"name": "x", "token": "my-own-secret"}, "token"),
    ],
)
def test_bad_create_fields_name_the_field(document: dict[str, object], field: str) -> None:
    with pytest.raises(BadRequest, match=field):
        TokenFields.for_create(document, NOW)


def test_update_fields() -> None:
    assert TokenFields.for_update({}, NOW) == TokenFields()
    assert TokenFields.for_update({"expires_in": None}, NOW).expires_at is None
    assert TokenFields.for_update({"databases": ["*"]}, NOW).databases == ()
    with pytest.raises(BadRequest, match="databases"):  # a null must not widen a scoped token
        TokenFields.for_update({"databases": None}, NOW)
    with pytest.raises(BadRequest, match="permissions"):
        TokenFields.for_update({"permissions": None}, NOW)
    with pytest.raises(BadRequest, match="name"):
        TokenFields.for_update({"name": None}, NOW)
    with pytest.raises(BadRequest, match="revoked"):
        TokenFields.for_update({"revoked": False}, NOW)


def test_an_admin_token_cannot_be_scoped(service: TokenService) -> None:
    # admin manages tokens, so it could mint an unscoped one: a scope on it would promise nothing
    with pytest.raises(BadRequest, match="admin token cannot be scoped"):
        service.create("scoped-admin", permissions=("admin",), databases=("prod",))
    scoped, _ = service.create("scoped-reader", permissions=("read",), databases=("prod",))
    with pytest.raises(BadRequest, match="admin token cannot be scoped"):
        service.update(scoped.token_id, TokenFields(permissions=("read", "admin")))
    admin, _ = service.create("admin", permissions=("admin",))
    with pytest.raises(BadRequest, match="admin token cannot be scoped"):
        service.update(admin.token_id, TokenFields(databases=("prod",)))
    assert service.get(scoped.token_id) == scoped and service.get(admin.token_id) == admin  # both unchanged
    widened = service.update(scoped.token_id, TokenFields(permissions=("admin",), databases=()))
    assert (widened.permissions, widened.databases) == (("admin",), ())


def _counting_hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import arcs.auth.tokens as tokens_module

    calls: list[int] = []
    real = tokens_module.slow_hash

    def counted(secret: str, salt: bytes) -> bytes:
        calls.append(1)
        return real(secret, salt)

    monkeypatch.setattr(tokens_module, "slow_hash", counted)
    return calls


def test_every_refusal_is_cheap_revoked_expired_or_unknown(
    service: TokenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No scrypt hash for a token that could not be used anyway: a revoked or expired token costs
    what an unknown one does, so neither time nor CPU tells which tokens existed."""
    revoked, revoked_secret = service.create("gone")
    service.revoke(revoked.token_id)
    _expired, expired_secret = service.create("old", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    _valid, valid_secret = service.create("valid")
    hashes = _counting_hashes(monkeypatch)
    for secret, says in [(revoked_secret, "revoked"), (expired_secret, "expired"), ("x" * 43, "invalid")]:
        with pytest.raises(Unauthorized, match=says):
            service.verify(secret)
    assert hashes == []
    service.verify(valid_secret)
    assert hashes == [1]  # only a usable token is hashed


def test_refusals_are_cached_and_a_change_drops_them(service: TokenService, monkeypatch: pytest.MonkeyPatch) -> None:
    record, secret = service.create("soon", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    with pytest.raises(Unauthorized, match="expired"):
        service.verify(secret)
    finds: list[str] = []
    real_find = service.store.find
    monkeypatch.setattr(service.store, "find", lambda lookup: finds.append(lookup) or real_find(lookup))
    for _ in range(3):
        with pytest.raises(Unauthorized, match="expired"):
            service.verify(secret)
    assert finds == []  # a repeated bad token costs no catalog read
    service.update(record.token_id, TokenFields(expires_at=None))  # extended: usable again at once
    assert service.verify(secret).token_id == record.token_id
    with pytest.raises(Unauthorized, match="invalid"):
        service.verify("chosen-secret-0123456789")
    service.create("chosen", secret="chosen-secret-0123456789")
    assert service.verify("chosen-secret-0123456789").name == "chosen"


def test_failed_attempts_are_limited_per_client_without_hurting_valid_callers(tmp_path: Path) -> None:
    from arcs.auth.failures import AuthFailures
    from arcs.errors import TooManyRequests

    now = [0.0]
    failures = AuthFailures(per_minute=6, clock=lambda: now[0])
    service = TokenService(SqliteTokenStore(SqliteDatabase(tmp_path / "t.sqlite")), 60, failures)
    _record, secret = service.create("valid")
    assert service.verify(secret, "10.0.0.1").name == "valid"
    for attempt in range(6):
        with pytest.raises(Unauthorized):
            service.verify(f"guess-{attempt}", "10.0.0.2")
    with pytest.raises(TooManyRequests) as limited:
        service.verify("guess-next", "10.0.0.2")
    assert limited.value.status == 429 and limited.value.retry_after_s == 10  # one failure back per 10 s
    assert service.verify(secret, "10.0.0.2").name == "valid"  # verified before: still served
    assert service.verify(secret, "10.0.0.3").name == "valid"  # other addresses are not limited
    with pytest.raises(Unauthorized):
        service.verify("guess-other", "10.0.0.3")
    now[0] += 10
    with pytest.raises(Unauthorized):  # one attempt again, after Retry-After
        service.verify("guess-later", "10.0.0.2")
    with pytest.raises(TooManyRequests):
        service.verify("guess-later-2", "10.0.0.2")


def test_a_wrong_secret_finding_a_usable_record_is_invalid(
    service: TokenService, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, _secret = service.create("live")
    monkeypatch.setattr(service.store, "find", lambda lookup: [record])  # as if the lookups collided
    with pytest.raises(Unauthorized, match="invalid token"):
        service.verify("another-secret-0123456789")


def test_a_token_is_named_by_its_id_or_its_integer_id(service: TokenService) -> None:
    record, _ = service.create("ci", permissions=("read",))
    number = numeric_id(record.token_id)
    assert 0 < number < 2**52 and numeric_id(record.token_id) == number  # stable: derived, not stored
    assert service.get(record.token_id) == service.get(str(number)) == record
    for unknown in (str(number + 1), "0", "1" * 17, "-1", "1e3"):
        with pytest.raises(NotFound):
            service.get(unknown)
    revoked = service.revoke(str(number))
    assert revoked.revoked and service.get(record.token_id).revoked
    service.delete(str(number))
    with pytest.raises(NotFound):
        service.get(record.token_id)


def test_a_new_token_never_shares_an_integer_id(service: TokenService, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _ = service.create("first")
    # The first ids drawn collide with the existing token's integer id: another one is drawn.
    drawn = iter([first.token_id, first.token_id, "0123456789abcdef"])
    monkeypatch.setattr("arcs.auth.tokens.uuid.uuid4", lambda: type("U", (), {"hex": next(drawn) * 2})())
    second, _ = service.create("second")
    assert second.token_id == "0123456789abcdef"
    assert numeric_id(second.token_id) != numeric_id(first.token_id)


def test_a_caller_locked_out_keeps_counting_as_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arcs import metrics
    from arcs.auth.failures import AuthFailures
    from arcs.errors import TooManyRequests

    refused: list[float] = []

    class Capture:
        def record(self, values: dict[metrics.Measure, float], labels: dict[str, str]) -> None:
            refused.extend(v for m, v in values.items() if m is metrics.AUTH_FAILURES)

    monkeypatch.setattr(metrics, "_recorder", Capture())
    service = TokenService(SqliteTokenStore(SqliteDatabase(tmp_path / "t.sqlite")), 60, AuthFailures(per_minute=3))
    for attempt in range(3):
        with pytest.raises(Unauthorized):
            service.verify(f"guess-{attempt}", "10.0.0.2")
    for attempt in range(5):  # the attack goes on, answered 429: an operator must still see it
        with pytest.raises(TooManyRequests):
            service.verify(f"guess-more-{attempt}", "10.0.0.2")
    assert sum(refused) == 8
