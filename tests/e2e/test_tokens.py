"""Tokens and permissions over HTTP (README "Tokens"), on every runtime.

Covers the token routes (create, list, get, update, delete, rotate, revoke, verify), the
permission each route family needs, database scopes that no spelling of a database escapes,
changes seen within the token cache TTL, and the last admin token that cannot be removed.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgpack
import pytest

from tests.e2e.servers import Client, ServerProcess

pytestmark = pytest.mark.e2e

T0 = 1_700_000_000
TOKENS = "/api/v1/auth/tokens"
NEVER_SENT = ("secret_hash", "salt", "lookup", "hash")


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def cache_ttl_s(server: ServerProcess) -> float:
    return float(server.env.get("ARCS_TOKEN_CACHE_TTL_S", "60"))


def eventually(server: ServerProcess, check: Callable[[], bool]) -> bool:
    """Whether ``check`` holds within the token cache TTL (plus slack for a loaded machine)."""
    deadline = time.monotonic() + cache_ttl_s(server) + 5
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def create(client: Client, **body: Any) -> dict[str, Any]:
    response = client.http.post(TOKENS, json={"name": unique("e2e-tok-"), **body})
    assert response.status_code == 201, response.text
    document: dict[str, Any] = response.json()
    return document


@contextmanager
def as_token(server: ServerProcess, secret: str) -> Iterator[Client]:
    client = Client(server.url, secret)
    try:
        yield client
    finally:
        client.http.close()


def status_with(server: ServerProcess, secret: str) -> int:
    response = httpx.get(f"{server.url}/api/v1/auth/verify", headers={"Authorization": f"Bearer {secret}"})
    return response.status_code


def assert_no_secrets(document: Any) -> None:
    text = json.dumps(document)
    for key in NEVER_SENT:
        assert f'"{key}"' not in text, text


def line(measurement: str, value: int = 1) -> bytes:
    return f"{measurement},host=a v={value}i {T0}000000000".encode()


# --- the routes ------------------------------------------------------------------------------


def test_create_list_get_update(client: Client, server: ServerProcess) -> None:
    name = unique("e2e-tok-")
    response = client.http.post(
        TOKENS,
        json={
            "name": name,
            "description": "ci",
            "permissions": ["read"],
            "databases": ["prod", "team-*"],
            "expires_in": "24h",
        },
    )
    assert response.status_code == 201, response.text
    assert response.headers["cache-control"] == "no-store"  # it carries the token value
    created = response.json()
    assert_no_secrets(created)
    secret, token_id = created["token"], created["id"]
    # Arc's integer id; the token's own id (hex) beside it, and the routes take either.
    assert isinstance(token_id, int) and not isinstance(token_id, bool) and 0 < token_id < 2**53
    assert re.fullmatch(r"[0-9a-f]{16}", created["token_id"])
    assert client.http.get(f"{TOKENS}/{created['token_id']}").json()["token"]["id"] == token_id
    assert created["success"] is True
    assert (created["name"], created["description"], created["permissions"]) == (name, "ci", ["read"])
    assert created["databases"] == ["prod", "team-*"]
    assert created["expires_at"] is not None and created["enabled"] is True and created["revoked"] is False

    listed = client.http.get(TOKENS).json()
    assert_no_secrets(listed)
    assert secret not in json.dumps(listed)
    assert listed["count"] == len(listed["tokens"])
    ours = [t for t in listed["tokens"] if t["id"] == token_id]
    assert ours == [{k: v for k, v in created.items() if k not in ("success", "token", "message")}]

    got = client.http.get(f"{TOKENS}/{token_id}").json()
    assert got["token"] == ours[0] and secret not in json.dumps(got)

    with as_token(server, secret) as caller:
        verified = caller.http.get("/api/v1/auth/verify").json()
    assert verified["token_info"]["id"] == token_id and verified["token_info"]["name"] == name
    assert (verified["token_id"], verified["permissions"], verified["databases"]) == (
        created["token_id"],
        ["read"],
        ["prod", "team-*"],
    )

    changes = {"name": name + "-2", "description": "", "permissions": ["write"], "databases": ["*"], "expires_in": None}
    patched = client.http.patch(f"{TOKENS}/{token_id}", json=changes)
    assert patched.status_code == 200, patched.text
    record = patched.json()["token"]
    assert_no_secrets(record)
    assert (record["name"], record["description"], record["permissions"]) == (name + "-2", "", ["write"])
    assert (record["databases"], record["expires_at"]) == (["*"], None)
    assert client.http.get(f"{TOKENS}/{token_id}").json()["token"] == record
    # the change reaches the token's holder within the cache TTL
    with as_token(server, secret) as caller:
        assert eventually(server, lambda: caller.http.get("/api/v1/auth/verify").json()["permissions"] == ["write"])
    client.http.delete(f"{TOKENS}/{token_id}")


def test_new_tokens_default_to_read_write_on_every_database(client: Client) -> None:
    created = create(client)
    assert (created["permissions"], created["databases"], created["expires_at"]) == (["read", "write"], ["*"], None)
    client.http.delete(f"{TOKENS}/{created['id']}")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x", "permissions": ["root"]}, "permissions"),
        ({"name": "x", "permissions": []}, "permissions"),
        ({"name": "x", "databases": ["../etc"]}, "databases"),
        ({"name": "x", "databases": "prod"}, "databases"),
        ({"name": "x", "databases": []}, "databases"),  # no database: never "every database"
        ({"name": "x", "expires_in": "1y"}, "expires_in"),
        ({"name": "x", "expires_in": "999999w"}, "expires_in"),
        ({"name": "x", "description": 1}, "description"),
        ({"name": "x", "permission": ["admin"]}, "permission"),
        ({"name": "x", "permissions": ["admin"], "databases": ["prod"]}, "admin"),  # admin reaches every database
    ],
)
def test_bad_fields_are_400_naming_the_field(client: Client, body: dict[str, Any], field: str) -> None:
    before = client.http.get(TOKENS).json()["tokens"]
    response = client.http.post(TOKENS, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["success"] is False and field in response.json()["error"]
    assert client.http.get(TOKENS).json()["tokens"] == before  # nothing stored


def test_bad_updates_are_400_and_change_nothing(client: Client) -> None:
    created = create(client, permissions=["read"])
    url = f"{TOKENS}/{created['id']}"
    for body in (
        {"permissions": None},
        {"permissions": ["sudo"]},
        {"name": None},
        {"revoked": False},
        {"databases": []},
    ):
        response = client.http.patch(url, json=body)
        assert response.status_code == 400, (body, response.text)
        assert next(iter(body)) in response.json()["error"]
    assert client.http.patch(url, content=b"{not json").status_code == 400
    assert client.http.patch(url, content=b"[]").status_code == 400
    assert client.http.get(url).json()["token"]["permissions"] == ["read"]
    assert client.http.get(url).json()["token"]["databases"] == ["*"]
    client.http.delete(url)


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/rotate"), ("POST", "/revoke")],
)
def test_unknown_ids_are_404(client: Client, method: str, suffix: str) -> None:
    response = client.http.request(method, f"{TOKENS}/0123456789abcdef{suffix}", json={"name": "x"})
    assert response.status_code == 404, response.text
    assert response.json()["success"] is False


def test_token_routes_are_for_admins_only(client: Client, server: ServerProcess) -> None:
    target = create(client)["id"]
    for permissions in (["read"], ["read", "write", "delete"]):
        secret = create(client, permissions=permissions)["token"]
        with as_token(server, secret) as caller:
            assert caller.http.get("/api/v1/auth/verify").status_code == 200
            for method, path, body in [
                ("POST", TOKENS, {"name": "escalate", "permissions": ["admin"]}),
                ("GET", TOKENS, None),
                ("GET", f"{TOKENS}/{target}", None),
                ("PATCH", f"{TOKENS}/{target}", {"permissions": ["admin"]}),
                ("DELETE", f"{TOKENS}/{target}", None),
                ("POST", f"{TOKENS}/{target}/rotate", None),
                ("POST", f"{TOKENS}/{target}/revoke", None),
            ]:
                response = caller.http.request(method, path, json=body)
                assert response.status_code == 403, (permissions, method, path, response.text)
                assert "admin" in response.json()["error"]
    # nothing changed
    assert client.http.get(f"{TOKENS}/{target}").json()["token"]["enabled"] is True
    assert not [t for t in client.http.get(TOKENS).json()["tokens"] if t["name"] == "escalate"]
    anonymous = httpx.get(f"{server.url}{TOKENS}")
    assert anonymous.status_code == 401


# --- rotate, revoke, delete: seen within the cache TTL -----------------------------------------


def test_rotation_gives_a_new_secret_and_retires_the_old(client: Client, server: ServerProcess) -> None:
    created = create(client, permissions=["read"])
    old = created["token"]
    assert status_with(server, old) == 200
    response = client.http.post(f"{TOKENS}/{created['id']}/rotate")
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    rotated = response.json()
    assert_no_secrets(rotated)
    new = rotated["new_token"]
    assert new != old and rotated["id"] == created["id"] and rotated["permissions"] == ["read"]
    assert eventually(server, lambda: status_with(server, old) == 401)
    assert status_with(server, new) == 200
    client.http.delete(f"{TOKENS}/{created['id']}")


def test_revocation_is_seen_within_the_ttl(client: Client, server: ServerProcess) -> None:
    created = create(client)
    secret, url = created["token"], f"{TOKENS}/{created['id']}"
    assert status_with(server, secret) == 200
    revoked = client.http.post(f"{url}/revoke")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["token"]["revoked"] is True and revoked.json()["token"]["enabled"] is False
    assert eventually(server, lambda: status_with(server, secret) == 401)
    assert client.http.get(url).json()["token"]["enabled"] is False
    assert client.http.post(f"{url}/revoke").status_code == 200  # again: no change, no error
    rotate = client.http.post(f"{url}/rotate")
    assert rotate.status_code == 409 and "revoked" in rotate.json()["error"]
    assert client.http.delete(url).status_code == 200


def test_deletion_is_seen_within_the_ttl(client: Client, server: ServerProcess) -> None:
    created = create(client)
    secret, url = created["token"], f"{TOKENS}/{created['id']}"
    assert status_with(server, secret) == 200
    deleted = client.http.delete(url)
    assert deleted.status_code == 200, deleted.text
    assert eventually(server, lambda: status_with(server, secret) == 401)
    assert client.http.get(url).status_code == 404
    assert client.http.delete(url).status_code == 404
    assert created["token_id"] not in json.dumps(client.http.get(TOKENS).json())


def test_the_last_admin_token_cannot_be_removed(client: Client, server: ServerProcess) -> None:
    bootstrap = client.http.get("/api/v1/auth/verify").json()["token_id"]
    # admin tokens this module left behind (a failed test) would make the bootstrap token not the last
    for token in client.http.get(TOKENS).json()["tokens"]:
        if token["token_id"] != bootstrap and "admin" in token["permissions"] and token["enabled"]:
            assert token["name"].startswith("e2e-tok-"), f"unexpected admin token {token}"
            assert client.http.delete(f"{TOKENS}/{token['id']}").status_code == 200
    url = f"{TOKENS}/{bootstrap}"
    for method, path, body in [
        ("DELETE", url, None),
        ("POST", f"{url}/revoke", None),
        ("PATCH", url, {"permissions": ["read", "write", "delete"]}),
        ("PATCH", url, {"expires_in": "1h"}),
    ]:
        response = client.http.request(method, path, json=body)
        assert response.status_code == 409, (method, path, response.text)
        assert "last" in response.json()["error"]
    assert client.http.get("/api/v1/auth/verify").status_code == 200
    assert client.http.get(url).json()["token"]["enabled"] is True

    # With a second admin token, either may go; the survivor is the last again.
    second = create(client, permissions=["admin"])
    with as_token(server, second["token"]) as other_admin:
        assert other_admin.http.get(TOKENS).status_code == 200
        assert other_admin.http.delete(f"{TOKENS}/{second['id']}").status_code == 200  # its own token
    assert client.http.delete(url).status_code == 409


# --- permissions per route -------------------------------------------------------------------


def test_read_tokens_cannot_write_and_write_tokens_cannot_read(client: Client, server: ServerProcess) -> None:
    db, m = unique("perm"), unique("m")
    assert client.write("/api/v1/write/line-protocol", line(m), headers={"x-arc-database": db}).status_code == 204
    assert client.wait_count(m, 1, database=db) == 1
    reader = create(client, permissions=["read"], databases=[db])
    writer = create(client, permissions=["write"], databases=[db])
    with as_token(server, reader["token"]) as caller:
        refused = caller.write("/api/v1/write/line-protocol", line(m, 2), headers={"x-arc-database": db})
        assert refused.status_code == 403 and "write" in refused.json()["error"]
        assert caller.rows(f"SELECT count(*) FROM {m}", db) == [[1]]
    with as_token(server, writer["token"]) as caller:
        other_point = line(m, 3).replace(b"host=a", b"host=b")  # host=a at T0 would merge into the first
        accepted = caller.write("/api/v1/write/line-protocol", other_point, headers={"x-arc-database": db})
        assert accepted.status_code == 204, accepted.text
        refused = caller.query(f"SELECT count(*) FROM {m}", db)
        assert refused.status_code == 403 and "read" in refused.json()["error"]
    assert client.wait_count(m, 2, database=db) == 2
    for token in (reader, writer):
        client.http.delete(f"{TOKENS}/{token['id']}")


# --- database scopes: no spelling escapes -------------------------------------------------------


@pytest.fixture(scope="module")
def scoped(server: ServerProcess) -> Iterator[dict[str, str]]:
    """Two databases with a row each, and a read+write token scoped to the first ("mine")."""
    admin = Client(server.url)
    names = {"mine": unique("mine"), "other": unique("other"), "m": unique("m")}
    for db in (names["mine"], names["other"]):
        response = admin.write("/api/v1/write/line-protocol", line(names["m"]), headers={"x-arc-database": db})
        assert response.status_code == 204, response.text
    for db in (names["mine"], names["other"]):
        assert admin.wait_count(names["m"], 1, database=db) == 1
    created = create(admin, permissions=["read", "write"], databases=[names["mine"]])
    yield {**names, "token": created["token"], "id": created["id"]}
    admin.http.delete(f"{TOKENS}/{created['id']}")
    admin.http.close()


def write_spellings(mine: str, other: str) -> list[tuple[str, str, dict[str, str], bytes]]:
    """(name, path, headers, body) for a write that targets ``other`` (or no allowed database)."""
    lp = "/api/v1/write/line-protocol"
    leak = "LEAK"  # replaced by the test's measurement
    row = msgpack.packb({"m": leak, "t": T0 * 1_000_000, "fields": {"v": 1}})
    as_json = json.dumps([{"m": leak, "t": T0 * 1_000_000, "fields": {"v": 1}}]).encode()
    return [
        ("msgpack header", "/api/v1/write/msgpack", {"x-arc-database": other}, row),
        ("json header", "/api/v1/write/json", {"x-arc-database": other}, as_json),
        ("line protocol header", lp, {"x-arc-database": other}, line(leak)),
        ("line protocol ?db=", f"{lp}?db={other}", {}, line(leak)),
        ("v1 ?db=", f"/write?db={other}", {}, line(leak)),
        ("v1 ?db= over own header", f"/write?db={other}", {"x-arc-database": mine}, line(leak)),
        ("v2 ?bucket=", f"/api/v2/write?bucket={other}&org=x", {}, line(leak)),
        ("v2 ?bucket=db/rp", f"/api/v2/write?bucket={other}/autogen", {}, line(leak)),
        ("v2 ?bucket= over own header", f"/api/v2/write?bucket={other}", {"x-arc-database": mine}, line(leak)),
        ("other in upper case", lp, {"x-arc-database": other.upper()}, line(leak)),
        ("own name in upper case", lp, {"x-arc-database": mine.upper()}, line(leak)),
        ("own name, other case", f"/write?db={mine[0].upper()}{mine[1:]}", {}, line(leak)),
        ("own name as prefix", lp, {"x-arc-database": mine + "x"}, line(leak)),
        ("own name with a NUL", f"{lp}?db={mine}%00", {}, line(leak)),
        ("no database: the default", lp, {}, line(leak)),
        ("v1 without db", "/write", {}, line(leak)),
        ("v2 without bucket", "/api/v2/write", {}, line(leak)),
    ]


def test_a_scoped_token_writes_to_no_other_database(
    client: Client, server: ServerProcess, scoped: dict[str, str]
) -> None:
    mine, other = scoped["mine"], scoped["other"]
    leak = unique("leak")
    refused = []
    with as_token(server, scoped["token"]) as caller:
        for name, path, headers, body in write_spellings(mine, other):
            response = caller.write(path, body.replace(b"LEAK", leak.encode()), headers=headers)
            if response.status_code != 403:
                refused.append((name, response.status_code, response.text))
        # its own database works, so the refusals above are the scope's doing
        own = caller.write("/api/v1/write/line-protocol", line(leak), headers={"x-arc-database": mine})
        assert own.status_code == 204, own.text
    assert refused == []
    assert client.wait_count(leak, 1, database=mine) == 1
    time.sleep(0.3)  # ingest is asynchronous: give anything wrongly accepted the time to land
    for db in (other, other.upper(), mine.upper(), "default"):
        response = client.query(f"SELECT count(*) FROM {leak}", db)
        assert response.status_code == 404, (db, response.text)
    assert client.rows(f"SELECT count(*) FROM {leak}", mine) == [[1]]


def query_spellings(mine: str, other: str, m: str) -> list[tuple[str, str, dict[str, str], dict[str, Any]]]:
    """(name, path, headers, body) for a query that reads ``other``."""
    q = "/api/v1/query"
    own = {"x-arc-database": mine}

    def sql(text: str, **extra: str) -> dict[str, Any]:
        return {"sql": text, **extra}

    return [
        ("header", q, {"x-arc-database": other}, sql(f"SELECT * FROM {m}")),
        ("db.measurement", q, {}, sql(f"SELECT * FROM {other}.{m}")),
        ("db.measurement over own header", q, own, sql(f"SELECT * FROM {other}.{m}")),
        ("quoted", q, own, sql(f'SELECT * FROM "{other}"."{m}"')),
        ("quoted database", q, own, sql(f'SELECT * FROM "{other}".{m}')),
        ("quoted measurement", q, own, sql(f'SELECT * FROM {other}."{m}"')),
        ("upper case", q, own, sql(f"SELECT * FROM {other.upper()}.{m}")),
        ("quoted upper case", q, own, sql(f'SELECT * FROM "{other.upper()}"."{m}"')),
        ("header in upper case", q, {"x-arc-database": other.upper()}, sql(f"SELECT * FROM {m}")),
        ("own name, other case", q, {"x-arc-database": mine.upper()}, sql(f"SELECT * FROM {m}")),
        ("body database", q, {}, sql(f"SELECT * FROM {m}", database=other)),
        ("body database, qualified", q, {}, sql(f"SELECT * FROM {other}.{m}", database=mine)),
        ("no database: the default", q, {}, sql(f"SELECT * FROM {m}")),
        ("join", q, own, sql(f"SELECT * FROM {m} a JOIN {other}.{m} b USING (time)")),
        ("comma join", q, own, sql(f"SELECT * FROM {m}, {other}.{m}")),
        ("subquery", q, own, sql(f"SELECT * FROM (SELECT * FROM {other}.{m}) t")),
        ("cte", q, own, sql(f"WITH x AS (SELECT * FROM {other}.{m}) SELECT * FROM x")),
        ("union", q, own, sql(f"SELECT time FROM {m} UNION ALL SELECT time FROM {other}.{m}")),
        ("in subquery", q, own, sql(f"SELECT * FROM {m} WHERE time IN (SELECT time FROM {other}.{m})")),
        ("scalar subquery", q, own, sql(f"SELECT (SELECT count(*) FROM {other}.{m})")),
        ("arrow", f"{q}/arrow", {"x-arc-database": other}, sql(f"SELECT * FROM {m}")),
        ("arrow qualified", f"{q}/arrow", own, sql(f"SELECT * FROM {other}.{m}")),
    ]


def test_a_scoped_token_queries_no_other_database(server: ServerProcess, scoped: dict[str, str]) -> None:
    mine, other, m = scoped["mine"], scoped["other"], scoped["m"]
    wrong = []
    with as_token(server, scoped["token"]) as caller:
        for name, path, headers, body in query_spellings(mine, other, m):
            response = caller.http.post(path, json=body, headers=headers)
            if response.status_code != 403 or "database" not in response.json().get("error", ""):
                wrong.append((name, response.status_code, response.text[:300]))
        # its own database works, so the refusals above are the scope's doing
        assert caller.rows(f"SELECT count(*) FROM {m}", mine) == [[1]]
        assert caller.rows(f'SELECT count(*) FROM "{mine}"."{m}"') == [[1]]
    assert wrong == []


def test_a_prefix_scope(client: Client, server: ServerProcess) -> None:
    prefix = unique("pfx")
    created = create(client, permissions=["read", "write"], databases=[prefix + "*"])
    lp = "/api/v1/write/line-protocol"
    m = unique("m")
    with as_token(server, created["token"]) as caller:
        for db in (prefix, prefix + "a", prefix + "-b_c"):
            assert caller.write(lp, line(m), headers={"x-arc-database": db}).status_code == 204, db
        for db in (prefix[:-1], prefix.upper() + "a", "x" + prefix, "default"):
            assert caller.write(lp, line(m), headers={"x-arc-database": db}).status_code == 403, db
        assert client.wait_count(m, 1, database=prefix + "a") == 1
        assert caller.rows(f"SELECT count(*) FROM {prefix}a.{m}") == [[1]]
        assert caller.query(f"SELECT count(*) FROM {prefix[:-1]}.{m}").status_code == 403
    client.http.delete(f"{TOKENS}/{created['id']}")


# --- never in clear -------------------------------------------------------------------------


def test_secrets_are_never_logged_or_stored_in_clear(client: Client, server: ServerProcess) -> None:
    created = create(client, permissions=["read"])
    first = created["token"]
    rotated = client.http.post(f"{TOKENS}/{created['id']}/rotate").json()["new_token"]
    # use them every way a client can send one, including refused ways
    for secret in (first, rotated):
        httpx.get(f"{server.url}/api/v1/auth/verify", params={"p": secret})
        httpx.get(f"{server.url}/api/v1/auth/verify", headers={"x-api-key": secret})
        httpx.post(f"{server.url}/api/v1/write/line-protocol", headers={"Authorization": f"Token {secret}"})
        httpx.get(f"{server.url}{TOKENS}", auth=("user", secret))
    client.http.delete(f"{TOKENS}/{created['id']}")
    time.sleep(0.2)  # let the output drain
    log = "".join(server.output)
    assert first not in log and rotated not in log
    if "--data-dir" in server.args:
        data_dir = Path(server.args[server.args.index("--data-dir") + 1])
        for path in data_dir.rglob("*"):
            if path.is_file():
                content = path.read_bytes()
                assert first.encode() not in content and rotated.encode() not in content, path
