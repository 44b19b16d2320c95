"""The engine's parts, each built alone with plain fakes of its neighbours (no server).

Admission, the shard state, the slots ledger, the timeline and delivery are pure
logic over the clock and data they are given; the facade that wires them is covered
by the integration suite.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler import InvalidArgument, ResourceExhausted
from scheduler._aio import Background
from scheduler.engine import EngineConfig, SubmitSpec
from scheduler.engine._admission import Admission
from scheduler.engine._delivery import Delivery
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._rows import TaskRows
from scheduler.engine._shard_state import ShardState
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline, to_ms, to_us
from scheduler.jitter import JitterMode
from scheduler.limits import MAX_RETRIES
from scheduler.states import TaskState
from scheduler.types import Assignment, InsertResult, Pool, Preloaded, TaskKey
from tests.support.records import task_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=7)


class FakeMembership:
    """A membership that owns exactly the shards it is given."""

    def __init__(self, owned: frozenset[int], shard_count: int = 256) -> None:
        self._owned = owned
        self.node_id = "n"
        self.shard_count = shard_count

    def set_listener(self, listener: object) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def owned(self) -> frozenset[int]:
        return self._owned

    def owns(self, shard: int) -> bool:
        return shard in self._owned


def shard_state(owned: frozenset[int] | None = None) -> ShardState:
    """Clustered with ``owned`` shards, or a single node that serves all (None)."""
    if owned is None:
        return ShardState(FakeMembership(frozenset(range(256))), clustered=False)  # type: ignore[arg-type]
    return ShardState(FakeMembership(owned), clustered=True)  # type: ignore[arg-type]


def preloaded(at_ms: int, shard: int = 0, pool: Pool = Pool.STANDARD) -> Preloaded:
    due = T0 + timedelta(milliseconds=at_ms)
    return Preloaded(
        key=TaskKey(uuid.uuid4(), due),
        due_at=due,
        tenant_id=TENANT,
        shard_id=shard,
        pool=pool,
        type="t",
    )


# -- admission -------------------------------------------------------------------------
def test_admission_preloads_only_what_is_due_soon_on_a_shard_this_node_serves() -> None:
    config = EngineConfig()
    soon = SubmitSpec(type="t", scheduled_at=T0 + timedelta(seconds=5), strict_timing=True)
    later = SubmitSpec(type="t", scheduled_at=T0 + timedelta(hours=2), strict_timing=True)
    alone = Admission(config, shard_state())
    assert alone.new_task(TENANT, soon, T0).initial_state is TaskState.PRELOADED
    assert alone.new_task(TENANT, later, T0).initial_state is TaskState.SCHEDULED
    # In a cluster, a task of a shard another node owns waits SCHEDULED for its owner,
    # whoever builds it (submit, a schedule occurrence, the canary, a workflow root).
    none_owned = Admission(config, shard_state(frozenset()))
    assert none_owned.new_task(TENANT, soon, T0).initial_state is TaskState.SCHEDULED
    all_owned = Admission(config, shard_state(frozenset(range(config.shard_count))))
    assert all_owned.new_task(TENANT, soon, T0).initial_state is TaskState.PRELOADED
    # A task with parents waits for them.
    child = alone.new_task(TENANT, soon, T0, depends_on=(uuid.uuid4(),))
    assert child.initial_state is TaskState.SCHEDULED


def test_admission_takes_the_callers_due_time_and_keys() -> None:
    admission = Admission(EngineConfig(), shard_state())
    spec = SubmitSpec(type="t", scheduled_at=T0, strict_timing=True)
    due = T0 + timedelta(seconds=3)
    sid = uuid.uuid4()
    task = admission.new_task(TENANT, spec, T0, due_at=due, idempotency_key="k", schedule_id=sid)
    assert (task.due_at, task.idempotency_key, task.schedule_id) == (due, "k", sid)
    assert task.jitter_mode is JitterMode.NONE
    # Without a key the task id is the key; jitter moves the due time within the window.
    free = admission.new_task(TENANT, SubmitSpec(type="t", scheduled_at=T0), T0)
    assert free.idempotency_key == str(free.id)
    assert abs((free.due_at - T0).total_seconds()) <= EngineConfig().jitter_window_s


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (SubmitSpec(type=""), "task.type"),
        (SubmitSpec(type="x" * 65), "task.type"),
        (SubmitSpec(type="t", payload={"n": float("nan")}), "task.payload"),
        (SubmitSpec(type="t", scheduled_at=datetime(2030, 1, 1)), "task.scheduled_at"),
        (SubmitSpec(type="t", idempotency_key="k" * 129), "task.idempotency_key"),
        (SubmitSpec(type="t", max_retries=MAX_RETRIES + 1), "task.max_retries"),
        (SubmitSpec(type="t", timeout_s=-1), "task.timeout_s"),
    ],
)
def test_admission_names_the_field(spec: SubmitSpec, field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        Admission(EngineConfig(), shard_state()).validate(spec, "task")
    assert info.value.field == field


def test_admission_bounds_a_batch() -> None:
    admission = Admission(EngineConfig(max_submit_batch=2), shard_state())
    admission.check_batch([SubmitSpec(type="t")] * 2)
    with pytest.raises(InvalidArgument) as info:
        admission.check_batch([])
    assert info.value.field == "tasks"
    # Over the bound: the same answer the server gives (RESOURCE_EXHAUSTED, "tasks").
    with pytest.raises(ResourceExhausted) as over:
        admission.check_batch([SubmitSpec(type="t")] * 3)
    assert over.value.limit == "tasks"


# -- shard state -------------------------------------------------------------------------
def test_shard_state_epochs_and_gains() -> None:
    state = shard_state(frozenset({1}))
    assert state.scope() == [1]
    assert state.serves(1)
    assert not state.serves(2)
    state.claimed({1: 4, 2: 9})
    state.gaining(frozenset({2}))
    assert state.owned_or_gaining() == {1, 2}
    assert (state.epoch(1), state.epoch(2)) == (4, 9)
    state.released(frozenset({2}))
    assert state.epoch(2) is None
    single = shard_state()
    assert single.scope() is None
    assert single.serves(200)


# -- slots -------------------------------------------------------------------------------
def test_slots_count_per_pool_and_report_what_finished() -> None:
    freed: list[uuid.UUID] = []
    slots = Slots(freed.append)
    a, b = preloaded(0), preloaded(0, pool=Pool.BULK)
    slots.take(a)
    slots.take(b)
    assert (len(slots), slots.in_pool(Pool.STANDARD), slots.in_pool(Pool.BULK)) == (2, 1, 1)
    slots.give_back(b)  # undone before it reached a worker: no quota unit, no callback
    slots.free(a.key.id)
    slots.free(a.key.id)  # idempotent
    assert freed == [a.key.id]
    assert len(slots) == 0
    assert slots.in_pool(Pool.BULK) == 0
    assert slots.take_finished() == {TENANT: 1}
    assert slots.take_finished() == {}


def test_slots_free_many_is_free_for_each_with_one_callback() -> None:
    # A completion batch (issue 41): the same counts as free() a task; the batch
    # callback told the freed ones once, in order; without it, on_free a task.
    batches: list[list[uuid.UUID]] = []
    singles: list[uuid.UUID] = []
    slots = Slots(singles.append, batches.append)
    a, b, c = preloaded(0), preloaded(0, pool=Pool.BULK), preloaded(0)
    for p in (a, b, c):
        slots.take(p)
    stranger = uuid.uuid4()
    slots.free_many([b.key.id, stranger, a.key.id, a.key.id])
    assert batches == [[b.key.id, a.key.id]]
    assert singles == []
    assert (len(slots), slots.in_pool(Pool.STANDARD), slots.in_pool(Pool.BULK)) == (1, 1, 0)
    assert slots.take_finished() == {TENANT: 2}
    slots.free_many([stranger])  # nothing freed: no call
    assert len(batches) == 1
    plain = Slots(singles.append)
    plain.take(c)
    plain.free_many([c.key.id])
    assert singles == [c.key.id]


def test_rows_rebuild_gives_each_row_its_own_times() -> None:
    # rebuild reuses the datetimes it built last (a burst shares them): never a stale
    # one for a row with other times.
    rows = TaskRows()
    tasks = [preloaded(0), preloaded(0), preloaded(5), preloaded(5), preloaded(0)]
    late = Preloaded(
        key=TaskKey(uuid.uuid4(), T0),
        due_at=T0 + timedelta(seconds=9),
        tenant_id=TENANT,
        shard_id=0,
        pool=Pool.STANDARD,
        type="t",
    )
    handles = [rows.add(p) for p in [*tasks, late]]
    assert [rows.take(h) for h in handles] == [*tasks, late]


# -- timeline ----------------------------------------------------------------------------
def timeline(config: EngineConfig, shards: ShardState) -> tuple[Timeline, list[int]]:
    stats = EngineStats()
    wakes: list[int] = []
    mirror = IndexMirror(None, config, stats, Background(logging.getLogger("test")), lambda: None)
    return Timeline(config, shards, mirror, stats, lambda: wakes.append(1), to_ms(T0)), wakes


def test_timeline_notes_the_latest_due_time_of_a_reserve_pool_only() -> None:
    # Kept per interned group (no walk of every added task): critical has the default
    # reserve, standard none; a task already held adds nothing; the latest only grows.
    tl, _ = timeline(EngineConfig(), shard_state())
    tl.add([preloaded(50), preloaded(70)])
    assert tl.latest_due_ms == {}
    late, early = preloaded(40, pool=Pool.CRITICAL), preloaded(30, pool=Pool.CRITICAL)
    tl.add([late, early, preloaded(90)])
    assert tl.latest_due_ms == {Pool.CRITICAL: to_ms(T0) + 40}
    tl.add([preloaded(20, pool=Pool.CRITICAL)])
    assert tl.latest_due_ms == {Pool.CRITICAL: to_ms(T0) + 40}
    tl.add([preloaded(60, pool=Pool.CRITICAL)])
    assert tl.latest_due_ms == {Pool.CRITICAL: to_ms(T0) + 60}
    no_reserve, _ = timeline(EngineConfig(reserves=()), shard_state())
    no_reserve.add([preloaded(10, pool=Pool.CRITICAL)])
    assert no_reserve.latest_due_ms == {}


def test_timeline_fires_in_due_order_and_forgets_what_it_drops() -> None:
    tl, wakes = timeline(EngineConfig(), shard_state())
    a, b, c = preloaded(30), preloaded(10), preloaded(20, shard=5)
    tl.add([a, b, c])
    tl.add([a])  # already in: not twice
    assert len(tl) == 3
    assert wakes
    assert tl.next_due_ms() == to_ms(b.due_at)
    tl.drop(a.key.id)
    assert a.key.id not in tl
    assert tl.drop_shards(frozenset({5})) == 1
    assert [p.key for p in tl.fire(to_ms(T0) + 100)] == [b.key]
    assert len(tl) == 0


def test_timeline_postpones_a_debounced_timer_only_later() -> None:
    tl, _ = timeline(EngineConfig(), shard_state())
    a, b = preloaded(10), preloaded(20)
    tl.add([a, b])
    later = to_us(T0 + timedelta(milliseconds=50))
    assert tl.postpone(a.key.id, later)
    assert tl.postpone(a.key.id, to_us(T0))  # an older move arriving late: kept at 50
    assert not tl.postpone(uuid.uuid4(), later)  # not here
    fired = tl.fire(to_ms(T0) + 30)
    assert [p.key for p in fired] == [b.key]
    [moved] = tl.fire(to_ms(T0) + 50)
    assert moved.key == a.key
    assert moved.due_at == T0 + timedelta(milliseconds=50)
    assert (moved.tenant_id, moved.type, moved.pool) == (a.tenant_id, a.type, a.pool)


def test_a_debounced_submission_is_due_one_period_after_it_without_jitter() -> None:
    from scheduler.types import Debounce, FlowOptions

    adm = Admission(EngineConfig(), shard_state())
    flow = FlowOptions(debounce=Debounce(key="k", period_s=2.5))
    spec = SubmitSpec(type="t", flow=flow)
    adm.validate(spec, "task")
    row = adm.new_task(TENANT, spec, T0)
    assert row.due_at == T0 + timedelta(seconds=2.5)
    assert row.jitter_mode is JitterMode.NONE
    assert row.flow is flow
    with pytest.raises(InvalidArgument, match=r"task\.scheduled_at"):
        adm.validate(SubmitSpec(type="t", scheduled_at=T0, flow=flow), "task")


def test_timeline_takes_only_this_nodes_shards_and_admits_fresh_rows() -> None:
    tl, _ = timeline(EngineConfig(), shard_state(frozenset({1})))
    tl.add([preloaded(0, shard=1), preloaded(0, shard=2)])
    assert len(tl) == 1
    record = task_record(
        tenant_id=TENANT,
        type="t",
        payload={},
        scheduled_at=T0,
        due_at=T0,
        idempotency_key="k",
        shard_id=1,
        strict_timing=True,
        jitter_mode=JitterMode.NONE,
        last_error=None,
        worker_id=None,
        created_at=T0,
        updated_at=T0,
    )
    tl.admit([InsertResult(task=record, created=True)])
    assert record.id in tl


# -- delivery ----------------------------------------------------------------------------
class FakeSession:
    def __init__(self, early_us: int = 0) -> None:
        self.session_id = uuid.uuid4().hex
        self.early_us = early_us
        self.delivered: list[tuple[Assignment, ...]] = []
        self.cancels: list[TaskKey] = []

    def deliver(self, batch: tuple[Assignment, ...]) -> None:
        self.delivered.append(batch)

    def notify_cancel(self, key: TaskKey, token: int) -> None:
        self.cancels.append(key)


def assignment(at_ms: int) -> Assignment:
    due = T0 + timedelta(milliseconds=at_ms)
    return Assignment(
        key=TaskKey(uuid.uuid4(), due),
        tenant_id=TENANT,
        type="t",
        payload={},
        fencing_token=1,
        attempt=1,
        max_retries=3,
        due_at=due,
        lease_expires_at=due,
        checkpoint=None,
        trace_context=None,
        pool=Pool.STANDARD,
        worker_id="w",
        timeout_s=0.0,
    )


def test_delivery_pushes_at_the_due_tick_and_a_cancel_follows_its_task() -> None:
    stats = EngineStats()
    delivery = Delivery(lambda: to_us(T0), stats)
    s = FakeSession()
    early, late = assignment(10), assignment(50)
    delivery.hold(s, late)  # type: ignore[arg-type]
    delivery.hold(s, early)  # type: ignore[arg-type]
    assert delivery.cancel_on_delivery(late.key.id)
    assert not delivery.cancel_on_delivery(uuid.uuid4())  # not held: the caller tells
    delivery.deliver_due(to_us(T0) + 5_000)
    assert s.delivered == []
    delivery.deliver_due(to_us(T0) + 10_000)
    assert s.delivered == [(early,)]
    assert s.cancels == []
    delivery.deliver_due(to_us(T0) + 60_000)
    assert s.delivered[-1] == (late,)
    assert s.cancels == [late.key]
    assert len(delivery) == 0
    assert stats.delivered == 2
    # Once delivered, a cancel is no longer delivery's to hold.
    assert not delivery.cancel_on_delivery(early.key.id)


def test_a_node_alone_on_its_database_neither_reconciles_nor_listens() -> None:
    """Clustered (ownership is checked, dispatches carry epochs) is not shared: a node
    that holds the database lease has nobody else writing work for its shards."""
    lone = FakeMembership(frozenset({1}))
    lone.exclusive = True  # type: ignore[attr-defined]
    assert ShardState(lone, clustered=True).shared is False  # type: ignore[arg-type]
    assert ShardState(FakeMembership(frozenset({1})), clustered=True).shared is True  # type: ignore[arg-type]
    assert shard_state().shared is False


def test_fired_timers_wait_ready_as_rows_of_the_timelines_table() -> None:
    """Issue 41: a fired timer's row stays in the table and waits ready by handle; the
    ready queues give it back as the same ``Preloaded``; a task is never both timed
    and waiting; dropping timers leaves the waiting rows to the ready queues."""
    tl, _ = timeline(EngineConfig(), shard_state())
    ready = ReadyQueues(lambda _t: 1, tl.rows)
    a, b, c, d = preloaded(10), preloaded(20, shard=5), preloaded(30), preloaded(500, shard=5)
    tl.add([a, b, c, d])
    ready.extend_handles(tl.fire_handles(to_ms(T0) + 100))
    assert (len(tl), len(ready), len(tl.rows)) == (1, 3, 4)
    assert a.key.id in ready
    assert a.key.id not in tl
    assert d.key.id in tl
    assert d.key.id not in ready
    tl.add([a])  # a reload of a task that waits ready: not timed again
    assert (len(tl), len(ready)) == (1, 3)
    tl.drop(a.key.id)  # a cancel: the timeline drops timers only
    assert tl.drop_shards(frozenset({5})) == 1  # d; b waits ready still
    assert (len(tl), len(ready), len(tl.rows)) == (0, 3, 3)
    assert ready.remove(a.key.id)
    assert len(tl.rows) == 2
    e = preloaded(40)
    tl.add([e])
    ready.push(e)  # pushed while timed (found late by a reconcile): it leaves the wheel
    assert (len(tl), len(ready), e.key.id in tl) == (0, 3, False)
    assert ready.remove_where(lambda p: p.shard_id == 5) == 1
    got = [ready.pop(Pool.STANDARD, None, None) for _ in range(3)]
    assert got == [c, e, None]
    assert len(tl.rows) == 0
