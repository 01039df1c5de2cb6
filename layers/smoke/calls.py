"""The handlers invoked as Lambda invokes them (context, API Gateway and SQS events), and what the
moto server recorded of the calls made to it (the functions' asynchronous invokes).
"""

from __future__ import annotations

import base64
import http.server
import importlib.util
import json
import os
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .routes import ROUTES, WRITE_ROUTES


class Context:
    """The fields of Lambda's context object the handlers (Powertools Logger) read."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 1024
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.aws_request_id = f"smoke-{name}"
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "smoke"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


Handler = Callable[[dict[str, Any], Context], Any]


def load(functions: Path, folder: str, file: str = "handler.py") -> Handler:
    spec = importlib.util.spec_from_file_location(f"smoke_{folder}_{Path(file).stem}", functions / folder / file)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Handler = module.handler
    return handler


def http_event(
    method: str, path: str, body: bytes, caller: dict[str, Any], headers: dict[str, str], query: dict[str, str]
) -> dict[str, Any]:
    """An API Gateway REST proxy event as the stack's ``/{proxy+}`` resource delivers it."""
    return {
        "resource": "/{proxy+}",
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query or None,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} or None,
        "pathParameters": {"proxy": path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": method,
            "path": "/prod" + path,
            "accountId": "123456789012",
            "stage": "prod",
            "requestId": "smoke",
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": caller,
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


class Api:
    """Calls routes through the function API Gateway sends them to; records which it called."""

    def __init__(self, edge: Handler, query: Handler, caller: dict[str, Any]) -> None:
        self.edge, self.query, self.caller = edge, query, caller
        self.called: set[tuple[str, str]] = set()

    def call(
        self,
        method: str,
        route: str,
        path: str | None = None,
        *,
        body: bytes | dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        status: int = 200,
    ) -> Any:
        assert (method, route) in ROUTES, (method, route)
        self.called.add((method, route))
        raw = json.dumps(body).encode() if isinstance(body, dict) else body or b""
        headers = {"Content-Type": "application/json", **(headers or {})}
        event = http_event(method, path or route, raw, self.caller, headers, query or {})
        function = self.edge if (method, route) in WRITE_ROUTES else self.query
        answer = function(event, Context("edge" if function is self.edge else "query"))
        assert answer["statusCode"] == status, (method, path or route, answer)
        text = answer.get("body") or ""
        payload = base64.b64decode(text) if answer.get("isBase64Encoded") else text.encode()
        types = {**(answer.get("multiValueHeaders") or {}), **(answer.get("headers") or {})}
        kind = next((v for k, v in types.items() if k.lower() == "content-type"), "")
        if "application/json" in str(kind) and payload:
            return json.loads(payload)
        return payload


@dataclass(frozen=True)
class Invocation:
    function: str
    headers: dict[str, str]
    event: dict[str, Any]


class Recording:
    """The requests made of the moto server meanwhile, as its recorder kept them."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.entries: list[dict[str, Any]] = []

    def _moto_api(self, action: str, method: str = "POST") -> bytes:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}", method=method)  # noqa: S310
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - the local test server
            body: bytes = answer.read()
            return body

    def __enter__(self) -> Recording:
        self._moto_api("reset-recording")
        self._moto_api("start-recording")
        return self

    def __exit__(self, *exc: object) -> None:
        self._moto_api("stop-recording")
        lines = self._moto_api("download-recording", "GET").decode().splitlines()
        self.entries = [json.loads(line) for line in lines if line.strip()]

    def invocations(self) -> list[Invocation]:
        """Lambda ``Invoke`` requests: ``POST /2015-03-31/functions/{name}/invocations``."""
        found = []
        for entry in self.entries:
            path = urllib.parse.urlsplit(entry["url"]).path.split("/")
            if entry["method"] == "POST" and path[1:3] == ["2015-03-31", "functions"] and path[-1] == "invocations":
                body = base64.b64decode(entry["body"]) if entry["body_encoded"] else entry["body"].encode()
                found.append(Invocation(urllib.parse.unquote(path[3]), entry["headers"], json.loads(body)))
        return found


class _CloudFormation(http.server.BaseHTTPRequestHandler):
    """The presigned ``ResponseURL`` the bootstrap function answers CloudFormation at."""

    answers: list[dict[str, Any]] = []

    def do_PUT(self) -> None:
        self.answers.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def bootstrap(handler: Handler) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CloudFormation)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        event = {
            "RequestType": "Create",
            "ResponseURL": f"http://127.0.0.1:{server.server_address[1]}/cloudformation",
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/smoke/1",
            "RequestId": "smoke",
            "LogicalResourceId": "Bootstrap",
            "ResourceType": "Custom::ArcsBootstrap",
            "ResourceProperties": {"SecretArn": os.environ["SMOKE_ADMIN_SECRET_ARN"]},
        }
        handler(event, Context("bootstrap"))
    finally:
        server.shutdown()
    [answer] = _CloudFormation.answers
    assert (answer["Status"], answer["Data"]) == ("SUCCESS", {"Created": "true"}), answer


def sqs_event(sqs: Any, queue_url: str) -> dict[str, Any]:
    """Everything queued, as the SQS event source hands a batch to the ingest function."""
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    records = []
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
        "Messages", []
    ):
        records += [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in batch
        ]
    return {"Records": records}
