"""``/health``, ``/ready`` and ``/ping`` (GET or HEAD): the probes, the routes that need no token.

On AWS API Gateway answers them itself in the same shape (``infra/api.py``), without a function.
``/health`` is InfluxDB's (1.8 and 2.x: ``name``, ``message``, ``status: "pass"``, ``checks``,
``version``), which InfluxDB's clients parse, with Arc's ``time``, ``uptime`` and ``uptime_sec``
besides; Arc answers ``status: "ok"``, a value InfluxDB's clients refuse (their ``health()`` reports
"fail"), while Arc's own SDK accepts any status.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.http.route_docs import NUMBER, STRING, array, component, doc, empty_answer, json_answer, obj

if TYPE_CHECKING:
    from arcs.runtime import Runtime

PUBLIC_PATHS = frozenset({"/health", "/ready", "/ping"})
PROBE_METHODS = ["GET", "HEAD"]
#: ``/ping`` answers as InfluxDB does (204 and these headers; clients read the version from it): the
#: InfluxDB version whose write API this one speaks (``/write``, and ``/api/v2/write`` for 2.x clients).
PING_VERSION = "1.8.10"
PING_BUILD = "arcs"
#: The part of ``/health`` InfluxDB's clients read; the same wherever it is answered.
HEALTH: dict[str, Any] = {
    "name": "arcs",
    "message": "ready for queries and writes",
    "status": "pass",
    "checks": [],
    "version": PING_VERSION,
}
_STARTED = time.time()

HEALTH_ANSWER = component(
    "Health",
    # On AWS API Gateway answers it (no process, so no uptime; the time in $context.requestTime's form).
    obj(
        {
            "name": {"const": HEALTH["name"]},
            "message": STRING,
            "status": {"const": "pass"},
            "checks": array({}),
            "version": STRING,
            "time": STRING,
            "uptime": STRING,
            "uptime_sec": NUMBER,
        },
        ("uptime", "uptime_sec"),
    ),
)
READY = component("Ready", obj({"status": {"enum": ["ready", "not ready"]}}))


def health_router(runtime: Runtime) -> Router:
    router = Router()

    @router.route(
        "/health",
        PROBE_METHODS,
        **doc(
            "Liveness: the process answers",
            "probes",
            {200: json_answer(HEALTH_ANSWER, "alive")},
            errors=(),
            public=True,
        ),
    )
    def health() -> dict[str, Any]:
        uptime = time.time() - _STARTED
        return {
            **HEALTH,
            "time": datetime.now(UTC).isoformat(),
            "uptime": f"{uptime:.0f}s",
            "uptime_sec": round(uptime, 3),
        }

    @router.route(
        "/ping",
        PROBE_METHODS,
        **doc(
            "InfluxDB's ping: 204 with its version headers",
            "probes",
            {204: empty_answer("alive", {"X-Influxdb-Version": STRING, "X-Influxdb-Build": STRING})},
            errors=(),
            public=True,
        ),
    )
    def ping() -> Response[Any]:
        return Response(204, headers={"X-Influxdb-Version": PING_VERSION, "X-Influxdb-Build": PING_BUILD})

    @router.route(
        "/ready",
        PROBE_METHODS,
        **doc(
            "Readiness: 503 while writes cannot be made durable (the standalone server's disk is full)",
            "probes",
            {200: json_answer(READY, "ready"), 503: json_answer(READY, "not ready")},
            errors=(),
            public=True,
        ),
    )
    def ready() -> Response[Any]:
        if runtime.ready():
            return Response(200, "application/json", json.dumps({"status": "ready"}))
        return Response(503, "application/json", json.dumps({"status": "not ready"}))

    return router
