"""What the engine counts: throughput counters, dispatch lateness and pool metrics.

Owns nothing but numbers. Written by the parts that do the work (admission, timeline,
dispatcher, delivery, completer, reaper); read by the facade's probes, the demo and,
later, the metrics endpoint. Imports only the pool order.
"""

from __future__ import annotations

import collections
import dataclasses

from scheduler.engine._ready import POOL_ORDER
from scheduler.types import Pool


@dataclasses.dataclass(slots=True)
class EngineStats:
    """Counters and a bounded sample of dispatch lateness, for metrics and the demo."""

    submitted: int = 0
    preloaded: int = 0
    dispatched: int = 0
    dispatch_rounds: int = 0
    """Dispatch commits (``dispatched / dispatch_rounds`` is the mean batch)."""
    delivered: int = 0
    completed: int = 0
    failed: int = 0
    stale_writes: int = 0
    spilled: int = 0
    """Tasks kept in the Redis index instead of the wheel (over its memory cap)."""
    index_rebuilds: int = 0
    """Shard indexes this node rebuilt from the store: on a gain that found them lost,
    and when its index round found an owned shard's index lost (FLUSHALL, a restart)."""
    reclaimed: int = 0
    schedule_fired: int = 0
    """Schedule occurrences turned into tasks."""
    canary_lag_ms: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=1000), repr=False
    )
    """Canary dispatch lag (dispatched - scheduled), most recent last."""
    lateness_ms: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=200_000), repr=False
    )
    pool_wait_ms: dict[Pool, collections.deque[float]] = dataclasses.field(
        default_factory=lambda: {p: collections.deque(maxlen=100_000) for p in POOL_ORDER},
        repr=False,
    )
    """Per pool: time from due to dispatch commit (waiting for a slot)."""

    def lateness_percentile(self, q: float) -> float | None:
        """The q-quantile (0..1) of recorded dispatch lateness in ms."""
        if not self.lateness_ms:
            return None
        ordered = sorted(self.lateness_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclasses.dataclass(frozen=True, slots=True)
class PoolMetrics:
    """A pool's state for metrics (brief §8)."""

    depth: int
    """Due tasks waiting for a slot."""
    wait_p50_ms: float | None
    wait_p99_ms: float | None
    slots_used: int
    """Tasks of this pool on workers now (this node)."""
    slots_reserved: int
    slots_max: int | None
