"""The pre-loader and the lease reaper built alone: a fake store, a real timeline and
index mirror (over the in-memory time index where the index matters), the shard state
and a background group. The pre-loader's loop runs as a task and is awaited through
signals the fake store gives (no sleeps).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta

from scheduler._aio import Background
from scheduler._errors import NotFound
from scheduler.engine import EngineConfig
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._leases import Reaper
from scheduler.engine._preloader import Preloader
from scheduler.engine._shard_state import ShardState
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline, to_ms
from scheduler.index import MemoryTimeIndex
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import (
    Pool,
    Preloaded,
    PreloadedPage,
    ReclaimResult,
    Release,
    TaskKey,
    TaskRecord,
)
from tests.support.records import task_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=7)


class FakeMembership:
    def __init__(self, owned: frozenset[int]) -> None:
        self._owned = owned
        self.node_id = "n"
        self.shard_count = 256

    def set_listener(self, listener: object) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def owned(self) -> frozenset[int]:
        return self._owned

    def owns(self, shard: int) -> bool:
        return shard in self._owned


class FakeStore:
    """Answers claims, loads and reclaims from queues of pages; records every call and
    puts the name of each into ``signals`` for the test to wait on."""

    def __init__(self) -> None:
        self.claims: list[list[Preloaded]] = []
        self.loads: list[list[Preloaded]] = []
        self.reclaims: list[ReclaimResult] = []
        self.tasks: dict[uuid.UUID, TaskRecord] = {}
        self.claim_calls: list[tuple[list[int] | None, datetime, int]] = []
        self.load_calls: list[tuple[list[int] | None, TaskKey | None, datetime | None]] = []
        self.reclaim_calls: list[list[int] | None] = []
        self.signals: asyncio.Queue[str] = asyncio.Queue()
        self.on_notice: object = None
        self.on_move: object = None

    async def claim_preload(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        now: datetime,
        retry_horizon: datetime | None = None,
    ) -> list[Preloaded]:
        self.claim_calls.append((None if shards is None else list(shards), horizon, limit))
        self.signals.put_nowait("claim")
        return self.claims.pop(0) if self.claims else []

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        self.load_calls.append((None if shards is None else list(shards), after, changed_since))
        self.signals.put_nowait("load")
        return self.loads.pop(0) if self.loads else []

    async def load_preloaded_packed(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> PreloadedPage:
        return PreloadedPage.of(
            await self.load_preloaded(shards, horizon, limit, after, changed_since)
        )

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise NotFound("task", str(task_id)) from None

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        self.reclaim_calls.append(None if shards is None else list(shards))
        if self.reclaims:
            return self.reclaims.pop(0)
        return ReclaimResult(requeued=(), retrying=(), dead_lettered=(), cancelled=())

    async def listen_work(self, on_notice: object, on_move: object = None) -> None:
        self.on_notice = on_notice
        self.on_move = on_move
        return None  # no channel: the caller returns


class FakeSessions:
    def __init__(self) -> None:
        self.expired_calls: list[tuple[uuid.UUID, bool]] = []

    def expired(self, task_id: uuid.UUID, *, requeued: bool) -> None:
        self.expired_calls.append((task_id, requeued))

    async def release_overdue(self) -> int:
        return 0  # no stream here: nothing pushed, nothing overdue

    async def end_orphans(self) -> int:
        return 0  # no stream here: nothing orphaned


class Rig:
    def __init__(
        self,
        config: EngineConfig | None = None,
        *,
        owned: frozenset[int] | None = None,
        index: MemoryTimeIndex | None = None,
    ) -> None:
        self.config = config or EngineConfig(preload_interval_s=3600, reconcile_interval_s=3600)
        self.store = FakeStore()
        self.stats = EngineStats()
        self.background = Background(logging.getLogger("test"))
        membership = FakeMembership(owned if owned is not None else frozenset(range(256)))
        self.shards = ShardState(membership, clustered=owned is not None)  # type: ignore[arg-type]
        self.mirror = IndexMirror(index, self.config, self.stats, self.background, lambda: None)
        self.timeline = Timeline(
            self.config, self.shards, self.mirror, self.stats, lambda: None, to_ms(T0)
        )
        self.preloader = Preloader(
            self.store,  # type: ignore[arg-type]
            self.config,
            lambda: T0,
            self.shards,
            self.timeline,
            self.mirror,
            self.background,
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        task = asyncio.create_task(self.preloader.run(), name="test-preloader")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self.background.cancel_all()

    async def signal(self, name: str) -> None:
        """Wait (bounded) for the fake store's next call named ``name``."""
        async with asyncio.timeout(10):
            while await self.store.signals.get() != name:
                pass


def preloaded(at_ms: int = 0, shard: int = 1) -> Preloaded:
    due = T0 + timedelta(milliseconds=at_ms)
    return Preloaded(
        key=TaskKey(uuid.uuid4(), due),
        due_at=due,
        tenant_id=TENANT,
        shard_id=shard,
        pool=Pool.STANDARD,
        type="t",
    )


