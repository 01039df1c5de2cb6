"""Token routes (API.md "Tokens and permissions")."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.routes.request import RequestView
from arcs.runtime import Runtime


def auth_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    @router.get("/api/v1/auth/verify")
    def verify() -> dict[str, Any]:
        caller = request.principal()
        return {
            "success": True,
            "valid": True,
            "token_id": caller.token_id,
            "name": caller.name,
            "permissions": sorted(caller.permissions),
            "databases": list(caller.databases) or ["*"],
        }

    return router
