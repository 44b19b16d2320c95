"""Flow control by key at dispatch (issue 43): rate limit keys and dispatch pauses.

Owns :class:`FlowRules`: the rate limits (a token bucket per (tenant, key)) and the
dispatch pauses this node applies, read from the store (every ``flow_refresh_s``, and at
once after a change through this node), and the per-round gate the dispatcher asks:
:meth:`FlowRules.gate` reserves the tokens of every limited key with waiting tasks in
one call of the key buckets (``scheduler.quota``: Redis, shared by every node, or this
process), and answers a :data:`~scheduler.engine._ready.Veto` that holds the lanes of a
paused type or pool and of a key out of tokens. Held tasks stay PRELOADED in their
ready queue, in due order; nothing is polled per task: the dispatcher looks again when
the first held key has a token (``retry_s``), or when a rule changes (``on_change``).
Calls the store and the key buckets; called by the dispatcher and the engine facade.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from scheduler._errors import InvalidArgument, NotFound
from scheduler.engine._ready import ReadyQueues, Veto
from scheduler.engine._stats import HOLD_CAUSES
from scheduler.limits import MAX_TYPE_CHARS, flow_key
from scheduler.quota._key_buckets import KeyId, KeyLimit, LocalKeyBuckets
from scheduler.store import Store
from scheduler.types import DispatchPause, Pool, RateLimitRule

log = logging.getLogger("tickwheel.engine")

CAUSES = HOLD_CAUSES
"""Why a flow rule held a task (the ``cause`` label of the hold metrics)."""
RATE_LIMITED, PAUSED = CAUSES


class Round:
    """One dispatch round's gate: the key grants and the veto (None: nothing held)."""

    __slots__ = ("grants", "retry_s", "veto", "wanted")

    def __init__(self) -> None:
        self.grants: dict[KeyId, int] = {}
        self.wanted: dict[KeyId, int] = {}
        self.veto: Veto | None = None
        self.retry_s: float | None = None
        """When a held key has a token again (None: no key held)."""

    def took(self, tenant_id: uuid.UUID, rate_key: str) -> None:
        """A task of this key was matched: one of its grants is used."""
        if rate_key:
            k = (tenant_id, rate_key)
            if k in self.grants:
                self.grants[k] -= 1

    def gave_back(self, tenant_id: uuid.UUID, rate_key: str) -> None:
        """A matched task was not dispatched after all: its grant is unused again."""
        if rate_key:
            k = (tenant_id, rate_key)
            if k in self.grants:
                self.grants[k] += 1

    def unused(self) -> dict[KeyId, int]:
        """Grants the round did not use (to refund)."""
        return {k: n for k, n in self.grants.items() if n > 0}


