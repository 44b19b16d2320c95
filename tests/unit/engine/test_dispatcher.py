"""The dispatcher built alone: real ready queues, fair share, slots, timeline, delivery,
shard state, quota and sessions registry; a fake store. ``match_and_commit`` is called
directly (no loop), so every test is one round and what it left behind.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._aio import Background, cancel_and_wait
from scheduler.engine import EngineConfig, SlotReserve, _dispatcher
from scheduler.engine._delivery import Delivery
from scheduler.engine._dispatcher import Dispatcher
from scheduler.engine._fair_share import FairShare
from scheduler.engine._health import Beat
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._shard_state import ShardState
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline, to_ms, to_us
from scheduler.engine._types import AssignmentBatch, WorkerHello
from scheduler.quota import LocalQuota
from scheduler.store import StoreUnavailable
from scheduler.types import Assignment, DispatchRequest, Pool, Preloaded, TaskKey, Tenant
from tests.support.waiting import eventually

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=7)
OTHER = uuid.UUID(int=8)


class FakeMembership:
    """A membership that owns exactly the shards it is given (mutable)."""

    def __init__(self, owned: frozenset[int]) -> None:
        self.owned_shards = owned
        self.node_id = "n"
        self.shard_count = 256

    def set_listener(self, listener: object) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def owned(self) -> frozenset[int]:
        return self.owned_shards

    def owns(self, shard: int) -> bool:
        return shard in self.owned_shards


class FakeStore:
    """``get_tenant`` from a dict; ``mark_dispatched`` records each call and answers
    an assignment per request (None for ids in ``cancelled``, or raises ``fail``)."""

    def __init__(self) -> None:
        self.tenants: dict[uuid.UUID, Tenant] = {}
        self.calls: list[list[DispatchRequest]] = []
        self.cancelled: set[uuid.UUID] = set()
        self.fail: Exception | None = None
        self.tenant_fail: Exception | None = None
        self.tick: FakeClock | None = None
        self.commit_ms = 0.0

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        if self.tenant_fail is not None:
            raise self.tenant_fail
        return self.tenants.get(tenant_id, Tenant(id=tenant_id, name="t"))

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> object:
        raise AssertionError("the dispatcher reads no task")

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | None]:
        self.calls.append(list(requests))
        if self.tick is not None:
            self.tick.t += self.commit_ms / 1000.0
        if self.fail is not None:
            raise self.fail
        return [
            None
            if r.key.id in self.cancelled
            else Assignment(
                key=r.key,
                tenant_id=TENANT,
                type="t",
                payload={},
                fencing_token=1,
                attempt=1,
                max_retries=3,
                due_at=r.key.scheduled_at,
                lease_expires_at=r.lease_expires_at,
                checkpoint=None,
                trace_context=None,
                pool=Pool.STANDARD,
                worker_id=r.worker_id,
                timeout_s=0.0,
            )
            for r in requests
        ]


class FakeCompleter:
    """Sessions need a completer; no test here writes through one."""

    def count_stale(self, outcomes: object) -> None: ...

    async def release_unacked(self, held: object) -> None: ...


class FakeClock:
    """Stands in for the dispatcher's ``time`` module (commit durations)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


