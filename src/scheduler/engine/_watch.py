"""What the dashboard reads of a node: task counts, the forecast, the worker streams.

Owns :class:`Watch`, a thin read-only part: counts and the forecast come from the store
(for one tenant, or None for every tenant), the workers from this node's sessions.
Built by the engine facade (``Engine.watch``); called by the transport's
``scheduler.server._insight``. Writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler.engine._sessions import Sessions, WorkerSession
from scheduler.store import Store
from scheduler.types import Forecast, Pool, TaskCounts, TaskFilter


class Watch:
    """Read-only views of the store and of this node's worker sessions."""

    def __init__(self, store: Store, sessions: Sessions) -> None:
        self._store = store
        self._sessions = sessions

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        """``tenant_id``'s tasks (None: every tenant's) matching ``flt``, grouped by
        (tenant,) state, type and pool."""
        return await self._store.count_tasks(tenant_id, flt)

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

    def workers(self, tenant_id: uuid.UUID | None) -> list[WorkerSession]:
        """The worker streams open on this node of ``tenant_id`` (None: every tenant's),
        by worker id (outlets' built-in sessions excluded)."""
        found = [s for s in self._sessions.streams() if tenant_id in (None, s.tenant_id)]
        return sorted(found, key=lambda s: (s.worker_id, s.session_id))
