"""The periodic store read behind the queue-depth, oldest-due and replication gauges.

Owns one named background task that asks the store every ``interval_s`` for the open
tasks per (pool, state, horizon) and for the standbys' lag, and keeps the last answer
for the collector. A failed read is logged and the previous answer kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from scheduler._aio import cancel_and_wait
from scheduler.store import DepthRow, ReplicationLag, Store

log = logging.getLogger("tickwheel.metrics")


class DepthPoller:
    """The latest queue depth and replication lag of the whole system."""

    def __init__(self, store: Store, interval_s: float) -> None:
        self._store = store
        self.interval_s = interval_s
        self.rows: list[DepthRow] = []
        self.replication: ReplicationLag | None = None
        self.polls = 0
        """Successful reads so far."""
        self._task: asyncio.Task[None] | None = None

    async def refresh(self, now: datetime) -> None:
        """Read both now."""
        rows = await self._store.queue_depth(now)
        replication = await self._store.replication_lag()
        self.rows, self.replication = rows, replication
        self.polls += 1

    def start(self, now: Callable[[], datetime]) -> None:
        """Start polling (not when ``interval_s`` is 0); idempotent."""
        if self._task is None and self.interval_s > 0:
            self._task = asyncio.create_task(self._run(now), name="tickwheel-metrics-depth")

    async def _run(self, now: Callable[[], datetime]) -> None:
        while True:
            try:
                await self.refresh(now())
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("metrics: the queue depth read failed", exc_info=True)
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        """Stop polling; safe twice or before start."""
        task, self._task = self._task, None
        await cancel_and_wait([task])
