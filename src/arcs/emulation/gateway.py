"""An API Gateway REST API in front of the Lambda functions, as the CDK stack configures it.

For each request: the proxy event (``arcs.http.proxy``); for every path but the public ones, the
REQUEST authorizer, its policy evaluated against the method ARN and its ``context`` passed on in
``requestContext.authorizer``; then the write function for the write paths and the query function
for the rest. The authorizer's refusals come back in the API's error shape, as the stack's gateway
responses make them (``UNAUTHORIZED`` 401, ``ACCESS_DENIED`` 413, ``AUTHORIZER_FAILURE`` 500).

Authorizers follow the stack's (``infra/authorizer.py``): under ``/api/v1`` but the writes, the
token is read from the identity sources only (``Authorization``), a request lacking any is refused
(401) without calling the authorizer, and with a TTL the policy is cached per identity (the
sources' values) and re-evaluated for each method ARN. Writes and InfluxDB's paths are never
cached and take the token in any of its places. ``arcs local`` caches nothing unless
``ARCS_LOCAL_AUTHORIZER_CACHE_TTL_S`` turns it on, so a revoked token is refused at once. The
probes are answered here, as the stack's gateway answers them, without a function.

Integrations follow the stack's transfer modes (``infra/api.py``): the writes' is ``BUFFERED``
(the 29 s integration timeout, Lambda's 6 MB response), the query function's ``STREAM``: it is
invoked with a response stream and its answer reaches the client as the function writes it, for
up to 15 minutes, cut short after 5 minutes without a byte or when the function fails midway.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from arcs.emulation.functions import ACCOUNT_ID, InvokeError, LambdaFunction, StreamCut
from arcs.http.api import PUBLIC_PATHS
from arcs.http.proxy import Admission, HttpResponse, http_response, proxy_event
from arcs.http.routes.health import HEALTH, PING_BUILD, PING_VERSION, PROBE_METHODS
from arcs.http.streaming import API_GATEWAY_STREAM_IDLE_S, API_GATEWAY_STREAM_MAX_S, MalformedStream, read_prelude
from arcs.settings import AWS_TOO_LARGE_MESSAGE
from arcs.write.paths import is_write_path, takes_cached_authorizer

logger = logging.getLogger(__name__)

#: API Gateway REST's payload limit; bigger requests never reach a function.
API_GATEWAY_PAYLOAD_LIMIT = 10 * 1024 * 1024
#: API Gateway REST's integration timeout (the default and, for regional APIs, the most without a
#: quota increase): a function that has not answered by then is a 504 to the caller.
API_GATEWAY_TIMEOUT_S = 29.0
API_ID = "arcslocal"


def json_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> HttpResponse:
    body = json.dumps({"success": False, "error": message}, separators=(",", ":")).encode()
    return HttpResponse(status, {"Content-Type": "application/json", **(headers or {})}, body)


def probe_answer(method: str, path: str) -> HttpResponse:
    """The probes as the stack's MOCK integrations answer them (``infra/api.py``): no function runs,
    ``/health`` and ``/ready`` always answer 200, and a method other than GET or HEAD is API
    Gateway's 403 for a method it does not have."""
    if method.upper() not in PROBE_METHODS:
        return json_error(403, "Missing Authentication Token")
    if path == "/ping":
        return HttpResponse(204, {"X-Influxdb-Version": PING_VERSION, "X-Influxdb-Build": PING_BUILD}, b"")
    # $context.requestTime's form, as the stack's template fills it in.
    answer = {**HEALTH, "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())}
    body = json.dumps(answer if path == "/health" else {"status": "ready"}).encode()
    return HttpResponse(200, {"Content-Type": "application/json"}, b"" if method.upper() == "HEAD" else body)


def _arn_pattern(resource: str) -> re.Pattern[str]:
    # IAM resource wildcards: '*' any run of characters, '?' any one character.
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in resource))


def policy_allows(policy: Mapping[str, Any], method_arn: str) -> bool:
    """IAM evaluation of an authorizer's policy for ``execute-api:Invoke`` on ``method_arn``."""
    allowed = False
    statements = policy.get("Statement") or []
    for statement in [statements] if isinstance(statements, Mapping) else statements:
        actions = statement.get("Action") or []
        resources = statement.get("Resource") or []
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        if not any(_arn_pattern(a).fullmatch("execute-api:Invoke") for a in actions):
            continue
        if not any(_arn_pattern(r).fullmatch(method_arn) for r in resources):
            continue
        if statement.get("Effect") == "Deny":
            return False  # an explicit deny always wins
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


