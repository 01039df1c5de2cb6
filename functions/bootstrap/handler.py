"""CloudFormation custom resource -> the bootstrap admin token, made from the deploy's secret.

The stack generates the token's value into Secrets Manager; on create (and update) this function
reads it and creates the admin token with it, if no token exists yet (a deployed stack starts
with one admin token, docs/deploy.md). Deleting the stack deletes no token. CloudFormation waits
for an answer at the presigned ``ResponseURL``, so every outcome is reported there, never the secret.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from arcs.runtime import lambda_runtime

logger = Logger(service="arcs-bootstrap")
PHYSICAL_ID = "arcs-bootstrap-admin-token"


def _respond(event: dict[str, Any], status: str, reason: str, data: dict[str, str]) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason,
            "PhysicalResourceId": PHYSICAL_ID,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": data,
        }
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - CloudFormation's presigned https URL
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": ""}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        response.read()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> None:
    status, reason, data = "SUCCESS", "", {}
    try:
        if event["RequestType"] in ("Create", "Update"):
            settings = lambda_runtime().settings
            secrets: Any = boto3.client(
                "secretsmanager", region_name=settings.aws_region, endpoint_url=settings.aws_endpoint_url
            )
            value = secrets.get_secret_value(SecretId=event["ResourceProperties"]["SecretArn"])["SecretString"]
            created = lambda_runtime().tokens.bootstrap(value) is not None
            data = {"Created": "true" if created else "false"}
            logger.info("bootstrap admin token", extra={"token_created": created})
    except Exception as exc:  # any failure must reach CloudFormation, or it waits an hour
        logger.exception("bootstrap failed")
        status, reason = "FAILED", f"{type(exc).__name__}; see log group {context.log_group_name}"
    _respond(event, status, reason, data)
