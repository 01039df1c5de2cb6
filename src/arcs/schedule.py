"""The schedule where no EventBridge exists: a thread that runs a task every so many seconds.

The standalone server runs continuous queries with it (DESIGN.md §2: "schedule" port, local
adapter); each run is the same core call the scheduled Lambda function makes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)


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
