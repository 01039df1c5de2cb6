"""API Gateway REQUEST authorizer: the token -> an IAM policy plus the caller's identity as context.

The stack attaches this function twice (``infra/authorizer.py``): cached on the Authorization
header for the Arc API under ``/api/v1``, and uncached, reading the token from any of its places,
for the writes and InfluxDB's paths. Either way the policy allows every route of the stage (a
cached policy is reused for the caller's other routes), so each route checks its permission itself.

It also refuses, before any function is invoked, a write whose declared length cannot reach the
edge function on AWS (``arcs.write.paths.declared_too_large``, with the room this request's
head leaves in the invoke: ``arcs.write.paths.body_room``): a Deny, which the stack's ``ACCESS_DENIED``
gateway response answers as a 413. Writes are never cached, so the Deny is never reused.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.auth.tokens import extract_token
from arcs.errors import ArcsError
from arcs.runtime import lambda_runtime
from arcs.write.paths import body_room, declared_too_large

logger = Logger(service="arcs-authorizer")


def _api_arn(method_arn: str) -> str:
    # arn:aws:execute-api:region:account:api-id/stage/METHOD/path -> every route of the stage
    parts = method_arn.split("/")
    return "/".join(parts[:2]) + "/*" if len(parts) >= 2 else method_arn


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    headers = event.get("headers") or {}
    try:
        token = extract_token(headers, event.get("queryStringParameters") or {})
        runtime = lambda_runtime()
        principal = runtime.tokens.verify(token)
    except ArcsError as exc:
        if not exc.client_error:
            # The token could not be checked (the tokens table failing): API Gateway answers an
            # authorizer's error 500, which a client retries, never a 401 that calls the token bad.
            logger.error("token not checked", extra={"reason": exc.message})
            raise
        logger.warning("token refused", extra={"reason": exc.message})
        # API Gateway answers 401 for exactly this message.
        raise Exception("Unauthorized") from None
    caller = principal.to_context()
    refusal = declared_too_large(
        str(event.get("httpMethod") or ""),
        # The resource is the route as declared (``path`` carries a custom domain's base path).
        str(event.get("resource") or event.get("path") or ""),
        headers,
        # A request whose head is unusually large leaves less room for its body in the invoke.
        min(runtime.settings.max_request_bytes, body_room(event, caller)),
    )
    if refusal is not None:
        logger.info("write refused before the edge", extra={"reason": refusal})
        return {
            "principalId": principal.token_id,
            "policyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Action": "execute-api:Invoke", "Effect": "Deny", "Resource": event["methodArn"]}],
            },
            "context": {"error": refusal},
        }
    return {
        "principalId": principal.token_id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": _api_arn(event["methodArn"])}
            ],
        },
        "context": caller,
    }