class Rig:
    """One dispatcher and the real parts around it."""

    def __init__(self, config: EngineConfig | None = None, owned: frozenset[int] | None = None):
        self.config = config or EngineConfig()
        self.store = FakeStore()
        self.beat = Beat("dispatcher")
        self.stats = EngineStats()
        self.membership = FakeMembership(owned if owned is not None else frozenset(range(256)))
        self.shards = ShardState(self.membership, clustered=owned is not None)  # type: ignore[arg-type]
        self.mirror = IndexMirror(
            None, self.config, self.stats, Background(logging.getLogger("test")), lambda: None
        )
        self.timeline = Timeline(
            self.config, self.shards, self.mirror, self.stats, lambda: None, to_ms(T0)
        )
        self.fair_share = FairShare(self.store, self.config)  # type: ignore[arg-type]
        self.ready = ReadyQueues(self.fair_share.weight, self.timeline.rows)
        self.slots = Slots(lambda _id: None)
        self.delivery = Delivery(lambda: to_us(T0), self.stats)
        self.quota = LocalQuota()
        self.sessions = Sessions(
            self.store,  # type: ignore[arg-type]
            self.config,
            FakeCompleter(),  # type: ignore[arg-type]
            lambda: None,
            lambda _o, _a: None,
        )
        self.dispatcher = Dispatcher(
            store=self.store,  # type: ignore[arg-type]
            config=self.config,
            now=lambda: T0,
            quota=self.quota,
            shards=self.shards,
            timeline=self.timeline,
            mirror=self.mirror,
            ready=self.ready,
            fair_share=self.fair_share,
            sessions=self.sessions,
            slots=self.slots,
            delivery=self.delivery,
            stats=self.stats,
            outlet_pools=frozenset(),
            reload_shard=lambda _s: None,
            beat=self.beat,
        )

    def session(
        self,
        slots: int = 1,
        *,
        tenant: uuid.UUID = TENANT,
        shared: bool = False,
        pools: frozenset[Pool] = frozenset(Pool),
        start_on_delivery: bool = False,
    ) -> WorkerSession:
        hello = WorkerHello(
            worker_id=f"w-{uuid.uuid4().hex[:6]}",
            tenant_id=tenant,
            task_types=frozenset({"t"}),
            pools=pools,
            slots=slots,
            start_on_delivery=start_on_delivery,
        )
        return self.sessions.open(hello, shared=shared)


def task(
    pool: Pool = Pool.STANDARD, *, tenant: uuid.UUID = TENANT, shard: int = 0, at_ms: int = 0
) -> Preloaded:
    due = T0 + timedelta(milliseconds=at_ms)
    return Preloaded(
        key=TaskKey(uuid.uuid4(), due),
        due_at=due,
        tenant_id=tenant,
        shard_id=shard,
        pool=pool,
        type="t",
    )


def pushed(s: WorkerSession) -> list[Assignment]:
    """What the session's stream was given so far."""
    out: list[Assignment] = []
    while not s._queue.empty():
        event = s._queue.get_nowait()
        assert isinstance(event, AssignmentBatch)
        out.extend(event.assignments)
    return out


async def test_ready_tasks_are_matched_to_sessions_with_credit_in_one_commit() -> None:
    rig = Rig()
    a, b = rig.session(2), rig.session(1)
    tasks = [task(at_ms=i) for i in range(4)]
    rig.ready.extend(tasks)
    assert await rig.dispatcher.match_and_commit() == 3
    assert len(rig.store.calls) == 1
    committed = {r.key for r in rig.store.calls[0]}
    assert len(committed) == 3
    assert committed <= {t.key for t in tasks}
    # Each request names the session's worker and a lease from the due time: to these
    # ack-first workers, until their ack is overdue (the ack extends it).
    by_worker = {r.worker_id for r in rig.store.calls[0]}
    assert by_worker == {a.worker_id, b.worker_id}
    short = timedelta(seconds=rig.config.dispatch_lease_s)
    assert short < timedelta(seconds=rig.config.lease_ttl_s)
    for r in rig.store.calls[0]:
        assert r.lease_expires_at == r.key.scheduled_at + short
    assert (a.credits, b.credits) == (0, 0)
    assert len(rig.slots) == 3
    assert len(rig.ready) == 1  # no credit left for the fourth
    assert rig.stats.dispatched == 3
    # No credit anywhere: the next round matches nothing and calls no store.
    assert await rig.dispatcher.match_and_commit() == 0
    assert len(rig.store.calls) == 1


