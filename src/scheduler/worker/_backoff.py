"""The backoff between worker stream attempts: :class:`ReconnectConfig` (its
settings) and :class:`Backoff` (the delays, full jitter under a doubling ceiling).

May call: nothing of the worker. Called by: the stream (``_stream.py``, which
re-exports both) and the :class:`~scheduler.worker.Worker` facade (its settings).
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectConfig:
    """Exponential backoff between stream attempts (full jitter under the ceiling).

    The defaults keep a restarted node from waiting for its workers: the first retry
    comes within 0.1 s, and however long the node was gone a worker tries again at
    least every 2 s (a 10 s ceiling left a node idle for up to 9 s after a restart).
    """

    initial_backoff_s: float = 0.1
    max_backoff_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_backoff_s <= self.max_backoff_s:
            raise ValueError("ReconnectConfig needs 0 < initial_backoff_s <= max_backoff_s")


class Backoff:
    """The delays between stream attempts: full jitter over a ceiling that doubles
    after each attempt up to ``max_backoff_s``, and starts again from
    ``initial_backoff_s`` once a stream was welcomed."""

    def __init__(
        self, config: ReconnectConfig, jitter: Callable[[float, float], float] = random.uniform
    ) -> None:
        self._config = config
        self._jitter = jitter
        self._ceiling_s = config.initial_backoff_s

    def reset(self) -> None:
        """A stream was welcomed: the next delay is short again."""
        self._ceiling_s = self._config.initial_backoff_s

    def next_delay_s(self) -> float:
        """The delay before the next attempt; doubles the ceiling for the one after."""
        delay = self._jitter(0, self._ceiling_s)
        self._ceiling_s = min(self._ceiling_s * 2, self._config.max_backoff_s)
        return delay


LOUD_EVERY = 64
"""After the first :data:`LOUD_EVERY` failures in a row, one in this many is logged loud."""


def loud_failure(n: int) -> bool:
    """Whether the ``n``-th stream failure in a row (from 1) is logged at WARNING (and
    its reconnect at INFO): the 1st, 2nd, 4th, ... 64th, then every 64th. A worker
    pointed at a dead server (about one attempt a second) says so at once, then about
    once a minute instead of every second forever; the rest go to DEBUG."""
    return n > 0 and (n & (n - 1) == 0 if n <= LOUD_EVERY else n % LOUD_EVERY == 0)


class FailureLog:
    """How loud to log a run of failed stream attempts (see :func:`loud_failure`)."""

    def __init__(self) -> None:
        self.failures = 0
        """Attempts in a row that failed; 0 after a welcomed stream ended cleanly."""

    def failed(self, *, after_welcome: bool) -> None:
        """One more failed attempt (a stream welcomed and then broken starts anew)."""
        self.failures = 1 if after_welcome else self.failures + 1

    def reset(self) -> None:
        """A welcomed stream ended cleanly."""
        self.failures = 0

    @property
    def broke_level(self) -> int:
        """The level of this failure's "stream broke" line."""
        return logging.WARNING if loud_failure(self.failures) else logging.DEBUG

    @property
    def reconnect_level(self) -> int:
        """The level of the "reconnecting" line after it."""
        return logging.INFO if self.failures == 0 or loud_failure(self.failures) else logging.DEBUG

    @property
    def note(self) -> str:
        """Said on a loud line once some were kept quiet."""
        if self.failures > 2 and loud_failure(self.failures):
            return f" ({self.failures} failures in a row; the rest are logged at DEBUG)"
        return ""
