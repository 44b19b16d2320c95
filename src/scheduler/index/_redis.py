"""The time index in Redis: a sorted set (score = due ms) and a hash per shard.

Every multi-key change is one Lua script, so a pop is ZRANGEBYSCORE + HMGET + ZREM +
HDEL at once and two nodes can never pop the same task. Large writes go in chunks of
:data:`CHUNK` tasks per script so Redis is never blocked for long; a rebuild
(:meth:`RedisTimeIndex.replace`) holds a private marker value while it writes its chunks
and turns it into "seeded" in the last one, so a FLUSHALL in the middle makes the
rebuild fail (:class:`IndexLost`) instead of leaving a partial index marked complete.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from scheduler.index import _codec, _keys, _scripts
from scheduler.index._errors import IndexLost, IndexUnavailable
from scheduler.index._protocol import check_items, check_limit
from scheduler.types import Preloaded

CHUNK = 1000
"""Tasks per Lua call in :meth:`RedisTimeIndex.add` / :meth:`~RedisTimeIndex.replace`."""
_REMOVE_CHUNK = 5000
_ERRORS = (RedisError, OSError, TimeoutError)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisTimeIndex:
    """:class:`~scheduler.index.TimeIndex` on Redis (see the module docstring).

    ``client`` may or may not decode responses. Every call has ``timeout_s`` (bulk
    reads and rebuilds ``bulk_timeout_s``); with ``owns_client`` :meth:`close` closes it.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        key_prefix: str = "tickwheel",
        timeout_s: float = 0.5,
        bulk_timeout_s: float = 10.0,
        owns_client: bool = False,
    ) -> None:
        if not key_prefix:
            raise ValueError("key_prefix must not be empty")
        self._client = client
        self._prefix = key_prefix
        self._timeout_s = timeout_s
        self._bulk_timeout_s = bulk_timeout_s
        self._owns_client = owns_client
        self._closed = False
        self._add = client.register_script(_scripts.ADD)
        self._pop = client.register_script(_scripts.POP_DUE)
        self._remove = client.register_script(_scripts.REMOVE)

    @classmethod
    def from_url(
        cls, url: str, *, key_prefix: str = "tickwheel", timeout_s: float = 0.5
    ) -> RedisTimeIndex:
        """An index on its own client for ``url`` (closed by :meth:`close`)."""
        client = aioredis.Redis.from_url(url, socket_timeout=10.0, socket_connect_timeout=timeout_s)
        return cls(client, key_prefix=key_prefix, timeout_s=timeout_s, owns_client=True)

    # -- writes --------------------------------------------------------------------------

    async def replace(self, shard: int, items: Sequence[Preloaded]) -> None:
        """See :meth:`TimeIndex.replace`."""
        check_items(shard, items)
        token = f"build:{uuid.uuid4().hex}"
        keys = _keys.shard_keys(self._prefix, shard)
        async with self._guard(shard, bulk=True):
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.delete(*keys)
                pipe.set(keys[2], token)
                await pipe.execute()
            chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)] or [[]]
            for n, chunk in enumerate(chunks):
                last = n == len(chunks) - 1
                await self._write(shard, keys, chunk, token, _scripts.SEEDED if last else "")

    async def add(self, shard: int, items: Sequence[Preloaded]) -> None:
        """See :meth:`TimeIndex.add`."""
        check_items(shard, items)
        if not items:
            return
        keys = _keys.shard_keys(self._prefix, shard)
        async with self._guard(shard, bulk=len(items) > CHUNK):
            for i in range(0, len(items), CHUNK):
                await self._write(shard, keys, items[i : i + CHUNK], _scripts.SEEDED, "")

    async def add_many(self, additions: Mapping[int, Sequence[Preloaded]]) -> frozenset[int]:
        """See :meth:`TimeIndex.add_many`: every shard's script in one pipeline (one
        script call per shard per pre-load pass cost a node 10-13% of its CPU)."""
        calls = [(shard, items) for shard, items in additions.items() if items]
        if not calls:
            return frozenset()
        for shard, items in calls:
            check_items(shard, items)
        shards: list[int] = []
        # Off the hot path and many shards at once: the bulk deadline, not one call's.
        async with (
            self._guard(calls[0][0], bulk=True),
            self._client.pipeline(transaction=False) as pipe,
        ):
            for shard, items in calls:
                keys = _keys.shard_keys(self._prefix, shard)
                for i in range(0, len(items), CHUNK):
                    args: list[str | int] = [_scripts.SEEDED, ""]
                    for p in items[i : i + CHUNK]:
                        args += (_codec.member(p), _codec.score_ms(p), _codec.encode(p))
                    await self._add(keys=keys, args=args, client=pipe)
                    shards.append(shard)
            replies = await pipe.execute()
        return frozenset(s for s, r in zip(shards, replies, strict=True) if int(r) < 0)

    async def _write(
        self,
        shard: int,
        keys: list[str],
        items: Sequence[Preloaded],
        expect: str,
        then: str,
    ) -> None:
        args: list[str | int] = [expect, then]
        for p in items:
            args += (_codec.member(p), _codec.score_ms(p), _codec.encode(p))
        if int(await self._add(keys=keys, args=args)) < 0:
            raise IndexLost(shard)

    async def pop_due(self, shard: int, now_ms: int, limit: int) -> list[Preloaded]:
        """See :meth:`TimeIndex.pop_due`."""
        check_limit(limit)
        keys = _keys.shard_keys(self._prefix, shard)
        async with self._guard(shard):
            reply = await self._pop(keys=keys, args=[now_ms, limit, _scripts.SEEDED])
        if reply and reply[0] == -1:
            raise IndexLost(shard)
        decoder = _codec.Decoder(shard)
        return [decoder.build(decoder.split(reply[i])) for i in range(1, len(reply), 2)]

    async def remove(self, shard: int, task_ids: Sequence[uuid.UUID]) -> int:
        """See :meth:`TimeIndex.remove`."""
        members = [t.hex for t in task_ids]
        keys = _keys.shard_keys(self._prefix, shard)
        removed = 0
        async with self._guard(shard, bulk=len(members) > _REMOVE_CHUNK):
            for i in range(0, len(members), _REMOVE_CHUNK):
                removed += int(await self._remove(keys=keys, args=members[i : i + _REMOVE_CHUNK]))
        return removed

    async def remove_many(self, removals: Mapping[int, Sequence[uuid.UUID]]) -> int:
        """See :meth:`TimeIndex.remove_many`: every shard's script in one pipeline."""
        calls = [(shard, [t.hex for t in ids]) for shard, ids in removals.items() if ids]
        if not calls:
            return 0
        async with self._guard(calls[0][0]), self._client.pipeline(transaction=False) as pipe:
            for shard, members in calls:
                keys = _keys.shard_keys(self._prefix, shard)
                for i in range(0, len(members), _REMOVE_CHUNK):
                    await self._remove(keys=keys, args=members[i : i + _REMOVE_CHUNK], client=pipe)
            replies = await pipe.execute()
        return sum(int(r) for r in replies)

    async def clear(self, shard: int) -> None:
        """See :meth:`TimeIndex.clear`."""
        async with self._guard(shard):
            await self._client.delete(*_keys.shard_keys(self._prefix, shard))

    # -- reads ---------------------------------------------------------------------------

    async def load(self, shard: int) -> list[Preloaded]:
        """See :meth:`TimeIndex.load` (one MULTI: the marker and every stored value)."""
        async with (
            self._guard(shard, bulk=True),
            self._client.pipeline(transaction=True) as pipe,
        ):
            pipe.get(_keys.seeded(self._prefix, shard))
            pipe.hvals(_keys.meta(self._prefix, shard))
            marker, values = await pipe.execute()
        if marker is None or _text(marker) != _scripts.SEEDED:
            raise IndexLost(shard)
        return _codec.Decoder(shard).many(values)

    async def lost(self, shards: Sequence[int]) -> frozenset[int]:
        """See :meth:`TimeIndex.lost`: one GET per shard, in one pipeline."""
        if not shards:
            return frozenset()
        async with self._guard(shards[0]), self._client.pipeline(transaction=False) as pipe:
            for shard in shards:
                pipe.get(_keys.seeded(self._prefix, shard))
            markers = await pipe.execute()
        return frozenset(
            shard
            for shard, marker in zip(shards, markers, strict=True)
            if marker is None or _text(marker) != _scripts.SEEDED
        )

    async def next_due_ms(self, shard: int) -> int | None:
        """See :meth:`TimeIndex.next_due_ms`."""
        async with self._guard(shard):
            first = await self._client.zrange(_keys.due(self._prefix, shard), 0, 0, withscores=True)
        return int(first[0][1]) if first else None

    async def count(self, shard: int) -> int:
        """See :meth:`TimeIndex.count`."""
        async with self._guard(shard):
            return int(await self._client.zcard(_keys.due(self._prefix, shard)))

    async def close(self) -> None:
        """Close an owned client; safe twice."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._client.aclose()

    # -- errors --------------------------------------------------------------------------

    def _guard(self, shard: int, *, bulk: bool = False) -> _Guard:
        return _Guard(shard, self._bulk_timeout_s if bulk else self._timeout_s)


class _Guard:
    """A deadline, and Redis/network errors turned into :class:`IndexUnavailable`."""

    __slots__ = ("_shard", "_timeout")

    def __init__(self, shard: int, timeout_s: float) -> None:
        self._shard = shard
        self._timeout = asyncio.timeout(timeout_s)

    async def __aenter__(self) -> None:
        await self._timeout.__aenter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        try:
            await self._timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError as timeout:
            raise IndexUnavailable(self._shard, "timed out") from timeout
        if exc is not None and isinstance(exc, _ERRORS):
            raise IndexUnavailable(self._shard, f"{type(exc).__name__}: {exc}") from exc
