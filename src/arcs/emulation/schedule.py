"""EventBridge's schedule rules and Lambda's asynchronous invoke, for the tasks function.

EventBridge delivers a rule's event by invoking the function asynchronously: its delivery succeeds
once Lambda has queued the event, and what the function does with it is Lambda's business. So is
the trigger route's ``Invoke`` with ``InvocationType=Event``. ``AsyncInvoker`` is that queue, with
Lambda's policy for it: a payload of at most 1 MB; an event whose invocation fails is retried
twice (after about one and two minutes), never beyond its maximum age (6 hours); then it goes to
the on-failure destination, here ``AsyncInvoker.failures`` and an error in the log, never an
exception into the loop that queued it. ``EventBridgeRule`` puts an event on such a queue every
``interval_s`` seconds (0: never).
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from arcs.emulation.functions import ACCOUNT_ID, ASYNC_PAYLOAD_LIMIT, InvokeError, LambdaFunction

logger = logging.getLogger(__name__)

#: Lambda's defaults for asynchronous invocation (``PutFunctionEventInvokeConfig``), and its ranges.
MAX_RETRY_ATTEMPTS = 2
MAX_EVENT_AGE_S = 6 * 3600
EVENT_AGE_RANGE_S = (60, 6 * 3600)
RETRY_DELAYS_S = (60.0, 120.0)  # before the second and the third attempt
FAILURES_KEPT = 1000


def _clock() -> float:
    """The queue's clock (tests move it forward to age an event)."""
    return time.monotonic()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(order=True)
class _Queued:
    due: float
    order: int
    event: dict[str, Any] = field(compare=False)
    queued_at: float = field(compare=False)
    request_id: str = field(compare=False, default_factory=lambda: str(uuid.uuid4()))
    attempts: int = field(compare=False, default=0)


