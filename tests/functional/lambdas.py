"""The Lambda handlers' world for a test: the handlers loaded from ``functions/`` exactly as
``arcs local`` loads them, the environment the stack gives the functions
(``arcs.emulation.local.function_environment``), and events built from messages really received
from the queue, so redelivery here is SQS redelivery: the same message ids with new receipt
handles and a higher ``ApproximateReceiveCount``.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arcs.emulation import sqs_event
from arcs.emulation.functions import FakeLambdaContext, Handler
from arcs.runtime import Runtime, lambda_runtime
from tests.conftest import AwsEnv

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef


EVENTS = Path(__file__).parent / "events"
PREFIX = "arcs"
T0_NS = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z
HOUR_NS = 3600 * 10**9


@dataclass(frozen=True)
class Handlers:
    edge: Handler
    ingest: Handler
    query: Handler
    authorizer: Handler
    tasks: Handler


def context(name: str) -> FakeLambdaContext:
    return FakeLambdaContext(name, 1024, f"arn:aws:lambda:us-east-1:123456789012:function:{name}", 1e12)


@dataclass
class Lambda:
    """The functions' world for one test: fresh resources, environment, runtime and an admin token."""

    aws: AwsEnv
    handlers: Handlers
    queue_arn: str
    token: str
    caller: dict[str, str]  # what the authorizer put in requestContext.authorizer

    @property
    def runtime(self) -> Runtime:
        return lambda_runtime()

    # --- API Gateway -----------------------------------------------------------------------------
    def api_event(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        headers = headers or {}
        event: dict[str, Any] = json.loads((EVENTS / "apigw_rest_proxy.json").read_text())
        event.update(path=path, httpMethod=method, queryStringParameters=query)
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
        event["headers"].update(headers)
        event["multiValueHeaders"].update({k: [v] for k, v in headers.items()})
        event["pathParameters"] = {"proxy": path.lstrip("/")}
        event["requestContext"].update(path=f"/prod{path}", httpMethod=method, requestId=str(uuid.uuid4()))
        event["requestContext"]["authorizer"].update(self.caller)
        event["body"] = base64.b64encode(body).decode() if body else None
        event["isBase64Encoded"] = bool(body)
        return event

    def write(self, lines: str, database: str | None = None) -> None:
        headers = {"x-arc-database": database} if database else {}
        event = self.api_event("POST", "/api/v1/write/line-protocol", lines.encode(), headers)
        response = self.handlers.edge(event, context("arcs-edge"))
        assert response["statusCode"] == 204, response

    def query(self, sql: str, arrow: bool = False) -> dict[str, Any]:
        path = "/api/v1/query/arrow" if arrow else "/api/v1/query"
        body = json.dumps({"sql": sql}).encode()
        response: dict[str, Any] = self.handlers.query(
            self.api_event("POST", path, body, {"Content-Type": "application/json"}), context("arcs-query")
        )
        return response

    def rows(self, sql: str) -> list[list[Any]]:
        response = self.query(sql)
        assert response["statusCode"] == 200, response
        data: list[list[Any]] = json.loads(response["body"])["data"]
        return data

    def count(self, measurement: str) -> int:
        response = self.query(f"SELECT count(*) FROM {measurement}")
        if response["statusCode"] == 404:  # nothing stored yet
            return 0
        assert response["statusCode"] == 200, response
        return int(json.loads(response["body"])["data"][0][0])

    # --- SQS -----------------------------------------------------------------------------------
    def receive(self, expected: int) -> list[MessageTypeDef]:
        messages: list[MessageTypeDef] = []
        for _ in range(20):
            response = self.aws.sqs.receive_message(
                QueueUrl=self.aws.queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0 if messages else 1,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages += response.get("Messages", [])
            if len(messages) >= expected:
                break
        assert len(messages) == expected, messages
        return messages

    def make_visible(self, messages: list[MessageTypeDef]) -> None:
        """What the visibility timeout running out does, without waiting for it."""
        for message in messages:
            self.aws.sqs.change_message_visibility(
                QueueUrl=self.aws.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )

    def delete(self, messages: list[MessageTypeDef]) -> None:
        for message in messages:
            self.aws.sqs.delete_message(QueueUrl=self.aws.queue_url, ReceiptHandle=message["ReceiptHandle"])

    def ingest(self, messages: list[MessageTypeDef]) -> list[str]:
        """Invoke the ingest function on an event of these messages; the ids it reports as failed."""
        event = sqs_event(messages, self.queue_arn, self.aws.region)
        result = self.handlers.ingest(event, context("arcs-ingest"))
        return [item["itemIdentifier"] for item in result["batchItemFailures"]]


def lp(measurement: str, count: int, start_ns: int = T0_NS, host: str = "a") -> str:
    return "\n".join(f"{measurement},host={host} v={i}i {start_ns + i * 1000}" for i in range(count))


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"