async def test_assignments_are_held_in_delivery_until_their_due_tick() -> None:
    rig = Rig()
    # Starting on delivery: each push goes as it comes due (an ack-first session holds
    # one back while the push before it awaits its ack: test_sessions.py).
    s = rig.session(2, start_on_delivery=True)
    soon, later = task(at_ms=0), task(at_ms=40)
    rig.ready.extend([soon, later])
    assert await rig.dispatcher.match_and_commit() == 2
    assert len(rig.delivery) == 2
    assert pushed(s) == []  # committed ahead, not pushed yet
    assert s.holding(soon.key.id) == (soon.key, 1)
    rig.delivery.deliver_due(to_us(T0))
    assert [x.key for x in pushed(s)] == [soon.key]
    rig.delivery.deliver_due(to_us(T0) + 40_000)
    assert [x.key for x in pushed(s)] == [later.key]
    assert len(rig.delivery) == 0


async def test_bulk_never_holds_more_than_its_cap() -> None:
    rig = Rig(EngineConfig(bulk_max_slots=2))
    rig.session(5)
    rig.ready.extend([task(Pool.BULK) for _ in range(4)])
    assert await rig.dispatcher.match_and_commit() == 2
    assert rig.slots.in_pool(Pool.BULK) == 2
    assert rig.ready.depth(Pool.BULK) == 2
    # Standard work still goes to the remaining credit.
    rig.ready.push(task(Pool.STANDARD))
    assert await rig.dispatcher.match_and_commit() == 1
    assert rig.slots.in_pool(Pool.STANDARD) == 1


async def test_the_critical_reserve_holds_only_while_a_critical_task_waits() -> None:
    # Capacity is credit plus slots in use: 4. Two are kept for critical work.
    rig = Rig(EngineConfig(critical_reserved_slots=2))
    rig.session(4, pools=frozenset({Pool.STANDARD, Pool.BULK}))  # cannot run critical
    crit = task(Pool.CRITICAL)
    rig.ready.push(crit)
    rig.ready.extend([task(Pool.STANDARD) for _ in range(4)])
    assert await rig.dispatcher.match_and_commit() == 2
    assert rig.slots.in_pool(Pool.STANDARD) == 2
    assert rig.ready.depth(Pool.STANDARD) == 2
    # Once no critical task waits, standard may take the reserve too (work stealing).
    assert rig.ready.remove(crit.key.id)
    assert await rig.dispatcher.match_and_commit() == 2
    assert rig.slots.in_pool(Pool.STANDARD) == 4


async def test_critical_takes_a_free_slot_first_whatever_the_reserve() -> None:
    rig = Rig(EngineConfig(critical_reserved_slots=10))
    rig.session(1)
    crit = task(Pool.CRITICAL, at_ms=5)
    rig.ready.extend([task(Pool.STANDARD), crit])
    assert await rig.dispatcher.match_and_commit() == 1
    assert [r.key for r in rig.store.calls[0]] == [crit.key]
    assert rig.ready.depth(Pool.STANDARD) == 1


async def test_a_worker_keeps_its_reserved_slots_free_for_critical_while_stealing() -> None:
    # 20 slots, 10% kept for critical at all times: bulk and standard fill 18, never
    # the last two, even with no critical task anywhere (the reserve does not steal).
    cfg = EngineConfig(
        bulk_max_slots=1000,
        reserves=(SlotReserve(pool=Pool.CRITICAL, share=0.1),),
        reserve_linger_s=None,
    )
    rig = Rig(cfg)
    s = rig.session(20)
    rig.ready.extend([task(Pool.BULK, at_ms=i) for i in range(100)])
    assert await rig.dispatcher.match_and_commit() == 18
    assert await rig.dispatcher.match_and_commit() == 0
    assert s.credits == 2
    # A critical task comes due: it takes a kept slot at once, no bulk task ended.
    crit = task(Pool.CRITICAL, at_ms=200)
    rig.ready.push(crit)
    assert await rig.dispatcher.match_and_commit() == 1
    assert [r.key for r in rig.store.calls[-1]] == [crit.key]
    assert rig.slots.in_pool(Pool.BULK) == 18
    # One slot is still free, but it is kept: bulk does not take it back.
    assert s.credits == 1
    assert await rig.dispatcher.match_and_commit() == 0


