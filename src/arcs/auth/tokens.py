"""API tokens: creation, verification with a short-lived cache, scopes and permissions.

A token is 32 random bytes, URL-safe base64. At rest there is only a short lookup prefix of its
SHA-256 (to find the record) and a salted scrypt hash (to check it); neither reveals the token.
Verified tokens are cached in memory, keyed by their SHA-256, for ``cache_ttl_s`` so the slow
hash runs once per token per TTL; refusals are cached alike, and the hash runs only for a record
that could still be used, so every refusal costs the same catalog read and no hash. A change made
through this service (update, rotate, revoke, delete) drops that token from this process's cache
at once; other processes (the authorizer's containers, other workers) see it when their entry
expires, within ``ARCS_TOKEN_CACHE_TTL_S``.

What each route family needs (``Principal.require``; ``admin`` implies every permission and
every database, so an admin token cannot carry database scopes: it could mint an unscoped token
anyway, and a scope it ignores would be a false promise):

| route family                                                 | needs     | database scope checked             |
|--------------------------------------------------------------|-----------|------------------------------------|
| `GET /health`, `GET /ready`                                  | nothing   | -                                  |
| `GET /api/v1/auth/verify`                                    | any token | -                                  |
| writes: `/api/v1/write/*`, `/write`, `/api/v2/write`         | write     | the target database                |
| queries: `/api/v1/query*` (also `SHOW`), estimates           | read      | every database the SQL reads       |
| listings: `/api/v1/measurements`, `GET /api/v1/databases*`   | read      | the one named; lists only in-scope |
| retention policies: list, get, executions                    | read      | the policy's; lists only in-scope  |
| deleting data: `/api/v1/delete`, retention changes and runs  | admin     | -                                  |
| continuous queries: list, get, executions                    | read      | the query's; lists only in-scope   |
| continuous queries: create, change, delete, execute          | admin     | -                                  |
| `/api/v1/auth/tokens*`, `POST`/`DELETE /api/v1/databases`    | admin     | -                                  |

``delete`` is accepted, as Arc's tokens have it, but no route asks for less than ``admin`` to
remove data (delete, retention), as in Arc's API, so it grants nothing beyond ``read`` here.
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
from enum import Enum

from arcs import metrics
from arcs.auth.failures import AuthFailures
from arcs.auth.numeric_ids import numeric_id
from arcs.errors import BadRequest, Conflict, Forbidden, NotFound, TooManyRequests, Unauthorized
from arcs.ports import TokenRecord, TokenStore

PERMISSIONS = ("read", "write", "delete", "admin")
DEFAULT_PERMISSIONS = ("read", "write")
MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 1024
MAX_SCOPES = 100
# Far enough for any real use, near enough that every store and client can spell the date.
MAX_EXPIRY = timedelta(days=100 * 366)
_LOOKUP_CHARS = 16
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
_EXPIRY = re.compile(r"(\d{1,6})([smhdw])")
_EXPIRY_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DATABASE_SCOPE = re.compile(r"[a-zA-Z][a-zA-Z0-9_-]{0,63}\*?|\*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FIELDS = ("name", "description", "permissions", "databases", "expires_in")


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
    delta = timedelta(**{_EXPIRY_UNITS[match[2]]: int(match[1])})
    if not timedelta(0) < delta <= MAX_EXPIRY:
        raise BadRequest(f"invalid expires_in {value!r}: must be more than 0 and at most 100 years (null: never)")
    return now + delta


def check_permissions(value: object) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_PERMISSIONS
    if not isinstance(value, list) or not value:
        raise BadRequest(f"permissions must be a non-empty list of {', '.join(PERMISSIONS)}")
    for permission in value:
        if permission not in PERMISSIONS:
            raise BadRequest(f"permissions: {_show(permission)} is not one of {', '.join(PERMISSIONS)}")
    return tuple(dict.fromkeys(value))


def check_scopes(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_SCOPES:
        raise BadRequest(f"databases must be a list of at most {MAX_SCOPES} database names or 'prefix*' patterns")
    if not value:
        # Unscoped is stored as no scopes, so an empty list would grant every database.
        raise BadRequest("databases must name at least one database or pattern; ['*'] (or no field) is every database")
    for scope in value:
        if not isinstance(scope, str) or not _DATABASE_SCOPE.fullmatch(scope):
            raise BadRequest(f"databases: {_show(scope)} is not a database name, a 'prefix*' pattern or '*'")
    return () if "*" in value else tuple(dict.fromkeys(value))


def check_admin_unscoped(permissions: tuple[str, ...], databases: tuple[str, ...]) -> None:
    if "admin" in permissions and databases:
        raise BadRequest(
            "an admin token cannot be scoped to databases (it manages tokens, so it reaches every database):"
            " give a scoped token read and write instead"
        )


def check_name(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME_CHARS or _CONTROL.search(value):
        raise BadRequest(f"name must be a string of 1 to {MAX_NAME_CHARS} characters without control characters")
    return value


def check_description(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION_CHARS:
        raise BadRequest(f"description must be a string of at most {MAX_DESCRIPTION_CHARS} characters")
    return value


def _show(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class Keep(Enum):
    """Marks a field an update leaves as it is (``None`` is a value: "never expires")."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True, slots=True)