class AsyncInvoker(threading.Thread):
    """One function's asynchronous event queue, run one event at a time (one container)."""

    def __init__(
        self,
        function: LambdaFunction,
        *,
        max_retry_attempts: int = MAX_RETRY_ATTEMPTS,
        max_event_age_s: float = MAX_EVENT_AGE_S,
        retry_delays_s: tuple[float, float] = RETRY_DELAYS_S,
    ) -> None:
        super().__init__(name=f"async-{function.name}", daemon=True)
        if not 0 <= max_retry_attempts <= MAX_RETRY_ATTEMPTS:
            raise ValueError(f"maximum retry attempts are 0 to {MAX_RETRY_ATTEMPTS}, got {max_retry_attempts}")
        if not EVENT_AGE_RANGE_S[0] <= max_event_age_s <= EVENT_AGE_RANGE_S[1]:
            raise ValueError(f"maximum event age is {EVENT_AGE_RANGE_S[0]} to {EVENT_AGE_RANGE_S[1]} s")
        self.function = function
        self.max_retry_attempts = max_retry_attempts
        self.max_event_age_s = max_event_age_s
        self.retry_delays_s = retry_delays_s
        # The on-failure destination: Lambda's invocation records, newest last.
        self.failures: deque[dict[str, Any]] = deque(maxlen=FAILURES_KEPT)
        self.invocations = 0
        self._queue: list[_Queued] = []
        self._order = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()

    def invoke_async(self, function_name: str, payload: bytes) -> None:
        """Lambda's ``Invoke`` with ``InvocationType=Event``: queue the payload, return at once."""
        if function_name not in (self.function.name, self.function.arn):
            raise InvokeError("ResourceNotFoundException", f"Function not found: {function_name}")
        if len(payload) > ASYNC_PAYLOAD_LIMIT:
            raise InvokeError(
                "RequestEntityTooLargeException",
                f"the payload is {len(payload)} bytes; an asynchronous invocation takes at most {ASYNC_PAYLOAD_LIMIT}",
            )
        try:
            event = json.loads(payload)
        except ValueError as exc:
            raise InvokeError("InvalidRequestContentException", f"the payload is not JSON: {exc}") from exc
        self.submit(event)

    def submit(self, event: dict[str, Any]) -> None:
        """Queue ``event`` as EventBridge delivers it (its size is checked as ``invoke_async`` does)."""
        size = len(json.dumps(event))
        if size > ASYNC_PAYLOAD_LIMIT:
            raise InvokeError("RequestEntityTooLargeException", f"the event is {size} bytes")
        now = _clock()
        with self._lock:
            heapq.heappush(self._queue, _Queued(now, next(self._order), event, now))
        self._wake.set()

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def stop(self, timeout: float | None = None) -> None:
        """Stop taking events; what is queued is dropped (a scheduled run comes again)."""
        self._stopping.set()
        self._wake.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                head = self._queue[0] if self._queue else None
                wait = None if head is None else head.due - _clock()
                if wait is not None and wait <= 0:
                    heapq.heappop(self._queue)
            if wait is None or wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            assert head is not None
            self._attempt(head)

    def _attempt(self, queued: _Queued) -> None:
        age = _clock() - queued.queued_at
        if age > self.max_event_age_s:
            self._failed(queued, "EventAgeExceeded", None)
            return
        queued.attempts += 1
        self.invocations += 1
        try:
            self.function.invoke(queued.event)
        except InvokeError as exc:
            retries = queued.attempts - 1
            if retries < self.max_retry_attempts:
                delay = self.retry_delays_s[min(retries, len(self.retry_delays_s) - 1)]
                logger.warning(
                    "asynchronous invocation of %s failed (attempt %d): %s; retrying in %g s",
                    self.function.name,
                    queued.attempts,
                    exc,
                    delay,
                )
                queued.due = _clock() + delay
                with self._lock:
                    heapq.heappush(self._queue, queued)
                return
            self._failed(queued, "RetriesExhausted", exc)

    def _failed(self, queued: _Queued, condition: str, error: InvokeError | None) -> None:
        """The on-failure destination's record, as Lambda sends it."""
        record: dict[str, Any] = {
            "version": "1.0",
            "timestamp": _now(),
            "requestContext": {
                "requestId": queued.request_id,
                "functionArn": f"{self.function.arn}:$LATEST",
                "condition": condition,
                "approximateInvokeCount": queued.attempts,
            },
            "requestPayload": queued.event,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST"},
        }
        if error is not None:
            record["responseContext"]["functionError"] = "Unhandled"
            record["responsePayload"] = {"errorType": error.error_type, "errorMessage": error.message}
        self.failures.append(record)
        logger.error(
            "asynchronous invocation of %s dropped to its on-failure destination (%s after %d attempts): %s",
            self.function.name,
            condition,
            queued.attempts,
            error,
        )


class EventBridgeRule(threading.Thread):
    """A rate rule targeting a function: ``payload`` as its constant input, else a scheduled event."""

    def __init__(
        self, name: str, target: AsyncInvoker, interval_s: float, payload: dict[str, Any] | None = None
    ) -> None:
        super().__init__(name=f"rule-{name}", daemon=True)
        self.target = target
        self.interval_s = interval_s
        self.payload = payload
        region = target.function.arn.split(":")[3]
        self.region = region
        self.rule_arn = f"arn:aws:events:{region}:{ACCOUNT_ID}:rule/{name}"
        self._stopping = threading.Event()

    def scheduled_event(self) -> dict[str, Any]:
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT_ID,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.region,
            "resources": [self.rule_arn],
            "detail": {},
        }

    def stop(self, timeout: float | None = None) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        if self.interval_s <= 0:
            return
        while not self._stopping.wait(self.interval_s):
            # Delivered once Lambda has queued it: what the function does is no concern of the rule's.
            try:
                self.target.submit(dict(self.payload) if self.payload is not None else self.scheduled_event())
            except InvokeError as exc:
                logger.error("rule %s could not deliver its event: %s", self.rule_arn, exc)
