"""API Gateway REQUEST authorizer: the token -> an IAM policy plus the caller's identity as context.

The token may come from Authorization, x-api-key or ``?p=``; API Gateway can only cache an
authorizer's answer when *every* identity source is present, so its cache is off and this
function caches verified tokens itself for ``ARCS_TOKEN_CACHE_TTL_S`` (how long a revocation can
take to be seen).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.errors import ArcsError
from arcs.runtime import lambda_runtime
from arcs.tokens import extract_token

logger = Logger(service="arcs-authorizer")


def _api_arn(method_arn: str) -> str:
    # arn:aws:execute-api:region:account:api-id/stage/METHOD/path -> every route of the stage
    parts = method_arn.split("/")
    return "/".join(parts[:2]) + "/*" if len(parts) >= 2 else method_arn


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        token = extract_token(event.get("headers") or {}, event.get("queryStringParameters") or {})
        principal = lambda_runtime().tokens.verify(token)
    except ArcsError as exc:
        logger.warning("token refused", extra={"reason": exc.message})
        # API Gateway answers 401 for exactly this message.
        raise Exception("Unauthorized") from None
    return {
        "principalId": principal.token_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": _api_arn(event["methodArn"])}
            ],
        },
        "context": principal.to_context(),
    }
