"""The emulation enforces AWS's limits (docs/aws-limits.md): Lambda's payloads, configuration
ranges and timeout, API Gateway's integration timeout, Lambda's asynchronous invocation (its
payload, retries, event age and on-failure destination), the SQS event source's batch rules, and
a streamed response's (Lambda's 200 MB and bandwidth, API Gateway's 15 minutes and idle timeout)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from arcs import envvars
from arcs.emulation import schedule
from arcs.emulation.functions import (
    ASYNC_PAYLOAD_LIMIT,
    LAMBDA_PAYLOAD_LIMIT,
    InvokeError,
    LambdaFunction,
    StreamCut,
)
from arcs.emulation.gateway import API_GATEWAY_TIMEOUT_S, ApiGateway
from arcs.emulation.local import event_source_batch_size
from arcs.emulation.poller import SqsPoller
from arcs.emulation.schedule import AsyncInvoker, EventBridgeRule
from arcs.http.streaming import (
    API_GATEWAY_STREAM_IDLE_S,
    API_GATEWAY_STREAM_MAX_S,
    LAMBDA_STREAM_BYTES_PER_S,
    LAMBDA_STREAM_MAX_BYTES,
    LAMBDA_STREAM_UNCAPPED_BYTES,
    PRELUDE_MAX_BYTES,
    StreamedResponse,
)
from arcs.settings import ConfigError, Settings


def function(handler: Any, timeout_s: float = 5, **options: Any) -> LambdaFunction:
    return LambdaFunction("fn", handler, timeout_s=timeout_s, **options)


def echo(event: dict[str, Any], context: Any) -> Any:
    return event


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


# --- Lambda: synchronous payloads, configuration, timeout ------------------------------------------
def test_a_sync_request_or_response_over_6_mb_is_refused() -> None:
    assert LAMBDA_PAYLOAD_LIMIT == 6 * 1024 * 1024
    fits = {"b": "x" * (LAMBDA_PAYLOAD_LIMIT - 10)}
    assert len(json.dumps(fits)) == LAMBDA_PAYLOAD_LIMIT - 1
    assert function(lambda e, c: "ok").invoke(fits) == "ok"
    with pytest.raises(InvokeError) as refused:
        function(echo).invoke({"b": "x" * LAMBDA_PAYLOAD_LIMIT})
    assert refused.value.error_type == "RequestEntityTooLargeException"
    with pytest.raises(InvokeError) as too_big:
        function(lambda e, c: "x" * LAMBDA_PAYLOAD_LIMIT).invoke({})
    assert too_big.value.error_type == "ResponseSizeTooLarge"


@pytest.mark.parametrize(
    "options",
    [
        {"timeout_s": 901},
        {"timeout_s": 0},
        {"memory_mb": 127},
        {"memory_mb": 10_241},
        {"ephemeral_storage_mb": 511},
        {"ephemeral_storage_mb": 10_241},
    ],
)
def test_a_configuration_lambda_refuses_is_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="fn: "):
        LambdaFunction("fn", echo, **{"timeout_s": 5, **options})


def test_the_largest_configuration_lambda_takes_is_taken() -> None:
    fn = LambdaFunction("fn", echo, timeout_s=900, memory_mb=10_240, ephemeral_storage_mb=10_240)
    assert (fn.timeout_s, fn.memory_mb, fn.ephemeral_storage_mb) == (900, 10_240, 10_240)


def test_an_invocation_past_its_timeout_ends_with_sandbox_timedout() -> None:
    release = threading.Event()
    calls: list[float] = []

    def slow(event: dict[str, Any], context: Any) -> str:
        calls.append(context.get_remaining_time_in_millis())
        release.wait(10)
        return "late"

    fn = function(slow, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(InvokeError) as timed_out:
        fn.invoke({})
    assert timed_out.value.error_type == "Sandbox.Timedout"
    assert timed_out.value.message == "Task timed out after 0.30 seconds"
    assert 0.3 <= time.monotonic() - started < 2
    # The container stays busy until the abandoned handler returns; then the next one runs.
    assert fn.lock.locked()
    release.set()
    fn.handler = echo
    assert fn.invoke({"a": 1}) == {"a": 1}
    assert len(calls) == 1 and 0 < calls[0] <= 300


# --- API Gateway ------------------------------------------------------------------------------
def allow_all(event: dict[str, Any], context: Any) -> dict[str, Any]:
    statement = {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": "*"}
    return {"principalId": "p", "policyDocument": {"Version": "2012-10-17", "Statement": [statement]}}


def test_a_function_slower_than_the_integration_timeout_is_a_504() -> None:
    assert API_GATEWAY_TIMEOUT_S == 29.0
    release = threading.Event()

    def slow(event: dict[str, Any], context: Any) -> dict[str, Any]:
        release.wait(10)
        return {"statusCode": 200, "body": ""}

    # The edge function's integration buffers (the query function's streams: below).
    writes = LambdaFunction("w", slow, timeout_s=60)
    gateway = ApiGateway(function(allow_all), writes, function(echo), integration_timeout_s=0.3)
    started = time.monotonic()
    response = gateway.handle("POST", "/api/v1/write/msgpack", "", {"authorization": "Bearer t"}, b"")
    assert response.status == 504 and json.loads(response.body)["error"] == "Endpoint request timed out"
    assert time.monotonic() - started < 2
    release.set()


def test_a_function_that_times_out_is_a_502() -> None:
    queries = LambdaFunction("q", lambda e, c: time.sleep(2), timeout_s=0.2)
    gateway = ApiGateway(function(allow_all), function(echo), queries, integration_timeout_s=5)
    response = gateway.handle("GET", "/api/v1/databases", "", {"authorization": "Bearer t"}, b"")
    assert response.status == 502


# --- Lambda's asynchronous invocation ---------------------------------------------------------------
@pytest.fixture
def queue() -> Iterator[tuple[AsyncInvoker, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.append(event)
        if event.get("fail"):
            raise RuntimeError("compaction failed")

    invoker = AsyncInvoker(function(handler), retry_delays_s=(0.05, 0.1))
    invoker.start()
    yield invoker, seen
    invoker.stop(timeout=5)


def test_an_async_payload_over_1_mb_is_refused(queue: tuple[AsyncInvoker, list[dict[str, Any]]]) -> None:
    invoker, _seen = queue
    assert ASYNC_PAYLOAD_LIMIT == 1024 * 1024
    with pytest.raises(InvokeError) as refused:
        invoker.invoke_async("fn", json.dumps({"b": "x" * ASYNC_PAYLOAD_LIMIT}).encode())
    assert refused.value.error_type == "RequestEntityTooLargeException"
    with pytest.raises(InvokeError, match="ResourceNotFoundException"):
        invoker.invoke_async("another", b"{}")


def test_a_failing_async_event_is_tried_three_times_then_goes_to_the_on_failure_destination(
    queue: tuple[AsyncInvoker, list[dict[str, Any]]],
) -> None:
    invoker, seen = queue
    invoker.invoke_async("fn", b'{"fail": true}')  # returns at once: the caller never sees the error
    wait_for(lambda: len(invoker.failures) == 1)
    assert seen == [{"fail": True}] * 3  # the first attempt and Lambda's two retries
    (record,) = invoker.failures
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 3
    assert record["requestPayload"] == {"fail": True}
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert record["responsePayload"] == {"errorType": "RuntimeError", "errorMessage": "compaction failed"}
    # The queue goes on: the next event is delivered.
    invoker.invoke_async("fn", b'{"task": "retention"}')
    wait_for(lambda: seen[-1] == {"task": "retention"})
    assert invoker.is_alive() and len(invoker.failures) == 1


def test_an_event_older_than_its_maximum_age_is_not_invoked(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    invoker = AsyncInvoker(function(lambda e, c: seen.append(e)), max_event_age_s=60)
    invoker.submit({"task": "compaction"})  # queued while the function's queue is not running
    later = time.monotonic() + 61
    monkeypatch.setattr(schedule, "_clock", lambda: later)
    invoker.start()
    try:
        wait_for(lambda: len(invoker.failures) == 1)
    finally:
        invoker.stop(timeout=5)
    assert seen == []
    assert invoker.failures[0]["requestContext"]["condition"] == "EventAgeExceeded"


@pytest.mark.parametrize("options", [{"max_retry_attempts": 3}, {"max_event_age_s": 59}, {"max_event_age_s": 21_601}])
def test_async_settings_lambda_refuses_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="maximum"):
        AsyncInvoker(function(echo), **options)


def test_a_rule_keeps_its_schedule_when_its_target_fails(queue: tuple[AsyncInvoker, list[dict[str, Any]]]) -> None:
    invoker, _seen = queue
    rule = EventBridgeRule("r", invoker, 0.05, {"fail": True})
    rule.start()
    try:
        wait_for(lambda: len(invoker.failures) >= 2)
        assert rule.is_alive()
    finally:
        rule.stop(timeout=5)
    scheduled = EventBridgeRule("s", invoker, 1).scheduled_event()
    assert scheduled["detail-type"] == "Scheduled Event" and scheduled["resources"] == [
        "arn:aws:events:us-east-1:123456789012:rule/s"
    ]


# --- the SQS event source ---------------------------------------------------------------------
def test_a_batch_over_10_needs_a_one_second_window() -> None:
    with pytest.raises(ValueError, match="at least 1 s"):
        SqsPoller(None, "q", "arn", function(echo), batch_size=11, batching_window_s=0.5)  # type: ignore[arg-type]
    SqsPoller(None, "q", "arn", function(echo), batch_size=10_000, batching_window_s=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 to 10,000"):
        SqsPoller(None, "q", "arn", function(echo), batch_size=10_001, batching_window_s=1)  # type: ignore[arg-type]


def test_arcs_local_batches_10_with_a_short_window_unless_told_otherwise() -> None:
    short = {envvars.INGEST_BATCH_WINDOW_S: "0.2"}
    assert event_source_batch_size(Settings.from_env(short), short) == 10
    long = {envvars.INGEST_BATCH_WINDOW_S: "1", envvars.INGEST_BATCH_MESSAGES: "1000"}
    assert event_source_batch_size(Settings.from_env(long), long) == 1000
    explicit = {**short, envvars.INGEST_BATCH_MESSAGES: "100"}
    with pytest.raises(ConfigError, match="at least 1"):
        event_source_batch_size(Settings.from_env(explicit), explicit)


# --- Response streaming: Lambda's InvokeWithResponseStream behind API Gateway's STREAM mode ------------
def streamed(*pieces: bytes, status: int = 200, pause_s: float = 0.0, fail: Exception | None = None) -> Any:
    """A streaming handler answering ``pieces``, ``pause_s`` apart, then failing with ``fail`` if given."""

    def body() -> Iterator[bytes]:
        for piece in pieces:
            time.sleep(pause_s)
            yield piece
        if fail is not None:
            raise fail

    return lambda event, context: StreamedResponse(status, {"Content-Type": "text/plain"}, body())


def stream_gateway(queries: LambdaFunction, **options: Any) -> ApiGateway:
    return ApiGateway(function(allow_all), function(echo), queries, **options)


def ask(gateway: ApiGateway) -> Any:
    return gateway.handle("POST", "/api/v1/query", "", {"authorization": "Bearer t"}, b"{}")


def test_a_streamed_answer_reaches_the_client_as_it_is_written_past_29_s_and_6_mb() -> None:
    # Timed on a shorter clock than AWS's: a buffered integration would give up after 0.2 s here.
    queries = LambdaFunction("q", streamed(b"a" * 7 * 1024 * 1024, b"b", pause_s=0.3), timeout_s=5)
    started = time.monotonic()
    response = ask(stream_gateway(queries, integration_timeout_s=0.2))
    assert response.status == 200 and response.headers == {"Content-Type": "text/plain"}
    first = next(response.stream)
    assert time.monotonic() - started < 1.5  # the first piece came before the rest was written
    body = response.body + first + b"".join(response.stream)
    assert body == b"a" * 7 * 1024 * 1024 + b"b"


def test_lambda_streams_6_mb_at_full_speed_then_2_mb_a_second() -> None:
    assert (LAMBDA_STREAM_UNCAPPED_BYTES, LAMBDA_STREAM_BYTES_PER_S) == (6 * 1024 * 1024, 2 * 1024 * 1024)
    fast = LambdaFunction("q", streamed(b"x" * LAMBDA_STREAM_UNCAPPED_BYTES), timeout_s=5)
    started = time.monotonic()
    assert len(b"".join(fast.invoke_stream({}))) > LAMBDA_STREAM_UNCAPPED_BYTES
    assert time.monotonic() - started < 1
    capped = LambdaFunction("q", streamed(b"x" * (LAMBDA_STREAM_UNCAPPED_BYTES + 2 * 1024 * 1024)), timeout_s=5)
    started = time.monotonic()
    b"".join(capped.invoke_stream({}, bytes_per_s=4 * 1024 * 1024))  # 2 MiB past the first 6, at 4 MiB/s
    assert 0.45 < time.monotonic() - started < 2


def test_a_stream_past_lambdas_200_mb_is_cut_short() -> None:
    assert LAMBDA_STREAM_MAX_BYTES == 200 * 1024 * 1024
    mib = b"x" * 1024 * 1024
    fn = LambdaFunction("q", streamed(*[mib] * 201), timeout_s=60)
    received: list[int] = []
    with pytest.raises(StreamCut, match="200"):
        received.extend(len(piece) for piece in fn.invoke_stream({}, bytes_per_s=1e12))
    assert sum(received) < LAMBDA_STREAM_MAX_BYTES


def test_a_stream_is_cut_when_the_function_times_out_fails_midway_or_idles() -> None:
    slow = LambdaFunction("q", streamed(b"a", b"b", pause_s=0.4), timeout_s=0.6)
    response = ask(stream_gateway(slow))
    with pytest.raises(StreamCut, match="timed out"):
        b"".join(response.stream)
    failing = LambdaFunction("q", streamed(b"a", fail=RuntimeError("disk gone")), timeout_s=5)
    with pytest.raises(StreamCut, match="disk gone"):
        b"".join(ask(stream_gateway(failing)).stream)
    idle = LambdaFunction("q", streamed(b"a", b"b", pause_s=0.5), timeout_s=5)
    with pytest.raises(StreamCut, match="idled out"):
        b"".join(ask(stream_gateway(idle, stream_idle_s=0.3)).stream)
    long = LambdaFunction("q", streamed(b"a", b"b", b"c", pause_s=0.2), timeout_s=5)
    with pytest.raises(StreamCut, match="longer than"):
        b"".join(ask(stream_gateway(long, stream_max_s=0.3)).stream)


def test_a_stream_that_fails_before_its_metadata_is_a_502() -> None:
    assert API_GATEWAY_STREAM_MAX_S == 900 and API_GATEWAY_STREAM_IDLE_S == 300
    late = LambdaFunction("q", lambda e, c: time.sleep(1), timeout_s=0.3)
    assert ask(stream_gateway(late)).status == 502  # Sandbox.Timedout before a byte
    crashed = LambdaFunction("q", lambda e, c: 1 / 0, timeout_s=5)
    assert ask(stream_gateway(crashed)).status == 502

    garbage = LambdaFunction("q", lambda e, c: _RawStream([b"x" * (PRELUDE_MAX_BYTES + 1)] * 20), timeout_s=5)
    assert ask(stream_gateway(garbage)).status == 502
    # What the function wrote past it is not read: its container is free for the next invocation.
    assert garbage.lock.acquire(timeout=2)


class _RawStream(StreamedResponse):
    """A stream without metadata: bytes as they are."""

    def __init__(self, pieces: list[bytes]) -> None:
        super().__init__(200, {}, pieces)

    def encoded(self) -> Iterator[bytes]:
        yield from self.body
