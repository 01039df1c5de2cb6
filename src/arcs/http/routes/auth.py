"""Token routes (README "Tokens"): verify for any token, the rest for admins.

Response shapes follow Arc's (and its Python client's): creation answers ``token`` (the value),
rotation ``new_token``, each shown once and never stored; a token's record is never sent with
its hash, salt or lookup. ``id`` is Arc's integer id (``arcs.auth.numeric_ids``), ``token_id`` the
token's own id (16 hex digits, the one the logs name); the routes take either in the path.
The permission each route family needs is tabled in ``arcs.auth.tokens``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.auth.numeric_ids import numeric_id
from arcs.auth.tokens import TokenFields
from arcs.errors import NotFound
from arcs.http.route_docs import (
    BOOLEAN,
    INTEGER,
    STRING,
    TRUE,
    array,
    component,
    doc,
    json_answer,
    json_body,
    nullable,
    obj,
    path_param,
)
from arcs.http.routes.request import RequestView
from arcs.ports import TokenRecord

if TYPE_CHECKING:
    from arcs.runtime import Runtime

SHOWN_ONCE = "Store this token securely: it is shown only now and cannot be retrieved again."

# --- what the token routes take and answer ---------------------------------------------------------

_PERMISSIONS = array({"enum": ["read", "write", "delete", "admin"]})
_TOKEN_FIELDS = {
    "id": {**INTEGER, "description": "Arc's integer id, derived from `token_id`; either names the token in a path"},
    "token_id": {**STRING, "description": "the token's own id (16 hex digits)"},
    "name": STRING,
    "description": STRING,
    "permissions": _PERMISSIONS,
    "databases": {**array(STRING), "description": 'the token\'s database scopes; `["*"]`: every database'},
    "created_at": STRING,
    "expires_at": nullable(STRING),
    "revoked": BOOLEAN,
    "expired": BOOLEAN,
    "enabled": BOOLEAN,
}
#: A token's record (``token_json``): never its value, hash or salt.
TOKEN = component("Token", obj(_TOKEN_FIELDS))
_EDITABLE = {
    "name": {**STRING, "minLength": 1, "maxLength": 128},
    "description": nullable({**STRING, "maxLength": 1024}),
    "permissions": {**_PERMISSIONS, "minItems": 1, "description": "default read and write"},
    "databases": nullable({**array(STRING), "description": "scopes: database names or patterns; none: every one"}),
    "expires_in": nullable({**STRING, "description": "a number and a unit, like `24h` or `7d`; null: never"}),
}
TOKEN_CREATE = component(
    "TokenCreate", obj(_EDITABLE, optional=("description", "permissions", "databases", "expires_in"))
)
TOKEN_UPDATE = component("TokenUpdate", obj(_EDITABLE, optional=tuple(_EDITABLE)))
TOKEN_CREATED = component(
    "TokenCreated",
    obj({"success": TRUE, **_TOKEN_FIELDS, "token": {**STRING, "description": "shown once"}, "message": STRING}),
)
TOKEN_ROTATED = component(
    "TokenRotated",
    obj({"success": TRUE, **_TOKEN_FIELDS, "new_token": {**STRING, "description": "shown once"}, "message": STRING}),
)
TOKEN_LIST = component("TokenList", obj({"success": TRUE, "tokens": array(TOKEN), "count": INTEGER}))
TOKEN_ANSWER = component(
    "TokenAnswer", obj({"success": TRUE, "token": TOKEN, "message": STRING}, optional=("message",))
)
TOKEN_DELETED = component("TokenDeleted", obj({"success": TRUE, "message": STRING, "id": INTEGER, "token_id": STRING}))
VERIFY = component(
    "TokenVerify",
    obj(
        {
            "success": TRUE,
            "valid": TRUE,
            "token_id": STRING,
            "name": STRING,
            "permissions": array(STRING),
            "databases": array(STRING),
            # The token's record; only what the verification knew if it was deleted since (cached).
            "token_info": obj(
                {**_TOKEN_FIELDS, "is_admin": BOOLEAN},
                optional=tuple(set(_TOKEN_FIELDS) - {"id", "token_id", "name", "permissions"}),
            ),
        }
    ),
)
_ID = path_param("token_id", "the token's id: its `token_id`, or its integer `id`")
_NO_STORE = {"Cache-Control": STRING}


def token_json(record: TokenRecord, now: datetime) -> dict[str, Any]:
    """A token's record as clients see it: never the hash, salt or lookup."""
    expired = record.expires_at is not None and record.expires_at <= now
    return {
        "id": numeric_id(record.token_id),
        "token_id": record.token_id,
        "name": record.name,
        "description": record.description,
        "permissions": list(record.permissions),
        "databases": list(record.databases) or ["*"],
        "created_at": _time(record.created_at),
        "expires_at": _time(record.expires_at),
        "revoked": record.revoked,
        "expired": expired,
        "enabled": not record.revoked and not expired,  # Arc's name for "usable now"
    }


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _with_secret(status: int, body: dict[str, Any]) -> Response[Any]:
    # A response carrying a token value must not be kept by any cache on the way.
    return Response(status, "application/json", json.dumps(body), {"Cache-Control": "no-store"})


