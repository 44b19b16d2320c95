"""The dispatcher: due tasks -> ready queues -> matched to sessions -> one commit.

Owns the dispatch loop, the commit lead (how far ahead of the due tick it commits, from
recent commit times), the pool gates (critical reserve, bulk cap), the quota throttle
and the round robin over sessions. A round takes what is due (the timeline, and the
index mirror's spilled tasks), pairs tasks with sessions that have credit, commits the
whole batch in one store call and hands the assignments to delivery; a failed commit
puts everything back as it was. Calls the store, the quota gate, the timeline, the
ready queues, fair share, the sessions registry, the slots ledger, delivery, the index
mirror and the shard state. Called by the facade (start, wake, pool metrics).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from scheduler._aio import wait_event
from scheduler.engine._config import EngineConfig
from scheduler.engine._delivery import Delivery
from scheduler.engine._fair_share import FairShare
from scheduler.engine._flow import FlowRules, Round
from scheduler.engine._health import Beat
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._keys import KeyGate
from scheduler.engine._ready import POOL_ORDER, ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._shard_state import ShardState
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats, PoolMetrics
from scheduler.engine._timeline import Timeline, to_ms
from scheduler.quota import QuotaGate
from scheduler.store import Store, StoreUnavailable
from scheduler.types import Assignment, DispatchRequest, Held, Pool, Preloaded

log = logging.getLogger("tickwheel.engine")


class Dispatcher:
    """Wheel -> ready queues -> one batched dispatch commit per round."""

    def __init__(
        self,
        *,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        quota: QuotaGate,
        shards: ShardState,
        timeline: Timeline,
        mirror: IndexMirror,
        ready: ReadyQueues,
        fair_share: FairShare,
        sessions: Sessions,
        slots: Slots,
        delivery: Delivery,
        stats: EngineStats,
        outlet_pools: frozenset[Pool],
        reload_shard: Callable[[int], None],
        flow: FlowRules | None = None,
        beat: Beat | None = None,
    ) -> None:
        # No rules given (a test's dispatcher): none set, none read.
        self._flow = flow or FlowRules(store, config.flow_refresh_s, lambda: now().timestamp())
        self._store = store
        self._config = config
        self._now = now
        self._quota = quota
        self._shards = shards
        self._timeline = timeline
        self._mirror = mirror
        self._ready = ready
        self._fair_share = fair_share
        self._sessions = sessions
        self._slots = slots
        self._delivery = delivery
        self._stats = stats
        self._outlet_pools = outlet_pools
        self._reload_shard = reload_shard
        self._beat = beat or Beat("dispatcher")
        self._commit_error: BaseException | None = None
        """The last round's failed dispatch commit (None: it had none)."""
        self._wake = asyncio.Event()
        self._commit_ms: collections.deque[float] = collections.deque(maxlen=32)
        self._throttled_until = 0.0
        self._rr = 0
        self._behind = False
        """The last round's tasks were all due within the lead when it committed:
        rounds take up to ``max_batch`` (see :meth:`round_limit`)."""
        self.keys = KeyGate(config.concurrency_recheck_s)
        """Tasks the store held back for their concurrency key, until a slot frees."""
        self._kept: dict[tuple[Pool, int, frozenset[Pool], frozenset[Pool]], int] = {}
        """``EngineConfig.kept_free`` by (pool, worker size, worker pools, reserves
        held): a few entries, read once per matched slot."""
        self._held: frozenset[Pool] = frozenset()
        """The pools whose reserve this round holds (:meth:`held_reserves`)."""

    def wake(self) -> None:
        """Look at the wheel, the ready queues and the sessions' credit now."""
        self._wake.set()

    def room_freed(self) -> None:
        """A worker granted credit, a slot freed or a stream opened or came back to
        life: a round for it only if tasks wait in the ready queues. What comes due
        later fires on the loop's own timer, so in a steady stream a worker's credit
        (one message every few milliseconds) no longer costs a round each (issue 41)."""
        if len(self._ready):
            self._wake.set()

    def freed(self, task_id: uuid.UUID) -> None:
        """A task left its worker (the slots ledger): a task its concurrency key held
        back may go now."""
        if self.keys.freed(task_id):
            self._wake.set()

    def freed_many(self, task_ids: list[uuid.UUID]) -> None:
        """:meth:`freed` for a batch (nothing to do a task while no keyed task runs)."""
        keys = self.keys
        if keys.running_keyed and any([keys.freed(t) for t in task_ids]):
            self._wake.set()

    def _now_ms(self) -> int:
        return to_ms(self._now())

    def lead_ms(self) -> int:
        """How far ahead of the due tick to commit: covers the recent commit times.

        A durable commit usually takes well under a millisecond but sometimes stalls
        for hundreds (brief §12); the lead follows 1.5x the slowest of the last
        commits, between ``dispatch_lead_ms`` and ``dispatch_lead_max_ms``, plus
        ``push_ahead_ms`` (a push may go that much before the due tick).
        """
        cfg = self._config
        recent = max(self._commit_ms, default=0.0)
        lead = int(recent * 1.5) + 1
        return cfg.push_ahead_ms + max(cfg.dispatch_lead_ms, min(cfg.dispatch_lead_max_ms, lead))

    async def run(self) -> None:
        """The dispatch loop, until cancelled."""
        await self._ready.paused_known.wait()  # which tenants a home move paused
        beat = self._beat
        while True:
            # Cleared before the work, so a nudge that arrives during it is not lost.
            self._wake.clear()
            lead = self.lead_ms()
            beat.begin()
            self._commit_error = None
            try:
                await self._round(lead)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A store or quota call outside the commit failed (a tenant's limits,
                # Redis): the round's tasks are still in the ready queues, nothing was
                # committed. Before issue 42 this ended the loop for good.
                if not isinstance(exc, StoreUnavailable):
                    log.exception("dispatch round failed; trying again")
                elif not beat.failing:
                    log.warning("dispatch round failed (%s); trying again", exc)
                beat.failed(exc)
                await asyncio.sleep(0.1)
                continue
            if self._commit_error is not None:
                beat.failed(self._commit_error)
            else:
                beat.ok()
            await self._sleep_until_next(lead)

    async def _round(self, lead: int) -> None:
        now_ms = self._now_ms()
        # A round fires the wheel only once its earliest task is within the lead,
        # and then takes a window more: wake-ups in between (completions, credit)
        # must not commit the trickle that just came into range one task at a time.
        harvest = lead + self._config.dispatch_window_ms
        nxt = self._timeline.next_due_ms()
        if nxt is not None and nxt <= now_ms + lead:
            self._ready.extend_handles(self._timeline.fire_handles(now_ms + harvest))
        if self._mirror.spilled:
            await self._pop_spilled(harvest)
        if self.keys.keys_waiting:
            self._ready.extend(self.keys.release())
        await self._report_finished()
        while len(self._ready) and await self.match_and_commit():
            pass

    async def _pop_spilled(self, ahead_ms: int) -> None:
        """Due tasks that wait in the Redis index (the wheel was over its cap)."""
        items, failed = await self._mirror.pop_due(self._now_ms() + ahead_ms)
        for shard in failed:
            self._reload_shard(shard)
        for p in items:
            if p.key.id not in self._timeline:  # wheel tasks fire from the wheel
                self._ready.push(p)

    async def _sleep_until_next(self, lead: int) -> None:
        nxt = self._timeline.next_due_ms()
        timeout = self._config.index_poll_ms / 1000.0 if self._mirror.spilled else None
        if nxt is not None:
            until = max(0.0, (nxt - lead - self._now_ms()) / 1000.0)
            timeout = until if timeout is None else min(timeout, until)
            if timeout == 0.0:
                await asyncio.sleep(0)
                return
        recheck = self.keys.recheck_in()
        if recheck is not None:
            timeout = recheck if timeout is None else min(timeout, recheck)
        throttled = self._throttled_until - time.monotonic()
        if len(self._ready) and throttled > 0:
            timeout = throttled if timeout is None else min(timeout, throttled)
        if len(self._ready) and self._commit_error is not None:
            # The commit failed (it waited a moment already): try again now, not at the
            # next nudge, which may never come if these were the last tasks due.
            timeout = 0.0
        await wait_event(self._wake, timeout)

    async def _report_finished(self) -> None:
        done = self._slots.take_finished()
        if done:
            await self._quota.finished(done)

    def _pool_open(self, pool: Pool, capacity: int) -> bool:
        """Whether a free slot may take work from ``pool`` now (brief §8).

        Bulk never holds more than ``bulk_max_slots``. While a critical task waits,
        standard and bulk may not grow into the ``critical_reserved_slots`` part of the
        capacity; while none waits, they may (work stealing). Running tasks are never
        taken back: critical simply gets every slot that frees up first.
        """
        if pool is Pool.CRITICAL:
            return True
        slots = self._slots
        if pool is Pool.BULK and slots.in_pool(Pool.BULK) >= self._config.bulk_max_slots:
            return False
        if self._ready.depth(Pool.CRITICAL) == 0:
            return True
        noncritical = slots.in_pool(Pool.STANDARD) + slots.in_pool(Pool.BULK)
        return noncritical < capacity - self._config.critical_reserved_slots

    def held_reserves(self, now_ms: int) -> frozenset[Pool]:
        """The pools whose reserve is held now: every pool with one when
        ``reserve_linger_s`` is None, else those with a task waiting in the ready
        queues or due in the wheel, or due less than the linger ago."""
        cfg = self._config
        if cfg.reserve_linger_s is None:
            return frozenset(r.pool for r in cfg.reserves)
        linger_ms = int(cfg.reserve_linger_s * 1000)
        latest = self._timeline.latest_due_ms
        return frozenset(
            r.pool
            for r in cfg.reserves
            if self._ready.depth(r.pool) > 0
            or latest.get(r.pool, -linger_ms - 1) + linger_ms >= now_ms
        )

    def _room(self, s: WorkerSession, pool: Pool) -> bool:
        """Whether stream ``s`` may take a ``pool`` task and still keep the free slots
        the held reserves keep for the pools ahead of it (critical takes any free
        slot; a broker outlet keeps none)."""
        if pool is Pool.CRITICAL or s.outlet is not None:
            return True
        size = max(s.slots, s.credits + s.held)
        key = (pool, size, s.pools, self._held)
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = self._config.kept_free(pool, size, s.pools, self._held)
        return s.credits > kept

    def _undo(self, s: WorkerSession, p: Preloaded) -> None:
        s.return_credit()
        self._slots.give_back(p)

    def round_limit(self) -> int:
        """Most tasks the next round commits: ``dispatch_batch`` while the dispatcher
        commits ahead of the lead (a small round holds the event loop, and the
        deliveries due meanwhile, for less), ``max_batch`` while it is behind (the last
        round's tasks were all due within the lead when it committed: a burst, a
        backlog, or commits slower than the harvest window, when rounds of
        ``dispatch_batch`` would fall behind the due times). Fewer, larger commits then
        catch up before the tasks are late, with less CPU per task in every process
        (issue 41: in a 1M minute the 250-task rounds fell behind whenever PostgreSQL's
        commits took over 50 ms, and the tasks were late by the time they grew)."""
        cfg = self._config
        return max(cfg.dispatch_batch, cfg.max_batch) if self._behind else cfg.dispatch_batch

    async def match_and_commit(self) -> int:
        """Pair ready tasks with sessions that have credit; one store call per batch.

        Sessions are served round robin, one slot at a time; each free slot takes the
        first pool that is open (:meth:`_pool_open`), leaves the stream the free slots
        its reserves keep for the pools ahead (:meth:`_room`) and has work the session
        can run (critical, standard, bulk), and inside a pool the tenant whose turn it
        is by weight. Returns how many tasks it committed (0: nothing could be matched).
        """
        cfg = self._config
        now = self._now()
        ttl = timedelta(seconds=cfg.lease_ttl_s)
        short = timedelta(seconds=cfg.dispatch_lease_s)
        limit = self.round_limit()
        sessions = self._sessions.takers()
        if not sessions:
            return 0
        # Start each round at a different session, so a lone task does not always go
        # to the same worker.
        self._rr = (self._rr + 1) % len(sessions)
        sessions = sessions[self._rr :] + sessions[: self._rr]
        await self._fair_share.learn(self._ready.tenants())
        credits = sum(s.credits for s in sessions)
        capacity = credits + len(self._slots)
        # Quotas (rate and in-flight cap per tenant, shared by every node): one reserve
        # call per round for every tenant with waiting work; unused grants go back.
        # A tenant a home move froze (or took away) gets no grant: its tasks wait.
        paused = self._ready.paused
        wanted = {
            t: min(n, credits, limit)
            for t, n in self._ready.tenant_counts().items()
            if t not in paused
        }
        grants = await self._quota.reserve(
            wanted, {t: self._fair_share.limits(t) for t in wanted}, now.timestamp()
        )
        for t, n in wanted.items():
            if grants.get(t, 0) < n:
                self._stats.throttled[t] += n - grants.get(t, 0)
        # Flow rules (issue 43): a token per task of a rate limit key, reserved for every
        # limited key with waiting tasks in one call; paused types and pools held.
        gate = await self._flow.gate(self._ready, min(credits, limit), now.timestamp())
        veto = gate.veto

        def allow(tenant_id: uuid.UUID) -> bool:
            return grants.get(tenant_id, 0) > 0

        picks: list[tuple[WorkerSession, Preloaded]] = []
        # No reserve held (no critical work in sight, say): not a call more per slot.
        self._held = self.held_reserves(to_ms(now)) if cfg.reserves else frozenset()
        reserving = bool(self._held)
        active = collections.deque(sessions)
        ready = self._ready
        # Only the pools with tasks waiting are tried (nothing is queued during the
        # loop, so a pool found empty stays empty): no call a slot for the others.
        live = [pool for pool in POOL_ORDER if ready.depth(pool)]
        while active and len(picks) < limit and live:
            s = active.popleft()
            task = None
            for pool in live:
                if (
                    pool in s.pools
                    and (s.outlet is not None or pool not in self._outlet_pools)
                    and self._pool_open(pool, capacity)
                    and (not reserving or self._room(s, pool))
                ):
                    task = ready.pop(pool, s.task_types, s.scope, allow, veto)
                    if task is not None:
                        if not ready.depth(pool):
                            live.remove(pool)
                        break
            if task is None:
                continue  # nothing this session can run right now
            if veto is not None:
                gate.took(task.tenant_id, task.rate_key)
            grants[task.tenant_id] -= 1
            s.take_credit()
            self._slots.take(task)
            picks.append((s, task))
            if s.credits > 0:
                active.append(s)
        unused = {t: n for t, n in grants.items() if n > 0}
        if len(self._ready) and any(grants.get(t, 0) < n for t, n in wanted.items()):
            # Throttled work stays PRELOADED in the ready queue; look again shortly.
            self._throttled_until = time.monotonic() + cfg.throttle_retry_s
        if veto is not None:
            self._flow.count_held(self._ready, gate, now.timestamp())
            if gate.retry_s is not None:
                # A held key: look again when it has a token (not per task, not sooner).
                again = time.monotonic() + max(gate.retry_s, 0.001)
                if self._throttled_until < time.monotonic() or again < self._throttled_until:
                    self._throttled_until = again
        if not picks:
            if unused:
                await self._quota.refund(unused, now.timestamp())
            await self._refund_keys(gate, now.timestamp())
            return 0
        # Behind once every task of the round was due within the lead already: each
        # should have been committed by now, so the rounds are not keeping up (a slow
        # commit, a burst, a backlog) and grow to max_batch before any is late.
        self._behind = max(p.due_at for _, p in picks) <= now + timedelta(
            milliseconds=self.lead_ms()
        )
        if self._shards.clustered:
            # Stop dispatching from a shard as soon as its lease is no longer trusted
            # (a margin before the TTL); the store refuses stale epochs anyway. Shards
            # being gained are claimed in etcd and their epoch is ours already.
            owned = self._shards.owned_or_gaining()
            lost = [(s, p) for s, p in picks if p.shard_id not in owned]
            if lost:
                for s, p in lost:
                    self._undo(s, p)
                    gate.gave_back(p.tenant_id, p.rate_key)
                    unused[p.tenant_id] = unused.get(p.tenant_id, 0) + 1
                picks = [(s, p) for s, p in picks if p.shard_id in owned]
                if not picks:
                    await self._quota.refund(unused, now.timestamp())
                    await self._refund_keys(gate, now.timestamp())
                    return 0
        # From the due time, not the commit: a task committed ahead (the lead and the
        # window) still gets its whole lease once it is delivered. To a worker that
        # acks first, only until the ack is due (its ack extends it): a task pushed by
        # a node that died unacked goes back then. Per session and per shard once.
        leases = {s: short if s.acks_first else ttl for s in sessions}
        epoch = self._shards.epoch
        epochs = {shard: epoch(shard) for shard in {p.shard_id for _, p in picks}}
        requests = [
            DispatchRequest(
                key=p.key,
                worker_id=s.worker_id,
                lease_expires_at=max(now, p.due_at) + leases[s],
                epoch=epochs[p.shard_id],
                running=s.start_on_delivery,
            )
            for s, p in picks
        ]
        started = time.monotonic()
        try:
            assignments = await self._store.mark_dispatched(requests, now)
        except Exception as exc:
            if not isinstance(exc, StoreUnavailable):
                log.exception("dispatch commit failed; tasks stay PRELOADED and are retried")
            elif not self._beat.failing:  # once per outage: the health loop says the rest
                log.warning("dispatch commit failed (%s); tasks stay PRELOADED, retried", exc)
            self._commit_error = exc
            back: collections.Counter[uuid.UUID] = collections.Counter(unused)
            for s, p in reversed(picks):
                self._undo(s, p)
                gate.gave_back(p.tenant_id, p.rate_key)
                back[p.tenant_id] += 1
                self._ready.push(p)  # the oldest: out first again
            await self._quota.refund(back, now.timestamp())
            await self._refund_keys(gate, now.timestamp())
            await asyncio.sleep(0.1)
            return 0
        took = time.monotonic() - started
        self._commit_ms.append(took * 1000.0)
        stats = self._stats
        stats.dispatch_rounds += 1
        stats.write("dispatch", len(requests), took)
        now_ms = to_ms(now)
        refund: collections.Counter[uuid.UUID] = collections.Counter(unused)
        pool_wait = stats.pool_wait_ms
        ready_wait = stats.ready_wait_s
        counts: collections.Counter[tuple[Pool, str]] = collections.Counter()
        late: dict[WorkerSession, list[Assignment]] = {}
        keys = self.keys
        hold_of = self._flow.hold_of if self._flow.since else None
        waits: dict[datetime, int] = {}  # by due time: a burst shares a few
        hold = self._delivery.hold
        sent = 0
        for (s, p), a in zip(picks, assignments, strict=True):
            if a is None:  # cancelled between pre-load and dispatch
                self._undo(s, p)
                gate.gave_back(p.tenant_id, p.rate_key)
                refund[p.tenant_id] += 1
                continue
            if type(a) is Held:  # its concurrency key is at its limit: it waits
                self._undo(s, p)
                gate.gave_back(p.tenant_id, p.rate_key)
                refund[p.tenant_id] += 1
                keys.hold(p, a)
                continue
            assert type(a) is Assignment
            if a.concurrency_key is not None:
                keys.dispatched(p.key.id, p.tenant_id, p.type, a.concurrency_key)
            wait_ms = waits.get(p.due_at)
            if wait_ms is None:
                wait_ms = waits[p.due_at] = max(0, now_ms - to_ms(p.due_at))
            pool = p.pool
            pool_wait[pool].append(float(wait_ms))
            ready_wait[pool].observe(wait_ms / 1000.0)
            if hold_of is not None:
                held = hold_of(p.tenant_id, p.type, pool, p.rate_key, p.due_at.timestamp())
                if held is not None:
                    stats.held_wait_s[held[0]].observe(held[1])
            counts[(pool, p.type)] += 1
            sent += 1
            if s.assigned(a):
                hold(s, a)
            else:
                late.setdefault(s, []).append(a)
        dispatched = stats.tasks["dispatched"]
        for (pool, type_), n in counts.items():
            dispatched[(pool.value, type_)] += n
        if hold_of is not None:
            self._flow.prune(self._ready)
        for s, gone in late.items():
            await s.give_back(gone)
        if refund:
            await self._quota.refund(refund, now.timestamp())
        await self._refund_keys(gate, now.timestamp())
        if self._mirror.enabled:
            self._mirror.remove([p.key for _, p in picks], [p.shard_id for _, p in picks])
        self._stats.dispatched += sent
        self._delivery.wake()
        return len(picks)

    async def _refund_keys(self, gate: Round, now_s: float) -> None:
        """Give back the key tokens a round reserved and did not use."""
        unused = gate.unused()
        if unused:
            await self._flow.keys.refund(unused, self._flow.limits, now_s)

    def pool_metrics(self) -> dict[Pool, PoolMetrics]:
        """Depth, wait time, slots used and reserved, per pool."""
        out = {}
        cfg = self._config
        for pool in POOL_ORDER:
            waits = sorted(self._stats.pool_wait_ms[pool])
            out[pool] = PoolMetrics(
                depth=self._ready.depth(pool),
                wait_p50_ms=waits[len(waits) // 2] if waits else None,
                wait_p99_ms=waits[min(len(waits) - 1, int(0.99 * len(waits)))] if waits else None,
                slots_used=self._slots.in_pool(pool),
                slots_reserved=cfg.critical_reserved_slots if pool is Pool.CRITICAL else 0,
                slots_max=cfg.bulk_max_slots if pool is Pool.BULK else None,
            )
        return out
