"""Fixed-bucket histograms that the hot path fills and the metrics endpoint reads.

A leaf (imports nothing of Tickwheel). One ``observe`` is a ``bisect`` and two
additions, so the engine and the worker count without importing ``prometheus_client``;
``scheduler.metrics`` turns the counts into Prometheus histograms at scrape time.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

LATENESS_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 7200.0,
)  # fmt: skip
"""Dispatch lateness and ready-queue wait: 1 ms to two hours (a backlog after an outage)."""
COMMIT_BUCKETS_S: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
"""Store commit latency: 0.5 ms to 10 s."""
BATCH_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
"""Rows per batched store call."""
HANDLER_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0,
)  # fmt: skip
"""Worker handler duration: 1 ms to an hour."""


class Buckets:
    """Counts per upper bound (the last slot is +Inf) and the sum of what was seen."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError("bucket bounds must be strictly increasing")
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        """Count one value (``le`` semantics: a value equal to a bound is in it)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        """How many values were seen."""
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count of values <= le)`` pairs ending with ``+Inf``, as exposed."""
        out: list[tuple[str, int]] = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out