async def test_reserves_keep_slots_from_every_pool_behind_and_only_on_workers_of_the_pool() -> None:
    cfg = EngineConfig(
        bulk_max_slots=1000,
        reserves=(
            SlotReserve(pool=Pool.CRITICAL, slots=1),
            SlotReserve(pool=Pool.STANDARD, slots=2),
        ),
        reserve_linger_s=None,
    )
    rig = Rig(cfg)
    both = rig.session(10)
    rig.ready.extend([task(Pool.BULK, at_ms=i) for i in range(50)])
    assert await rig.dispatcher.match_and_commit() == 7  # 1 kept for critical, 2 for standard
    rig.ready.extend([task(Pool.STANDARD, at_ms=100 + i) for i in range(5)])
    assert await rig.dispatcher.match_and_commit() == 2  # standard may use its own two
    assert both.credits == 1
    # A worker that runs neither critical nor standard work keeps nothing for them.
    bulk_only = rig.session(10, pools=frozenset({Pool.BULK}))
    assert await rig.dispatcher.match_and_commit() == 10
    assert bulk_only.credits == 0
    assert rig.ready.depth(Pool.STANDARD) == 3


async def test_the_default_reserve_is_held_only_while_critical_work_is_in_sight() -> None:
    # The default: 10% of each worker's slots for critical, held while a critical task
    # waits, is in the wheel, or was due less than reserve_linger_s (300 s) ago.
    rig = Rig(EngineConfig(bulk_max_slots=1000))
    first = rig.session(20)
    rig.ready.extend([task(Pool.BULK, at_ms=i) for i in range(100)])
    assert rig.dispatcher.held_reserves(to_ms(T0)) == frozenset()
    assert await rig.dispatcher.match_and_commit() == 20  # nothing critical: no slot idle
    assert first.credits == 0
    # A critical task enters the wheel, due in ten minutes: the reserve is held from now.
    rig.timeline.add([task(Pool.CRITICAL, at_ms=600_000)])
    assert rig.dispatcher.held_reserves(to_ms(T0)) == frozenset({Pool.CRITICAL})
    assert rig.dispatcher.held_reserves(to_ms(T0) + 900_000) == frozenset({Pool.CRITICAL})
    assert rig.dispatcher.held_reserves(to_ms(T0) + 900_001) == frozenset()
    fresh = rig.session(20)
    assert await rig.dispatcher.match_and_commit() == 18
    assert fresh.credits == 2
    # A critical task waiting in the ready queues holds it too, whatever the wheel saw.
    other = Rig(EngineConfig(bulk_max_slots=1000))
    other.ready.push(task(Pool.CRITICAL, at_ms=0))
    assert other.dispatcher.held_reserves(to_ms(T0)) == frozenset({Pool.CRITICAL})
    # Held at all times with reserve_linger_s=None; none at all with reserves=().
    always = Rig(EngineConfig(reserve_linger_s=None))
    assert always.dispatcher.held_reserves(to_ms(T0)) == frozenset({Pool.CRITICAL})
    off = Rig(EngineConfig(reserves=()))
    off.timeline.add([task(Pool.CRITICAL, at_ms=0)])
    assert off.dispatcher.held_reserves(to_ms(T0)) == frozenset()


