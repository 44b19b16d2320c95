"""The in-process quota gate: one node (embedded mode), and the Redis gate's fallback."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping

from scheduler.quota._key_buckets import LocalKeyBuckets
from scheduler.quota._protocol import MILLI, TenantLimits, now_ms


class _Bucket:
    __slots__ = ("rate", "tokens_milli", "ts_ms")

    def __init__(self, rate: int, tokens_milli: int, ts_ms: int) -> None:
        self.rate = rate
        self.tokens_milli = tokens_milli
        self.ts_ms = ts_ms

    def refill(self, rate: int, at_ms: int) -> None:
        # A clock that steps back refills nothing and never moves the stamp back.
        if at_ms > self.ts_ms:
            self.tokens_milli += (at_ms - self.ts_ms) * rate
            self.ts_ms = at_ms
        self.rate = rate
        self.tokens_milli = min(self.tokens_milli, rate * MILLI)


class LocalQuota:
    """Token bucket + in-flight cap in memory (see :mod:`scheduler.quota._protocol`).

    ``start_full=False`` makes a tenant's bucket start empty at its first reserve instead
    of holding a full second of burst: the Redis gate uses that when it falls back, so
    the shared burst already spent is not spent again locally. ``in_flight`` seeds the
    in-flight counts (the fallback's view of what this node already has out).
    """

    def __init__(
        self, *, start_full: bool = True, in_flight: Mapping[uuid.UUID, int] | None = None
    ) -> None:
        self._start_full = start_full
        self._buckets: dict[uuid.UUID, _Bucket] = {}
        self._in_flight: Counter[uuid.UUID] = Counter(
            {t: n for t, n in (in_flight or {}).items() if n > 0}
        )
        self._throttled: Counter[uuid.UUID] = Counter()
        self._closed = False
        self.keys = LocalKeyBuckets()
        """The rate limit keys' buckets (issue 43), in this process too."""

    async def reserve(
        self,
        wanted: Mapping[uuid.UUID, int],
        limits: Mapping[uuid.UUID, TenantLimits],
        now_s: float,
    ) -> dict[uuid.UUID, int]:
        """See :meth:`QuotaGate.reserve`."""
        at_ms = now_ms(now_s)
        granted: dict[uuid.UUID, int] = {}
        for tenant, want in wanted.items():
            lim = limits[tenant]
            bucket = self._buckets.get(tenant)
            if bucket is None:
                start = lim.rate_limit_rps * MILLI if self._start_full else 0
                bucket = self._buckets[tenant] = _Bucket(lim.rate_limit_rps, start, at_ms)
            bucket.refill(lim.rate_limit_rps, at_ms)
            room = max(0, lim.max_concurrent - self._in_flight[tenant])
            grant = max(0, min(want, bucket.tokens_milli // MILLI, room))
            bucket.tokens_milli -= grant * MILLI
            if grant:
                self._in_flight[tenant] += grant
            if want > grant:
                self._throttled[tenant] += want - grant
            granted[tenant] = grant
        return granted

    async def refund(self, unused: Mapping[uuid.UUID, int], now_s: float) -> None:
        """See :meth:`QuotaGate.refund`."""
        at_ms = now_ms(now_s)
        for tenant, n in unused.items():
            if n <= 0:
                continue
            bucket = self._buckets.get(tenant)
            if bucket is not None:
                bucket.refill(bucket.rate, at_ms)
                bucket.tokens_milli = min(bucket.rate * MILLI, bucket.tokens_milli + n * MILLI)
            self._lower(tenant, n)

    async def finished(self, done: Mapping[uuid.UUID, int]) -> None:
        """See :meth:`QuotaGate.finished`."""
        for tenant, n in done.items():
            if n > 0:
                self._lower(tenant, n)

    def _lower(self, tenant: uuid.UUID, n: int) -> None:
        left = self._in_flight[tenant] - n
        if left > 0:
            self._in_flight[tenant] = left
        else:
            self._in_flight.pop(tenant, None)

    def in_flight(self) -> Mapping[uuid.UUID, int]:
        """Current in-flight units per tenant (tenants with none are absent)."""
        return dict(self._in_flight)

    def throttled(self) -> Mapping[uuid.UUID, int]:
        """See :meth:`QuotaGate.throttled`."""
        return dict(self._throttled)

    async def close(self) -> None:
        """Nothing to release; safe to call twice."""
        self._closed = True
