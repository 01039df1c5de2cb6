"""API Gateway -> queries and the rest of the HTTP API (everything but writes).

API Gateway invokes this function with a response stream (integration transfer mode ``STREAM``):
``stream_handler`` is what the stack runs, through ``arcs.http.runtime_api`` (Lambda's Python runtime
answers buffered only). ``handler`` answers the same routes buffered, as a proxy response.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.http.api import lambda_app
from arcs.http.streaming import StreamedResponse
from arcs.tracing import traced_handler

logger = Logger(service="arcs-query")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@traced_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return lambda_app("query").resolve(event, context)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@traced_handler
def stream_handler(event: dict[str, Any], context: LambdaContext) -> StreamedResponse:
    return lambda_app("query").resolve_streamed(event, context)