class ApiGateway:
    """``handle(method, path, query, headers, body) -> HttpResponse`` for ``arcs.http.asgi.AsgiApp``."""

    def __init__(
        self,
        authorizer: LambdaFunction,
        edge: LambdaFunction,
        queries: LambdaFunction,
        *,
        cache_ttl_s: float = 0.0,
        identity_sources: Sequence[str] = (),
        region: str = "us-east-1",
        stage: str = "local",
        integration_timeout_s: float = API_GATEWAY_TIMEOUT_S,
        stream_queries: bool = True,
        stream_max_s: float = API_GATEWAY_STREAM_MAX_S,
        stream_idle_s: float = API_GATEWAY_STREAM_IDLE_S,
    ) -> None:
        self.integration_timeout_s = integration_timeout_s
        #: The query function's integration streams (``STREAM``), as the stack configures it.
        self.stream_queries = stream_queries
        self.stream_max_s = stream_max_s
        self.stream_idle_s = stream_idle_s
        self.authorizer = authorizer
        self.edge = edge
        self.queries = queries
        if cache_ttl_s > 0 and not identity_sources:
            raise ValueError("authorizer caching needs identity sources, as in API Gateway")
        for source in identity_sources:
            kind, _, name = source.partition(":")
            if kind not in ("header", "query") or not name:
                raise ValueError(f"identity source {source!r} must be 'header:<name>' or 'query:<name>'")
        self.cache_ttl_s = cache_ttl_s
        self.identity_sources = tuple(identity_sources)
        self.region = region
        self.stage = stage
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._cache_lock = threading.Lock()

    def method_arn(self, method: str, path: str) -> str:
        return f"arn:aws:execute-api:{self.region}:{ACCOUNT_ID}:{API_ID}/{self.stage}/{method.upper()}{path}"

    def screen(
        self, method: str, path: str, query: str, headers: dict[str, str], client: str | None = None
    ) -> Admission:
        """The authorizer on the request's head, before the emulation reads its body: API Gateway
        buffers bodies itself, so no caller's stalled upload can hold the functions back there."""
        if path in PUBLIC_PATHS:
            return Admission()
        event = self._event(method, path, query, headers, b"")
        refused = self._authorize(event)
        if refused is not None:
            return Admission(refusal=refused)
        return Admission(caller=str(event["requestContext"]["authorizer"].get("principalId")))

    def handle(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes, client: str | None = None
    ) -> HttpResponse:
        """``client``, the caller's address, is not used: API Gateway's throttling limits callers."""
        if len(body) > API_GATEWAY_PAYLOAD_LIMIT:
            return json_error(413, f"request body exceeds API Gateway's limit of {API_GATEWAY_PAYLOAD_LIMIT} bytes")
        if path in PUBLIC_PATHS:
            return probe_answer(method, path)
        event = self._event(method, path, query, headers, body)
        refused = self._authorize(event)
        if refused is not None:
            return refused
        function = self.edge if is_write_path(path) else self.queries
        try:
            if function is self.queries and self.stream_queries:
                return self._streamed(function, event)
            return http_response(function.invoke(event, wait_s=self.integration_timeout_s))
        except MalformedStream as exc:
            logger.error("%s streamed no valid metadata on %s %s: %s", function.name, method, path, exc)
            return json_error(502, "Internal server error")
        except InvokeError as exc:
            if exc.error_type == "RequestEntityTooLargeException":
                # As API Gateway answers a refused invoke (a write declaring its length was
                # refused 413 by the authorizer before this; one sent chunked ends here).
                logger.error("%s refused the event on %s %s: %s", function.name, method, path, exc.message)
                return json_error(500, "Internal server error")
            if exc.error_type == "IntegrationTimeout":
                logger.error("%s on %s %s: %s", function.name, method, path, exc.message)
                return json_error(504, "Endpoint request timed out")
            logger.error("%s failed on %s %s: %s", function.name, method, path, exc)
            # What API Gateway answers when the integration fails or returns garbage.
            return json_error(502, "Internal server error")
        except (KeyError, TypeError, ValueError) as exc:
            logger.error("%s returned a malformed proxy response on %s %s: %s", function.name, method, path, exc)
            return json_error(502, "Internal server error")

    def _streamed(self, function: LambdaFunction, event: dict[str, Any]) -> HttpResponse:
        """The function's answer as it streams it: status and headers once its metadata is read,
        then the body as it comes, within the stream's 15 minutes and 5 minutes of idleness."""
        started = time.monotonic()
        pieces = function.invoke_stream(event, idle_s=self.stream_idle_s)
        try:
            status, headers, first = read_prelude(pieces)
        except BaseException:
            pieces.close()  # nobody reads the rest: the function's container is let go
            raise
        return HttpResponse(status, headers, first, self._within_limits(pieces, started, function.name))

    def _within_limits(self, pieces: Iterator[bytes], started: float, name: str) -> Iterator[bytes]:
        try:
            for piece in pieces:
                if time.monotonic() - started > self.stream_max_s:
                    raise StreamCut(f"the response streamed longer than {self.stream_max_s:g} s")
                yield piece
        except StreamCut as exc:
            logger.error("%s: the streamed response was cut short: %s", name, exc)
            raise
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()

    def _event(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        event = proxy_event(method, path, query, headers, body)
        event["requestContext"]["stage"] = self.stage
        event["requestContext"]["apiId"] = API_ID
        event["requestContext"]["accountId"] = ACCOUNT_ID
        return event

    # --- the authorizer ------------------------------------------------------------------------
    def _identity(self, event: Mapping[str, Any]) -> str | None:
        """The cache key: a digest (never a token in clear) of every identity source; None if one is missing."""
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        query = event.get("queryStringParameters") or {}
        values = []
        for source in self.identity_sources:
            kind, _, name = source.partition(":")
            value = headers.get(name.lower()) if kind == "header" else query.get(name)
            if not value:
                return None
            values.append(value)
        return hashlib.sha256("\0".join(values).encode("utf-8", "surrogateescape")).hexdigest()

    def _authorize(self, event: dict[str, Any]) -> HttpResponse | None:
        method_arn = self.method_arn(event["httpMethod"], event["path"])
        # As the stack attaches its authorizers: Arc's API but the writes takes the token in its
        # identity sources only (a request without them is a 401 before any function runs), and
        # only there may the answer be cached; writes and InfluxDB's paths take it anywhere.
        arc_api = takes_cached_authorizer(event["path"])
        identity = self._identity(event) if arc_api and self.identity_sources else None
        if arc_api and self.identity_sources and identity is None:
            return json_error(401, "Unauthorized")
        if self.cache_ttl_s <= 0:
            identity = None
        now = time.monotonic()
        result: dict[str, Any] | None = None
        if identity is not None:
            with self._cache_lock:
                cached = self._cache.get(identity)
            if cached is not None and cached[0] > now:
                result = cached[1]
        if result is None:
            request = {
                "type": "REQUEST",
                "methodArn": method_arn,
                **{key: event[key] for key in ("resource", "path", "httpMethod", "headers", "multiValueHeaders")},
                **{key: event[key] for key in ("queryStringParameters", "multiValueQueryStringParameters")},
                "pathParameters": event["pathParameters"],
                "stageVariables": event["stageVariables"],
                "requestContext": {k: v for k, v in event["requestContext"].items() if k != "authorizer"},
            }
            try:
                result = self.authorizer.invoke(request)
            except InvokeError as exc:
                if exc.message == "Unauthorized":
                    return json_error(401, "Unauthorized")
                logger.error("authorizer failed: %s", exc)
                return json_error(500, "Authorizer error")
            if not isinstance(result, dict) or "policyDocument" not in result or "principalId" not in result:
                logger.error("authorizer returned no policy: %r", result)
                return json_error(500, "Authorizer error")
            if identity is not None:
                with self._cache_lock:
                    if len(self._cache) > 10_000:
                        self._cache.clear()
                    self._cache[identity] = (now + self.cache_ttl_s, result)
        if not policy_allows(result["policyDocument"], method_arn):
            # The stack's ACCESS_DENIED gateway response: the authorizer denies only oversized writes.
            return json_error(413, AWS_TOO_LARGE_MESSAGE)
        context = {str(k): v for k, v in (result.get("context") or {}).items()}
        event["requestContext"]["authorizer"] = {**context, "principalId": result["principalId"]}
        return None
