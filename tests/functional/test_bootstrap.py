"""The bootstrap function as CloudFormation calls it: the secret's value becomes the admin token, once.

Secrets Manager and DynamoDB are the session's moto server; CloudFormation's presigned response
URL is a local HTTP server that records what the function PUTs there.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from arcs.emulation import load_handler
from arcs.emulation.functions import FakeLambdaContext, Handler
from arcs.http.api import lambda_app
from arcs.runtime import lambda_runtime
from tests.conftest import ACCESS_KEY, SECRET_KEY, AwsEnv

pytestmark = pytest.mark.functional


class Responses:
    """A stand-in for CloudFormation's response URL: every body PUT to it, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        responses = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers["Content-Length"])
                responses.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/response"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def responses() -> Iterator[Responses]:
    made = Responses()
    yield made
    made.close()


@pytest.fixture
def bootstrap(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Handler]:
    # The stack's bootstrap function gets the tokens table only (infra/bootstrap.py).
    env = {
        "ARCS_BACKEND": "aws",
        "ARCS_BUCKET": aws.bucket,
        "ARCS_TOKENS_TABLE": aws.tokens_table,
        "AWS_ENDPOINT_URL": aws.endpoint,
        "AWS_REGION": aws.region,
        "ARCS_WORK_DIR": str(tmp_path / "work"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("ARCS_CATALOG_TABLE", "ARCS_LEASES_TABLE", "ARCS_QUEUE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "ARCS_BOOTSTRAP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()
    yield load_handler("bootstrap")
    lambda_runtime.cache_clear()
    lambda_app.cache_clear()


def _secret(aws: AwsEnv, value: str) -> str:
    client = aws.session.client("secretsmanager", endpoint_url=aws.endpoint)
    return str(client.create_secret(Name=f"arcs-admin-{uuid.uuid4().hex[:8]}", SecretString=value)["ARN"])


def _event(request: str, secret_arn: str, url: str) -> dict[str, Any]:
    return {
        "RequestType": request,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/ArcServerless/1",
        "RequestId": str(uuid.uuid4()),
        "ResourceType": "Custom::ArcsBootstrapToken",
        "LogicalResourceId": "BootstrapAdminTokenRecord",
        "ResourceProperties": {"ServiceToken": "arn:aws:lambda:...", "SecretArn": secret_arn},
    }


def _context() -> FakeLambdaContext:
    return FakeLambdaContext("arcs-bootstrap", 1024, "arn:aws:lambda:us-east-1:123456789012:function:b", 1e12)


def test_create_makes_the_secret_an_admin_token_and_tells_cloudformation(
    aws: AwsEnv, bootstrap: Handler, responses: Responses
) -> None:
    value = "Z" * 12 + uuid.uuid4().hex
    bootstrap(_event("Create", _secret(aws, value), responses.url), _context())
    [answer] = responses.bodies
    assert answer["Status"] == "SUCCESS", answer
    assert answer["Data"] == {"Created": "true"}
    assert answer["PhysicalResourceId"] == "arcs-bootstrap-admin-token"
    assert answer["LogicalResourceId"] == "BootstrapAdminTokenRecord"
    principal = lambda_runtime().tokens.verify(value)
    assert "admin" in principal.permissions

    # An update (or a second stack update) creates nothing more: tokens exist.
    bootstrap(_event("Update", _secret(aws, "another-value-0123456789"), responses.url), _context())
    assert responses.bodies[-1]["Status"] == "SUCCESS"
    assert responses.bodies[-1]["Data"] == {"Created": "false"}
    # Deleting the stack keeps the token (the table is retained too).
    bootstrap(_event("Delete", "unused", responses.url), _context())
    assert responses.bodies[-1]["Status"] == "SUCCESS"
    lambda_runtime().tokens.verify(value)


def test_a_failure_is_reported_to_cloudformation_without_the_secret(
    aws: AwsEnv, bootstrap: Handler, responses: Responses
) -> None:
    short = "too-short"  # the core refuses bootstrap tokens under 16 characters
    bootstrap(_event("Create", _secret(aws, short), responses.url), _context())
    [answer] = responses.bodies
    assert answer["Status"] == "FAILED"
    assert short not in json.dumps(answer)
    assert "/aws/lambda/arcs-bootstrap" in answer["Reason"]
    bootstrap(
        _event("Create", "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing", responses.url), _context()
    )
    assert responses.bodies[-1]["Status"] == "FAILED"