def record(p: Preloaded, status: TaskState) -> TaskRecord:
    return task_record(
        id=p.key.id,
        tenant_id=p.tenant_id,
        type=p.type,
        payload={},
        scheduled_at=p.key.scheduled_at,
        due_at=p.due_at,
        idempotency_key="k",
        status=status,
        fencing_token=1,
        shard_id=p.shard_id,
        pool=p.pool,
        strict_timing=True,
        jitter_mode=JitterMode.NONE,
        last_error=None,
        worker_id=None,
        created_at=T0,
        updated_at=T0,
    )


async def settle() -> None:
    """Let the background work spawned so far run to its end."""
    while tasks := [
        t for t in asyncio.all_tasks() if t.get_name().startswith("tickwheel-") and not t.done()
    ]:
        await asyncio.gather(*tasks)


async def yield_often(n: int = 50) -> None:
    """Let the loop task run whatever it has ready."""
    for _ in range(n):
        await asyncio.sleep(0)


# -- the claim pass ----------------------------------------------------------------------
async def test_a_claim_pass_pages_while_full_batches_come_back() -> None:
    rig = Rig(EngineConfig(preload_batch=2, preload_interval_s=3600))
    pages = [[preloaded(1), preloaded(2)], [preloaded(3), preloaded(4)], [preloaded(5)]]
    rig.store.claims = [list(p) for p in pages]
    async with rig.running():
        for _ in range(3):
            await rig.signal("claim")
        await yield_often()
    assert len(rig.store.claim_calls) == 3  # the short third page ends the pass
    horizon = T0 + timedelta(seconds=rig.config.lookahead_s)
    assert all(c == (None, horizon, 2) for c in rig.store.claim_calls)
    assert len(rig.timeline) == 5
    assert all(p.key.id in rig.timeline for page in pages for p in page)


async def test_a_node_that_owns_no_shard_claims_nothing() -> None:
    rig = Rig(owned=frozenset())
    await rig.preloader.reconcile()
    async with rig.running():
        await yield_often()
    assert rig.store.claim_calls == []
    assert rig.store.load_calls == []  # nothing to reconcile either


# -- reconcile -------------------------------------------------------------------------
async def test_reconcile_is_incremental_except_the_first_and_a_full_one() -> None:
    config = EngineConfig(reconcile_skew_s=2.0)
    rig = Rig(config, owned=frozenset({3, 1}))
    row = preloaded(shard=1)
    rig.store.loads = [[row]]
    await rig.preloader.reconcile()
    await rig.preloader.reconcile()
    await rig.preloader.reconcile(full=True)
    await rig.preloader.reconcile()
    since = T0 - timedelta(seconds=2.0)
    assert rig.store.load_calls == [
        ([1, 3], None, None),
        ([1, 3], None, since),
        ([1, 3], None, None),
        ([1, 3], None, since),
    ]
    assert row.key.id in rig.timeline


# -- whole shards --------------------------------------------------------------------------
async def test_load_shards_reads_the_index_then_reconciles_from_the_store() -> None:
    index = MemoryTimeIndex()
    near, far = preloaded(10, shard=4), preloaded(2 * 3600 * 1000, shard=4)
    await index.replace(4, [near, far])
    rig = Rig(owned=frozenset({4}), index=index)
    late = preloaded(20, shard=4)  # its owner died before its index write
    rig.store.loads = [[late]]
    await rig.preloader.load_shards([4])
    assert near.key.id in rig.timeline
    assert far.key.id not in rig.timeline  # beyond the look-ahead
    await settle()
    assert rig.store.load_calls == [([4], None, None)]
    assert late.key.id in rig.timeline
    assert rig.mirror.rebuilding == set()


async def test_load_shards_without_an_index_reads_the_store() -> None:
    rig = Rig(EngineConfig(load_batch=1), owned=frozenset({4}))
    a, b = preloaded(1, shard=4), preloaded(2, shard=4)
    rig.store.loads = [[a], [b]]
    await rig.preloader.load_shards([4])
    # Keyset pages: the second starts after the first page's last key.
    assert rig.store.load_calls == [([4], None, None), ([4], a.key, None), ([4], b.key, None)]
    assert a.key.id in rig.timeline
    assert b.key.id in rig.timeline


async def test_load_shards_rebuilds_a_failing_index_from_the_store_rows() -> None:
    index = MemoryTimeIndex()  # shard 4 never seeded: the index lost it
    rig = Rig(owned=frozenset({4}), index=index)
    a, b = preloaded(1, shard=4), preloaded(2, shard=4)
    rig.store.loads = [[a, b]]
    await rig.preloader.load_shards([4])
    assert rig.store.load_calls == [([4], None, None)]
    assert a.key.id in rig.timeline
    assert b.key.id in rig.timeline
    assert rig.mirror.rebuilding == {4}
    await settle()
    assert rig.mirror.rebuilding == set()
    assert await index.load(4) == [a, b]


