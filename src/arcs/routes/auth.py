"""Token routes (README "Tokens"): verify for any token, the rest for admins.

Response shapes follow Arc's (and its Python client's): creation answers ``token`` (the value),
rotation ``new_token``, each shown once and never stored; a token's record is never sent with
its hash, salt or lookup. ``id`` is Arc's integer id (``arcs.numeric_ids``), ``token_id`` the
token's own id (16 hex digits, the one the logs name); the routes take either in the path.
The permission each route family needs is tabled in ``arcs.tokens``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.errors import NotFound
from arcs.numeric_ids import numeric_id
from arcs.ports import TokenRecord
from arcs.routes.request import RequestView
from arcs.runtime import Runtime
from arcs.tokens import TokenFields

SHOWN_ONCE = "Store this token securely: it is shown only now and cannot be retrieved again."


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

    @router.get("/api/v1/auth/verify")
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

    @router.post("/api/v1/auth/tokens")
    def create_token() -> Response[Any]:
        admin()
        now = datetime.now(UTC)
        record, secret = tokens.create_from(TokenFields.for_create(request.json(), now))
        body = {"success": True, **token_json(record, now), "token": secret, "message": "token created. " + SHOWN_ONCE}
        return _with_secret(201, body)

    @router.get("/api/v1/auth/tokens")
    def list_tokens() -> dict[str, Any]:
        admin()
        now = datetime.now(UTC)
        records = tokens.list()
        return {"success": True, "tokens": [token_json(r, now) for r in records], "count": len(records)}

    @router.get("/api/v1/auth/tokens/<token_id>")
    def get_token(token_id: str) -> dict[str, Any]:
        admin()
        return {"success": True, "token": token_json(tokens.get(token_id), datetime.now(UTC))}

    @router.patch("/api/v1/auth/tokens/<token_id>")
    def update_token(token_id: str) -> dict[str, Any]:
        admin()
        now = datetime.now(UTC)
        record = tokens.update(token_id, TokenFields.for_update(request.json(), now))
        return {"success": True, "message": "token updated", "token": token_json(record, now)}

    @router.delete("/api/v1/auth/tokens/<token_id>")
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

    @router.post("/api/v1/auth/tokens/<token_id>/rotate")
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

    @router.post("/api/v1/auth/tokens/<token_id>/revoke")
    def revoke_token(token_id: str) -> dict[str, Any]:
        admin()
        record = tokens.revoke(token_id)
        return {"success": True, "message": "token revoked", "token": token_json(record, datetime.now(UTC))}

    return router
