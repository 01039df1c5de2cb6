"""EventBridge's schedule and Lambda's asynchronous invoke, for the compact function.

A rate rule invokes the function every ``interval_s`` seconds with a scheduled event (0: never);
``invoke_async`` is the Lambda service's ``Invoke`` with ``InvocationType=Event``, which the
trigger route calls: the payload is queued and the call returns at once. As with Lambda, what an
asynchronous invocation raises is logged, not returned to anyone.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from arcs.emulation.functions import ACCOUNT_ID, InvokeError, LambdaFunction

logger = logging.getLogger(__name__)


class EventBridgeSchedule(threading.Thread):
    def __init__(self, function: LambdaFunction, interval_s: float, region: str = "us-east-1") -> None:
        super().__init__(name=f"schedule-{function.name}", daemon=True)
        self.function = function
        self.interval_s = interval_s
        self.region = region
        self.rule_arn = f"arn:aws:events:{region}:{ACCOUNT_ID}:rule/{function.name}-schedule"
        self._pending: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
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

    def invoke_async(self, function_name: str, payload: bytes) -> None:
        if function_name not in (self.function.name, self.function.arn):
            raise InvokeError("ResourceNotFoundException", f"Function not found: {function_name}")
        with self._lock:
            self._pending.append(json.loads(payload))
        self._wake.set()

    def stop(self, timeout: float | None = None) -> None:
        self._stopping.set()
        self._wake.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        while not self._stopping.is_set():
            woken = self._wake.wait(self.interval_s if self.interval_s > 0 else None)
            self._wake.clear()
            if self._stopping.is_set():
                return
            with self._lock:
                events = self._pending or ([] if woken else [self.scheduled_event()])
                self._pending = []
            for event in events:
                try:
                    self.function.invoke(event)
                except InvokeError as exc:
                    logger.error("asynchronous invocation of %s failed: %s", self.function.name, exc)