def auth_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)
    tokens = runtime.tokens

    def admin() -> None:
        request.caller("admin")

    @router.get(
        "/api/v1/auth/verify",
        **doc("The calling token: valid, and what it may do", "tokens", {200: json_answer(VERIFY, "valid")}),
    )
    def verify() -> dict[str, Any]:
        caller = request.principal()
        # The record as token routes show it (Arc's ``token_info``). The caller was verified up to
        # a cache TTL ago: a record deleted since leaves what the verification knew.
        try:
            info = token_json(tokens.get(caller.token_id), datetime.now(UTC))
        except NotFound:
            info = {
                "id": numeric_id(caller.token_id),
                "token_id": caller.token_id,
                "name": caller.name,
                "permissions": sorted(caller.permissions),
            }
        return {
            "success": True,
            "valid": True,
            "token_id": caller.token_id,
            "name": caller.name,
            "permissions": sorted(caller.permissions),
            "databases": list(caller.databases) or ["*"],
            "token_info": {**info, "is_admin": "admin" in caller.permissions},
        }

    @router.post(
        "/api/v1/auth/tokens",
        **doc(
            "Create a token (admin); its value is answered once",
            "tokens",
            {201: json_answer(TOKEN_CREATED, "created", _NO_STORE)},
            body=json_body(TOKEN_CREATE, example={"name": "dashboards", "permissions": ["read"], "expires_in": "30d"}),
            errors=(400, 401, 403, 408, 409, 413, 429, 503),
        ),
    )
    def create_token() -> Response[Any]:
        admin()
        now = datetime.now(UTC)
        record, secret = tokens.create_from(TokenFields.for_create(request.json(), now))
        body = {"success": True, **token_json(record, now), "token": secret, "message": "token created. " + SHOWN_ONCE}
        return _with_secret(201, body)

    @router.get(
        "/api/v1/auth/tokens", **doc("Every token (admin)", "tokens", {200: json_answer(TOKEN_LIST, "the tokens")})
    )
    def list_tokens() -> dict[str, Any]:
        admin()
        now = datetime.now(UTC)
        records = tokens.list()
        return {"success": True, "tokens": [token_json(r, now) for r in records], "count": len(records)}

    @router.get(
        "/api/v1/auth/tokens/<token_id>",
        **doc("A token (admin)", "tokens", {200: json_answer(TOKEN_ANSWER, "the token")}, parameters=[_ID]),
    )
    def get_token(token_id: str) -> dict[str, Any]:
        admin()
        return {"success": True, "token": token_json(tokens.get(token_id), datetime.now(UTC))}

    @router.patch(
        "/api/v1/auth/tokens/<token_id>",
        **doc(
            "Change a token (admin): the fields given",
            "tokens",
            {200: json_answer(TOKEN_ANSWER, "changed")},
            parameters=[_ID],
            body=json_body(TOKEN_UPDATE),
            errors=(400, 401, 403, 404, 408, 409, 413, 429, 503),
        ),
    )
    def update_token(token_id: str) -> dict[str, Any]:
        admin()
        now = datetime.now(UTC)
        record = tokens.update(token_id, TokenFields.for_update(request.json(), now))
        return {"success": True, "message": "token updated", "token": token_json(record, now)}

    @router.delete(
        "/api/v1/auth/tokens/<token_id>",
        **doc(
            "Delete a token (admin)",
            "tokens",
            {200: json_answer(TOKEN_DELETED, "deleted")},
            parameters=[_ID],
            errors=(400, 401, 403, 404, 408, 409, 413, 429, 503),
        ),
    )
    def delete_token(token_id: str) -> dict[str, Any]:
        admin()
        record = tokens.get(token_id)
        tokens.delete(record.token_id)
        return {
            "success": True,
            "message": "token deleted",
            "id": numeric_id(record.token_id),
            "token_id": record.token_id,
        }

    @router.post(
        "/api/v1/auth/tokens/<token_id>/rotate",
        **doc(
            "Give a token a new value (admin); the old one stops working",
            "tokens",
            {200: json_answer(TOKEN_ROTATED, "rotated", _NO_STORE)},
            parameters=[_ID],
            errors=(400, 401, 403, 404, 408, 409, 413, 429, 503),
        ),
    )
    def rotate_token(token_id: str) -> Response[Any]:
        admin()
        record, secret = tokens.rotate(token_id)
        body = {
            "success": True,
            **token_json(record, datetime.now(UTC)),
            "new_token": secret,
            "message": "token rotated; the previous value no longer works. " + SHOWN_ONCE,
        }
        return _with_secret(200, body)

    @router.post(
        "/api/v1/auth/tokens/<token_id>/revoke",
        **doc(
            "Revoke a token (admin)",
            "tokens",
            {200: json_answer(TOKEN_ANSWER, "revoked")},
            parameters=[_ID],
            errors=(400, 401, 403, 404, 408, 409, 413, 429, 503),
        ),
    )
    def revoke_token(token_id: str) -> dict[str, Any]:
        admin()
        record = tokens.revoke(token_id)
        return {"success": True, "message": "token revoked", "token": token_json(record, datetime.now(UTC))}

    return router
