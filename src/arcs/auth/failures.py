"""Failed authentications per client address: a token bucket each, so a client that keeps sending
bad tokens is answered 429 (with ``Retry-After``) before its next guess costs a catalog read.

Only the standalone server knows its clients' addresses; in AWS, API Gateway's throttling (and a
WAF rule, where one is wanted) plays this part.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from arcs.errors import TooManyRequests

_MAX_CLIENTS = 10_000


class AuthFailures:
    """``per_minute`` failures an address may have in a burst, refilled at that rate; 0: no limit."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (allowance, as of)
        self._lock = threading.Lock()

    def _allowance(self, client: str, now: float) -> float:
        allowance, since = self._buckets.get(client, (self.capacity, now))
        return min(self.capacity, allowance + (now - since) * self.rate)

    def check(self, client: str | None) -> None:
        """Raises TooManyRequests while ``client`` has spent its failures."""
        if client is None or not self.capacity:
            return
        now = self.clock()
        with self._lock:
            if client not in self._buckets:
                return
            allowance = self._allowance(client, now)
        if allowance < 1:
            wait = math.ceil((1 - allowance) / self.rate)
            raise TooManyRequests(
                f"too many failed authentications from this address; retry in {wait} s", retry_after_s=wait
            )

    def failed(self, client: str | None) -> None:
        if client is None or not self.capacity:
            return
        now = self.clock()
        with self._lock:
            if client not in self._buckets and len(self._buckets) >= _MAX_CLIENTS:
                # Forget the addresses whose allowance is whole again; all of them if none is.
                whole = [c for c in self._buckets if self._allowance(c, now) >= self.capacity]
                for address in whole or list(self._buckets):
                    del self._buckets[address]
            self._buckets[client] = (self._allowance(client, now) - 1, now)
