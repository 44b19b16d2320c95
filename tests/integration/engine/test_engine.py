"""The engine end to end over a real store (SQLite and PostgreSQL), without gRPC.

Time is a FakeClock: leases lapse and backoffs elapse because the test moves the
clock, never because it sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from scheduler import InvalidArgument, InvalidTransition, StaleFencingToken
from scheduler.engine import (
    AssignmentBatch,
    CancelNotice,
    Engine,
    FailureReport,
    SubmitSpec,
    WorkerHello,
    WorkerSession,
)
from scheduler.jsonbytes import as_dict
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import Assignment, Completion, FencedWrite, InsertResult
from tests.integration.engine.conftest import CONFIG
from tests.support.clock import FakeClock
from tests.support.waiting import eventually


async def next_batch(session: WorkerSession, timeout_s: float = 10.0) -> AssignmentBatch:
    event = await asyncio.wait_for(session.next_event(), timeout_s)
    assert isinstance(event, AssignmentBatch), event
    return event


def now_spec(**kw: object) -> SubmitSpec:
    return SubmitSpec(type="email", payload={"to": "a@b.c"}, strict_timing=True, **kw)  # type: ignore[arg-type]


async def run_to_running(engine: Engine, session: WorkerSession) -> Assignment:
    batch = await next_batch(session)
    (a,) = batch.assignments
    assert await session.ack([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    return a


@contextlib.asynccontextmanager
async def engine_with(
    store: Store, clock: FakeClock, **changes: int
) -> AsyncIterator[tuple[Engine, uuid.UUID]]:
    """An engine with CONFIG changed by ``changes``, and a tenant of it."""
    e = Engine(store, dataclasses.replace(CONFIG, **changes), clock=clock)
    await e.start()
    try:
        yield e, (await e.tenancy.create_tenant(name="acme")).id
    finally:
        await e.stop()


AHEAD = {"dispatch_lead_ms": 200, "dispatch_lead_max_ms": 200, "dispatch_window_ms": 0}
"""A 200 ms commit-ahead lead and no window (for :func:`committed_ahead`)."""


async def committed_ahead(e: Engine, tenant: uuid.UUID, clock: FakeClock) -> InsertResult:
    """One task due in 1 s, its dispatch committed 100 ms ahead (``AHEAD``) and held in
    memory for its due tick."""
    (res,) = await e.submit(tenant, [now_spec(scheduled_at=clock() + timedelta(seconds=1))])
    clock.advance(0.9)
    e.wake()
    await eventually(lambda: asyncio.sleep(0, e.stats.dispatched), until=lambda n: n == 1)
    return res


async def test_submit_dispatch_ack_complete(engine: Engine, tenant: uuid.UUID) -> None:
    session = await engine.open_session(
        WorkerHello(worker_id="w1", tenant_id=tenant, task_types=frozenset({"email"}), slots=4)
    )
    (res,) = await engine.submit(tenant, [now_spec()])
    assert res.created
    a = await run_to_running(engine, session)
    assert a.key == res.task.key
    assert a.attempt == 1
    assert a.fencing_token == res.task.fencing_token + 1
    assert as_dict(a.payload) == {"to": "a@b.c"}
    (outcome,) = await session.complete(
        [Completion(key=a.key, token=a.fencing_token, result={"sent": True})]
    )
    assert outcome == "ok"
    task = await engine.store.get_task(tenant, a.key.id)
    assert task.status is TaskState.COMPLETED
    assert task.result_payload == {"sent": True}
    assert engine.stats.delivered == 1
    await session.close()


async def test_a_dispatch_round_takes_a_window_and_delivers_each_on_time(
    store: Store, clock: FakeClock
) -> None:
    """A round starts when the earliest task is within the lead and commits every task
    due within the window after that too; each is still delivered at its own due time."""
    window = {"dispatch_lead_ms": 50, "dispatch_lead_max_ms": 50, "dispatch_window_ms": 100}
    async with engine_with(store, clock, **window) as (e, tenant):
        session = await e.open_session(
            WorkerHello(worker_id="w1", tenant_id=tenant, task_types=frozenset({"email"}), slots=9)
        )
        t0 = clock.current
        results = await e.submit(
            tenant, [now_spec(scheduled_at=t0 + timedelta(seconds=s)) for s in (1.0, 1.05, 1.2)]
        )
        first, second, third = (r.task.key.id for r in results)
        # 40 ms before the first due time: one round takes the first two (due within
        # lead + window = 150 ms), not the third (200 ms away).
        clock.advance(0.96)
        e.wake()
        await eventually(lambda: asyncio.sleep(0, e.stats.dispatched), until=lambda n: n == 2)
        assert e.stats.dispatch_rounds == 1
        records = [await e.store.get_task(tenant, t) for t in (first, second, third)]
        assert [r.status for r in records] == [
            TaskState.DISPATCHED,
            TaskState.DISPATCHED,
            TaskState.PRELOADED,
        ]
        # Committed ahead, but each lease runs from its task's due time (to this
        # ack-first worker, until the ack is overdue: the ack extends it).
        lease = timedelta(seconds=e.config.dispatch_lease_s)
        assert [r.lease_expires_at for r in records[:2]] == [r.due_at + lease for r in records[:2]]
        # Committed early, delivered on time: nothing before its due tick.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(session.next_event(), 0.2)
        clock.advance(0.04)
        assert [a.key.id for a in (await next_batch(session)).assignments] == [first]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(session.next_event(), 0.2)
        clock.advance(0.05)
        assert [a.key.id for a in (await next_batch(session)).assignments] == [second]
        await session.close()


async def test_credit_bounds_what_is_pushed(engine: Engine, tenant: uuid.UUID) -> None:
    session = await engine.open_session(
        WorkerHello(worker_id="w1", tenant_id=tenant, task_types=frozenset({"email"}), slots=2)
    )
    await engine.submit(tenant, [now_spec() for _ in range(5)])
    got: list[Assignment] = []
    while len(got) < 2:
        ev = await asyncio.wait_for(session.next_event(), 10)
        assert isinstance(ev, AssignmentBatch)
        got.extend(ev.assignments)
    assert len(got) == 2
    assert session.credits == 0
    # No credit: nothing more arrives until the worker grants some.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(session.next_event(), 0.3)
    session.grant(3)
    while len(got) < 5:
        ev = await asyncio.wait_for(session.next_event(), 10)
        assert isinstance(ev, AssignmentBatch)
        got.extend(ev.assignments)
    assert len({a.key.id for a in got}) == 5
    await session.close()


async def test_zombie_write_is_rejected_after_lease_expiry(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    hello = WorkerHello(worker_id="A", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    a_session = await engine.open_session(hello)
    await engine.submit(tenant, [now_spec()])
    a = await run_to_running(engine, a_session)
    # Worker A freezes; its lease lapses; the reaper counts the attempt (RETRYING).
    clock.advance(CONFIG.lease_ttl_s + 1)
    engine.wake()
    await eventually(
        lambda: engine.store.get_task(tenant, a.key.id),
        until=lambda t: t.status in (TaskState.RETRYING, TaskState.PRELOADED),
        what="lease expiry",
    )
    # Backoff elapses; the task goes to worker B with a higher token.
    b_session = await engine.open_session(
        WorkerHello(worker_id="B", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    )
    clock.advance(CONFIG.retry_max_s + 1)
    engine.wake()
    b = await run_to_running(engine, b_session)
    assert b.fencing_token > a.fencing_token
    assert b.attempt == 2
    assert await b_session.complete(
        [Completion(key=b.key, token=b.fencing_token, result={"by": "B"})]
    ) == ["ok"]
    # A wakes and tries to commit: rejected, nothing changes.
    assert await a_session.complete(
        [Completion(key=a.key, token=a.fencing_token, result={"by": "A"})]
    ) == ["stale"]
    with pytest.raises(StaleFencingToken):
        await engine.complete(tenant, a.key.id, a.fencing_token, {"by": "A"})
    task = await engine.store.get_task(tenant, a.key.id)
    assert task.status is TaskState.COMPLETED
    assert task.result_payload == {"by": "B"}


async def test_retry_then_dead_letter_then_redrive(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    session = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    )
    (res,) = await engine.submit(tenant, [now_spec(max_retries=1)])
    a = await run_to_running(engine, session)
    report = FailureReport(key=a.key, token=a.fencing_token, error="boom")
    assert await session.fail([report]) == ["ok"]
    t = await engine.store.get_task(tenant, res.task.id)
    # RETRYING, or already claimed back into the wheel for its backoff instant.
    assert t.status in (TaskState.RETRYING, TaskState.PRELOADED)
    assert t.retry_count == 1
    assert t.due_at > clock()
    transitions = await engine.store.transitions_of(res.task.id)
    moves = [(x.from_state, x.to_state) for x in transitions]
    i = moves.index((TaskState.DISPATCHED, TaskState.RUNNING))
    assert moves[i + 1] == (TaskState.RUNNING, TaskState.RETRYING)
    assert transitions[i + 1].actor == "w"
    session.grant(1)
    clock.advance(CONFIG.retry_max_s + 1)
    engine.wake()
    a2 = await run_to_running(engine, session)
    assert a2.attempt == 2
    assert await session.fail(
        [FailureReport(key=a2.key, token=a2.fencing_token, error="boom")]
    ) == ["ok"]
    t = await engine.store.get_task(tenant, res.task.id)
    assert t.status is TaskState.DEAD_LETTER
    assert t.last_error == "boom"
    t = await engine.redrive(tenant, res.task.id)
    assert t.status is TaskState.SCHEDULED
    session.grant(1)
    engine.wake()
    a3 = await run_to_running(engine, session)
    assert a3.fencing_token > a2.fencing_token
    await session.close()


async def test_cancel_in_every_state(engine: Engine, tenant: uuid.UUID, clock: FakeClock) -> None:
    far = SubmitSpec(type="email", scheduled_at=clock() + timedelta(days=3), strict_timing=True)
    (scheduled,) = await engine.submit(tenant, [far])
    assert scheduled.task.status is TaskState.SCHEDULED
    assert (await engine.cancel(tenant, scheduled.task.id)).status is TaskState.CANCELLED
    with pytest.raises(InvalidTransition):
        await engine.cancel(tenant, scheduled.task.id)

    soon = SubmitSpec(type="email", scheduled_at=clock() + timedelta(minutes=5), strict_timing=True)
    (pre,) = await engine.submit(tenant, [soon])
    assert pre.task.status is TaskState.PRELOADED
    assert (await engine.cancel(tenant, pre.task.id)).status is TaskState.CANCELLED

    session = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"email"}), slots=2)
    )
    (dis,) = await engine.submit(tenant, [now_spec()])
    batch = await next_batch(session)
    (_a,) = batch.assignments
    t = await engine.cancel(tenant, dis.task.id)
    assert t.cancel_requested or t.status is TaskState.CANCELLED

    (run,) = await engine.submit(tenant, [now_spec()])
    ev = await asyncio.wait_for(session.next_event(), 10)
    while not (isinstance(ev, AssignmentBatch) and ev.assignments[0].key.id == run.task.id):
        ev = await asyncio.wait_for(session.next_event(), 10)
    r = ev.assignments[0]
    assert await session.ack([FencedWrite(key=r.key, token=r.fencing_token)]) == ["ok"]
    t = await engine.cancel(tenant, run.task.id)
    assert t.status is TaskState.RUNNING
    assert t.cancel_requested
    notice = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(notice, CancelNotice)
    assert notice.key.id == run.task.id
    assert await session.confirm_cancel([FencedWrite(key=r.key, token=r.fencing_token)]) == ["ok"]
    assert (await engine.store.get_task(tenant, run.task.id)).status is TaskState.CANCELLED
    await session.close()


async def test_other_tenant_cannot_touch_tasks(engine: Engine, tenant: uuid.UUID) -> None:
    other = (await engine.tenancy.create_tenant(name="evil")).id
    mine = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    )
    theirs = await engine.open_session(
        WorkerHello(worker_id="x", tenant_id=other, task_types=frozenset({"email"}), slots=1)
    )
    (res,) = await engine.submit(tenant, [now_spec()])
    a = await run_to_running(engine, mine)
    # A session of another tenant is told "not found", even with the right token.
    out = await theirs.complete([Completion(key=a.key, token=a.fencing_token, result={})])
    assert out == ["not_found"]
    from scheduler import NotFound

    with pytest.raises(NotFound):
        await engine.store.get_task(other, res.task.id)
    with pytest.raises(NotFound):
        await engine.cancel(other, res.task.id)
    assert (await engine.store.get_task(tenant, res.task.id)).status is TaskState.RUNNING
    await mine.close()
    await theirs.close()


async def test_closed_session_returns_unacked_tasks(engine: Engine, tenant: uuid.UUID) -> None:
    s1 = await engine.open_session(
        WorkerHello(worker_id="w1", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    )
    (res,) = await engine.submit(tenant, [now_spec()])
    (a,) = (await next_batch(s1)).assignments
    await s1.close()
    t = await engine.store.get_task(tenant, res.task.id)
    assert t.status is TaskState.PRELOADED
    s2 = await engine.open_session(
        WorkerHello(worker_id="w2", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    )
    b = await run_to_running(engine, s2)
    assert b.key.id == a.key.id
    assert b.fencing_token == a.fencing_token + 1
    await s2.close()


async def test_a_worker_that_starts_on_delivery_needs_no_ack(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    """Its dispatches commit RUNNING: it completes without an ack; a pushed task it
    never finishes keeps its lease when the stream closes, then expires as an attempt."""
    hello = WorkerHello(
        worker_id="w1",
        tenant_id=tenant,
        task_types=frozenset({"email"}),
        slots=2,
        start_on_delivery=True,
    )
    s1 = await engine.open_session(hello)
    await engine.submit(tenant, [now_spec(), now_spec()])
    got: list[Assignment] = []
    while len(got) < 2:
        got.extend((await next_batch(s1)).assignments)
    done, lost = got
    for a in got:
        assert (await engine.store.get_task(tenant, a.key.id)).status is TaskState.RUNNING
    assert await s1.complete([Completion(key=done.key, token=done.fencing_token)]) == ["ok"]
    assert (await engine.store.get_task(tenant, done.key.id)).status is TaskState.COMPLETED
    moves = [(x.from_state, x.to_state) for x in await engine.store.transitions_of(done.key.id)]
    assert (TaskState.PRELOADED, TaskState.RUNNING) in moves
    assert (TaskState.DISPATCHED, TaskState.RUNNING) not in moves
    # The worker vanishes with the other task pushed to it: that one may be running,
    # so it is not handed back; its lease expires and the attempt counts.
    await s1.close()
    assert (await engine.store.get_task(tenant, lost.key.id)).status is TaskState.RUNNING
    clock.advance(CONFIG.lease_ttl_s + 1)
    engine.wake()
    await eventually(
        lambda: engine.store.get_task(tenant, lost.key.id),
        until=lambda t: t.retry_count == 1,
        what="lease expiry",
    )
    s2 = await engine.open_session(dataclasses.replace(hello, worker_id="w2"))
    clock.advance(CONFIG.retry_max_s + 1)
    engine.wake()
    (again,) = (await next_batch(s2)).assignments
    assert again.key.id == lost.key.id
    assert again.attempt == 2
    assert again.fencing_token == lost.fencing_token + 1
    await s2.close()


@pytest.mark.parametrize("start_on_delivery", [False, True], ids=["ack", "on_delivery"])
async def test_a_worker_silent_for_a_whole_lease_gets_nothing_more_until_it_shows_life(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock, start_on_delivery: bool
) -> None:
    """A frozen worker with spare credit must not soak up work: once a task pushed to
    it expired (never acked, or never heartbeated when it starts on delivery), nothing
    more goes to it until it writes again."""
    session = await engine.open_session(
        WorkerHello(
            worker_id="w1",
            tenant_id=tenant,
            task_types=frozenset({"email"}),
            slots=5,
            start_on_delivery=start_on_delivery,
        )
    )
    await engine.submit(tenant, [now_spec()])
    (first,) = (await next_batch(session)).assignments
    if not start_on_delivery:
        await session.ack([FencedWrite(key=first.key, token=first.fencing_token)])
    clock.advance(CONFIG.lease_ttl_s + 1)
    engine.wake()
    await eventually(
        lambda: engine.store.get_task(tenant, first.key.id),
        until=lambda t: t.retry_count == 1,
        what="lease expiry",
    )
    if not start_on_delivery:
        # An acked task whose lease lapsed says nothing about the stream: not stalled.
        assert not session.stalled
        await session.close()
        return
    assert session.stalled
    (second,) = await engine.submit(tenant, [now_spec()])
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(session.next_event(), 0.3)
    assert await session.heartbeat([]) == []  # a sign of life
    pushed = {a.key.id for a in (await next_batch(session)).assignments}
    assert second.task.id in pushed
    await session.close()


async def test_tasks_committed_ahead_but_never_pushed_go_back_when_the_stream_closes(
    store: Store, clock: FakeClock
) -> None:
    """Starting on delivery, only pushed tasks count as started: one committed ahead
    and held for its due tick returns to PRELOADED, without using an attempt."""
    async with engine_with(store, clock, **AHEAD) as (e, tenant):
        session = await e.open_session(
            WorkerHello(
                worker_id="w1",
                tenant_id=tenant,
                task_types=frozenset({"email"}),
                slots=1,
                start_on_delivery=True,
            )
        )
        res = await committed_ahead(e, tenant, clock)
        assert (await e.store.get_task(tenant, res.task.id)).status is TaskState.RUNNING
        await session.close()
        task = await e.store.get_task(tenant, res.task.id)
        assert task.status is TaskState.PRELOADED
        assert task.retry_count == 0


async def test_a_cancel_before_the_due_tick_follows_the_task(
    store: Store, clock: FakeClock
) -> None:
    """A task committed ahead and cancelled before its delivery: the worker gets the
    task, then the cancel notice (a notice first would name a task it does not hold)."""
    async with engine_with(store, clock, **AHEAD) as (e, tenant):
        session = await e.open_session(
            WorkerHello(worker_id="w1", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
        )
        res = await committed_ahead(e, tenant, clock)
        assert (await e.cancel(tenant, res.task.id)).cancel_requested
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(session.next_event(), 0.2)
        clock.advance(0.1)
        (a,) = (await next_batch(session)).assignments
        notice = await asyncio.wait_for(session.next_event(), 10)
        assert isinstance(notice, CancelNotice)
        assert (notice.key, notice.token) == (a.key, a.fencing_token)
        await session.close()


async def test_restart_loses_nothing_and_runs_nothing_twice(store: Store, clock: FakeClock) -> None:
    e1 = Engine(store, CONFIG, clock=clock)
    await e1.start()
    tenant = (
        await e1.tenancy.create_tenant(
            name="r", rate_limit_rps=100_000, max_concurrent_workers=10_000
        )
    ).id
    n = 500
    specs = [
        SubmitSpec(type="t", scheduled_at=clock() + timedelta(seconds=5), strict_timing=True)
        for _ in range(n)
    ]
    results = await e1.submit(tenant, specs)
    # Half of them go to a worker that acks but whose node dies before completing.
    s = await e1.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"t"}), slots=n // 2)
    )
    clock.advance(6)
    e1.wake()
    first: list[Assignment] = []
    while len(first) < n // 2:
        ev = await asyncio.wait_for(s.next_event(), 10)
        assert isinstance(ev, AssignmentBatch)
        first.extend(ev.assignments)
    await s.ack([FencedWrite(key=a.key, token=a.fencing_token) for a in first])
    await e1.stop()

    e2 = Engine(store, CONFIG, clock=clock)
    await e2.start()
    s2 = await e2.open_session(
        WorkerHello(worker_id="w2", tenant_id=tenant, task_types=frozenset({"t"}), slots=n)
    )
    clock.advance(CONFIG.lease_ttl_s + CONFIG.retry_max_s + 2)
    e2.wake()
    seen: dict[uuid.UUID, int] = {}
    while len(seen) < n:
        ev = await asyncio.wait_for(s2.next_event(), 20)
        assert isinstance(ev, AssignmentBatch)
        await s2.ack([FencedWrite(key=a.key, token=a.fencing_token) for a in ev.assignments])
        outs = await s2.complete(
            [Completion(key=a.key, token=a.fencing_token, result={}) for a in ev.assignments]
        )
        assert set(outs) == {"ok"}
        for a in ev.assignments:
            seen[a.key.id] = seen.get(a.key.id, 0) + 1
        if len(seen) < n:
            e2.wake()
    assert set(seen) == {r.task.id for r in results}
    assert set(seen.values()) == {1}
    for r in results[:20]:
        assert (await e2.store.get_task(tenant, r.task.id)).status is TaskState.COMPLETED
    await e2.stop()


async def test_bad_input_names_the_field(engine: Engine, tenant: uuid.UUID) -> None:
    from datetime import datetime

    cases = [
        (SubmitSpec(type=""), "task.type"),
        (SubmitSpec(type="x" * 65), "task.type"),
        (SubmitSpec(type="t", payload=[1, 2]), "task.payload"),  # type: ignore[arg-type]
        (SubmitSpec(type="t", scheduled_at=datetime(2030, 1, 1)), "task.scheduled_at"),
        (SubmitSpec(type="t", idempotency_key="k" * 129), "task.idempotency_key"),
        (SubmitSpec(type="t", max_retries=-1), "task.max_retries"),
    ]
    for spec, field in cases:
        with pytest.raises(InvalidArgument) as info:
            await engine.submit(tenant, [spec])
        assert info.value.field == field
    with pytest.raises(InvalidArgument) as info:
        await engine.submit(tenant, [SubmitSpec(type="ok"), SubmitSpec(type="")])
    assert info.value.field == "tasks[1].type"
    # A large call is handled in slices (yielding to the loop between them), but still
    # all or nothing: a bad task late in the call stores none of those before it.
    specs = [SubmitSpec(type="ok") for _ in range(1000)]
    specs[700] = SubmitSpec(type="t", payload=[1])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as info:
        await engine.submit(tenant, specs)
    assert info.value.field == "tasks[700].payload"
    page = await engine.list_tasks(tenant, __import__("scheduler.store").store.TaskFilter(), 10, "")
    assert page.tasks == ()
    assert engine.stats.submitted == 0


async def test_cancel_reaches_a_worker_that_reconnected(engine: Engine, tenant: uuid.UUID) -> None:
    hello = WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"email"}), slots=1)
    first = await engine.open_session(hello)
    (res,) = await engine.submit(tenant, [now_spec()])
    a = await run_to_running(engine, first)
    # The stream breaks; the task keeps its lease. A client cancels meanwhile.
    await first.close()
    t = await engine.cancel(tenant, res.task.id)
    assert t.cancel_requested
    # The worker reconnects and heartbeats the task it still runs: it is told.
    second = await engine.open_session(dataclasses.replace(hello, slots=0))
    assert await second.heartbeat([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    notice = await asyncio.wait_for(second.next_event(), 10)
    assert isinstance(notice, CancelNotice)
    assert notice.key.id == res.task.id
    assert await second.confirm_cancel([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    assert (await engine.store.get_task(tenant, res.task.id)).status is TaskState.CANCELLED
    await second.close()
