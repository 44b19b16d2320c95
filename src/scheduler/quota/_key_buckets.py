"""Token buckets per (tenant, rate limit key) (issue 43): in memory, or shared in Redis.

A key's bucket holds at most ``burst`` tokens and refills at ``rate`` tokens a second;
a dispatch takes one. Arithmetic is exact integers: tokens in micro-tokens
(:data:`MICRO` a token), time in whole milliseconds, the refill ``round(rate * 1000)``
micro-tokens a millisecond (so a rate has a resolution of 0.001 a second). A bucket
starts full (``burst``). Over any window of ``T`` seconds at most ``burst + rate * T``
tokens are granted (and not refunded): the steady rate is ``rate``, the burst ``burst``.

:class:`LocalKeyBuckets` keeps the buckets in this process (one node, embedded mode, and
the Redis gate's fallback); ``_key_redis.RedisKeyBuckets`` keeps them in Redis, one Lua call
per dispatch round for every key of the round (the pattern of the tenant quota's
script, ``_script.py``), so every node draws from the same bucket. On a Redis error it
serves from a local bucket at ``node_share`` of each rate, starting empty (the shared
burst may be spent), and tries Redis again after ``retry_after_s``.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Mapping

from scheduler.quota._protocol import now_ms

MICRO = 1_000_000
"""Micro-tokens per token."""

KeyId = tuple[uuid.UUID, str]
"""(tenant, rate limit key)."""


@dataclasses.dataclass(frozen=True, slots=True)
class KeyLimit:
    """A key's bucket: ``rate`` tokens a second, at most ``burst`` held."""

    rate: float
    burst: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and self.rate > 0):
            raise ValueError("rate must be > 0")
        if self.burst < 1:
            raise ValueError("burst must be >= 1")

    @property
    def per_ms(self) -> int:
        """Micro-tokens added a millisecond (at least 1)."""
        return max(1, round(self.rate * 1000))

    @property
    def cap(self) -> int:
        """The most micro-tokens the bucket holds."""
        return self.burst * MICRO


def refill(tokens: int, ts_ms: int, at_ms: int, limit: KeyLimit) -> tuple[int, int]:
    """The bucket at ``at_ms``: a clock that steps back refills nothing and never moves
    the stamp back; never more than the cap."""
    if at_ms > ts_ms:
        tokens += (at_ms - ts_ms) * limit.per_ms
        ts_ms = at_ms
    return min(tokens, limit.cap), ts_ms


def wait_s(tokens: int, limit: KeyLimit) -> float:
    """Seconds until a bucket holding ``tokens`` has a whole token."""
    missing = MICRO - tokens
    return 0.0 if missing <= 0 else math.ceil(missing / limit.per_ms) / 1000.0


class LocalKeyBuckets:
    """The buckets in this process (``start_full=False``: they start empty)."""

    def __init__(self, *, start_full: bool = True, share: float = 1.0) -> None:
        self._start_full = start_full
        self._share = share
        self._buckets: dict[KeyId, list[int]] = {}  # [micro-tokens, stamp ms]

    def _limit(self, limit: KeyLimit) -> KeyLimit:
        if self._share >= 1.0:
            return limit
        return KeyLimit(limit.rate * self._share, max(1, math.floor(limit.burst * self._share)))

    async def reserve(
        self, wanted: Mapping[KeyId, int], limits: Mapping[KeyId, KeyLimit], now_s: float
    ) -> dict[KeyId, int]:
        """How many dispatches each key may send now (<= wanted); taken from its bucket."""
        at = now_ms(now_s)
        out: dict[KeyId, int] = {}
        for k, want in wanted.items():
            lim = self._limit(limits[k])
            b = self._buckets.get(k)
            if b is None:
                b = self._buckets[k] = [lim.cap if self._start_full else 0, at]
            b[0], b[1] = refill(b[0], b[1], at, lim)
            grant = max(0, min(want, b[0] // MICRO))
            b[0] -= grant * MICRO
            out[k] = grant
        return out

    async def refund(
        self, unused: Mapping[KeyId, int], limits: Mapping[KeyId, KeyLimit], now_s: float
    ) -> None:
        """Give back grants a round did not use (never above the cap)."""
        at = now_ms(now_s)
        for k, n in unused.items():
            b = self._buckets.get(k)
            if n <= 0 or b is None or k not in limits:
                continue
            lim = self._limit(limits[k])
            b[0], b[1] = refill(b[0], b[1], at, lim)
            b[0] = min(lim.cap, b[0] + n * MICRO)

    def next_token_s(self, k: KeyId, limit: KeyLimit, now_s: float) -> float:
        """Seconds until ``k`` has a token again (0: it has one)."""
        b = self._buckets.get(k)
        if b is None:
            return 0.0
        lim = self._limit(limit)
        tokens, _ = refill(b[0], b[1], now_ms(now_s), lim)
        return wait_s(tokens, lim)
