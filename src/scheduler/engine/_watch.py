"""What the dashboard reads of a node: task counts, the forecast, the worker streams,
and the overdue tasks no worker stream connected here would take (``unserved``).

Owns :class:`Watch`, a thin read-only part: counts and the forecast come from the store
(for one tenant, or None for every tenant), the workers from this node's sessions.
Counts, and the overdue groups behind ``unserved``, are served from a short-lived
cache keyed by (tenant or every tenant, filter), respectively by tenant
(:class:`~scheduler.engine._count_cache.SwrCache`; ``EngineConfig.count_cache_*``): up to
``count_cache_ttl_s`` old, or ``count_cache_max_age_s`` while a refresh runs.
Built by the engine facade (``Engine.watch``); called by the transport's
``scheduler.server._insight``. Writes nothing.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

from scheduler.engine._config import EngineConfig
from scheduler.engine._count_cache import SwrCache
from scheduler.engine._registry import Sessions
from scheduler.engine._sessions import WorkerSession
from scheduler.store import Store
from scheduler.types import Forecast, OverdueGroup, Pool, TaskCounts, TaskFilter, TaskOrder


@dataclasses.dataclass(frozen=True, slots=True)
class CountedTasks:
    """:meth:`Watch.count_tasks`: the counts and when they were taken (the wall clock
    just before the store was asked)."""

    counts: TaskCounts
    as_of: datetime


_CountKey = tuple[uuid.UUID | None, TaskFilter]


def _filter_key(flt: TaskFilter) -> TaskFilter:
    """``flt`` with only what changes a count: states and pools sorted and once each,
    the order left at its default. Hashable (tuples in a frozen dataclass)."""
    return dataclasses.replace(
        flt,
        statuses=tuple(sorted(set(flt.statuses), key=lambda s: s.value)),
        pools=tuple(sorted(set(flt.pools), key=lambda p: p.value)),
        order=TaskOrder.SCHEDULED_ASC,
    )


class Watch:
    """Read-only views of the store and of this node's worker sessions."""

    def __init__(
        self,
        store: Store,
        sessions: Sessions,
        config: EngineConfig,
        now: Callable[[], datetime],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._now = now
        self.counts: SwrCache[_CountKey, CountedTasks] = SwrCache(
            self._count,
            ttl_s=config.count_cache_ttl_s,
            max_age_s=config.count_cache_max_age_s,
            max_keys=config.count_cache_keys,
            clock=clock,
        )
        """The count cache (its ``loads`` tell how often the store was asked)."""
        self.overdue: SwrCache[uuid.UUID | None, list[OverdueGroup]] = SwrCache(
            self._overdue,
            ttl_s=config.count_cache_ttl_s,
            max_age_s=config.count_cache_max_age_s,
            max_keys=config.count_cache_keys,
            clock=clock,
        )
        """The overdue groups, cached as the counts are: every browser's overview polls
        them, and with every worker gone they may be a read of every waiting task."""

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> CountedTasks:
        """``tenant_id``'s tasks (None: every tenant's) matching ``flt``, grouped by
        (tenant,) state, type and pool, as of up to the cache's TTL ago (the hard max
        while a refresh runs)."""
        return await self.counts.get((tenant_id, _filter_key(flt)))

    async def _count(self, key: _CountKey) -> CountedTasks:
        as_of = self._now()
        return CountedTasks(await self._store.count_tasks(*key), as_of)

    async def forecast(
        self,
        tenant_id: uuid.UUID | None,
        start: datetime,
        bucket_s: int,
        buckets: int,
        pools: Sequence[Pool],
    ) -> Forecast:
        """What will fire in each bucket of the window (see ``Store.forecast``)."""
        return await self._store.forecast(tenant_id, start, bucket_s, buckets, pools)

    async def _overdue(self, tenant_id: uuid.UUID | None) -> list[OverdueGroup]:
        return await self._store.overdue(tenant_id, self._now())

    def workers(self, tenant_id: uuid.UUID | None) -> list[WorkerSession]:
        """The worker streams open on this node of ``tenant_id`` (None: every tenant's),
        by worker id (outlets' built-in sessions excluded)."""
        found = [s for s in self._sessions.streams() if tenant_id in (None, s.tenant_id)]
        return sorted(found, key=lambda s: (s.worker_id, s.session_id))

    async def unserved(self, tenant_id: uuid.UUID | None) -> list[OverdueGroup]:
        """The overdue groups (``Store.overdue``, from a cache like the counts') of
        ``tenant_id`` (None: every tenant) that no open session of this node takes:
        none of the tenant's streams (or a shared worker's) names the type and the
        pool, and no broker outlet publishes the pool (its consumers are not known
        here: any type counts)."""
        groups = await self.overdue.get(tenant_id)
        sessions = [s for s in self._sessions if not s.draining and not s.closed]
        return [g for g in groups if not any(serves(s, g) for s in sessions)]


def serves(session: WorkerSession, group: OverdueGroup) -> bool:
    """Whether the dispatcher could hand ``session`` a task of ``group`` (its tenant,
    type and pool), credit aside: the rule of ``Dispatcher`` and ``Ready.pop``."""
    if group.pool not in session.pools:
        return False
    if session.outlet is not None:
        return True
    if session.scope is not None and session.scope != group.tenant_id:
        return False
    return session.task_types is None or group.type in session.task_types
