"""The shared quota gate: token buckets and in-flight counts in Redis, one Lua call each.

Clock: the buckets run on the caller's ``now_s`` (not Redis ``TIME``), so tests drive
time and the engine's dispatch clock is the one that is limited. The tradeoff is clock
skew between nodes: a bucket never refills backwards (its stamp only moves forward), so
a node whose clock runs ``d`` seconds ahead can pull at most ``d * rate`` extra tokens
once (while its clock leads the stamp), never a sustained excess; nodes that run behind
refill nothing until they catch up. With NTP-level skew (milliseconds) this is noise.
Node liveness, on the other hand, uses Redis ``TIME``: one clock decides when a lease
has run out.

In-flight: each node keeps its own count per tenant (a field of the tenant's in-flight
hash) and only touches its own field; the cap applies to the sum over nodes whose lease
(renewed by every call and by a heartbeat every ``node_lease_ttl_s / 3``) is live. A
dead node's counts stop counting ``node_lease_ttl_s`` after its last contact, so they
cannot leak. :meth:`RedisQuota.finished` must therefore be reported by the node that
reserved the units (the node whose worker stream carried the assignment). Each node
also keeps its own count in memory and writes it back whenever its lease had lapsed or
it returns from a fallback, which also heals counts lost with a Redis restart.

Fallback: any Redis error or timeout switches the node to a :class:`LocalQuota` whose
limits are ``floor(limit * node_share)``, whose buckets start empty (the shared burst may
already be spent) and whose in-flight starts at this node's own count. With
``node_share = 1 / node count`` and every node cut off from Redis, the cluster total
stays within each limit. (A partition that cuts off only some nodes lets those use their
share on top of what the others see in Redis: the excess is bounded by their shares.)
Redis is tried again every ``retry_after_s``; on success the node writes its in-flight
back and returns to shared state. One warning per outage, one info line on recovery.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from scheduler._aio import cancel_and_wait
from scheduler.quota import _keys
from scheduler.quota._key_redis import RedisKeyBuckets
from scheduler.quota._local import LocalQuota
from scheduler.quota._protocol import TenantLimits, now_ms
from scheduler.quota._script import SCRIPT

_log = logging.getLogger("tickwheel.quota")

_ERRORS = (RedisError, OSError, TimeoutError)
# An idle bucket is full after one second; expiring it later changes nothing.
_BUCKET_TTL_MS = 60_000


def _scaled(lim: TenantLimits, share: float) -> TenantLimits:
    return TenantLimits(
        rate_limit_rps=math.floor(lim.rate_limit_rps * share),
        max_concurrent=math.floor(lim.max_concurrent * share),
    )


class RedisQuota:
    """Quotas shared by every scheduler node through Redis (see the module docstring).

    ``client`` should have short socket timeouts and no retries (:func:`open_quota` makes
    one); with ``owns_client`` :meth:`close` closes it.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        key_prefix: str,
        node_share: float,
        timeout_s: float = 0.2,
        retry_after_s: float = 1.0,
        node_lease_ttl_s: float = 15.0,
        node_id: str | None = None,
        owns_client: bool = False,
    ) -> None:
        if not 0.0 < node_share <= 1.0:
            raise ValueError("node_share must be in (0, 1]")
        self._client = client
        self._prefix = key_prefix
        self._share = node_share
        self._timeout_s = timeout_s
        self._retry_after_s = retry_after_s
        self._lease_ms = max(1, int(node_lease_ttl_s * 1000))
        self.node_id = node_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This node's field name in the in-flight hashes."""
        self._owns_client = owns_client
        self._script = client.register_script(SCRIPT)
        # This node's own in-flight per tenant; zero entries stay until the next sync
        # so that a stale field in Redis gets deleted.
        self._own: dict[uuid.UUID, int] = {}
        self._throttled: Counter[uuid.UUID] = Counter()
        self._fallback: LocalQuota | None = None
        self._retry_at = 0.0
        self._heartbeat: asyncio.Task[None] | None = None
        self._closed = False
        self.keys = RedisKeyBuckets(
            client,
            key_prefix=key_prefix,
            node_share=node_share,
            timeout_s=timeout_s,
            retry_after_s=retry_after_s,
        )
        """The rate limit keys' buckets (issue 43), shared through the same Redis."""

    # -- public API ------------------------------------------------------------------

    @property
    def shared(self) -> bool:
        """False while serving from the local fallback."""
        return self._fallback is None

    async def reserve(
        self,
        wanted: Mapping[uuid.UUID, int],
        limits: Mapping[uuid.UUID, TenantLimits],
        now_s: float,
    ) -> dict[uuid.UUID, int]:
        """See :meth:`QuotaGate.reserve`: one EVALSHA for all tenants of the call."""
        self._ensure_heartbeat()
        tenants = sorted(t for t, n in wanted.items() if n > 0)
        granted = dict.fromkeys(wanted, 0)
        if not tenants:
            return granted
        if await self._use_shared():
            args: list[int] = []
            for t in tenants:
                lim = limits[t]
                args += (wanted[t], lim.rate_limit_rps, lim.max_concurrent, self._own.get(t, 0))
            try:
                lapsed, got = await self._call("reserve", tenants, args, now_ms(now_s))
            except _ERRORS as exc:
                self._fail(exc)
            else:
                granted.update(zip(tenants, got, strict=True))
                self._account(wanted, granted)
                if lapsed:
                    await self._resync_or_fail()
                return granted
        assert self._fallback is not None
        local = await self._fallback.reserve(
            {t: wanted[t] for t in tenants},
            {t: _scaled(limits[t], self._share) for t in tenants},
            now_s,
        )
        granted.update(local)
        self._account(wanted, granted)
        return granted

    async def refund(self, unused: Mapping[uuid.UUID, int], now_s: float) -> None:
        """See :meth:`QuotaGate.refund`."""
        await self._give_back("refund", unused, now_s)

    async def finished(self, done: Mapping[uuid.UUID, int]) -> None:
        """See :meth:`QuotaGate.finished`."""
        await self._give_back("finished", done, None)

    def throttled(self) -> Mapping[uuid.UUID, int]:
        """See :meth:`QuotaGate.throttled` (counts denials in fallback mode too)."""
        return dict(self._throttled)

    def in_flight(self) -> Mapping[uuid.UUID, int]:
        """This node's own in-flight units per tenant (tenants with none are absent)."""
        return {t: n for t, n in self._own.items() if n > 0}

    async def close(self) -> None:
        """Stop the heartbeat and close an owned client; safe to call twice.

        The lease is left to run out, so this node's in-flight keeps counting for up to
        ``node_lease_ttl_s`` (those tasks may still be running).
        """
        if self._closed:
            return
        self._closed = True
        task, self._heartbeat = self._heartbeat, None
        await cancel_and_wait([task])
        if self._owns_client:
            await self._client.aclose()

    # -- internals -------------------------------------------------------------------

    async def _give_back(
        self, op: str, units: Mapping[uuid.UUID, int], now_s: float | None
    ) -> None:
        tenants = sorted(t for t, n in units.items() if n > 0)
        if not tenants:
            return
        if await self._use_shared():
            args: list[int] = []
            for t in tenants:
                args += (units[t], 0, 0, 0)
            try:
                lapsed, _ = await self._call(op, tenants, args, now_ms(now_s or 0.0))
            except _ERRORS as exc:
                # The in-flight side heals on the next sync; lost refunded tokens only
                # make the bucket stricter.
                self._fail(exc)
            else:
                self._lower_own(units, tenants)
                if lapsed:
                    await self._resync_or_fail()
                return
        # A fallback made just now was seeded with the counts before this call.
        assert self._fallback is not None
        self._lower_own(units, tenants)
        mine = {t: units[t] for t in tenants}
        if now_s is None:
            await self._fallback.finished(mine)
        else:
            await self._fallback.refund(mine, now_s)

    def _lower_own(self, units: Mapping[uuid.UUID, int], tenants: Sequence[uuid.UUID]) -> None:
        for t in tenants:
            self._own[t] = max(0, self._own.get(t, 0) - units[t])

    def _account(self, wanted: Mapping[uuid.UUID, int], granted: Mapping[uuid.UUID, int]) -> None:
        for t, n in granted.items():
            if n:
                self._own[t] = self._own.get(t, 0) + n
            denied = wanted[t] - n
            if denied > 0:
                self._throttled[t] += denied

    async def _call(
        self, op: str, tenants: Sequence[uuid.UUID], per_tenant: Sequence[int], at_ms: int
    ) -> tuple[bool, list[int]]:
        keys = [_keys.nodes(self._prefix)]
        for t in tenants:
            keys += (_keys.bucket(self._prefix, t), _keys.in_flight(self._prefix, t))
        args: list[str | int] = [op, self.node_id, self._lease_ms, at_ms, _BUCKET_TTL_MS]
        args += per_tenant
        async with asyncio.timeout(self._timeout_s):
            reply = await self._script(keys=keys, args=args)
        values = [int(v) for v in reply]
        return bool(values[0]), values[1:]

    async def _sync(self) -> None:
        """Write this node's own in-flight counts over its fields in Redis."""
        tenants = sorted(self._own)
        args: list[int] = []
        for t in tenants:
            args += (self._own[t], 0, 0, 0)
        await self._call("sync", tenants, args, 0)
        for t in tenants:
            if self._own.get(t) == 0:
                del self._own[t]

    async def _resync_or_fail(self) -> None:
        try:
            await self._sync()
        except _ERRORS as exc:
            self._fail(exc)

    async def _use_shared(self) -> bool:
        if self._fallback is None:
            return True
        if time.monotonic() < self._retry_at:
            return False
        try:
            await self._sync()
        except _ERRORS:
            self._retry_at = time.monotonic() + self._retry_after_s
            return False
        self._fallback = None
        _log.info("quota: Redis is back; node %s uses shared quotas again", self.node_id)
        return True

    def _fail(self, exc: BaseException) -> None:
        self._retry_at = time.monotonic() + self._retry_after_s
        if self._fallback is not None:
            return
        self._fallback = LocalQuota(start_full=False, in_flight=self._own)
        _log.warning(
            "quota: Redis unreachable (%s: %s); node %s falls back to %.3g of each limit",
            type(exc).__name__,
            exc,
            self.node_id,
            self._share,
        )

    def _ensure_heartbeat(self) -> None:
        if self._heartbeat is None and not self._closed:
            self._heartbeat = asyncio.create_task(
                self._beat_forever(), name=f"tickwheel-quota-heartbeat-{self.node_id}"
            )

    async def _beat_forever(self) -> None:
        interval_s = self._lease_ms / 3000
        while True:
            await asyncio.sleep(interval_s)
            if self._fallback is not None:
                continue
            try:
                lapsed, _ = await self._call("beat", (), (), 0)
                if lapsed:
                    await self._sync()
            except _ERRORS as exc:
                _log.debug("quota: heartbeat failed: %s", exc)