class TokenFields:
    """What a create or update request body says about a token, validated; ``None``/``KEEP``: not given."""

    name: str | None = None
    description: str | None = None
    permissions: tuple[str, ...] | None = None
    databases: tuple[str, ...] | None = None
    expires_at: datetime | Keep | None = KEEP

    @classmethod
    def for_create(cls, document: Mapping[str, object], now: datetime) -> TokenFields:
        if "name" not in document:
            raise BadRequest("name is required")
        return cls._parse(document, now)

    @classmethod
    def for_update(cls, document: Mapping[str, object], now: datetime) -> TokenFields:
        if document.get("permissions", ()) is None:
            # A null is not "the default" here: it would change a token's permissions unasked.
            raise BadRequest(f"permissions must be a non-empty list of {', '.join(PERMISSIONS)}")
        if document.get("databases", ()) is None:
            # Nor here: a null would widen a scoped token to every database. '["*"]' says so.
            raise BadRequest("databases must name at least one database or pattern; ['*'] is every database")
        return cls._parse(document, now)

    @classmethod
    def _parse(cls, document: Mapping[str, object], now: datetime) -> TokenFields:
        """Validates every field present; a field that is not ours is refused rather than ignored,
        so a misspelt ``permission`` cannot silently create a token with the default permissions."""
        for key in document:
            if key not in _FIELDS:
                raise BadRequest(f"unknown field {_show(key)}: a token has {', '.join(_FIELDS)}")
        return cls(
            name=check_name(document["name"]) if "name" in document else None,
            description=check_description(document["description"]) if "description" in document else None,
            permissions=check_permissions(document["permissions"]) if "permissions" in document else None,
            databases=check_scopes(document["databases"]) if "databases" in document else None,
            expires_at=parse_expiry(document["expires_in"], now) if "expires_in" in document else KEEP,
        )


def is_active_admin(record: TokenRecord, now: datetime) -> bool:
    return (
        "admin" in record.permissions and not record.revoked and (record.expires_at is None or record.expires_at > now)
    )


