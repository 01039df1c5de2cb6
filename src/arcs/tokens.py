"""API tokens: creation, verification with a short-lived cache, scopes and permissions.

A token is 32 random bytes, URL-safe base64. At rest there is only a short lookup prefix of its
SHA-256 (to find the record) and a salted scrypt hash (to check it); neither reveals the token.
Verified tokens are cached in memory, keyed by their SHA-256, for ``cache_ttl_s`` so the slow
hash runs once per token per TTL; revocation is therefore visible within that TTL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from arcs.errors import BadRequest, Forbidden, NotFound, Unauthorized
from arcs.ports import TokenRecord, TokenStore

PERMISSIONS = ("read", "write", "delete", "admin")
DEFAULT_PERMISSIONS = ("read", "write")
_LOOKUP_CHARS = 16
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
_EXPIRY = re.compile(r"(\d{1,6})([smhdw])")
_EXPIRY_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DATABASE_SCOPE = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]{0,63}\*?|\*")


@dataclass(frozen=True, slots=True)
class Principal:
    token_id: str
    name: str
    permissions: frozenset[str]
    databases: tuple[str, ...]  # empty: every database

    def require(self, permission: str) -> None:
        if permission not in self.permissions and "admin" not in self.permissions:
            raise Forbidden(f"token {self.name!r} lacks the {permission!r} permission")

    def may_use(self, database: str) -> bool:
        if not self.databases or "admin" in self.permissions:
            return True
        return any(
            database.startswith(scope[:-1]) if scope.endswith("*") else database == scope for scope in self.databases
        )

    def require_database(self, database: str) -> None:
        if not self.may_use(database):
            raise Forbidden(f"token {self.name!r} may not use database {database!r}")

    def to_context(self) -> dict[str, str]:
        """Flat string map, as an API Gateway authorizer passes context to the function."""
        return {
            "token_id": self.token_id,
            "token_name": self.name,
            "permissions": ",".join(sorted(self.permissions)),
            "databases": ",".join(self.databases),
        }

    @classmethod
    def from_context(cls, context: Mapping[str, object]) -> Principal:
        def items(key: str) -> tuple[str, ...]:
            return tuple(part for part in str(context.get(key) or "").split(",") if part)

        return cls(
            str(context["token_id"]),
            str(context.get("token_name", "")),
            frozenset(items("permissions")),
            items("databases"),
        )


def fast_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def slow_hash(token: str, salt: bytes) -> bytes:
    return hashlib.scrypt(token.encode("utf-8"), salt=salt, **_SCRYPT)


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def parse_expiry(value: object, now: datetime) -> datetime | None:
    if value is None or value == "":
        return None
    match = _EXPIRY.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise BadRequest(f"invalid expires_in {value!r}: use a number and a unit, like '24h' or '7d', or null")
    return now + timedelta(**{_EXPIRY_UNITS[match[2]]: int(match[1])})


def check_permissions(value: object) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_PERMISSIONS
    if not isinstance(value, list) or not value or not all(p in PERMISSIONS for p in value):
        raise BadRequest(f"permissions must be a non-empty list of {', '.join(PERMISSIONS)}")
    return tuple(dict.fromkeys(value))


def check_scopes(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(s, str) and _DATABASE_SCOPE.fullmatch(s) for s in value):
        raise BadRequest("databases must be a list of database names or 'prefix*' patterns")
    return () if "*" in value else tuple(dict.fromkeys(value))


class TokenService:
    def __init__(self, store: TokenStore, cache_ttl_s: float = 60.0) -> None:
        self.store = store
        self.cache_ttl_s = cache_ttl_s
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def create(
        self,
        name: str,
        description: str = "",
        permissions: tuple[str, ...] = DEFAULT_PERMISSIONS,
        databases: tuple[str, ...] = (),
        expires_at: datetime | None = None,
        secret: str | None = None,
    ) -> tuple[TokenRecord, str]:
        if not name or len(name) > 128:
            raise BadRequest("token name must be 1 to 128 characters")
        secret = secret or new_secret()
        salt = secrets.token_bytes(16)
        record = TokenRecord(
            token_id=uuid.uuid4().hex[:16],
            name=name,
            description=description,
            lookup=fast_hash(secret)[:_LOOKUP_CHARS],
            salt=salt,
            secret_hash=slow_hash(secret, salt),
            permissions=permissions,
            databases=databases,
            created_at=datetime.now(UTC),
            expires_at=expires_at,
        )
        self.store.put(record)
        return record, secret

    def bootstrap(self, configured: str | None) -> str | None:
        """On first start create the admin token (``configured`` when given); returns it, once."""
        if not self.store.is_empty():
            return None
        if configured is not None and len(configured) < 16:
            raise BadRequest("ARCS_BOOTSTRAP_TOKEN must be at least 16 characters")
        _record, secret = self.create("bootstrap", "admin token created on first start", ("admin",), secret=configured)
        return secret

    def verify(self, secret: str) -> Principal:
        digest = fast_hash(secret)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        principal = self._verify_slow(secret, digest)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now + self.cache_ttl_s, principal)
        return principal

    def _verify_slow(self, secret: str, digest: str) -> Principal:
        for record in self.store.find(digest[:_LOOKUP_CHARS]):
            if not hmac.compare_digest(slow_hash(secret, record.salt), record.secret_hash):
                continue
            if record.revoked:
                raise Unauthorized("token has been revoked")
            if record.expires_at is not None and record.expires_at <= datetime.now(UTC):
                raise Unauthorized("token has expired")
            return Principal(record.token_id, record.name, frozenset(record.permissions), record.databases)
        raise Unauthorized("invalid token")

    def get(self, token_id: str) -> TokenRecord:
        record = self.store.get(token_id)
        if record is None:
            raise NotFound(f"no token {token_id!r}")
        return record

    def revoke(self, token_id: str) -> TokenRecord:
        record = replace(self.get(token_id), revoked=True)
        self.store.put(record)
        return record


def extract_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The token from any of the places InfluxDB and Arc clients put it (API.md)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    authorization = lowered.get("authorization", "").strip()
    scheme, _, value = authorization.partition(" ")
    scheme = scheme.lower()
    value = value.strip()
    if scheme in ("bearer", "token") and value:
        return value
    if scheme == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise Unauthorized("malformed Basic authorization") from exc
        _user, sep, password = decoded.partition(":")
        if sep and password:
            return password
        raise Unauthorized("Basic authorization must carry the token as the password")
    if lowered.get("x-api-key"):
        return lowered["x-api-key"].strip()
    if query.get("p"):
        return query["p"]
    raise Unauthorized("missing token: send 'Authorization: Bearer <token>'")
