"""The Redis index mirror: PRELOADED tasks copied into the time index, best effort.

Owns the index handle, the removals waiting for their pipelined flush, the shards whose
index holds tasks the wheel does not (spilled over the wheel's cap) and the shards whose
index is being rebuilt. Calls only the index and the background task group; never the
store. Called by the timeline (mirror and spill), the dispatcher (removals after a
commit, popping spilled tasks when due) and the pre-loader (load and rebuild on a gain,
and its index round: which owned shards lost their index, to rebuild them).
Every call is off the hot path: a failing index costs latency, never a task.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence

from scheduler._aio import Background
from scheduler.engine._config import EngineConfig
from scheduler.engine._stats import EngineStats
from scheduler.index import IndexUnavailable, TimeIndex
from scheduler.types import Preloaded, TaskKey

log = logging.getLogger("tickwheel.engine")


class IndexMirror:
    """The index side of the timeline; every method is a no-op without an index."""

    def __init__(
        self,
        index: TimeIndex | None,
        config: EngineConfig,
        stats: EngineStats,
        background: Background,
        wake_dispatcher: Callable[[], None],
    ) -> None:
        self.index = index
        self._config = config
        self._stats = stats
        self._background = background
        self._wake_dispatcher = wake_dispatcher
        self._removals: collections.defaultdict[int, set[uuid.UUID]] = collections.defaultdict(set)
        self._flushing = False
        self.spilled: set[int] = set()
        """Shards whose index holds tasks that the wheel does not."""
        self.rebuilding: set[int] = set()
        """Shards whose index is being rebuilt (spilling into them would be erased)."""

    @property
    def enabled(self) -> bool:
        """Whether there is an index to mirror into."""
        return self.index is not None

    def add(self, items: Sequence[Preloaded]) -> None:
        """Mirror PRELOADED tasks into the index (best effort, off the hot path)."""
        if self.index is None or not items:
            return
        index = self.index
        per_shard: dict[int, list[Preloaded]] = collections.defaultdict(list)
        for p in items:
            per_shard[p.shard_id].append(p)
            # Back in the index (a release): a removal still waiting must not undo it.
            if waiting := self._removals.get(p.shard_id):
                waiting.discard(p.key.id)

        async def run() -> None:
            # One pipelined call for every shard of the batch: a script call per shard
            # per pre-load pass cost 10-13% of a loaded node's CPU. A lost shard is
            # skipped (its owner's index round rebuilds it); a failing index is left to
            # the next owner's reconcile from the store.
            with contextlib.suppress(IndexUnavailable):
                await index.add_many(per_shard)

        self._background.spawn(run(), "index-add")

    def spill(
        self, items: Sequence[Preloaded], fallback: Callable[[Sequence[Preloaded]], None]
    ) -> None:
        """Keep tasks in the index instead of the wheel; ``fallback`` puts them back into
        the wheel (over its cap) if the index cannot take them: memory is cheaper than a
        lost task."""
        assert self.index is not None
        index = self.index
        per_shard: dict[int, list[Preloaded]] = collections.defaultdict(list)
        for p in items:
            per_shard[p.shard_id].append(p)

        async def run() -> None:
            for shard, batch in per_shard.items():
                try:
                    await index.add(shard, batch)
                except IndexUnavailable:
                    fallback(batch)
                else:
                    self.spilled.add(shard)
                    self._stats.spilled += len(batch)
            self._wake_dispatcher()

        self._background.spawn(run(), "index-spill")

    def remove(self, keys: Sequence[TaskKey], shards: Sequence[int]) -> None:
        """Drop dispatched tasks from the index (best effort, off the hot path).

        Removals are gathered for ``index_flush_ms`` and sent in one pipelined call for
        all shards: one Lua call per shard per dispatch round cost 7-11% of a node's CPU.
        """
        if self.index is None or not keys:
            return
        for key, shard in zip(keys, shards, strict=True):
            self._removals[shard].add(key.id)
        if not self._flushing:
            self._flushing = True
            self._background.spawn(self._flush_removals(self.index), "index-remove")

    async def _flush_removals(self, index: TimeIndex) -> None:
        try:
            await asyncio.sleep(self._config.index_flush_ms / 1000.0)
        finally:
            self._flushing = False
            pending, self._removals = self._removals, collections.defaultdict(set)
        with contextlib.suppress(IndexUnavailable):  # the next owner reconciles
            await index.remove_many({s: list(ids) for s, ids in pending.items()})

    async def pop_due(self, due_ms: int) -> tuple[list[Preloaded], list[int]]:
        """Spilled tasks due by ``due_ms``, and the shards whose index failed (their
        tasks are still PRELOADED in the store: the caller reloads them)."""
        assert self.index is not None
        out: list[Preloaded] = []
        failed: list[int] = []
        for shard in sorted(self.spilled):
            try:
                items = await self.index.pop_due(shard, due_ms, self._config.max_batch)
                if not items and await self.index.next_due_ms(shard) is None:
                    self.spilled.discard(shard)
            except IndexUnavailable as exc:
                log.warning("index unavailable for shard %d (%s); reloading it", shard, exc)
                self.spilled.discard(shard)
                failed.append(shard)
                continue
            out.extend(items)
        return out, failed

    async def load(self, shards: Sequence[int]) -> list[list[Preloaded]]:
        """Each shard's indexed tasks; IndexUnavailable when the index fails.

        Concurrently (a takeover after a node's death must be quick), but a few at a
        time: a Redis connection pool is small.
        """
        assert self.index is not None
        index = self.index
        gate = asyncio.Semaphore(8)

        async def load(shard: int) -> list[Preloaded]:
            async with gate:
                return await index.load(shard)

        return list(await asyncio.gather(*(load(shard) for shard in shards)))

    async def find_lost(self, shards: Sequence[int]) -> list[int]:
        """The index round: which of ``shards`` (owned) lost their index since it was
        built (FLUSHALL, a Redis restart, an eviction), less those being rebuilt. They
        count as rebuilding from now on (nothing spills into them): the caller rebuilds
        them from the store, or calls :meth:`rebuild_failed`. One round trip; nothing
        when the index does not answer (it is checked again next round)."""
        if self.index is None or not shards:
            return []
        try:
            gone = await self.index.lost(shards)
        except IndexUnavailable as exc:
            log.debug("index round skipped: %s", exc)
            return []
        lost = sorted(gone - self.rebuilding)
        if lost:
            self.rebuilding.update(lost)
            log.warning(
                "time index lost for %d owned shards (flushed, evicted or Redis restarted); "
                "rebuilding them from the store: %s",
                len(lost),
                _shard_list(lost),
            )
        return lost

    def rebuild_failed(self, shards: Sequence[int]) -> None:
        """A rebuild that :meth:`find_lost` announced could not read the store."""
        self.rebuilding.difference_update(shards)

    def rebuild(self, per_shard: Mapping[int, list[Preloaded]]) -> None:
        """Replace the index of each shard by what the store holds (in the background)."""
        if self.index is None:
            return
        index = self.index
        self.rebuilding.update(per_shard)

        async def run() -> None:
            started = time.monotonic()
            done = tasks = 0
            try:
                for shard, items in per_shard.items():
                    await index.replace(shard, items)
                    self.rebuilding.discard(shard)
                    self._stats.index_rebuilds += 1
                    done += 1
                    tasks += len(items)
            except IndexUnavailable as exc:
                log.info("index rebuild stopped: %s", exc)
            finally:
                self.rebuilding.difference_update(per_shard)
            if done:
                log.info(
                    "rebuilt the time index of %d shards from the store (%d tasks) in %.0f ms",
                    done,
                    tasks,
                    (time.monotonic() - started) * 1000,
                )

        self._background.spawn(run(), "index-rebuild")


def _shard_list(shards: Sequence[int], most: int = 16) -> str:
    shown = ", ".join(str(s) for s in shards[:most])
    return shown + (f" and {len(shards) - most} more" if len(shards) > most else "")
