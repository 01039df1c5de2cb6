"""``GET /api/v1/openapi.json``: the API's OpenAPI document (``arcs.http.openapi``), for any valid token.

Behind the token as the rest of ``/api/v1`` is: on AWS no anonymous request reaches a function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.http.route_docs import SPEC_PATH, doc, json_answer, served
from arcs.http.routes.request import RequestView

if TYPE_CHECKING:
    from arcs.runtime import Runtime


def spec_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    @router.get(
        SPEC_PATH,
        **doc(
            "This API's OpenAPI 3.1 document",
            "spec",
            {200: json_answer({"type": "object", "required": ["openapi", "paths"]}, "the document")},
            errors=(401, 429, 503),
        ),
    )
    def openapi() -> Response[Any]:
        request.principal()
        return Response(200, "application/json", served().decode())

    return router