def test_slot_reserve_sizes_parses_and_refuses() -> None:
    share = SlotReserve(pool=Pool.CRITICAL, share=0.1)
    assert [share.of(n) for n in (0, 1, 2, 5, 10, 20, 21, 200)] == [0, 0, 1, 1, 1, 2, 3, 20]
    assert SlotReserve(pool=Pool.CRITICAL, slots=4, share=0.1).of(20) == 4
    assert SlotReserve(pool=Pool.CRITICAL, slots=50).of(20) == 19  # one left to the rest
    assert SlotReserve.parse("critical=10%, standard=2") == (
        SlotReserve(pool=Pool.CRITICAL, share=0.1),
        SlotReserve(pool=Pool.STANDARD, slots=2),
    )
    assert SlotReserve.parse("") == ()
    for bad, why in (
        ("bulk=1", "no pool comes after bulk"),
        ("critical", "expected POOL=SLOTS"),
        ("critical=", "expected POOL=SLOTS"),
        ("x=1", "expected POOL=SLOTS"),
        ("critical=1,critical=2", "given twice"),
        ("critical=100%", "share must be >= 0 and < 1"),
        ("critical=-1", "slots must be >= 0"),
        ("critical=a", "invalid literal"),
    ):
        with pytest.raises(ValueError, match=why):
            SlotReserve.parse(bad)
    with pytest.raises(ValueError, match="one SlotReserve per pool"):
        EngineConfig(reserves=(share, share))
    cfg = EngineConfig(reserves=(share, SlotReserve(pool=Pool.STANDARD, slots=3)))
    assert cfg.kept_free(Pool.CRITICAL, 20, frozenset(Pool)) == 0
    assert cfg.kept_free(Pool.STANDARD, 20, frozenset(Pool)) == 2
    assert cfg.kept_free(Pool.BULK, 20, frozenset(Pool)) == 5
    assert cfg.kept_free(Pool.BULK, 20, frozenset({Pool.BULK})) == 0
    assert cfg.kept_free(Pool.BULK, 3, frozenset(Pool)) == 2


async def test_a_session_of_another_tenant_never_gets_the_task_a_shared_one_does() -> None:
    rig = Rig()
    other = rig.session(3, tenant=OTHER)
    t = task(tenant=TENANT)
    rig.ready.push(t)
    assert await rig.dispatcher.match_and_commit() == 0
    assert rig.store.calls == []
    assert other.credits == 3
    assert len(rig.ready) == 1
    shared = rig.session(1, tenant=OTHER, shared=True)
    assert await rig.dispatcher.match_and_commit() == 1
    assert [r.worker_id for r in rig.store.calls[0]] == [shared.worker_id]
    assert other.credits == 3
    assert shared.holding(t.key.id) is not None


async def test_a_failed_commit_puts_everything_back_as_it_was() -> None:
    rig = Rig()
    s = rig.session(3)
    tasks = [task(at_ms=i) for i in range(4)]
    rig.ready.extend(tasks)
    rig.store.fail = RuntimeError("disk on fire")
    assert await rig.dispatcher.match_and_commit() == 0
    assert len(rig.store.calls) == 1
    assert [r.key for r in rig.store.calls[0]] == [t.key for t in tasks[:3]]
    assert s.credits == 3
    assert len(rig.slots) == 0
    assert len(rig.delivery) == 0
    assert rig.stats.dispatched == 0
    assert rig.quota.in_flight() == {}  # the grants went back too
    # The three taken are back at the front, in their order, ahead of the fourth.
    assert len(rig.ready) == 4
    order = [rig.ready.pop(Pool.STANDARD, None, TENANT) for _ in range(4)]
    assert [p.key for p in order if p] == [t.key for t in tasks]


async def test_a_task_cancelled_meanwhile_gives_its_credit_and_slot_back() -> None:
    rig = Rig()
    s = rig.session(2)
    gone, kept = task(at_ms=0), task(at_ms=1)
    rig.ready.extend([gone, kept])
    rig.store.cancelled.add(gone.key.id)
    assert await rig.dispatcher.match_and_commit() == 2
    assert s.credits == 1
    assert len(rig.slots) == 1
    assert s.holding(gone.key.id) is None
    assert s.holding(kept.key.id) is not None
    assert len(rig.delivery) == 1
    assert rig.stats.dispatched == 1
    assert rig.quota.in_flight() == {TENANT: 1}


