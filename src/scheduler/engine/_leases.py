"""Leases: the reaper that takes back tasks whose worker went silent.

Owns no state. Calls the store (``reclaim_expired``), the slots ledger, the sessions
registry (the session lets the task go and may stall), the timeline (requeued tasks go
back into the wheel) and the pre-loader's wake (retries and released children). Called
by the pre-loader's loop, which runs pre-load, reap and reconcile in one pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from scheduler.engine._config import EngineConfig
from scheduler.engine._registry import Sessions
from scheduler.engine._shard_state import ShardState
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline
from scheduler.store import Store
from scheduler.types import ReclaimResult


class Reaper:
    """Expired leases -> RETRYING, DEAD_LETTER, CANCELLED, or back to PRELOADED."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        shards: ShardState,
        slots: Slots,
        sessions: Sessions,
        timeline: Timeline,
        stats: EngineStats,
        wake_preloader: Callable[[], None],
        may_reap: Callable[[], bool] = lambda: True,
    ) -> None:
        self._store = store
        self._config = config
        self._now = now
        self._shards = shards
        self._slots = slots
        self._sessions = sessions
        self._timeline = timeline
        self._stats = stats
        self._wake_preloader = wake_preloader
        self._may_reap = may_reap
        """False during and just after a store outage (``Health.reaping_allowed``)."""

    def _count(self, result: ReclaimResult) -> None:
        """Lease expiries by outcome, and the lifecycle counters they move (labels from
        the slots ledger: before the slots are freed)."""
        stats = self._stats
        expiries = stats.lease_expiries
        expiries["requeued"] += len(result.requeued)
        expiries["retrying"] += len(result.retrying)
        expiries["dead_letter"] += len(result.dead_lettered)
        expiries["cancelled"] += len(result.cancelled)
        labels = self._slots.labels
        for event, keys in (
            ("retried", result.retrying),
            ("dead_lettered", result.dead_lettered),
            ("cancelled", result.cancelled),
        ):
            for key in keys:
                stats.tasks[event][labels(key.id)] += 1
        for key in (*result.retrying, *result.dead_lettered):
            stats.tasks["failed"][labels(key.id)] += 1

    async def reclaim_once(self) -> None:
        """Take back every expired lease of this node's shards (in batches).

        Not during or just after a store outage: a lease that lapsed only because its
        worker's heartbeats and completion could not be written is not the worker's
        silence. The writes held through the outage commit first, and every live
        worker gets a grace period to heartbeat again (``Health.reaping_allowed``)."""
        if self._config.ack_timeout_s > 0:
            self._stats.lease_expiries["ack_timeout"] += await self._sessions.release_overdue()
        await self._sessions.end_orphans()
        scope = self._shards.scope()
        if scope == []:
            return
        if not self._may_reap():
            return
        batch = self._config.preload_batch
        while True:
            result = await self._store.reclaim_expired(scope, self._now(), batch)
            gone = [*result.retrying, *result.dead_lettered, *result.cancelled]
            requeued = {p.key.id for p in result.requeued}
            self._count(result)
            for key in (*gone, *(p.key for p in result.requeued)):
                self._slots.free(key.id)
                self._sessions.expired(key.id, requeued=key.id in requeued)
            self._timeline.add(result.requeued)
            if result.dead_lettered or result.cancelled or result.retrying:
                # Retries to pre-load; children released by the upstream policy.
                self._wake_preloader()
            n = len(result.requeued) + len(gone)
            self._stats.reclaimed += n
            if n < batch:
                return
