"""What a route reads from the API Gateway event it is answering: headers, parameters, body, caller."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

from arcs.auth.tokens import Principal
from arcs.errors import BadRequest, Unauthorized
from arcs.http.proxy import BODY_BYTES_CONTEXT
from arcs.names import DEFAULT_DATABASE


class RequestView:
    def __init__(self, router: BaseRouter) -> None:
        self.router = router

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        headers = self.router.current_event.headers or {}
        return next((value for key, value in headers.items() if key.lower() == wanted), None)

    def param(self, name: str) -> str | None:
        return (self.router.current_event.query_string_parameters or {}).get(name)

    def database(self, fallback: str | None = None) -> str:
        """The database a request names: the ``x-arc-database`` header, else ``fallback``, else default."""
        return self.header("x-arc-database") or fallback or DEFAULT_DATABASE

    def principal(self) -> Principal:
        """The caller, as the authorizer put it in ``requestContext.authorizer``."""
        # REST API events carry the authorizer's context at requestContext.authorizer.
        context = (self.router.current_event.raw_event.get("requestContext") or {}).get("authorizer") or {}
        if not context or "token_id" not in context:
            raise Unauthorized("missing token")
        return Principal.from_context(context)

    def caller(self, permission: str) -> Principal:
        """The caller, who must hold ``permission`` (read, write, delete or admin): 403 otherwise."""
        principal = self.principal()
        principal.require(permission)
        return principal

    def body(self) -> bytes:
        event = self.router.current_event
        given = (event.raw_event.get("requestContext") or {}).get(BODY_BYTES_CONTEXT)
        if given is not None:
            return bytes(given)
        body = event.body or ""
        if event.is_base64_encoded:
            try:
                return base64.b64decode(body, validate=True)
            except binascii.Error as exc:
                raise BadRequest("request body is not valid base64") from exc
        return body.encode("utf-8", "surrogateescape")

    def json(self) -> dict[str, Any]:
        try:
            document = json.loads(self.body() or b"{}")
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"request body is not valid JSON: {str(exc)[:200]}") from exc
        if not isinstance(document, dict):
            raise BadRequest("request body must be a JSON object")
        return document


def flag(document: dict[str, Any], name: str) -> bool:
    """A JSON body's optional boolean ``name`` (false when absent); anything but true or false is a 400."""
    value = document.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name!r} must be true or false")
    return value


def limit_param(raw: str | None, default: int, maximum: int) -> int:
    """A ``limit`` query parameter: a whole number from 1 to ``maximum`` (``default`` when absent)."""
    text = raw or str(default)
    if not text.isdigit() or not 1 <= int(text) <= maximum:
        raise BadRequest(f"'limit' must be a whole number from 1 to {maximum}")
    return int(text)
