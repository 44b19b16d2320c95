"""The rate limit keys' buckets in Redis (issue 43): see :mod:`scheduler.quota._key_buckets`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from scheduler.quota._key_buckets import MICRO, KeyId, KeyLimit, LocalKeyBuckets, wait_s
from scheduler.quota._protocol import now_ms

_log = logging.getLogger("tickwheel.quota")

KEY_SCRIPT = """
local op = ARGV[1]
local now_ms = tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local a = tonumber(ARGV[3 * i])
  local per_ms = tonumber(ARGV[3 * i + 1])
  local cap = tonumber(ARGV[3 * i + 2])
  local st = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local tokens = cap
  local ts = now_ms
  if st[1] then
    tokens = tonumber(st[1])
    ts = tonumber(st[2])
    if now_ms > ts then
      tokens = tokens + (now_ms - ts) * per_ms
      ts = now_ms
    end
    if tokens > cap then
      tokens = cap
    end
  end
  local res = 0
  if op == 'reserve' then
    res = math.min(a, math.floor(tokens / 1000000))
    if res < 0 then
      res = 0
    end
    tokens = tokens - res * 1000000
  else
    tokens = math.min(cap, tokens + a * 1000000)
  end
  redis.call('HSET', KEYS[i], 'tokens', tokens, 'ts', ts)
  redis.call('PEXPIRE', KEYS[i], math.max(60000, 2 * math.ceil(cap / per_ms)))
  out[#out + 1] = res
  out[#out + 1] = tokens
end
return out
"""
"""KEYS: one bucket hash per key. ARGV: op (``reserve`` or ``refund``), the caller's
now in ms, then per key: wanted (or refunded) units, micro-tokens a ms, cap. Replies
per key: units granted, micro-tokens left. An idle bucket expires once it would be
full again (at least a minute on), which changes nothing."""

_ERRORS = (RedisError, OSError, TimeoutError)


def bucket_key(prefix: str, k: KeyId) -> str:
    """HASH: the bucket of (tenant, key), ``tokens`` and ``ts`` (same hash tag as the
    tenant quota's keys, so a Redis Cluster keeps one script's keys in one slot)."""
    return f"{{{prefix}}}:ratekey:{k[0]}:{k[1]}"


class RedisKeyBuckets:
    """The buckets in Redis, shared by every node (see the module docstring)."""

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        key_prefix: str,
        node_share: float,
        timeout_s: float = 0.2,
        retry_after_s: float = 1.0,
    ) -> None:
        self._client = client
        self._prefix = key_prefix
        self._share = node_share
        self._timeout_s = timeout_s
        self._retry_after_s = retry_after_s
        self._script = client.register_script(KEY_SCRIPT)
        self._left: dict[KeyId, int] = {}
        self._fallback: LocalKeyBuckets | None = None
        self._retry_at = 0.0

    @property
    def shared(self) -> bool:
        """False while serving from the local fallback."""
        return self._fallback is None

    async def _call(
        self, op: str, units: Mapping[KeyId, int], limits: Mapping[KeyId, KeyLimit], now_s: float
    ) -> dict[KeyId, int] | None:
        if self._fallback is not None:
            if time.monotonic() < self._retry_at:
                return None
            self._fallback = None
        ks = list(units)
        args: list[str | int] = [op, now_ms(now_s)]
        for k in ks:
            args += (units[k], limits[k].per_ms, limits[k].cap)
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._script(
                    keys=[bucket_key(self._prefix, k) for k in ks], args=args
                )
        except _ERRORS as exc:
            self._retry_at = time.monotonic() + self._retry_after_s
            self._fallback = LocalKeyBuckets(start_full=False, share=self._share)
            _log.warning(
                "rate limit keys: Redis unreachable (%s); local share %.3g", exc, self._share
            )
            return None
        values = [int(v) for v in reply]
        out = {}
        for i, k in enumerate(ks):
            out[k] = values[2 * i]
            self._left[k] = values[2 * i + 1]
        return out

    async def reserve(
        self, wanted: Mapping[KeyId, int], limits: Mapping[KeyId, KeyLimit], now_s: float
    ) -> dict[KeyId, int]:
        """See :meth:`LocalKeyBuckets.reserve`: one EVALSHA for every key."""
        if not wanted:
            return {}
        got = await self._call("reserve", wanted, limits, now_s)
        if got is not None:
            return got
        assert self._fallback is not None
        return await self._fallback.reserve(wanted, limits, now_s)

    async def refund(
        self, unused: Mapping[KeyId, int], limits: Mapping[KeyId, KeyLimit], now_s: float
    ) -> None:
        """See :meth:`LocalKeyBuckets.refund`."""
        units = {k: n for k, n in unused.items() if n > 0 and k in limits}
        if not units:
            return
        if self._fallback is not None:
            await self._fallback.refund(units, limits, now_s)
            return
        await self._call("refund", units, limits, now_s)

    def next_token_s(self, k: KeyId, limit: KeyLimit, now_s: float) -> float:
        """Seconds until ``k`` has a token again, from what Redis last answered."""
        if self._fallback is not None:
            return self._fallback.next_token_s(k, limit, now_s)
        return wait_s(self._left.get(k, MICRO), limit)
