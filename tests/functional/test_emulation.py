"""The local serverless emulation in-process: API Gateway front, authorizer cache, SQS poller, DLQ.

``start_emulation`` runs here against the session's moto server as the "external emulator"
(``AWS_ENDPOINT_URL``), with a short visibility timeout and a small ``maxReceiveCount`` so that
redrive to the dead-letter queue takes two seconds, and with the gateway's authorizer cache on
(keyed on the Authorization header; ``arcs local`` leaves it off, like the stack).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from arcs.emulation import Emulation, EmulationConfig, LambdaFunction, SqsPoller, start_emulation
from arcs.emulation.functions import LAMBDA_PAYLOAD_LIMIT
from arcs.emulation.gateway import API_GATEWAY_PAYLOAD_LIMIT
from arcs.http.api import lambda_app
from arcs.http.proxy import HttpResponse
from arcs.runtime import lambda_runtime
from arcs.settings import AWS_MAX_REQUEST_BYTES, AWS_TOO_LARGE_MESSAGE
from tests.conftest import ACCESS_KEY, SECRET_KEY, AwsEnv, MotoServer

pytestmark = [
    pytest.mark.functional,
]

TOKEN = "emulation-admin-token-0123456789"
TOKEN_TTL_S = 1  # API Gateway's authorizer cache TTL is whole seconds
T0_NS = 1_700_000_000 * 10**9


@pytest.fixture(scope="module")
def emulation(moto_server: MotoServer) -> Iterator[Emulation]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ENDPOINT_URL": moto_server.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "ARCS_BOOTSTRAP_TOKEN": TOKEN,
            "ARCS_LOCAL_AUTHORIZER_CACHE_TTL_S": str(TOKEN_TTL_S),
            "ARCS_INGEST_BATCH_WINDOW_S": "0.05",
            "ARCS_LOCAL_MAX_RECEIVE_COUNT": "2",
            "ARCS_LOCAL_VISIBILITY_TIMEOUT_S": "1",
        }.items():
            patch.setenv(name, value)
        for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "ARCS_PREFIX", "ARCS_CLAIM_CHECK_BYTES"):
            patch.delenv(name, raising=False)
        suffix = uuid.uuid4().hex[:10]
        config = dataclasses.replace(
            EmulationConfig.from_env(),
            bucket=f"arcs-emu-{suffix}",
            queue_name=f"arcs-emu-{suffix}",
            dlq_name=f"arcs-emu-dlq-{suffix}",
            table_prefix=f"arcs-emu-{suffix}",
        )
        assert (config.endpoint_url, config.max_receive_count, config.visibility_timeout_s) == (
            moto_server.endpoint,
            2,
            1,
        )
        lambda_app.cache_clear()
        running = start_emulation(config, patch.setenv)
        try:
            yield running
        finally:
            running.close()
            lambda_runtime.cache_clear()
            lambda_app.cache_clear()


def call(
    emulation: Emulation, method: str, path: str, body: bytes = b"", token: str | None = TOKEN, query: str = ""
) -> HttpResponse:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    response = emulation.gateway.handle(method, path, query, headers, body)
    if response.stream is None:
        return response
    # The query function's answers stream (as on AWS): read whole, as a client does.
    return HttpResponse(response.status, response.headers, response.body + b"".join(response.stream))


def count(emulation: Emulation, measurement: str, expected: int, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        response = call(
            emulation, "POST", "/api/v1/query", json.dumps({"sql": f"SELECT count(*) FROM {measurement}"}).encode()
        )
        if response.status == 200:
            seen = int(json.loads(response.body)["data"][0][0])
            if seen >= expected:
                return seen
        time.sleep(0.05)
    return seen


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_the_environment_is_the_stacks_and_the_admin_token_works(emulation: Emulation) -> None:
    settings = lambda_runtime().settings
    assert settings.backend == "aws"
    resources = emulation.resources
    assert (settings.bucket, settings.queue_url) == (resources["bucket"], resources["queue_url"])
    # One process, one runtime for every handler: all three tables (the stack gives each function its own).
    assert (settings.tokens_table, settings.catalog_table, settings.leases_table) == (
        resources["tokens_table"],
        resources["catalog_table"],
        resources["leases_table"],
    )
    assert settings.aws_endpoint_url == emulation.endpoint_url
    assert settings.work_dir is not None and str(settings.work_dir) == emulation.work_dir
    assert emulation.admin_token == TOKEN
    verify = call(emulation, "GET", "/api/v1/auth/verify")
    assert verify.status == 200 and "admin" in json.loads(verify.body)["permissions"]


def test_write_is_polled_ingested_deleted_and_queryable(emulation: Emulation) -> None:
    m = name("cpu")
    for k in range(4):  # 100 points: 25 a request
        lines = "\n".join(f"{m},host=h{i % 3} v={i}i {T0_NS + k * 25 + i}" for i in range(25)).encode()
        assert call(emulation, "POST", "/api/v1/write/line-protocol", lines).status == 204
    assert count(emulation, m, 100) == 100
    sqs = emulation.clients.sqs
    attributes = sqs.get_queue_attributes(QueueUrl=emulation.resources["queue_url"], AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
    assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"


@pytest.mark.parametrize(
    ("headers", "query"),
    [({}, ""), ({"authorization": "Bearer wrong-token-0123456789"}, ""), ({}, "p=wrong"), ({"x-api-key": "nope"}, "")],
)
def test_refused_or_missing_tokens_are_401_in_the_api_error_shape(
    emulation: Emulation, headers: dict[str, str], query: str
) -> None:
    for method, path in [("POST", "/api/v1/query"), ("POST", "/write"), ("GET", "/api/v1/auth/verify")]:
        response = emulation.gateway.handle(method, path, query, headers, b"m v=1")
        assert response.status == 401
        assert json.loads(response.body) == {"success": False, "error": "Unauthorized"}
    assert emulation.gateway.handle("GET", "/health", "", headers, b"").status == 200
    assert emulation.gateway.handle("GET", "/ready", "", headers, b"").status == 200


def test_authorizer_results_are_cached_per_token_for_the_ttl(
    emulation: Emulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    authorizer = emulation.gateway.authorizer
    calls: list[dict[str, Any]] = []
    real = authorizer.handler

    def counting(event: dict[str, Any], context: Any) -> Any:
        calls.append(event)
        return real(event, context)

    monkeypatch.setattr(authorizer, "handler", counting)
    other_token = lambda_runtime().tokens.create("reader", permissions=("read",))[1]
    time.sleep(TOKEN_TTL_S)  # whatever earlier tests cached has expired
    for _ in range(3):
        assert call(emulation, "GET", "/api/v1/auth/verify").status == 200
    assert len(calls) == 1
    (event,) = calls
    assert event["type"] == "REQUEST"
    assert event["methodArn"].endswith("/local/GET/api/v1/auth/verify")
    assert event["headers"]["authorization"] == f"Bearer {TOKEN}"
    # Another token is another identity; a cached policy is re-evaluated for each method ARN.
    assert call(emulation, "GET", "/api/v1/auth/verify", token=other_token).status == 200
    assert call(emulation, "POST", "/api/v1/query", b'{"sql": "SELECT 1"}').status == 200
    assert len(calls) == 2
    time.sleep(TOKEN_TTL_S + 0.1)
    assert call(emulation, "GET", "/api/v1/auth/verify").status == 200
    assert len(calls) == 3


def test_a_read_token_cannot_write_and_sees_its_identity(emulation: Emulation) -> None:
    reader = lambda_runtime().tokens.create("reader", permissions=("read",))[1]
    response = call(emulation, "POST", "/api/v1/write/line-protocol", b"m v=1", token=reader)
    assert response.status == 403 and "write" in json.loads(response.body)["error"]
    verify = json.loads(call(emulation, "GET", "/api/v1/auth/verify", token=reader).body)
    assert verify["name"] == "reader" and verify["permissions"] == ["read"]


def test_payload_limits_of_api_gateway_and_lambda_are_answered_as_aws_answers_them(emulation: Emulation) -> None:
    too_big = call(emulation, "POST", "/api/v1/write/line-protocol", b"0" * (API_GATEWAY_PAYLOAD_LIMIT + 1))
    assert too_big.status == 413 and "API Gateway" in json.loads(too_big.body)["error"]
    # Under API Gateway's limit but, base64-encoded in the event, over what Lambda can be invoked
    # with, and declaring no length the authorizer could refuse: API Gateway's 500.
    over_lambda = call(emulation, "POST", "/api/v1/write/line-protocol", b"0" * (LAMBDA_PAYLOAD_LIMIT * 3 // 4 + 1))
    assert over_lambda.status == 500 and json.loads(over_lambda.body)["error"] == "Internal server error"


def test_a_write_over_the_aws_limit_is_413_before_the_edge_and_one_at_it_is_stored(emulation: Emulation) -> None:
    """The write limit on AWS is what fits one synchronous invoke base64-encoded, with the largest
    headers API Gateway lets through (10,240 bytes, here all quotes: escaped twice over in the event)."""
    m = name("limit")
    line = f"{m} v=1i {T0_NS}\n".encode()
    body = line * (AWS_MAX_REQUEST_BYTES // len(line))
    body += b" " * (AWS_MAX_REQUEST_BYTES - len(body))  # trailing blanks: still one point per line
    assert len(body) == AWS_MAX_REQUEST_BYTES
    headers = {"authorization": f"Bearer {TOKEN}", "x-padding": '"' * 10_000, "content-length": str(len(body))}
    stored = emulation.gateway.handle("POST", "/api/v1/write/line-protocol", "", headers, body)
    assert stored.status == 204, stored.body
    over = {**headers, "content-length": str(len(body) + 1)}
    refused = emulation.gateway.handle("POST", "/api/v1/write/line-protocol", "", over, body + b" ")
    assert refused.status == 413
    assert json.loads(refused.body) == {"success": False, "error": AWS_TOO_LARGE_MESSAGE}


def test_a_poison_message_ends_in_the_dlq_through_the_poller(emulation: Emulation) -> None:
    sqs = emulation.clients.sqs
    poison = sqs.send_message(QueueUrl=emulation.resources["queue_url"], MessageBody="never a queued write")
    m = name("alive")
    assert call(emulation, "POST", "/api/v1/write/line-protocol", f"{m} v=1i {T0_NS}".encode()).status == 204
    assert count(emulation, m, 1) == 1  # the good write is not held back by the poison one
    dead: list[Any] = []
    deadline = time.monotonic() + 15
    while not dead and time.monotonic() < deadline:
        dead = sqs.receive_message(
            QueueUrl=emulation.resources["dlq_url"], WaitTimeSeconds=1, MessageSystemAttributeNames=["All"]
        ).get("Messages", [])
    assert [message["MessageId"] for message in dead] == [poison["MessageId"]]
    assert dead[0]["Body"] == "never a queued write"
    # It was received maxReceiveCount times by the poller (and once more from the DLQ just now).
    assert dead[0]["Attributes"]["ApproximateReceiveCount"] == "3"
    attributes = sqs.get_queue_attributes(QueueUrl=emulation.resources["queue_url"], AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
    assert attributes["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0"


# --- the SQS event source, with a stand-in function on a fresh queue -----------------------------
class Recorder:
    """A stand-in ingest function: records each event, answers what the test says."""

    def __init__(self, answer: Any = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.answer = answer

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.events.append(event)
        assert context.get_remaining_time_in_millis() > 0
        answer = self.answer(event) if callable(self.answer) else self.answer
        if isinstance(answer, Exception):
            raise answer
        return answer


def poller_on(aws: AwsEnv, recorder: Recorder, **options: Any) -> SqsPoller:
    arn = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    function = LambdaFunction("arcs-ingest", recorder, timeout_s=5)
    return SqsPoller(aws.sqs, aws.queue_url, arn, function, **options)


def send(aws: AwsEnv, count: int) -> list[str]:
    return [aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=f"m{i}")["MessageId"] for i in range(count)]


def in_flight(aws: AwsEnv) -> int:
    attributes = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_the_event_has_lambdas_sqs_record_shape(aws: AwsEnv) -> None:
    recorder = Recorder()
    aws.sqs.send_message(
        QueueUrl=aws.queue_url,
        MessageBody="hello",
        MessageAttributes={
            "kind": {"DataType": "String", "StringValue": "test"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        },
    )
    assert poller_on(aws, recorder).poll_once() == 1
    (record,) = recorder.events[0]["Records"]
    assert record["body"] == "hello"
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"].startswith("arn:aws:sqs:us-east-1:") and record["awsRegion"] == "us-east-1"
    assert record["md5OfBody"] == "5d41402abc4b2a76b9719d911017c592"
    assert record["md5OfMessageAttributes"]
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= set(record["attributes"])
    assert record["messageAttributes"] == {
        "kind": {"stringValue": "test", "stringListValues": [], "binaryListValues": [], "dataType": "String"},
        "blob": {"binaryValue": "AAE=", "stringListValues": [], "binaryListValues": [], "dataType": "Binary"},
    }
    assert {"messageId", "receiptHandle"} <= set(record)
    assert in_flight(aws) == 0


def test_only_the_reported_failures_stay_for_redelivery(aws: AwsEnv) -> None:
    ids = send(aws, 3)
    recorder = Recorder({"batchItemFailures": [{"itemIdentifier": ids[1]}]})
    poller = poller_on(aws, recorder, batch_size=10, batching_window_s=0.2)
    assert poller.poll_once() == 2
    assert sorted(r["messageId"] for r in recorder.events[0]["Records"]) == sorted(ids)
    assert in_flight(aws) == 1


@pytest.mark.parametrize(
    "answer",
    [RuntimeError("the function crashed"), {"batchItemFailures": [{"itemIdentifier": "not-in-the-batch"}]}],
    ids=["raises", "unknown-item"],
)
def test_a_failed_invocation_keeps_the_whole_batch(aws: AwsEnv, answer: Any) -> None:
    send(aws, 3)
    assert poller_on(aws, Recorder(answer), batching_window_s=0.2).poll_once() == 0
    assert in_flight(aws) == 3


def test_batches_gather_up_to_the_batch_size_within_the_window(aws: AwsEnv) -> None:
    send(aws, 25)
    recorder = Recorder()
    assert poller_on(aws, recorder, batch_size=20, batching_window_s=1.5).poll_once() == 20
    assert poller_on(aws, recorder, batch_size=20, batching_window_s=1).poll_once() == 5
    assert [len(e["Records"]) for e in recorder.events] == [20, 5]
    assert in_flight(aws) == 0


def test_the_poller_thread_stops_promptly(aws: AwsEnv) -> None:
    poller = poller_on(aws, Recorder())
    poller.start()
    send(aws, 2)
    deadline = time.monotonic() + 5
    while in_flight(aws) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_flight(aws) == 0
    started = time.monotonic()
    poller.stop(timeout=5)
    assert not poller.is_alive() and time.monotonic() - started < 2


def test_the_queue_refuses_a_message_over_sqs_1_mib_limit(emulation: Emulation) -> None:
    from botocore.exceptions import ClientError

    from arcs.adapters.aws.wiring import SQS_MAX_MESSAGE_BYTES

    assert SQS_MAX_MESSAGE_BYTES == 1024 * 1024
    sqs, queue_url = emulation.clients.sqs, emulation.resources["queue_url"]
    with pytest.raises(ClientError, match="shorter than 1048576 bytes"):
        sqs.send_message(QueueUrl=queue_url, MessageBody="x" * (SQS_MAX_MESSAGE_BYTES + 1))
    # The edge's claim-check threshold keeps every queued write (base64, in JSON) under the limit.
    assert emulation.settings.claim_check_bytes * 4 // 3 + 1024 < SQS_MAX_MESSAGE_BYTES


def test_scheduled_and_triggered_compaction_are_asynchronous_invocations(emulation: Emulation) -> None:
    response = call(emulation, "POST", "/api/v1/compaction/trigger", b"{}")
    assert response.status in (200, 202), response.body
    deadline = time.monotonic() + 30
    while emulation.tasks.invocations == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert emulation.tasks.invocations >= 1 and not emulation.tasks.failures
    assert emulation.poller.batch_size == 10  # a 0.05 s window: Lambda takes no more than 10


@pytest.mark.parametrize("junk", ["Negotiate xyz", "Bearer ", "\xa0", "\x85"])
def test_a_cached_answer_never_reaches_a_caller_without_a_token(emulation: Emulation, junk: str) -> None:
    """The cache key is the Authorization header alone, so a token beside an unusable one is not
    read: otherwise the admin's answer would be cached for the next sender of the same junk."""
    planted = emulation.gateway.handle(
        "GET", "/api/v1/auth/tokens", f"p={TOKEN}", {"authorization": junk, "x-api-key": TOKEN}, b""
    )
    assert planted.status == 401
    stranger = emulation.gateway.handle("GET", "/api/v1/auth/tokens", "", {"authorization": junk}, b"")
    assert stranger.status == 401
