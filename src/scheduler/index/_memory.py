"""The in-memory time index: the test double of :class:`RedisTimeIndex`, same contract."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from scheduler.index import _codec
from scheduler.index._errors import IndexLost, IndexUnavailable
from scheduler.index._protocol import check_items, check_limit
from scheduler.types import Preloaded


class MemoryTimeIndex:
    """Per-shard dicts; :meth:`flush` and :attr:`down` imitate a FLUSHALL and an outage."""

    def __init__(self) -> None:
        self._shards: dict[int, dict[str, tuple[int, Preloaded]]] = {}
        self._seeded: set[int] = set()
        self.down = False
        """While True every call raises :class:`IndexUnavailable` (an outage)."""

    def flush(self) -> None:
        """Forget everything, as FLUSHALL does to Redis."""
        self._shards.clear()
        self._seeded.clear()

    def _check(self, shard: int, *, seeded: bool) -> dict[str, tuple[int, Preloaded]]:
        if self.down:
            raise IndexUnavailable(shard, "memory index is down")
        if seeded and shard not in self._seeded:
            raise IndexLost(shard)
        return self._shards.setdefault(shard, {})

    @staticmethod
    def _ordered(entries: dict[str, tuple[int, Preloaded]]) -> list[tuple[int, str]]:
        return sorted((score, m) for m, (score, _) in entries.items())

    async def replace(self, shard: int, items: Sequence[Preloaded]) -> None:
        """See :meth:`TimeIndex.replace`."""
        check_items(shard, items)
        self._check(shard, seeded=False)
        self._shards[shard] = {_codec.member(p): (_codec.score_ms(p), p) for p in items}
        self._seeded.add(shard)

    async def add(self, shard: int, items: Sequence[Preloaded]) -> None:
        """See :meth:`TimeIndex.add`."""
        check_items(shard, items)
        entries = self._check(shard, seeded=True)
        for p in items:
            entries[_codec.member(p)] = (_codec.score_ms(p), p)

    async def add_many(self, additions: Mapping[int, Sequence[Preloaded]]) -> frozenset[int]:
        """See :meth:`TimeIndex.add_many`."""
        lost: set[int] = set()
        for shard, items in additions.items():
            if not items:
                continue
            try:
                await self.add(shard, items)
            except IndexLost:
                lost.add(shard)
        return frozenset(lost)

    async def pop_due(self, shard: int, now_ms: int, limit: int) -> list[Preloaded]:
        """See :meth:`TimeIndex.pop_due`."""
        check_limit(limit)
        entries = self._check(shard, seeded=True)
        out: list[Preloaded] = []
        for score, m in self._ordered(entries):
            if score > now_ms or len(out) >= limit:
                break
            out.append(entries.pop(m)[1])
        return out

    async def remove(self, shard: int, task_ids: Sequence[uuid.UUID]) -> int:
        """See :meth:`TimeIndex.remove`."""
        entries = self._check(shard, seeded=False)
        return sum(entries.pop(t.hex, None) is not None for t in task_ids)

    async def remove_many(self, removals: Mapping[int, Sequence[uuid.UUID]]) -> int:
        """See :meth:`TimeIndex.remove_many`."""
        return sum([await self.remove(shard, ids) for shard, ids in removals.items()])

    async def load(self, shard: int) -> list[Preloaded]:
        """See :meth:`TimeIndex.load`."""
        entries = self._check(shard, seeded=True)
        return [entries[m][1] for _, m in self._ordered(entries)]

    async def lost(self, shards: Sequence[int]) -> frozenset[int]:
        """See :meth:`TimeIndex.lost`."""
        for shard in shards:
            self._check(shard, seeded=False)
        return frozenset(s for s in shards if s not in self._seeded)

    async def next_due_ms(self, shard: int) -> int | None:
        """See :meth:`TimeIndex.next_due_ms`."""
        entries = self._check(shard, seeded=False)
        return min((score for score, _ in entries.values()), default=None)

    async def count(self, shard: int) -> int:
        """See :meth:`TimeIndex.count`."""
        return len(self._check(shard, seeded=False))

    async def clear(self, shard: int) -> None:
        """See :meth:`TimeIndex.clear`."""
        self._check(shard, seeded=False)
        self._shards.pop(shard, None)
        self._seeded.discard(shard)

    async def close(self) -> None:
        """Nothing to release."""
