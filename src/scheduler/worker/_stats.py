"""What a worker process counts: tasks handled by outcome, handler durations.

Owns nothing but numbers (the worker's ``/metrics`` reads them at scrape time).

May call: nothing (imports only the bucket counts). Called by: the handler runner
(writes), ``Worker.stats`` and ``scheduler.metrics`` (reads).
"""

from __future__ import annotations

import collections
import dataclasses

from scheduler._histogram import HANDLER_BUCKETS_S, Buckets

OUTCOMES: tuple[str, ...] = (
    "completed",
    "failed",
    "cancelled",
    "released",
    "rejected",
    "uncommitted",
)
"""How a handled attempt ended: its write was accepted as a completion, a failure, a
confirmed cancel or a release; the server refused it (a zombie: another attempt owns
the task, or the lease was lost); or it never got through (the stream stayed down)."""


@dataclasses.dataclass(slots=True)
class WorkerStats:
    """Per task type: attempts by outcome and handler durations."""

    handled: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    """(type, outcome) -> attempts."""
    handler_s: dict[str, Buckets] = dataclasses.field(default_factory=dict)
    """type -> handler durations in seconds."""

    def handler_done(self, type_: str, seconds: float) -> None:
        """One handler call of ``type_`` returned or raised after ``seconds``."""
        buckets = self.handler_s.get(type_)
        if buckets is None:
            buckets = self.handler_s[type_] = Buckets(HANDLER_BUCKETS_S)
        buckets.observe(seconds)
