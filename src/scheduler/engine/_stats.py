"""What the engine counts: throughput counters, dispatch lateness and pool metrics.

Owns nothing but numbers. Written by the parts that do the work (admission, timeline,
dispatcher, delivery, completer, reaper, shard handler); read by the facade's probes,
the demo and ``scheduler.metrics``, which exports them at scrape time (so the hot path
pays a dict increment or a bucket ``bisect``, never a Prometheus object's lock).
Imports only the pool order and the bucket counts.
"""

from __future__ import annotations

import collections
import dataclasses
import uuid

from scheduler._histogram import BATCH_BUCKETS, COMMIT_BUCKETS_S, LATENESS_BUCKETS_S, Buckets
from scheduler.engine._ready import POOL_ORDER
from scheduler.types import Pool

UNKNOWN = "unknown"
"""The pool and type label of a task this node did not dispatch (its row is elsewhere)."""

Labels = tuple[str, str]
"""(pool, type) of a task, the labels of the per-task counters."""

TASK_EVENTS: tuple[str, ...] = (
    "submitted",
    "dispatched",
    "completed",
    "failed",
    "retried",
    "dead_lettered",
    "cancelled",
)
"""The per-(pool, type) lifecycle counters of :attr:`EngineStats.tasks`."""
WRITE_KINDS: tuple[str, ...] = (
    "insert",
    "dispatch",
    "ack",
    "heartbeat",
    "complete",
    "fail",
    "release",
)
"""The kinds of batched store write whose latency and size are measured."""
LEASE_OUTCOMES: tuple[str, ...] = (
    "requeued",
    "retrying",
    "dead_letter",
    "cancelled",
    "ack_timeout",
)
"""What the reaper did with a task whose lease lapsed."""


def _task_counters() -> dict[str, collections.Counter[Labels]]:
    return {event: collections.Counter() for event in TASK_EVENTS}


HOLD_CAUSES = ("rate_limited", "paused")
"""Why a flow rule held a task back (issue 43): the ``cause`` label of its metrics."""


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
    loop_restarts: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter, repr=False
    )
    """Background loops started again after they died, by loop name."""
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
    tasks: dict[str, collections.Counter[Labels]] = dataclasses.field(
        default_factory=_task_counters, repr=False
    )
    """Per lifecycle event (:data:`TASK_EVENTS`), tasks by (pool, type)."""
    lateness_s: Buckets = dataclasses.field(
        default_factory=lambda: Buckets(LATENESS_BUCKETS_S), repr=False
    )
    """Delivery time - due time of every delivered task, in seconds."""
    ready_wait_s: dict[Pool, Buckets] = dataclasses.field(
        default_factory=lambda: {p: Buckets(LATENESS_BUCKETS_S) for p in POOL_ORDER},
        repr=False,
    )
    """Per pool: due time to dispatch commit, in seconds (the ready-queue wait)."""
    held_wait_s: dict[str, Buckets] = dataclasses.field(
        default_factory=lambda: {c: Buckets(LATENESS_BUCKETS_S) for c in HOLD_CAUSES},
        repr=False,
    )
    """Per cause (``rate_limited``, ``paused``; issue 43): how long a dispatched task
    was held by that flow rule, in seconds (due time, or the hold's start if later, to
    dispatch commit)."""
    commit_s: dict[str, Buckets] = dataclasses.field(
        default_factory=lambda: {k: Buckets(COMMIT_BUCKETS_S) for k in WRITE_KINDS},
        repr=False,
    )
    """Per kind of write (:data:`WRITE_KINDS`): the store call's latency in seconds."""
    batch_size: dict[str, Buckets] = dataclasses.field(
        default_factory=lambda: {k: Buckets(BATCH_BUCKETS) for k in WRITE_KINDS},
        repr=False,
    )
    """Per kind of write: rows per store call."""
    lease_expiries: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )
    """Per outcome (:data:`LEASE_OUTCOMES`): tasks whose lease lapsed."""
    throttled: collections.Counter[uuid.UUID] = dataclasses.field(
        default_factory=collections.Counter, repr=False
    )
    """Per tenant: tasks a quota reservation refused (counted in every round refused)."""
    epoch_changes: int = 0
    """Shards this node claimed (each claim raises the shard's epoch by one)."""
    shards_lost: int = 0
    """Shards this node gave up or lost."""

    def count(self, event: str, pool: Pool | str, type_: str, n: int = 1) -> None:
        """Add ``n`` tasks of (``pool``, ``type_``) to the ``event`` counter."""
        self.tasks[event][(str(pool), type_)] += n

    def write(self, kind: str, rows: int, seconds: float) -> None:
        """One batched store write of ``kind``: its size and latency."""
        self.commit_s[kind].observe(seconds)
        self.batch_size[kind].observe(rows)

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