async def test_in_a_cluster_a_task_of_a_lost_shard_is_not_committed() -> None:
    rig = Rig(owned=frozenset({1, 2}))
    rig.shards.claimed({1: 5, 2: 6})
    s = rig.session(3)
    mine, lost = task(shard=1), task(shard=2, at_ms=1)
    rig.ready.extend([mine, lost])
    rig.membership.owned_shards = frozenset({1})  # shard 2 went to another node
    assert await rig.dispatcher.match_and_commit() == 1
    [request] = rig.store.calls[0]
    assert (request.key, request.epoch) == (mine.key, 5)
    assert s.credits == 2
    assert len(rig.slots) == 1
    assert rig.quota.in_flight() == {TENANT: 1}
    # Only the lost one left: no commit at all.
    rig.ready.push(task(shard=2))
    assert await rig.dispatcher.match_and_commit() == 0
    assert len(rig.store.calls) == 1
    assert s.credits == 2


@pytest.mark.parametrize(
    ("commit_ms", "ahead", "lead"),
    [(0.0, 0, 50), (100.0, 0, 151), (5000.0, 0, 1000), (0.0, 20, 70), (5000.0, 20, 1020)],
)
async def test_the_lead_follows_commit_times_within_its_bounds(
    monkeypatch: pytest.MonkeyPatch, commit_ms: float, ahead: int, lead: int
) -> None:
    # A push may go ``push_ahead_ms`` before due: the commit leads by that much more.
    cfg = EngineConfig(dispatch_lead_ms=50, dispatch_lead_max_ms=1000, push_ahead_ms=ahead)
    rig = Rig(cfg)
    assert rig.dispatcher.lead_ms() == 50 + ahead  # no commit yet
    clock = FakeClock()
    monkeypatch.setattr(_dispatcher, "time", clock)
    rig.store.tick, rig.store.commit_ms = clock, commit_ms
    rig.session(1)
    rig.ready.push(task())
    assert await rig.dispatcher.match_and_commit() == 1
    assert rig.dispatcher.lead_ms() == lead


async def test_pool_metrics_report_depth_and_slots_used() -> None:
    # Capacity 5, 3 kept for the waiting critical task: bulk gets 2 of its 3.
    rig = Rig(EngineConfig(critical_reserved_slots=3, bulk_max_slots=7))
    rig.session(5, pools=frozenset({Pool.BULK}))
    rig.ready.extend([task(Pool.BULK), task(Pool.BULK), task(Pool.BULK), task(Pool.CRITICAL)])
    assert await rig.dispatcher.match_and_commit() == 2
    metrics = rig.dispatcher.pool_metrics()
    assert (metrics[Pool.BULK].depth, metrics[Pool.BULK].slots_used) == (1, 2)
    assert (metrics[Pool.CRITICAL].depth, metrics[Pool.CRITICAL].slots_used) == (1, 0)
    assert (metrics[Pool.STANDARD].depth, metrics[Pool.STANDARD].slots_used) == (0, 0)
    assert metrics[Pool.CRITICAL].slots_reserved == 3
    assert metrics[Pool.BULK].slots_max == 7
    assert metrics[Pool.STANDARD].slots_max is None
    assert metrics[Pool.BULK].wait_p50_ms == 0.0  # due at T0, committed at T0
    assert metrics[Pool.STANDARD].wait_p50_ms is None


async def test_a_shared_session_gets_a_waiting_task_after_scoped_sessions_took_others() -> None:
    """The tenant's own worker took three tasks; a shared session that comes later gets
    the fourth (the deficit of a tenant's own takes no longer goes below zero)."""
    rig = Rig()
    rig.session(3)  # the tenant's own worker
    rig.ready.extend([task(at_ms=i) for i in range(4)])
    assert await rig.dispatcher.match_and_commit() == 3
    shared = rig.session(1, tenant=OTHER, shared=True)
    assert await rig.dispatcher.match_and_commit() == 1
    assert shared.credits == 0


