"""Failures counted per caller, and a block once there were too many: one rule for the
server's authentication throttle (per source address, ``server/_auth.py``) and the
dashboard's login throttle (per browser, ``ui/_boundary.py``). A leaf.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class FailureThrottle:
    """After ``limit`` failures of one caller within ``window_s``, that caller is
    blocked for ``block_s``; other callers are not affected. At most ``max_callers``
    are remembered in each table: expired entries go first, then the oldest."""

    def __init__(
        self,
        limit: int,
        window_s: float,
        block_s: float,
        *,
        max_callers: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self.block_s = block_s
        self.max_callers = max_callers
        self._clock = clock
        self._failures: dict[str, tuple[float, int]] = {}  # caller -> (window start, count)
        self._blocked: dict[str, float] = {}  # caller -> until

    def retry_after(self, caller: str) -> float | None:
        """Seconds until ``caller`` may try again, or None when it is not blocked."""
        until = self._blocked.get(caller)
        if until is None:
            return None
        left = until - self._clock()
        if left <= 0:
            del self._blocked[caller]
            return None
        return left

    def failed(self, caller: str) -> None:
        """Count one failure of ``caller`` (a block once it reaches ``limit``)."""
        now = self._clock()
        start, count = self._failures.get(caller, (now, 0))
        if now - start > self.window_s:
            start, count = now, 0
        count += 1
        if count >= self.limit:
            self._failures.pop(caller, None)
            self._blocked[caller] = now + self.block_s
        else:
            self._failures[caller] = (start, count)
        if len(self._failures) > self.max_callers:
            self._failures = {
                c: w for c, w in self._failures.items() if now - w[0] <= self.window_s
            }
        if len(self._blocked) > self.max_callers:
            self._blocked = {c: u for c, u in self._blocked.items() if u > now}
        for table in (self._failures, self._blocked):
            while len(table) > self.max_callers:  # still too many: the oldest go
                del table[next(iter(table))]
