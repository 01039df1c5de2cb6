"""Every request the emulated AWS answers, metered: a WSGI middleware in front of a moto server of
the benchmark's own process (S3 by request class and bytes read, SQS in 64 KB chunks, DynamoDB
operations with the items they write), and how those requests become priced usage."""

from __future__ import annotations

import io
import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

from benchmarks import cost_prices as prices
from benchmarks.cost_prices import Usage
from benchmarks.pruning_requests import _QuietHandler


@dataclass(slots=True)
class Request:
    service: str  # s3, sqs, dynamodb
    operation: str
    sent: int
    received: int = 0
    items: int = 1  # DynamoDB: the items a batch or transaction writes


class MeteringApp:
    """WSGI middleware in front of moto: every request the emulated AWS answered, with its sizes."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.requests: list[Request] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if target:
            service = "sqs" if target.startswith("AmazonSQS") else "dynamodb"
            body = environ["wsgi.input"].read(length) if length else b""
            environ["wsgi.input"] = io.BytesIO(body)
            request = Request(service, target.split(".")[-1], length, items=_write_items(target, body))
        else:
            method = environ["REQUEST_METHOD"]
            query = environ.get("QUERY_STRING", "")
            path = environ.get("PATH_INFO", "").strip("/")
            listing = method == "GET" and ("list-type" in query or "/" not in path)
            request = Request("s3", "LIST" if listing else method, length)
        with self.lock:
            self.requests.append(request)
        return self._counted(self.app(environ, start_response), request)

    @staticmethod
    def _counted(answer: Iterable[bytes], request: Request) -> Iterator[bytes]:
        try:
            for piece in answer:
                request.received += len(piece)
                if request.operation == "ReceiveMessage" and b'"Body"' in piece:
                    request.items = 2  # marks a receive that returned messages
                yield piece
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()

    def mark(self) -> int:
        with self.lock:
            return len(self.requests)

    def since(self, mark: int) -> list[Request]:
        with self.lock:
            return self.requests[mark:]


def _write_items(target: str, body: bytes) -> int:
    operation = target.split(".")[-1]
    if operation not in ("TransactWriteItems", "BatchWriteItem"):
        return 1
    document = json.loads(body or b"{}")
    if operation == "TransactWriteItems":
        return len(document.get("TransactItems", []))
    return sum(len(items) for items in document.get("RequestItems", {}).values())


DDB_READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


def storage_usage(requests: Iterable[Request], usage: Usage) -> None:
    """Add the billed units of ``requests`` to ``usage``.

    DynamoDB units are estimated: a read costs one unit per 4 KB answered (strongly consistent,
    the upper bound), a write one per 1 KB sent and at least one per item, a transaction twice
    that. SQS: receives that returned nothing are the poller's idle polling, priced under idle."""
    for request in requests:
        if request.service == "s3":
            if request.operation in ("PUT", "POST", "LIST"):
                usage.s3_put += 1
            elif request.operation != "DELETE":
                usage.s3_get += 1
        elif request.service == "sqs":
            if request.operation == "ReceiveMessage" and request.items < 2:
                continue
            usage.sqs_requests += prices.sqs_chunks(max(request.sent, request.received))
        elif request.operation in DDB_READS:
            units = max(1, math.ceil(request.received / 4096))
            usage.ddb_read_units += units * (2 if request.operation == "TransactGetItems" else 1)
        elif request.operation in DDB_WRITES:
            units = max(request.items, math.ceil(request.sent / 1024))
            usage.ddb_write_units += units * (2 if request.operation == "TransactWriteItems" else 1)


def s3_bytes_read(requests: Iterable[Request]) -> int:
    return sum(r.received for r in requests if r.service == "s3" and r.operation == "GET")


def start_metered_moto() -> tuple[str, MeteringApp]:
    app = MeteringApp(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", app