async def test_rounds_grow_to_max_batch_only_while_the_dispatcher_is_behind() -> None:
    """Ahead of the lead a round commits at most ``dispatch_batch`` (it holds the loop
    that delivers); once a round's tasks were all due within the lead when it committed
    (a burst, a backlog, commits slower than the window), rounds take up to
    ``max_batch``, and go back to small when they are ahead of the lead again."""
    rig = Rig(EngineConfig(dispatch_batch=3, max_batch=8))
    rig.session(100)
    # Due at or before the dispatcher's now (T0): behind.
    rig.ready.extend([task(at_ms=-i) for i in range(20)])
    sizes = []
    while len(rig.ready):
        sizes.append(await rig.dispatcher.match_and_commit())
    assert sizes == [3, 8, 8, 1]
    assert [len(c) for c in rig.store.calls] == sizes
    # Due after the lead (70 ms: the push ahead and the 50 ms floor): small rounds
    # again, after the one round that finds out (the last round was behind).
    assert rig.dispatcher.lead_ms() == 70
    rig.ready.extend([task(at_ms=1_000 + i) for i in range(20)])
    sizes = []
    while len(rig.ready):
        sizes.append(await rig.dispatcher.match_and_commit())
    assert sizes == [8, 3, 3, 3, 3]
    # Not due yet, but within the lead: each should have been committed already (the
    # rounds are not keeping up), so they grow before any task is late.
    rig.ready.extend([task(at_ms=10 + i) for i in range(20)])
    sizes = []
    while len(rig.ready):
        sizes.append(await rig.dispatcher.match_and_commit())
    assert sizes == [3, 8, 8, 1]


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` (bounded by the test's timeout): the loop runs meanwhile."""

    async def probe() -> bool:
        return condition()

    await eventually(probe, timeout_s=10)


async def test_the_loop_outlives_a_store_that_fails_outside_the_commit() -> None:
    """Issue 42's silent stall: a tenant's limits read from a store that had gone away
    raised out of the round and ended the dispatch loop for good, while the node kept
    its shards. The round fails, the beat says so, and the next round dispatches."""
    rig = Rig()
    rig.session(slots=1)
    rig.store.tenant_fail = StoreUnavailable("PostgreSQL: CannotConnectNowError")
    rig.ready.push(task())
    loop = asyncio.create_task(rig.dispatcher.run())
    try:
        await until(lambda: rig.beat.failing)
        assert rig.store.calls == []
        assert len(rig.ready) == 1
        rig.store.tenant_fail = None
        await until(lambda: len(rig.store.calls) == 1 and not rig.beat.failing)
        assert not loop.done()
    finally:
        await cancel_and_wait([loop])


async def test_a_failing_commit_marks_the_round_failed_until_one_lands() -> None:
    rig = Rig()
    rig.session(slots=1)
    rig.store.fail = StoreUnavailable("PostgreSQL: ConnectionRefusedError")
    rig.ready.push(task())
    loop = asyncio.create_task(rig.dispatcher.run())
    try:
        await until(lambda: len(rig.store.calls) >= 2)
        assert rig.beat.failing
        assert "ConnectionRefused" in (rig.beat.last_error or "")
        rig.store.fail = None
        rig.dispatcher.wake()
        await until(lambda: not rig.beat.failing and len(rig.ready) == 0)
    finally:
        await cancel_and_wait([loop])


async def test_new_room_wakes_the_loop_only_while_tasks_wait_for_it() -> None:
    """A worker's credit (one every few milliseconds in a steady stream) costs a round
    only when a ready task waits for it; what comes due later fires on the timer."""
    rig = Rig()
    wake = rig.dispatcher._wake
    rig.dispatcher.room_freed()
    assert not wake.is_set()
    rig.ready.extend([task()])
    rig.dispatcher.room_freed()
    assert wake.is_set()
