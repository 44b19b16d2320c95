"""The time index contract: each shard's PRELOADED window ordered by due time.

The index is a cache of the store, never the truth. A shard's index is either *seeded*
(complete: its owner rebuilt it with :meth:`TimeIndex.replace` and has kept it current
with :meth:`~TimeIndex.add` / :meth:`~TimeIndex.remove` / :meth:`~TimeIndex.pop_due`
since) or *lost*. Reads and writes of a lost shard raise :class:`IndexLost`, never
return a silently empty answer, so a FLUSHALL or an eviction costs a rebuild, not a
task. Every failure of the backing service raises :class:`IndexUnavailable`
(``retryable``); the caller serves the shard from PostgreSQL meanwhile.

Items are :class:`~scheduler.store.Preloaded` values: what the engine needs to put a
task back in the wheel or dispatch it, without reading PostgreSQL. Each task is in a
shard's index at most once (keyed by task id): adding it again moves it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from scheduler.types import Preloaded

MAX_POP = 5000
"""Largest ``limit`` of one :meth:`TimeIndex.pop_due` (one Lua call)."""


class TimeIndex(Protocol):
    """A per-shard due-time index (Redis sorted sets in production)."""

    async def replace(self, shard: int, items: Sequence[Preloaded]) -> None:
        """Make ``items`` the shard's whole index and mark it seeded.

        Readers see :class:`IndexLost` until it finishes; a flush meanwhile makes it
        raise :class:`IndexLost` (call it again)."""
        ...

    async def add(self, shard: int, items: Sequence[Preloaded]) -> None:
        """Index ``items`` (all of ``shard``) by due time; an indexed task moves.

        Raises :class:`IndexLost` when the shard is not seeded."""
        ...

    async def add_many(self, additions: Mapping[int, Sequence[Preloaded]]) -> frozenset[int]:
        """:meth:`add` for many shards at once (one round trip where the backend can).

        Returns the shards that were not seeded (nothing was written to them; the
        others were indexed). :class:`IndexUnavailable` when it cannot answer."""
        ...

    async def pop_due(self, shard: int, now_ms: int, limit: int) -> list[Preloaded]:
        """Atomically remove and return up to ``limit`` (<= :data:`MAX_POP`) tasks due at
        or before ``now_ms``, earliest first. Raises :class:`IndexLost` when not seeded."""
        ...

    async def remove(self, shard: int, task_ids: Sequence[uuid.UUID]) -> int:
        """Drop tasks (dispatched by the wheel, cancelled); how many were indexed."""
        ...

    async def remove_many(self, removals: Mapping[int, Sequence[uuid.UUID]]) -> int:
        """:meth:`remove` for many shards at once (one round trip where the backend
        can); how many were indexed. :class:`IndexUnavailable` when it cannot answer."""
        ...

    async def load(self, shard: int) -> list[Preloaded]:
        """Every task of the shard, earliest first (shard takeover).

        Raises :class:`IndexLost` when not seeded."""
        ...

    async def lost(self, shards: Sequence[int]) -> frozenset[int]:
        """Which of ``shards`` are not seeded (flushed, evicted, never built, or being
        rebuilt): one round trip, for an owner checking its shards every round."""
        ...

    async def next_due_ms(self, shard: int) -> int | None:
        """The earliest due time in ms, or None when the shard's index is empty."""
        ...

    async def count(self, shard: int) -> int:
        """How many tasks the shard's index holds."""
        ...

    async def clear(self, shard: int) -> None:
        """Forget the shard (it is lost until the next :meth:`replace`)."""
        ...

    async def close(self) -> None:
        """Release connections; safe twice."""
        ...


def check_items(shard: int, items: Sequence[Preloaded]) -> None:
    """Every item must belong to ``shard``."""
    for p in items:
        if p.shard_id != shard:
            raise ValueError(f"task {p.key.id} is in shard {p.shard_id}, not {shard}")


def check_limit(limit: int) -> None:
    """``limit`` of :meth:`TimeIndex.pop_due` must be in [1, MAX_POP]."""
    if not 1 <= limit <= MAX_POP:
        raise ValueError(f"limit must be in [1, {MAX_POP}], got {limit}")
