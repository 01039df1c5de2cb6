"""``GET /health`` and ``GET /ready``: the two routes that need no token."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.runtime import Runtime

PUBLIC_PATHS = frozenset({"/health", "/ready"})
_STARTED = time.time()


def health_router(runtime: Runtime) -> Router:
    router = Router()

    @router.get("/health")
    def health() -> dict[str, Any]:
        uptime = time.time() - _STARTED
        return {
            "status": "ok",
            "time": datetime.now(UTC).isoformat(),
            "uptime": f"{uptime:.0f}s",
            "uptime_sec": round(uptime, 3),
        }

    @router.get("/ready")
    def ready() -> Response[Any]:
        if runtime.ready():
            return Response(200, "application/json", json.dumps({"status": "ready"}))
        return Response(503, "application/json", json.dumps({"status": "not ready"}))

    return router
