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

import importlib
from typing import TYPE_CHECKING, Any

from scheduler.index._errors import IndexLost, IndexUnavailable
from scheduler.index._memory import MemoryTimeIndex
from scheduler.index._protocol import MAX_POP, TimeIndex

if TYPE_CHECKING:
    from scheduler.index._redis import RedisTimeIndex

# The backends that need a network client (etcd, Redis) load on first use, so that
# importing this package (as the engine does) loads neither the client nor grpc.
_LAZY = {
    "RedisTimeIndex": "scheduler.index._redis",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "MAX_POP",
    "IndexLost",
    "IndexUnavailable",
    "MemoryTimeIndex",
    "RedisTimeIndex",
    "TimeIndex",
]