class TokenService:
    def __init__(self, store: TokenStore, cache_ttl_s: float = 60.0, failures: AuthFailures | None = None) -> None:
        self.store = store
        self.cache_ttl_s = cache_ttl_s
        self.failures = failures or AuthFailures(0)
        self._cache: dict[str, tuple[float, Principal]] = {}
        # Refusals by the secret's SHA-256, as long as verdicts are cached: (until, token id if a
        # record matched, the refusal). A repeated bad token costs no catalog read.
        self._refused: dict[str, tuple[float, str | None, str]] = {}
        self._lock = threading.Lock()
        # Bumped on every change, so a verification that read a record before the change
        # does not put the stale answer back into the cache after the change dropped it.
        self._generation = 0
        # One change at a time in this process, so two revocations cannot both pass the
        # last-admin check. (Across processes that check is best effort.)
        self._changes = threading.Lock()

    # --- creation and verification ------------------------------------------------------------
    def create(
        self,
        name: str,
        description: str = "",
        permissions: tuple[str, ...] = DEFAULT_PERMISSIONS,
        databases: tuple[str, ...] = (),
        expires_at: datetime | None = None,
        secret: str | None = None,
    ) -> tuple[TokenRecord, str]:
        check_name(name)
        check_description(description)
        check_admin_unscoped(permissions, databases)
        secret = secret or new_secret()
        record = _with_secret(
            TokenRecord(
                token_id=self._new_token_id(),
                name=name,
                description=description,
                lookup="",
                salt=b"",
                secret_hash=b"",
                permissions=permissions,
                databases=databases,
                created_at=datetime.now(UTC),
                expires_at=expires_at,
            ),
            secret,
        )
        self.store.put(record)
        self._forget(digest=fast_hash(secret))  # a secret refused before (a chosen one) works now
        return record, secret

    def create_from(self, fields: TokenFields) -> tuple[TokenRecord, str]:
        """A token from a request's fields; absent ones take their defaults (as in Arc)."""
        if fields.name is None:
            raise BadRequest("name is required")
        return self.create(
            fields.name,
            fields.description or "",
            fields.permissions or DEFAULT_PERMISSIONS,
            fields.databases or (),
            None if fields.expires_at is KEEP else fields.expires_at,
        )

    def bootstrap(self, configured: str | None) -> str | None:
        """On first start create the admin token (``configured`` when given); returns it, once."""
        if not self.store.is_empty():
            return None
        if configured is not None and len(configured) < 16:
            raise BadRequest("ARCS_BOOTSTRAP_TOKEN must be at least 16 characters")
        _record, secret = self.create("bootstrap", "admin token created on first start", ("admin",), secret=configured)
        return secret

    def verify(self, secret: str, client: str | None = None) -> Principal:
        """The token's principal; Unauthorized otherwise, and TooManyRequests while ``client`` (the
        caller's address, where known) has failed too often (``AuthFailures``).

        Every refusal costs alike and little: the scrypt hash runs only for a record that could
        still be used (neither revoked nor expired), so a revoked, expired or unknown token is told
        apart neither by time nor by the CPU it burns, and refusals are cached like verdicts.
        """
        digest = fast_hash(secret)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
            refused = self._refused.get(digest)
            generation = self._generation
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            self.failures.check(client)
        except TooManyRequests:
            # Counted too: a caller locked out for failing keeps trying, which is what to see.
            metrics.record({metrics.AUTH_FAILURES: 1})
            raise
        if refused is not None and refused[0] > now:
            self.failures.failed(client)
            metrics.record({metrics.AUTH_FAILURES: 1})
            raise Unauthorized(refused[2])
        try:
            principal, expires_at = self._verify_slow(secret, digest)
        except _Refusal as exc:
            self.failures.failed(client)
            metrics.record({metrics.AUTH_FAILURES: 1})
            with self._lock:
                if generation == self._generation:
                    if len(self._refused) > 10_000:
                        self._refused.clear()
                    self._refused[digest] = (now + self.cache_ttl_s, exc.token_id, exc.message)
            raise
        until = now + self.cache_ttl_s
        if expires_at is not None:
            # An expiring token leaves the cache when it expires, not up to a TTL later.
            until = min(until, now + (expires_at - datetime.now(UTC)).total_seconds())
        with self._lock:
            if generation == self._generation:
                if len(self._cache) > 10_000:
                    self._cache.clear()
                self._cache[digest] = (until, principal)
        return principal

    def _verify_slow(self, secret: str, digest: str) -> tuple[Principal, datetime | None]:
        now = datetime.now(UTC)
        dead: list[TokenRecord] = []
        for record in self.store.find(digest[:_LOOKUP_CHARS]):
            if record.revoked or (record.expires_at is not None and record.expires_at <= now):
                dead.append(record)  # unusable whatever the secret: not worth a hash
            elif hmac.compare_digest(slow_hash(secret, record.salt), record.secret_hash):
                principal = Principal(record.token_id, record.name, frozenset(record.permissions), record.databases)
                return principal, record.expires_at
        if not dead:
            raise _Refusal("invalid token")
        # The lookup is 64 bits of the secret's SHA-256: a record it finds is this token's.
        revoked = next((record for record in dead if record.revoked), None)
        if revoked is not None:
            raise _Refusal("token has been revoked", revoked.token_id)
        raise _Refusal("token has expired", dead[0].token_id)

    def _forget(self, token_id: str | None = None, digest: str | None = None) -> None:
        """Drop every cached verdict on ``token_id`` (the cache is keyed by secret, not id), and the
        refusal of the secret whose SHA-256 is ``digest``."""
        with self._lock:
            self._generation += 1
            for cached in [d for d, (_until, p) in self._cache.items() if p.token_id == token_id]:
                del self._cache[cached]
            for refused in [
                d for d, (_until, i, _m) in self._refused.items() if d == digest or (i is not None and i == token_id)
            ]:
                del self._refused[refused]

    def _new_token_id(self) -> str:
        """A fresh id whose integer id (``numeric_id``) no other token has: it names the token too."""
        taken = {numeric_id(record.token_id) for record in self.store.list()}
        while True:
            token_id = uuid.uuid4().hex[:16]
            if numeric_id(token_id) not in taken:
                return token_id

    # --- management ---------------------------------------------------------------------------
    def get(self, token_id: str) -> TokenRecord:
        """The token named by its id (16 hex digits) or by its integer id (Arc's, in its clients)."""
        record = self.store.get(token_id)
        if record is None and token_id.isdigit() and len(token_id) <= 16:
            number = int(token_id)
            record = next((r for r in self.store.list() if numeric_id(r.token_id) == number), None)
        if record is None:
            raise NotFound(f"no token {token_id[:40]!r}")
        return record

    def list(self) -> list[TokenRecord]:
        return self.store.list()

    def update(self, token_id: str, fields: TokenFields) -> TokenRecord:
        with self._changes:
            before = self.get(token_id)
            after = replace(
                before,
                name=before.name if fields.name is None else fields.name,
                description=before.description if fields.description is None else fields.description,
                permissions=before.permissions if fields.permissions is None else fields.permissions,
                databases=before.databases if fields.databases is None else fields.databases,
                expires_at=before.expires_at if fields.expires_at is KEEP else fields.expires_at,
            )
            if after == before:
                return before
            check_admin_unscoped(after.permissions, after.databases)
            self._keep_an_admin(before, after, "change")
            self.store.put(after)
            self._forget(before.token_id)
            return after

    def rotate(self, token_id: str) -> tuple[TokenRecord, str]:
        """A new secret for the same token (id, name, permissions); the old secret stops working."""
        with self._changes:
            before = self.get(token_id)
            if before.revoked:
                raise Conflict(
                    f"token {before.token_id!r} is revoked; a revoked token cannot be rotated, create a new one"
                )
            secret = new_secret()
            after = _with_secret(before, secret)
            self.store.put(after, previous_lookup=before.lookup)
            self._forget(before.token_id)
            return after, secret

    def revoke(self, token_id: str) -> TokenRecord:
        with self._changes:
            before = self.get(token_id)
            if before.revoked:
                return before
            after = replace(before, revoked=True)
            self._keep_an_admin(before, after, "revoke")
            self.store.put(after)
            self._forget(before.token_id)
            return after

    def delete(self, token_id: str) -> None:
        with self._changes:
            before = self.get(token_id)
            self._keep_an_admin(before, None, "delete")
            if not self.store.delete(before.token_id):
                raise NotFound(f"no token {token_id[:40]!r}")
            self._forget(before.token_id)

    def _keep_an_admin(self, before: TokenRecord, after: TokenRecord | None, action: str) -> None:
        """Refuse (409) a change that would leave no usable admin token: nobody could manage tokens then.

        Two bars: some admin token stays active now; and if one never expired before the change,
        one still never expires (else the installation would lock itself out later, unnoticed).
        """
        now = datetime.now(UTC)
        if not is_active_admin(before, now):
            return  # only a change to an active admin token can remove the last one

        def lasting(record: TokenRecord) -> bool:
            return is_active_admin(record, now) and record.expires_at is None

        remaining = [r for r in self.store.list() if r.token_id != before.token_id]
        remaining += [after] if after is not None else []
        if not any(is_active_admin(r, now) for r in remaining):
            raise Conflict(
                f"refusing to {action} token {before.token_id!r}: it is the last active admin token "
                "and nobody could manage tokens without one; create another admin token first"
            )
        if lasting(before) and not any(lasting(r) for r in remaining):
            raise Conflict(
                f"refusing to {action} token {before.token_id!r}: it is the last admin token that never "
                "expires, and the installation would lock itself out when the others expire; "
                "create another admin token without expiry first"
            )


