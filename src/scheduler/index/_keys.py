"""Every Redis key the time index uses, in one place.

A shard's keys share the hash tag ``{prefix:idx:shard}``, so one Lua script may touch all
of them on a Redis Cluster while different shards spread over its slots.
"""

from __future__ import annotations


def _root(prefix: str, shard: int) -> str:
    return f"{{{prefix}:idx:{shard}}}"


def due(prefix: str, shard: int) -> str:
    """ZSET: task id (hex) -> due time in ms."""
    return f"{_root(prefix, shard)}:due"


def meta(prefix: str, shard: int) -> str:
    """HASH: task id (hex) -> ``id|scheduled_at_us|due_at_us|tenant|pool|type``."""
    return f"{_root(prefix, shard)}:meta"


def seeded(prefix: str, shard: int) -> str:
    """STRING: present while the shard's index is complete (written last by a rebuild).

    A FLUSHALL or an eviction removes it with the rest, and the index then refuses to
    serve the shard (:class:`~scheduler.index.IndexLost`) instead of silently holding
    nothing."""
    return f"{_root(prefix, shard)}:seeded"


def shard_keys(prefix: str, shard: int) -> list[str]:
    """The keys of one shard, in the order the scripts take them."""
    return [due(prefix, shard), meta(prefix, shard), seeded(prefix, shard)]
