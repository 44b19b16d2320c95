"""The pace of pushes to an ack-first worker stream: one push per
:data:`PUSH_INTERVAL_S` at most, what comes due sooner joining the next.

Owns the assignments held back and the timer that pushes them; calls the push function
it is given (the session's). Used by ``_sessions.WorkerSession.deliver`` only.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from scheduler.types import Assignment

PUSH_INTERVAL_S = 0.002
"""Shortest time between two pushes to an ack-first worker (:meth:`Pacer.offer`):
what comes due sooner joins the next push, so a due task waits this long at most. Each
push costs a message, an ack and a Result; at 5,000 fires/s this interval gave fewer of
them and a shorter, steadier tail than holding each push until the one before it was
answered, whose wait was a round trip through two busy event loops
(docs/benchmarks.md, "A push interval")."""

PUSH_HOLD_MAX = 250
"""Tasks held back that make a push of their own at once: in a burst the pushes keep
flowing, as big as a dispatch round (``EngineConfig.dispatch_batch``'s default), so the
worker starts on one while the next is on its way."""


EARLY_SHARE = 1 / 3
"""To a worker that holds pushes until their due time (``Hello.early_ms``) a task is
handed over between ``early_us`` and two thirds of it ahead of its due instant (the
delivery's window, ``Delivery.hold``), and a push may wait this share of ``early_us``
for the one before it: a task pushed on time still arrives a third of the lead ahead,
and a stream of 8,333 tasks a second costs 150 pushes (and acks, and their Results) a
second at the default lead of 20 ms (``EngineConfig.push_ahead_ms``) instead of 500
(docs/benchmarks.md, "Fewer messages a second")."""


class Pacer:
    """Assignments held back for the next push, and when the last one went."""

    __slots__ = ("_held", "_interval", "_last", "_push", "_timer")

    def __init__(self, push: Callable[[tuple[Assignment, ...]], None], early_us: int = 0) -> None:
        self._push = push
        self._interval = max(PUSH_INTERVAL_S, early_us / 1e6 * EARLY_SHARE)
        """The shortest time between two pushes: :data:`PUSH_INTERVAL_S`, or a share of
        the time a push goes ahead of its due instant (:data:`EARLY_SHARE`)."""
        self._last = -math.inf
        """When the last push went (``time.monotonic``)."""
        self._held: list[Assignment] = []
        """Assignments come due within :data:`PUSH_INTERVAL_S` of the last push."""
        self._timer: asyncio.TimerHandle | None = None

    def __bool__(self) -> bool:
        """Whether assignments are held back."""
        return bool(self._held)

    def offer(self, batch: tuple[Assignment, ...]) -> None:
        """Push ``batch`` now, or with the next push if the last went less than the
        interval ago (at once, once :data:`PUSH_HOLD_MAX` tasks wait: a burst keeps the
        pushes flowing, each a full one). A task due after a quiet spell goes at once.
        The messages a task costs (a push, an ack, a Result each) so fall as the rate
        rises, while the wait stays bounded whatever the load."""
        now = time.monotonic()
        held = self._held
        if held or now - self._last < self._interval:
            held.extend(batch)
            if len(held) >= PUSH_HOLD_MAX:
                self.flush()
            elif self._timer is None:
                wait = self._last + self._interval - now
                self._timer = asyncio.get_running_loop().call_later(max(wait, 0.0), self.flush)
            return
        self._last = now
        self._push(batch)

    def flush(self) -> None:
        """Push what was held back (its interval is over, or a push's worth waits)."""
        self.cancel()
        batch, self._held = self._held, []
        if batch:
            self._last = time.monotonic()
            self._push(tuple(batch))

    def cancel(self) -> None:
        """Stop the timer (what is held stays, for :meth:`flush` or :meth:`drop`)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def drop(self) -> None:
        """Forget what is held back (the session closed: it goes back with the unacked)."""
        self.cancel()
        self._held.clear()