class FlowRules:
    """The rules this node applies and their per-round gate (module docstring)."""

    def __init__(
        self,
        store: Store,
        refresh_s: float,
        now_s: Callable[[], float],
        keys: Any = None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self._now_s = now_s
        self._store = store
        self._refresh_s = refresh_s
        self.keys: Any = keys if keys is not None else LocalKeyBuckets()
        """The key buckets (``LocalKeyBuckets`` or ``RedisKeyBuckets``)."""
        self._on_change = on_change
        self.limits: dict[KeyId, KeyLimit] = {}
        self.pauses: tuple[DispatchPause, ...] = ()
        self.held: dict[str, int] = dict.fromkeys(CAUSES, 0)
        """Tasks held in the ready queues now, by cause (as of the last round)."""
        self.held_by: dict[tuple[uuid.UUID, str, Pool, str], tuple[str, int]] = {}
        """Held lanes (tenant, type, pool, rate key): their cause and waiting tasks,
        as of the last round."""
        self.held_total: collections.Counter[str] = collections.Counter()
        """Tasks held per round, by cause (a monotonic count, like quota throttling)."""
        self.since: dict[tuple[uuid.UUID, str, Pool, str], tuple[str, float]] = {}
        """Lanes a rule has held and that still have waiting tasks: the cause, and when
        the hold was first seen (epoch s); a task dispatched from one counts its wait
        as a hold of that cause (:meth:`hold_of`)."""
        self._kick = asyncio.Event()
        self.loaded = False

    @property
    def active(self) -> bool:
        """Whether any rule is set (off: the dispatcher skips the gate)."""
        return bool(self.limits or self.pauses)

    def kick(self) -> None:
        """Re-read the rules now (a change was made through this node)."""
        self._kick.set()

    async def refresh(self) -> None:
        """Read every rule from the store."""
        rules = await self._store.list_rate_limits(None)
        pauses = await self._store.list_dispatch_pauses(None)
        limits = {(r.tenant_id, r.key): KeyLimit(r.rate, r.burst) for r in rules}
        changed = limits != self.limits or tuple(pauses) != self.pauses
        self.limits = limits
        self.pauses = tuple(pauses)
        self.loaded = True
        if changed:
            self._on_change()

    async def run(self) -> None:
        """Re-read the rules every ``refresh_s`` or when kicked, until cancelled."""
        while True:
            self._kick.clear()
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store is away: keep the rules we have
                log.warning("flow rules: reading them failed (%s); keeping the last ones", exc)
            try:
                async with asyncio.timeout(self._refresh_s):
                    await self._kick.wait()
            except TimeoutError:
                pass

    def paused(self, tenant_id: uuid.UUID, task_type: str, pool: Pool) -> bool:
        """Whether a pause holds this tenant's tasks of this type and pool."""
        return any(p.covers(tenant_id, task_type, pool) for p in self.pauses)

    async def gate(self, ready: ReadyQueues, most: int, now_s: float) -> Round:
        """This round's gate: reserve tokens for every limited key with waiting tasks
        (at most ``most`` each: the round's room), then the veto."""
        r = Round()
        if not self.active:
            return r
        limits = self.limits
        if limits:
            r.wanted = {
                k: min(n, most) for k, n in ready.key_counts().items() if k in limits and n > 0
            }
            if r.wanted:
                r.grants = await self.keys.reserve(r.wanted, limits, now_s)
        grants = r.grants
        pauses = self.pauses
        seen: dict[tuple[Pool, uuid.UUID, str], bool] = {}

        def veto(pool: Pool, tenant_id: uuid.UUID, task_type: str, rate_key: str) -> bool:
            if pauses:
                lane = (pool, tenant_id, task_type)
                p = seen.get(lane)
                if p is None:
                    p = seen[lane] = any(x.covers(tenant_id, task_type, pool) for x in pauses)
                if p:
                    return True
            if rate_key:
                g = grants.get((tenant_id, rate_key))
                return g is not None and g <= 0
            return False

        r.veto = veto
        return r

    def count_held(self, ready: ReadyQueues, r: Round, now_s: float) -> None:
        """After a round: what its gate still holds, by cause, and when a held key has
        a token again."""
        if r.veto is None:
            if self.held_by:
                self.held_by = {}
                self.held = dict.fromkeys(CAUSES, 0)
            return
        held = ready.held(r.veto)
        by: dict[tuple[uuid.UUID, str, Pool, str], tuple[str, int]] = {}
        counts = dict.fromkeys(CAUSES, 0)
        waits: list[float] = []
        for lane, n in held.items():
            tenant_id, task_type, pool, rate_key = lane
            cause = PAUSED if self.paused(tenant_id, task_type, pool) else RATE_LIMITED
            by[lane] = (cause, n)
            if lane not in self.since:
                self.since[lane] = (cause, now_s)
            counts[cause] += n
            self.held_total[cause] += n
            if cause == RATE_LIMITED:
                k = (tenant_id, rate_key)
                waits.append(self.keys.next_token_s(k, self.limits[k], now_s))
        self.held_by = by
        self.held = counts
        r.retry_s = min(waits, default=None)

    def prune(self, ready: ReadyQueues) -> None:
        """Forget the holds of lanes with no task left waiting (after a round's
        dispatches were counted by :meth:`hold_of`)."""
        if self.since:
            self.since = {lane: v for lane, v in self.since.items() if ready.has_lane(*lane)}

    def held_for(self, tenant_id: uuid.UUID | None, pools: tuple[Pool, ...]) -> dict[str, int]:
        """Tasks held now, by cause, of ``tenant_id`` (None: every tenant) in ``pools``."""
        out = dict.fromkeys(CAUSES, 0)
        for (t, _type, pool, _key), (cause, n) in self.held_by.items():
            if (tenant_id is None or t == tenant_id) and pool in pools:
                out[cause] += n
        return out

    def hold_of(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool, rate_key: str, due_s: float
    ) -> tuple[str, float] | None:
        """The cause and length (s) of a dispatched task's hold: from its due time, or
        from when its lane was first held if later; None: its lane was not held."""
        if not self.since:
            return None
        v = self.since.get((tenant_id, task_type, pool, rate_key))
        if v is None:
            return None
        return v[0], max(0.0, self._now_s() - max(due_s, v[1]))

    # -- doors (the RPCs): each change is stored, then applied here at once ----------

    async def set_rate_limit(
        self, tenant_id: uuid.UUID, key: str, rate: float, burst: int
    ) -> RateLimitRule:
        """Create or replace a key's limit (``burst`` 0: ``max(1, ceil(rate))``)."""
        flow_key(key, "limit.key")
        if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
            raise InvalidArgument("limit.rate", f"must be > 0 and at most {MAX_RATE:,}")
        if burst == 0:
            burst = max(1, math.ceil(rate))
        if not 1 <= burst <= MAX_RATE:
            raise InvalidArgument("limit.burst", f"must be 1..{MAX_RATE:,}")
        rule = await self._store.set_rate_limit(tenant_id, key, rate, burst, _dt(self._now_s()))
        await self._applied()
        return rule

    async def delete_rate_limit(self, tenant_id: uuid.UUID, key: str) -> None:
        """Remove a key's limit; NotFound when it had none."""
        flow_key(key, "key")
        if not await self._store.delete_rate_limit(tenant_id, key):
            raise NotFound("rate limit", key)
        await self._applied()

    async def list_rate_limits(self, tenant_id: uuid.UUID) -> list[RateLimitRule]:
        """The tenant's limits, by key."""
        return await self._store.list_rate_limits(tenant_id)

    async def pause(self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None) -> DispatchPause:
        """Pause a tenant's (``ALL_TENANTS``: everyone's) type and/or pool."""
        check_type(task_type)
        p = await self._store.pause_dispatch(tenant_id, task_type, pool, _dt(self._now_s()))
        await self._applied()
        return p

    async def resume(self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None) -> None:
        """Remove the pause of exactly these fields; NotFound when there was none."""
        check_type(task_type)
        if not await self._store.resume_dispatch(tenant_id, task_type, pool):
            raise NotFound("dispatch pause", f"{task_type or '*'}/{pool.value if pool else '*'}")
        await self._applied()

    async def list_pauses(self, tenant_id: uuid.UUID | None) -> list[DispatchPause]:
        """The pauses that apply to ``tenant_id`` (None: all)."""
        return await self._store.list_dispatch_pauses(tenant_id)

    async def _applied(self) -> None:
        try:
            await self.refresh()
        except Exception:  # stored: the loop applies it within refresh_s
            self.kick()


MAX_RATE = 1_000_000
"""Largest rate (tokens a second) and burst of a rate limit key."""


def _dt(now_s: float) -> datetime:
    return datetime.fromtimestamp(now_s, UTC)


def check_type(task_type: str) -> None:
    """A paused type: empty (any) or a task type's length."""
    if len(task_type) > MAX_TYPE_CHARS:
        raise InvalidArgument("task_type", f"longer than {MAX_TYPE_CHARS} characters")
