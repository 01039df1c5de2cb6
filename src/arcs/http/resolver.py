"""The resolver that answers API Gateway proxy events, one request per thread, and the error answers.

Powertools' REST resolver keeps the request it answers per process; the standalone server and
``arcs local`` answer many at once, so here each request lives in a context variable. A route may
also stream its answer (``stream_answer``) when its function was invoked with a response stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from arcs.errors import ArcsError, ServiceUnavailable
from arcs.http.streaming import StreamedResponse, from_proxy_result


@dataclass
class _Request:
    """What the resolver knows of the request it is answering."""

    event: BaseProxyEvent
    lambda_context: Any
    routing: dict[str, Any] = field(default_factory=dict)
    #: The answer may be streamed (the function is invoked with a response stream).
    streaming: bool = False
    #: The body a route chose to stream instead of the one in its Response.
    stream: Iterable[bytes] | None = None


#: The request being answered by this thread (or task): each has its own.
_current_request: ContextVar[_Request | None] = ContextVar("arcs_current_request", default=None)


def answer_streams() -> bool:
    """Whether the request being answered may have its body streamed (``stream_answer``)."""
    request = _current_request.get()
    return request is not None and request.streaming


def stream_answer(body: Iterable[bytes]) -> None:
    """Send ``body``, written piece by piece, instead of the body of the route's Response (whose
    status and headers still go): only where ``answer_streams()``."""
    request = _current_request.get()
    if request is None or not request.streaming:
        raise RuntimeError("this request's answer is not streamed")
    request.stream = body


class RequestScopedResolver(APIGatewayRestResolver):
    """Powertools' REST resolver, with the request it answers kept per thread instead of per process.

    Powertools keeps the event being answered on the ``BaseRouter`` class (``resolve`` assigns
    ``BaseRouter.current_event``), and the routing context on the resolver. Lambda answers one
    event at a time per container, so that is safe there; the standalone server and ``arcs local``
    answer many at once on threads, and every route reads body, headers, parameters and caller
    through that state. Here the event, the Lambda context and the routing context live in a
    context variable set for the duration of ``resolve``, so a request only ever sees its own.
    The included routers read them through the resolver (``Router.api_resolver``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._shared_routing: dict[str, Any] = {}
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def current_event(self) -> BaseProxyEvent:
        return self._request().event

    @current_event.setter
    def current_event(self, value: BaseProxyEvent) -> None:
        self._request().event = value

    @property
    def lambda_context(self) -> Any:
        return self._request().lambda_context

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._request().lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        request = _current_request.get()
        return self._shared_routing if request is None else request.routing

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        request = _current_request.get()
        if request is None:
            self._shared_routing = value
        else:
            request.routing = value

    @staticmethod
    def _request() -> _Request:
        request = _current_request.get()
        if request is None:
            raise RuntimeError("no request is being resolved in this thread")
        return request

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        return self._resolve_request(event, context, streaming=False)[0]

    def resolve_streamed(self, event: Mapping[str, Any], context: Any) -> StreamedResponse:
        """The answer for a function invoked with a response stream: the routes that can (a query's
        result) stream their body; every other answer is one piece."""
        result, request = self._resolve_request(event, context, streaming=True)
        if request.stream is None:
            return from_proxy_result(result)
        buffered = from_proxy_result(result)
        return StreamedResponse(buffered.status, buffered.headers, request.stream)

    def _resolve_request(
        self, event: Mapping[str, Any], context: Any, streaming: bool
    ) -> tuple[dict[str, Any], _Request]:
        raw = event.raw_event if isinstance(event, BaseProxyEvent) else dict(event)
        request = _Request(self._to_proxy_event(raw), context, dict(self._shared_routing), streaming)
        token = _current_request.set(request)
        try:
            result = super().resolve(raw, context)
        finally:
            _current_request.reset(token)
        if request.stream is not None and int(result.get("statusCode", 0)) >= 400:
            request.stream = None  # the route failed after choosing to stream: its error answers
        return result, request


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    body = json.dumps({"success": False, "error": message}, separators=(",", ":"))
    return Response(status, "application/json", body, headers)


def error_response(exc: ArcsError) -> Response[Any]:
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, ServiceUnavailable) else {}
    return json_error(exc.status, exc.message, headers)
