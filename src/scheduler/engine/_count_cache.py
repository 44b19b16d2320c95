"""A short-lived cache of task counts: single-flight, stale-while-revalidate, bounded.

Owns :class:`SwrCache`, used by :class:`~scheduler.engine._watch.Watch` for CountTasks
(an exact GROUP BY over every row of a tenant, seconds with a million tasks). Per key:

- a value younger than ``ttl_s`` is returned at once;
- one older, up to ``max_age_s``, is returned at once too, and one background refresh
  starts (unless one is running);
- with none, or one older than ``max_age_s``, the caller waits for a fresh load;
- concurrent callers that must wait share one load (single-flight); a caller cancelled
  while waiting does not cancel it;
- at most ``max_keys`` keys are kept, the least recently used dropped first.

Ages are measured on ``clock`` (monotonic seconds; tests pass a fake one) from the
moment a load started, so a value is never younger than it says. A failed load reaches
its waiters; a failed background refresh is logged and the old value stays usable until
``max_age_s``. ``ttl_s`` 0 turns the cache off: every call loads.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

log = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class _Entry(Generic[V]):
    value: V | None = None
    taken: float = 0.0
    has_value: bool = False
    loading: asyncio.Task[V] | None = None


class SwrCache(Generic[K, V]):
    """Values of ``load(key)``, kept ``ttl_s`` fresh and served stale up to ``max_age_s``."""

    def __init__(
        self,
        load: Callable[[K], Awaitable[V]],
        *,
        ttl_s: float,
        max_age_s: float,
        max_keys: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s < 0 or max_age_s < ttl_s:
            raise ValueError("SwrCache: need 0 <= ttl_s <= max_age_s")
        if max_keys < 1:
            raise ValueError("SwrCache: max_keys must be positive")
        self._load = load
        self._ttl_s = ttl_s
        self._max_age_s = max_age_s
        self._max_keys = max_keys
        self._clock = clock
        self._entries: collections.OrderedDict[K, _Entry[V]] = collections.OrderedDict()
        self.loads = 0
        """Loads started (for tests and stats)."""

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: K) -> V:
        """The value for ``key`` under the policy above."""
        if self._ttl_s == 0:
            self.loads += 1
            return await self._load(key)
        entry = self._entries.get(key)
        if entry is None:
            entry = _Entry()
            self._entries[key] = entry
            self._evict()
        self._entries.move_to_end(key)
        if entry.has_value:
            age = self._clock() - entry.taken
            if age < self._ttl_s:
                return entry.value  # type: ignore[return-value]
            if age < self._max_age_s:
                if entry.loading is None:
                    self._start(key, entry)
                return entry.value  # type: ignore[return-value]
        loading = entry.loading or self._start(key, entry)
        return await asyncio.shield(loading)

    def _start(self, key: K, entry: _Entry[V]) -> asyncio.Task[V]:
        self.loads += 1
        started = self._clock()
        task = asyncio.ensure_future(self._load(key))
        entry.loading = task

        def done(t: asyncio.Task[V]) -> None:
            entry.loading = None
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None:
                if entry.has_value:
                    log.warning("count refresh failed for %r: %s", key, exc)
                elif self._entries.get(key) is entry:
                    del self._entries[key]
                return
            entry.value, entry.taken, entry.has_value = t.result(), started, True

        task.add_done_callback(done)
        return task

    def _evict(self) -> None:
        while len(self._entries) > self._max_keys:
            self._entries.popitem(last=False)
