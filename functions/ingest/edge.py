"""API Gateway -> the write edge: validate a write and queue it durably before answering 204."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.http.api import lambda_app

logger = Logger(service="arcs-edge")


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return lambda_app("edge").resolve(event, context)