async def test_reload_puts_back_only_tasks_still_preloaded_due_now_at_the_latest() -> None:
    rig = Rig()
    later, overdue = preloaded(60_000), preloaded(-5_000)
    taken, gone = preloaded(0), preloaded(0)
    rig.store.tasks = {
        later.key.id: record(later, TaskState.PRELOADED),
        overdue.key.id: record(overdue, TaskState.PRELOADED),
        taken.key.id: record(taken, TaskState.DISPATCHED),
    }
    await rig.preloader.reload([Release(key=p.key, token=1) for p in (later, overdue, taken, gone)])
    assert len(rig.timeline) == 2
    fired = rig.timeline.fire(to_ms(T0))
    assert {p.key.id: p.due_at for p in fired} == {later.key.id: T0, overdue.key.id: overdue.due_at}


# -- the reaper ----------------------------------------------------------------------------
def reaper(rig: Rig, sessions: FakeSessions, slots: Slots, wakes: list[int]) -> Reaper:
    return Reaper(
        rig.store,  # type: ignore[arg-type]
        rig.config,
        lambda: T0,
        rig.shards,
        slots,
        sessions,  # type: ignore[arg-type]
        rig.timeline,
        rig.stats,
        lambda: wakes.append(1),
    )


async def test_the_reaper_frees_slots_lets_sessions_go_and_requeues() -> None:
    rig = Rig(EngineConfig(preload_batch=3), owned=frozenset({1}))
    freed: list[uuid.UUID] = []
    slots = Slots(freed.append)
    sessions, wakes = FakeSessions(), []
    back, retry, dead, cancelled = (preloaded(i) for i in range(4))
    for p in (back, retry, dead, cancelled):
        slots.take(p)
    rig.store.reclaims = [
        ReclaimResult(
            requeued=(back,), retrying=(retry.key,), dead_lettered=(dead.key,), cancelled=()
        ),
        ReclaimResult(requeued=(), retrying=(), dead_lettered=(), cancelled=(cancelled.key,)),
    ]
    await reaper(rig, sessions, slots, wakes).reclaim_once()
    # A full first batch (3 of 3) asks again; the short second one ends the pass.
    assert rig.store.reclaim_calls == [[1], [1]]
    assert sorted(freed) == sorted(p.key.id for p in (back, retry, dead, cancelled))
    assert len(slots) == 0
    assert sorted(sessions.expired_calls) == sorted(
        [
            (back.key.id, True),
            (retry.key.id, False),
            (dead.key.id, False),
            (cancelled.key.id, False),
        ]
    )
    assert back.key.id in rig.timeline
    assert len(rig.timeline) == 1
    assert wakes == [1, 1]  # retries to pre-load, children released
    assert rig.stats.reclaimed == 4


async def test_the_reaper_wakes_no_one_for_requeued_tasks_only() -> None:
    rig = Rig()
    slots, sessions, wakes = Slots(lambda _id: None), FakeSessions(), []
    back = preloaded()
    rig.store.reclaims = [
        ReclaimResult(requeued=(back,), retrying=(), dead_lettered=(), cancelled=())
    ]
    await reaper(rig, sessions, slots, wakes).reclaim_once()
    assert rig.store.reclaim_calls == [None]
    assert wakes == []
    assert sessions.expired_calls == [(back.key.id, True)]
    assert back.key.id in rig.timeline


async def test_the_reaper_runs_in_the_preloaders_pass() -> None:
    rig = Rig()
    rig.preloader.use_reaper(reaper(rig, FakeSessions(), Slots(lambda _id: None), []))
    async with rig.running():
        await rig.signal("claim")
        await yield_often()
    assert rig.store.reclaim_calls == [None]


# -- work notices ----------------------------------------------------------------------------
async def test_a_notice_wakes_the_preloader_only_for_a_shard_it_owns() -> None:
    rig = Rig(owned=frozenset({1}))
    await rig.preloader.hear_notices()  # the fake has no channel: hands back the callback
    notice = rig.store.on_notice
    assert callable(notice)
    async with rig.running():
        await rig.signal("load")  # the first pass claims, then reconciles
        await yield_often()
        assert (len(rig.store.claim_calls), len(rig.store.load_calls)) == (1, 1)
        notice(frozenset({2}), True)  # another node's shard
        await yield_often()
        assert len(rig.store.claim_calls) == 1
        notice(frozenset({1, 2}), False)  # new SCHEDULED rows of ours: a claim pass
        await rig.signal("claim")
        await yield_often()
        assert (len(rig.store.claim_calls), len(rig.store.load_calls)) == (2, 1)
        notice(frozenset({1}), True)  # PRELOADED rows of ours: a reconcile too
        await rig.signal("load")
        assert len(rig.store.claim_calls) == 3


async def test_a_stopping_preloader_ignores_every_notice() -> None:
    rig = Rig(owned=frozenset({1}))
    await rig.preloader.hear_notices()
    rig.preloader.stopping = True
    notice = rig.store.on_notice
    assert callable(notice)
    async with rig.running():
        await rig.signal("load")
        await yield_often()
        notice(frozenset({1}), True)
        await yield_often()
    assert (len(rig.store.claim_calls), len(rig.store.load_calls)) == (1, 1)
