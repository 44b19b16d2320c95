"""The fallback time index (brief §2): each shard's PRELOADED window, by due time.

:class:`RedisTimeIndex` keeps one sorted set per shard (score = due time in ms) beside a
hash of task details, changed only by Lua scripts; :class:`MemoryTimeIndex` is its
in-memory double. Both satisfy :class:`TimeIndex` and pass one conformance suite. A node
taking over a shard loads it from here instead of scanning PostgreSQL, and when the
timing wheel is unavailable or over its memory cap, dispatch pops due tasks from here.
Every failure is an :class:`IndexUnavailable` (a flushed shard an :class:`IndexLost`):
the caller falls back to PostgreSQL and rebuilds.
"""

from __future__ import annotations

from scheduler.index._errors import IndexLost, IndexUnavailable
from scheduler.index._memory import MemoryTimeIndex
from scheduler.index._protocol import MAX_POP, TimeIndex
from scheduler.index._redis import RedisTimeIndex

__all__ = [
    "MAX_POP",
    "IndexLost",
    "IndexUnavailable",
    "MemoryTimeIndex",
    "RedisTimeIndex",
    "TimeIndex",
]
