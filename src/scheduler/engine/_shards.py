"""The shard handler: what this node does when it gains or loses shards.

Owns no state of its own (the shard state does). On a gain it raises the shards'
epochs in the store, then loads their tasks through the pre-loader; on a loss it forgets
their epochs and their due tasks (timeline and ready queues). Calls the store, the shard
state, the pre-loader, the timeline and the ready queues. Called by the membership
through the facade (``Engine.on_gain`` / ``Engine.on_loss``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from scheduler.engine._preloader import Preloader
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._shard_state import ShardState
from scheduler.engine._timeline import Timeline
from scheduler.store import Store

log = logging.getLogger("tickwheel.engine")


class ShardHandler:
    """Gains and losses of shards (brief §7)."""

    def __init__(
        self,
        store: Store,
        node_id: str,
        now: Callable[[], datetime],
        shards: ShardState,
        preloader: Preloader,
        timeline: Timeline,
        ready: ReadyQueues,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._now = now
        self._shards = shards
        self._preloader = preloader
        self._timeline = timeline
        self._ready = ready
        self._changes = asyncio.Lock()
        """One gain, loss or re-claim at a time: a re-claim never races a loss."""
        self._reclaim: asyncio.Task[None] | None = None
        if shards.clustered:
            store.on_fence(self._fenced)

    async def on_gain(self, shards: Mapping[int, int]) -> None:
        """This node now serves ``shards``: raise their epochs, then load them.

        Called by the membership before the shards count as owned. The epoch rises in
        the store with every change of owner; this node's dispatches carry it, so a
        node that lost a shard can no longer dispatch from it.
        """
        async with self._changes:
            await self._gain(shards)

    async def _gain(self, shards: Mapping[int, int] | frozenset[int]) -> None:
        started = time.monotonic()
        epochs = await self._store.claim_shards(list(shards), self._node_id, self._now())
        self._shards.claimed(epochs)
        # Not yet in membership.owned(): let the load through for these shards.
        self._shards.gaining(frozenset(shards))
        try:
            await self._preloader.load_shards(sorted(shards))
        finally:
            self._shards.gaining(frozenset())
        self._preloader.wake()
        log.info(
            "gained %d shards in %.0f ms (%d due tasks in the wheel)",
            len(shards),
            (time.monotonic() - started) * 1000,
            len(self._timeline),
        )

    async def on_loss(self, shards: frozenset[int]) -> None:
        """This node no longer serves ``shards``: forget their due tasks.

        What it already committed keeps its lease; the new owner loads the rest.
        """
        async with self._changes:
            self._shards.released(shards)
            dropped = self._forget(shards)
        log.info("lost %d shards; dropped %d due tasks", len(shards), dropped)

    def _forget(self, shards: frozenset[int]) -> int:
        dropped = self._timeline.drop_shards(shards)
        self._ready.remove_where(lambda p: p.shard_id in shards)
        return dropped

    def _fenced(self, generation: int) -> None:
        """The store found the fencing generation raised (its PostgreSQL promoted under
        this node, issue 42): every epoch this node holds is refused from now on, and a
        refused dispatch drops its task from memory. Claim the shards it still owns
        again, with their tasks reloaded, as a gain would."""
        if self._reclaim is None or self._reclaim.done():
            self._reclaim = asyncio.get_running_loop().create_task(self._claim_again())

    async def _claim_again(self) -> None:
        while True:
            try:
                async with self._changes:
                    owned = self._shards.owned()  # under the lock: no loss in between
                    if owned:
                        self._forget(owned)
                        await self._gain(owned)
                return
            except Exception as exc:  # the store went away again: try until it is back
                log.warning("claiming shards again after a fence failed (%s); retrying", exc)
                await asyncio.sleep(1.0)
