"""The schedule port: what runs compaction and continuous queries on a schedule.

In AWS EventBridge rules invoke the tasks function, and the compaction trigger route invokes it
asynchronously (the query function that answers the route has neither the time nor the memory
to compact). In the standalone server threads do it: a compaction timer every ``interval_s``
(0: off) that also runs at once when triggered, and a periodic task for continuous queries; each
run is the same core call the scheduled Lambda function makes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from arcs.errors import ServiceUnavailable, StorageFault

if TYPE_CHECKING:
    from arcs.lifecycle.compaction.compactor import Compactor
    from arcs.lifecycle.compaction.report import RunReport

logger = logging.getLogger(__name__)


class CompactionTrigger(Protocol):
    def trigger(self, database: str | None, measurement: str | None) -> dict[str, Any]:
        """Start a compaction run soon (not waiting for it); what the route answers."""
        ...

    def status(self) -> dict[str, Any]:
        """What this process knows of its schedule and runs."""
        ...


class CompactionTimer(threading.Thread):
    """The standalone server's schedule: a run every ``interval_s`` seconds, and one per trigger."""

    def __init__(self, compactor: Callable[[], Compactor], interval_s: float) -> None:
        super().__init__(name="arcs-compaction", daemon=True)
        self._compactor = compactor
        self.interval_s = interval_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[tuple[str | None, str | None]] = []
        self.running = False
        self.last_report: RunReport | None = None
        self.runs = 0
        self.next_run_at: datetime | None = None

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def trigger(self, database: str | None, measurement: str | None) -> dict[str, Any]:
        with self._lock:
            self._requests.append((database, measurement))
        if not self.is_alive():
            # A process without the timer (a test app): run in the background once.
            threading.Thread(target=self._drain, name="arcs-compaction-once", daemon=True).start()
        self._wake.set()
        return {"triggered": True, "database": database, "measurement": measurement}

    def status(self) -> dict[str, Any]:
        report = self.last_report
        return {
            "scheduler": "timer",
            "enabled": self.interval_s > 0,
            "interval_s": self.interval_s,
            "running": self.running,
            "runs": self.runs,
            "next_run_at": None if self.next_run_at is None else self.next_run_at.isoformat(),
            "last_run": None if report is None else report.to_json(),
        }

    def run(self) -> None:
        while not self._stopping.is_set():
            wait = self.interval_s if self.interval_s > 0 else None
            self.next_run_at = None if wait is None else datetime.now(UTC) + timedelta(seconds=wait)
            woken = self._wake.wait(wait)
            self._wake.clear()
            if self._stopping.is_set():
                return
            if not woken:
                with self._lock:
                    self._requests.append((None, None))
            self._drain()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._requests:
                    return
                database, measurement = self._requests.pop(0)
            self.running = True
            try:
                self.last_report = self._compactor().run(database, measurement)
            except Exception:
                logger.exception("compaction run failed; the next one retries")
            finally:
                self.running = False
                self.runs += 1


class LambdaCompactionTrigger:
    """AWS: the trigger invokes the tasks function asynchronously (``InvocationType=Event``)."""

    def __init__(self, invoke: Callable[[str, bytes], None], function_name: str) -> None:
        self._invoke = invoke
        self.function_name = function_name

    def trigger(self, database: str | None, measurement: str | None) -> dict[str, Any]:
        if not self.function_name:
            raise ServiceUnavailable("no tasks function is configured for this deployment")
        payload = {"source": "arcs.trigger", "database": database, "measurement": measurement}
        try:
            self._invoke(self.function_name, json.dumps(payload).encode())
        except Exception as exc:
            raise StorageFault(f"could not start the tasks function: {exc}") from exc
        return {"triggered": True, "database": database, "measurement": measurement}

    def status(self) -> dict[str, Any]:
        return {"scheduler": "eventbridge", "enabled": bool(self.function_name), "function": self.function_name}


class PeriodicTask(threading.Thread):
    """Calls ``task`` every ``every_s`` seconds (the first time after one period) until stopped."""

    def __init__(self, name: str, every_s: float, task: Callable[[], object]) -> None:
        super().__init__(name=f"arcs-{name}", daemon=True)
        self.every_s = every_s
        self.task = task
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            try:
                self.task()
            except Exception:
                # A failed run is retried at the next tick; the task keeps its own state.
                logger.exception("%s failed; it runs again in %g s", self.name, self.every_s)
