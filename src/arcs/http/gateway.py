"""The standalone server's gateway: the Lambda authorizer and the routes, in one process.

HTTP requests become API Gateway proxy events (``arcs.http.proxy``), the token is checked by the same
code as the Lambda authorizer, and the routes of ``arcs.http.api`` answer; ``/metrics`` is answered
here, before the routes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from arcs import metrics
from arcs.auth.tokens import Principal, extract_token
from arcs.errors import ArcsError
from arcs.http.api import PUBLIC_PATHS, build_app
from arcs.http.asgi import error_http_response
from arcs.http.proxy import Admission, HttpResponse, http_response, proxy_event
from arcs.http.routes.imports import UPLOAD_CONTEXT
from arcs.http.routes.writes import is_write_path, write_database
from arcs.runtime import LocalRuntime

#: The standalone server's Prometheus endpoint (the Lambda functions emit CloudWatch metrics instead).
METRICS_PATH = "/metrics"


class _LambdaContext:
    """What the resolver may read from a Lambda context; nothing of it matters outside Lambda."""

    function_name = "arcs-standalone"
    aws_request_id = "local"


class Gateway:
    """Authorizer + router for one process, serving many requests at once.

    The resolver keeps each request's state its own (``arcs.http.resolver.RequestScopedResolver``), so one
    resolver serves every worker thread.
    """

    def __init__(self, runtime: LocalRuntime, recorder: metrics.PrometheusRecorder | None = None) -> None:
        self.runtime = runtime
        self.app = build_app(runtime)
        #: Where ``/metrics`` reads the measurements; None: the route is not served.
        self.recorder = recorder

    def warm(self) -> None:
        """Open DuckDB now, so the first request costs what any other does."""
        self.runtime.engine.connection()

    def screen(
        self, method: str, path: str, query: str, headers: dict[str, str], client: str | None = None
    ) -> Admission:
        """What can be judged before the body is read: the token, and for a write its permission and
        database scope (the write route checks them again)."""
        if path in PUBLIC_PATHS or path == METRICS_PATH:
            return Admission()
        params = dict(parse_qsl(query, keep_blank_values=True))
        try:
            principal = self._principal(params, headers, client)
            if is_write_path(path):
                lowered = {key.lower(): value for key, value in headers.items()}
                principal.require("write")
                principal.require_database(write_database(path, lowered.get, params.get))
        except ArcsError as exc:
            return Admission(refusal=error_http_response(exc))
        return Admission(caller=principal.token_id)

    def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, client: str | None = None
    ) -> HttpResponse:
        if path == METRICS_PATH and self.recorder is not None:
            return self.scrape(method)
        context = None
        if path not in PUBLIC_PATHS:
            # Checked again here, as the Lambda authorizer runs for every request: a verified token
            # comes from the cache, and a token revoked since the screen is refused.
            try:
                context = self._principal(dict(parse_qsl(query, keep_blank_values=True)), headers, client).to_context()
            except ArcsError as exc:
                return error_http_response(exc)
        event = proxy_event(method, path, query, headers, body, context, body_as_bytes=True)
        return http_response(self.app.resolve(event, _LambdaContext()))

    def scrape(self, method: str) -> HttpResponse:
        """``/metrics``: every measurement in Prometheus' text format, the spool's backlog read now.

        Like Arc's, it needs no token, so that a scraper holds no secret: its labels name no
        database and no token (``arcs.metrics``)."""
        assert self.recorder is not None
        if method not in ("GET", "HEAD"):
            return HttpResponse(
                405,
                {"Content-Type": "application/json", "Allow": "GET, HEAD"},
                b'{"success":false,"error":"method not allowed"}',
            )
        depth, oldest_s = self.runtime.spool.backlog()
        self.recorder.record({metrics.QUEUE_DEPTH: depth, metrics.QUEUE_OLDEST_AGE: oldest_s}, {})
        body, content_type = self.recorder.render()
        return HttpResponse(200, {"Content-Type": content_type}, b"" if method == "HEAD" else body)

    def handle_upload(
        self,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        upload: dict[str, Any],
        client: str | None = None,
    ) -> HttpResponse:
        """An import whose file the HTTP front streamed to disk: the route reads it from there."""
        try:
            context = self._principal(dict(parse_qsl(query, keep_blank_values=True)), headers, client).to_context()
        except ArcsError as exc:
            return error_http_response(exc)
        event = proxy_event(method, path, query, headers, b"", context)
        event["requestContext"][UPLOAD_CONTEXT] = upload
        return http_response(self.app.resolve(event, _LambdaContext()))

    def _principal(self, params: dict[str, str], headers: dict[str, str], client: str | None) -> Principal:
        """The caller, as the Lambda authorizer would find it (``params``: the query's, last value kept)."""
        return self.runtime.tokens.verify(extract_token(headers, params), client)