class _Refusal(Unauthorized):
    """A token refused, and the record it matched (None: none did)."""

    def __init__(self, message: str, token_id: str | None = None) -> None:
        super().__init__(message)
        self.token_id = token_id


def _with_secret(record: TokenRecord, secret: str) -> TokenRecord:
    salt = secrets.token_bytes(16)
    return replace(record, lookup=fast_hash(secret)[:_LOOKUP_CHARS], salt=salt, secret_hash=slow_hash(secret, salt))


_HTTP_WHITESPACE = " \t"


def extract_token(headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The token where InfluxDB and Arc clients put it: ``Authorization``, ``x-api-key`` or ``?p=``."""
    lowered = {key.lower(): value for key, value in headers.items()}
    # HTTP's own whitespace only: str.strip() would also take no-break spaces and control bytes,
    # turning a header API Gateway sees as present into one read here as empty.
    authorization = lowered.get("authorization", "").strip(_HTTP_WHITESPACE)
    scheme, _, value = authorization.partition(" ")
    scheme = scheme.lower()
    value = value.strip(_HTTP_WHITESPACE)
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
    if "authorization" in lowered:
        # A present Authorization header is the only place looked at: API Gateway caches the
        # authorizer's answer on that header alone, so a token taken from elsewhere would be
        # cached for whoever sends the same header next.
        raise Unauthorized("unusable Authorization header: send 'Authorization: Bearer <token>'")
    if lowered.get("x-api-key"):
        return lowered["x-api-key"].strip()
    if query.get("p"):
        return query["p"]
    raise Unauthorized("missing token: send 'Authorization: Bearer <token>'")
