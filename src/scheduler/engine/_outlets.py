"""Outlets: the broker hooks (Kafka) that take a pool's dispatches instead of streams.

Owns the outlets, the pools they serve and the publishes in flight. Calls only the
outlets. Called by the sessions registry (an outlet session's pushes are published),
the dispatcher (which pools only outlets take) and the facade (drain on stop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from scheduler.engine._types import Outlet
from scheduler.types import Assignment

log = logging.getLogger("tickwheel.engine")


class Outlets:
    """At most one outlet per pool."""

    def __init__(self, outlets: Sequence[Outlet]) -> None:
        self.outlets = tuple(outlets)
        self.pools = frozenset(o.pool for o in self.outlets)
        """Pools whose tasks go only to their outlet, never to streams."""
        if len(self.pools) != len(self.outlets):
            raise ValueError("at most one outlet per pool")
        self._publishing: set[asyncio.Task[None]] = set()

    def publish(self, outlet: Outlet, assignments: Sequence[Assignment]) -> None:
        """Hand committed assignments to ``outlet`` (in the background)."""

        async def run() -> None:
            try:
                await outlet.publish(assignments)
            except Exception:
                # Committed but not delivered: the leases lapse and the reaper puts the
                # tasks back (token + 1 at the next dispatch). Nothing is lost.
                log.exception(
                    "outlet %s: publish of %d assignments failed", outlet.name, len(assignments)
                )

        task = asyncio.create_task(run(), name=f"tickwheel-publish-{outlet.name}")
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def drain(self) -> None:
        """Wait for the publishes in flight."""
        if self._publishing:
            await asyncio.gather(*self._publishing, return_exceptions=True)
