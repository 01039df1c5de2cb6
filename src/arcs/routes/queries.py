"""The query routes: SQL answered as JSON or as an Arrow IPC stream."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from arcs.query import QueryResult, to_arrow_stream, to_json_document
from arcs.routes.request import RequestView
from arcs.runtime import Runtime

ARROW_STREAM = "application/vnd.apache.arrow.stream"


def queries_router(runtime: Runtime) -> Router:
    router = Router()
    request = RequestView(router)

    def run_query() -> QueryResult:
        caller = request.principal()
        caller.require("read")
        document = request.json()
        database = request.database(str(document["database"]) if document.get("database") else None)
        return runtime.queries.run(document.get("sql"), database, caller)

    @router.post("/api/v1/query")
    def query_json() -> dict[str, Any]:
        return to_json_document(run_query())

    @router.post("/api/v1/query/arrow")
    def query_arrow() -> Response[Any]:
        result = run_query()
        return Response(
            200,
            ARROW_STREAM,
            to_arrow_stream(result.table),
            {"X-Arc-Execution-Time-Ms": f"{result.execution_time_ms:.3f}"},
        )

    return router
