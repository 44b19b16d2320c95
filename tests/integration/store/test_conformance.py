"""One conformance suite, run against PostgreSQL and SQLite (fixture ``store``)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._errors import InvalidArgument, InvalidTransition, NotFound, StaleFencingToken
from scheduler.jsonbytes import as_dict
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Completion,
    DispatchRequest,
    Failure,
    FencedWrite,
    Outcome,
    Pool,
    Release,
    TaskFilter,
    TaskKey,
    Tenant,
    raise_for_outcome,
)
from tests.integration.store.conftest import NOW, count_rows, force_status, new_task

S = TaskState
LEASE = NOW + timedelta(seconds=30)
HORIZON = NOW + timedelta(minutes=60)


async def running(store: Store, tenant: Tenant, **kw: object) -> tuple[TaskKey, int]:
    """Insert, pre-load, dispatch and ack one task; (key, token)."""
    [res] = await store.insert_tasks([new_task(tenant, **kw)], NOW)
    key = res.task.key
    await force_status(store, key, S.PRELOADED)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    assert await store.ack([FencedWrite(key=key, token=a.fencing_token)], LEASE, NOW) == [
        Outcome.OK
    ]
    return key, a.fencing_token


async def test_insert_get_and_idempotency_whatever_the_time(store: Store, tenant: Tenant) -> None:
    first = new_task(tenant, idempotency_key="order-1")
    later = new_task(tenant, NOW + timedelta(days=3), idempotency_key="order-1")
    same_batch = new_task(tenant, idempotency_key="order-2")
    twin = new_task(tenant, NOW + timedelta(hours=1), idempotency_key="order-2")
    r = await store.insert_tasks([first, same_batch, twin], NOW)
    assert [x.created for x in r] == [True, True, False]
    assert r[2].task.id == same_batch.id
    [dup] = await store.insert_tasks([later], NOW)
    assert not dup.created
    assert dup.task.id == first.id
    assert dup.task.scheduled_at == first.scheduled_at
    got = await store.get_task(tenant.id, first.id)
    assert got == r[0].task
    assert got.payload == {"to": "a@example.com"}
    assert got.status is S.SCHEDULED
    assert got.fencing_token == 1
    with pytest.raises(NotFound):
        await store.get_task(uuid.uuid4(), first.id)
    with pytest.raises(NotFound):
        await store.get_task(None, uuid.uuid4())
    # Another tenant may use the same key.
    other = await store.create_tenant(Tenant(id=uuid.uuid4(), name="other"))
    [o] = await store.insert_tasks([new_task(other, idempotency_key="order-1")], NOW)
    assert o.created


async def test_full_lifecycle_writes_ledger_and_audit(store: Store, tenant: Tenant) -> None:
    task = new_task(tenant, trace_context={"traceparent": "00-abc-01"}, due_at=NOW)
    await store.insert_tasks([task], NOW)
    pre = await store.claim_preload(None, HORIZON, 10, NOW)
    assert [p.key.id for p in pre] == [task.id]
    assert await store.claim_preload(None, HORIZON, 10, NOW) == []
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=pre[0].key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    assert a.fencing_token == 2
    assert a.attempt == 1
    assert a.trace_context == {"traceparent": "00-abc-01"}
    w = FencedWrite(key=a.key, token=a.fencing_token)
    assert await store.ack([w], LEASE, NOW) == [Outcome.OK]
    assert await store.ack([w], LEASE, NOW) == [Outcome.OK]  # repeated ack
    assert await store.heartbeat([w], LEASE + timedelta(seconds=30), NOW) == [Outcome.OK]
    assert await store.checkpoint(a.key, a.fencing_token, {"row": 5}, NOW) == Outcome.OK
    [c] = await store.complete(
        [Completion(key=a.key, token=a.fencing_token, result={"ok": 1})], NOW
    )
    assert c.outcome is Outcome.OK
    done = await store.get_task(None, task.id)
    assert done.status is S.COMPLETED
    assert done.result_payload == {"ok": 1}
    assert done.checkpoint == {"row": 5}
    assert await count_rows(store, "task_completions") == 1
    trail = [(t.from_state, t.to_state) for t in await store.transitions_of(task.id)]
    assert trail == [
        (S.SCHEDULED, S.PRELOADED),
        (S.PRELOADED, S.DISPATCHED),
        (S.DISPATCHED, S.RUNNING),
        (S.RUNNING, S.COMPLETED),
    ]
    # A second completion (duplicate delivery) is stale, and changes nothing.
    [again] = await store.complete([Completion(key=a.key, token=a.fencing_token)], NOW)
    assert again.outcome is Outcome.STALE
    assert await count_rows(store, "task_completions") == 1


async def test_dispatch_to_a_worker_that_starts_on_delivery_commits_running(
    store: Store, tenant: Tenant
) -> None:
    """``running=True``: PRELOADED -> RUNNING in the dispatch itself; no ack is needed
    before a completion, and an expired lease counts the attempt (RETRYING)."""
    done_task, lapsed_task, plain_task = (new_task(tenant, due_at=NOW) for _ in range(3))
    await store.insert_tasks([done_task, lapsed_task, plain_task], NOW)
    pre = {p.key.id: p.key for p in await store.claim_preload(None, HORIZON, 10, NOW)}
    done, lapsed, plain = await store.mark_dispatched(
        [
            DispatchRequest(key=pre[t.id], worker_id="w1", lease_expires_at=LEASE, running=r)
            for t, r in ((done_task, True), (lapsed_task, True), (plain_task, False))
        ],
        NOW,
    )
    assert done is not None
    assert lapsed is not None
    assert plain is not None
    assert (done.fencing_token, done.attempt) == (2, 1)
    assert (await store.get_task(None, done_task.id)).status is S.RUNNING
    assert (await store.get_task(None, plain_task.id)).status is S.DISPATCHED
    w = FencedWrite(key=done.key, token=done.fencing_token)
    assert await store.heartbeat([w], LEASE + timedelta(seconds=30), NOW) == [Outcome.OK]
    stale = FencedWrite(key=done.key, token=done.fencing_token - 1)
    assert await store.heartbeat([stale], LEASE, NOW) == [Outcome.STALE]
    [c] = await store.complete([Completion(key=done.key, token=done.fencing_token)], NOW)
    assert c.outcome is Outcome.OK
    trail = [(t.from_state, t.to_state) for t in await store.transitions_of(done_task.id)]
    assert trail == [(S.SCHEDULED, S.PRELOADED), (S.PRELOADED, S.RUNNING), (S.RUNNING, S.COMPLETED)]
    # Never finished: lease expiry retries it and the attempt counts; the plain
    # dispatch, never acked, goes back without using one.
    r = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
    assert r.retrying == (lapsed.key,)
    assert [p.key for p in r.requeued] == [plain.key]
    assert (await store.get_task(None, lapsed_task.id)).retry_count == 1
    assert (await store.get_task(None, plain_task.id)).retry_count == 0


async def test_zombie_worker_is_fenced(store: Store, tenant: Tenant) -> None:
    key, old = await running(store, tenant)
    # Lease lapses: the attempt counts, the task retries and is dispatched again.
    later = LEASE + timedelta(seconds=1)
    r = await store.reclaim_expired(None, later, 100)
    assert r.retrying == (key,)
    await store.claim_preload(None, later + timedelta(minutes=60), 10, later)
    [b] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w2", lease_expires_at=later + timedelta(seconds=30))],
        later,
    )
    assert b is not None
    assert b.fencing_token == old + 1
    assert b.attempt == 2
    zombie = FencedWrite(key=key, token=old)
    assert await store.ack([zombie], later, later) == [Outcome.STALE]
    assert await store.heartbeat([zombie], later, later) == [Outcome.STALE]
    assert await store.checkpoint(key, old, {"x": 1}, later) == Outcome.STALE
    with pytest.raises(StaleFencingToken):
        raise_for_outcome(await store.checkpoint(key, old, {"x": 1}, later), key, old)
    assert await store.ack([FencedWrite(key=key, token=b.fencing_token)], later, later) == [
        Outcome.OK
    ]
    results = await store.complete(
        [Completion(key=key, token=old), Completion(key=key, token=b.fencing_token)], later
    )
    assert [x.outcome for x in results] == [Outcome.STALE, Outcome.OK]
    assert (await store.fail([Failure(key=key, token=old, error="late")], later))[
        0
    ].outcome is Outcome.STALE
    assert await store.release([Release(key=key, token=old)], later) == [Outcome.STALE]
    missing = TaskKey(uuid.uuid4(), NOW)
    assert await store.heartbeat([FencedWrite(key=missing, token=1)], later, later) == [
        Outcome.NOT_FOUND
    ]
    final = await store.get_task(None, key.id)
    assert final.status is S.COMPLETED
    assert final.worker_id == "w2"


async def test_fail_retries_then_dead_letters_then_redrive(store: Store, tenant: Tenant) -> None:
    key, token = await running(store, tenant, max_retries=1)
    retry_at = NOW + timedelta(seconds=40)
    [f] = await store.fail([Failure(key=key, token=token, error="boom", retry_at=retry_at)], NOW)
    assert f == type(f)(Outcome.OK, S.RETRYING)
    t = await store.get_task(None, key.id)
    assert (t.status, t.due_at, t.retry_count, t.last_error) == (S.RETRYING, retry_at, 1, "boom")
    assert await store.claim_preload(None, NOW + timedelta(seconds=10), 10, NOW) == []
    [p] = await store.claim_preload(None, retry_at, 10, NOW)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=p.key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    await store.ack([FencedWrite(key=key, token=a.fencing_token)], LEASE, NOW)
    [f2] = await store.fail([Failure(key=key, token=a.fencing_token, error="again")], NOW)
    assert f2.new_state is S.DEAD_LETTER
    trail = [(x.from_state, x.to_state) for x in await store.transitions_of(key.id)][-2:]
    assert trail == [(S.RUNNING, S.RETRYING), (S.RETRYING, S.DEAD_LETTER)]
    red = await store.redrive(tenant.id, key.id, NOW, NOW + timedelta(minutes=5))
    assert (red.status, red.retry_count, red.due_at) == (
        S.SCHEDULED,
        0,
        NOW + timedelta(minutes=5),
    )
    with pytest.raises(InvalidTransition):
        await store.redrive(tenant.id, key.id, NOW, NOW)


async def test_a_failure_keeps_its_error_type_and_traceback_until_a_lease_expiry(
    store: Store, tenant: Tenant
) -> None:
    key, token = await running(store, tenant, max_retries=2)
    trace = "Traceback (most recent call last):\n  File \"h.py\", line 3\nKeyError: 'sku'\n"
    [f] = await store.fail(
        [Failure(key=key, token=token, error="'sku'", error_type="KeyError", traceback=trace)],
        NOW,
    )
    assert f.outcome is Outcome.OK
    t = await store.get_task(None, key.id)
    assert (t.last_error, t.last_error_type, t.last_traceback) == ("'sku'", "KeyError", trace)
    # A failure that names no type and sends no traceback clears both.
    [p] = await store.claim_preload(None, t.due_at, 10, NOW)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=p.key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    await store.ack([FencedWrite(key=key, token=a.fencing_token)], LEASE, NOW)
    await store.fail([Failure(key=key, token=a.fencing_token, error="plain")], NOW)
    t = await store.get_task(None, key.id)
    assert (t.last_error, t.last_error_type, t.last_traceback) == ("plain", None, None)
    # A lease expiry is no worker's error: its type and traceback go with the old text.
    key2, token2 = await running(store, tenant, max_retries=2)
    await store.fail(
        [Failure(key=key2, token=token2, error="x", error_type="ValueError", traceback="tb")],
        NOW,
    )
    t2 = await store.get_task(None, key2.id)
    claimed = await store.claim_preload(None, t2.due_at, 10, NOW)
    [p2] = [c for c in claimed if c.key == key2]
    [a2] = await store.mark_dispatched(
        [DispatchRequest(key=p2.key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a2 is not None
    await store.ack([FencedWrite(key=key2, token=a2.fencing_token)], LEASE, NOW)
    await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
    t2 = await store.get_task(None, key2.id)
    assert (t2.last_error, t2.last_error_type, t2.last_traceback) == ("lease expired", None, None)


async def test_overdue_groups_by_tenant_type_and_pool_oldest_first(
    store: Store, tenant: Tenant
) -> None:
    early, late = NOW - timedelta(minutes=5), NOW - timedelta(minutes=1)
    await store.insert_tasks(
        [
            new_task(tenant, early, type="orphan", pool=Pool.BULK),
            new_task(tenant, late, type="orphan", pool=Pool.BULK),
            new_task(tenant, late, type="served", pool=Pool.STANDARD),
            new_task(tenant, NOW + timedelta(minutes=1), type="future"),
        ],
        NOW,
    )
    await running(store, tenant, type="running")
    found = await store.overdue(tenant.id, NOW)
    assert [(g.type, g.pool, g.count, g.oldest_due_at) for g in found] == [
        ("orphan", Pool.BULK, 2, early),
        ("served", Pool.STANDARD, 1, late),
    ]
    assert {g.tenant_id for g in found} == {tenant.id}
    assert await store.overdue(uuid.uuid4(), NOW) == []
    everyone = await store.overdue(None, NOW)
    assert {(g.tenant_id, g.type) for g in everyone} >= {(tenant.id, "orphan")}


async def test_non_retryable_failure_dead_letters(store: Store, tenant: Tenant) -> None:
    key, token = await running(store, tenant)
    [f] = await store.fail([Failure(key=key, token=token, error="bad", retryable=False)], NOW)
    assert f.new_state is S.DEAD_LETTER


async def test_release_keeps_attempt_and_checkpoint(store: Store, tenant: Tenant) -> None:
    key, token = await running(store, tenant)
    assert await store.release([Release(key=key, token=token, checkpoint={"row": 9})], NOW) == [
        Outcome.OK
    ]
    t = await store.get_task(None, key.id)
    assert (t.status, t.retry_count, t.checkpoint) == (S.PRELOADED, 0, {"row": 9})
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w2", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    # A backend may hand JSON on as its stored text (RawJSON): compared as objects.
    assert a.checkpoint is not None
    assert (as_dict(a.checkpoint), a.attempt, a.fencing_token) == ({"row": 9}, 1, token + 1)


async def test_reclaim_expired_follows_the_state_table(store: Store, tenant: Tenant) -> None:
    dispatched = (await store.insert_tasks([new_task(tenant)], NOW))[0].task.key
    await force_status(store, dispatched, S.PRELOADED)
    await store.mark_dispatched(
        [DispatchRequest(key=dispatched, worker_id="w", lease_expires_at=LEASE)], NOW
    )
    retrying, _ = await running(store, tenant)
    dead, _ = await running(store, tenant, max_retries=0)
    cancelling, _ = await running(store, tenant)
    await store.cancel(None, cancelling.id, NOW)
    fresh, _ = await running(store, tenant)
    await store.heartbeat([FencedWrite(key=fresh, token=2)], LEASE + timedelta(hours=1), NOW)
    r = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
    assert [p.key for p in r.requeued] == [dispatched]
    assert r.retrying == (retrying,)
    assert r.dead_lettered == (dead,)
    assert r.cancelled == (cancelling,)
    assert (await store.get_task(None, fresh.id)).status is S.RUNNING


async def test_cancel(store: Store, tenant: Tenant) -> None:
    [r] = await store.insert_tasks([new_task(tenant)], NOW)
    c = await store.cancel(tenant.id, r.task.id, NOW)
    assert (c.task.status, c.notify_worker) == (S.CANCELLED, None)
    with pytest.raises(InvalidTransition):
        await store.cancel(tenant.id, r.task.id, NOW)
    key, token = await running(store, tenant)
    with pytest.raises(NotFound):
        await store.cancel(uuid.uuid4(), key.id, NOW)
    c2 = await store.cancel(tenant.id, key.id, NOW)
    assert (c2.task.status, c2.task.cancel_requested, c2.notify_worker) == (S.RUNNING, True, "w1")
    assert await store.confirm_cancel([FencedWrite(key=key, token=token - 1)], NOW) == [
        Outcome.STALE
    ]
    assert await store.confirm_cancel([FencedWrite(key=key, token=token)], NOW) == [Outcome.OK]
    assert (await store.get_task(None, key.id)).status is S.CANCELLED
    # Cancel requested, then the worker drains: the task ends CANCELLED, not re-queued.
    k3, t3 = await running(store, tenant)
    await store.cancel(None, k3.id, NOW)
    assert await store.release([Release(key=k3, token=t3)], NOW) == [Outcome.OK]
    assert (await store.get_task(None, k3.id)).status is S.CANCELLED


async def test_dag_children_released_in_completing_transaction(
    store: Store, tenant: Tenant
) -> None:
    wf = uuid.uuid4()
    a = new_task(tenant, workflow_id=wf)
    b = new_task(tenant, workflow_id=wf, depends_on=(a.id,))
    c = new_task(tenant, NOW + timedelta(days=1), workflow_id=wf, depends_on=(a.id,))
    d = new_task(tenant, workflow_id=wf, depends_on=(b.id, c.id))
    res = await store.insert_tasks([a, b, c, d], NOW)
    assert [x.task.unresolved_dependencies for x in res] == [0, 1, 1, 2]
    pre = await store.claim_preload(None, NOW + timedelta(days=3), 10, NOW)
    assert [p.key.id for p in pre] == [a.id]  # children wait for their parents

    async def run_and_complete(task_id: uuid.UUID) -> set[uuid.UUID]:
        t = await store.get_task(None, task_id)
        await force_status(store, t.key, S.PRELOADED)
        [asg] = await store.mark_dispatched(
            [DispatchRequest(key=t.key, worker_id="w", lease_expires_at=LEASE)], NOW
        )
        assert asg is not None
        await store.ack([FencedWrite(key=t.key, token=asg.fencing_token)], LEASE, NOW)
        [done] = await store.complete([Completion(key=t.key, token=asg.fencing_token)], NOW)
        assert done.outcome is Outcome.OK
        return {p.key.id for p in done.ready_children}

    assert await run_and_complete(a.id) == {b.id, c.id}
    assert (await store.get_task(None, b.id)).status is S.PRELOADED
    assert await run_and_complete(b.id) == set()
    assert (await store.get_task(None, d.id)).unresolved_dependencies == 1
    assert await run_and_complete(c.id) == {d.id}
    assert (await store.get_task(None, d.id)).status is S.PRELOADED


async def test_claim_preload_respects_shards_horizon_and_limit(
    store: Store, tenant: Tenant
) -> None:
    tasks = [new_task(tenant, NOW + timedelta(minutes=i), shard_id=i % 2) for i in range(6)]
    tasks.append(new_task(tenant, NOW + timedelta(hours=5), shard_id=0))
    await store.insert_tasks(tasks, NOW)
    got = await store.claim_preload([0], HORIZON, 2, NOW)
    assert [p.key.id for p in got] == [tasks[0].id, tasks[2].id]
    got = await store.claim_preload([0], HORIZON, 10, NOW)
    assert [p.key.id for p in got] == [tasks[4].id]
    got = await store.claim_preload(None, HORIZON, 10, NOW)
    assert {p.key.id for p in got} == {tasks[1].id, tasks[3].id, tasks[5].id}
    page1 = await store.load_preloaded(None, HORIZON, 4, None)
    page2 = await store.load_preloaded(None, HORIZON, 4, page1[-1].key)
    assert [p.key.id for p in page1 + page2] == [t.id for t in tasks[:6]]


async def test_claim_preload_moves_only_scheduled_without_deps_or_retrying(
    store: Store, tenant: Tenant
) -> None:
    """The claim's guard (docs/architecture.md): every row due, in every state; only
    SCHEDULED rows with no unresolved dependency and RETRYING rows move, and only they
    gain an audit row."""
    tasks = {state: new_task(tenant) for state in S}
    waiting = new_task(tenant)
    inserted = await store.insert_tasks([*tasks.values(), waiting], NOW)
    keys = {r.task.id: r.task.key for r in inserted}
    for state, t in tasks.items():
        await force_status(store, keys[t.id], state)
    await force_status(store, keys[waiting.id], S.SCHEDULED, unresolved_dependencies=1)
    trails = {t.id: await store.transitions_of(t.id) for t in [*tasks.values(), waiting]}
    got = await store.claim_preload(None, HORIZON, 100, NOW)
    assert {p.key.id for p in got} == {tasks[S.SCHEDULED].id, tasks[S.RETRYING].id}
    for state, t in tasks.items():
        moved = state in (S.SCHEDULED, S.RETRYING)
        assert (await store.get_task(None, t.id)).status is (S.PRELOADED if moved else state)
        trail = await store.transitions_of(t.id)
        assert len(trail) == len(trails[t.id]) + (1 if moved else 0)
    assert (await store.get_task(None, waiting.id)).status is S.SCHEDULED
    assert await store.transitions_of(waiting.id) == trails[waiting.id]


async def test_load_preloaded_packed_pages_hold_the_same_tasks_as_load_preloaded(
    store: Store, tenant: Tenant
) -> None:
    """Packed per (tenant, type, pool), keyset paged alike, with microsecond times,
    shards and the shard and changed-since filters of the unpacked read."""
    other = await store.create_tenant(Tenant(id=uuid.uuid4(), name="other"))
    tasks = [
        new_task(
            (tenant, other)[i % 2],
            NOW + timedelta(minutes=i, microseconds=7 * i + 1),
            type=f"t{i % 3}",
            pool=(Pool.CRITICAL, Pool.STANDARD, Pool.BULK)[i % 3],
            shard_id=i % 5,
        )
        for i in range(12)
    ]
    await store.insert_tasks(tasks, NOW)
    await store.claim_preload(None, HORIZON, 100, NOW)
    for shards in (None, [1, 3]):
        pages, after = [], None
        while True:
            page = await store.load_preloaded_packed(shards, HORIZON, 5, after)
            pages.append(page)
            if page.count < 5:
                break
            after = page.last
        got = [p for page in pages for p in page.unpack()]
        want, after = [], None
        while batch := await store.load_preloaded(shards, HORIZON, 5, after):
            want += batch
            after = batch[-1].key
        assert got == want
        counts = [page.count for page in pages]
        assert sum(counts) == len(want)
        assert set(counts[:-1]) <= {5}
        assert counts[-1] < 5
        for page in pages:
            assert len({(g.tenant_id, g.type, g.pool) for g in page.groups}) == len(page.groups)
        assert len(want) == (12 if shards is None else 5)
    since = await store.load_preloaded_packed(None, HORIZON, 100, None, NOW + timedelta(hours=1))
    assert (since.count, since.groups, since.last) == (0, (), None)


async def test_load_preloaded_since_a_time_returns_only_rows_changed_since(
    store: Store, tenant: Tenant
) -> None:
    early = [new_task(tenant, NOW + timedelta(minutes=i)) for i in range(3)]
    late = [new_task(tenant, NOW + timedelta(minutes=10 + i)) for i in range(2)]
    await store.insert_tasks([*early, *late], NOW)
    await store.claim_preload(None, NOW + timedelta(minutes=5), 10, NOW)  # early, at NOW
    later = NOW + timedelta(seconds=30)
    await store.claim_preload(None, HORIZON, 10, later)  # late, 30 s after
    since = await store.load_preloaded(None, HORIZON, 10, None, later - timedelta(seconds=1))
    assert [p.key.id for p in since] == [t.id for t in late]
    assert len(await store.load_preloaded(None, HORIZON, 10, None, NOW)) == 5
    assert len(await store.load_preloaded(None, HORIZON, 10, None)) == 5
    with pytest.raises(InvalidArgument, match="changed_since"):
        await store.load_preloaded(None, HORIZON, 10, None, datetime(2026, 1, 1))  # naive


async def test_initial_preloaded_skips_the_claim(store: Store, tenant: Tenant) -> None:
    t = new_task(tenant, initial_state=S.PRELOADED)
    await store.insert_tasks([t], NOW)
    assert await store.claim_preload(None, HORIZON, 10, NOW) == []
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=TaskKey(t.id, t.scheduled_at), worker_id="w", lease_expires_at=LEASE)],
        NOW,
    )
    assert a is not None


async def test_list_tasks_pages(store: Store, tenant: Tenant) -> None:
    tasks = [new_task(tenant, NOW + timedelta(hours=i)) for i in range(5)]
    await store.insert_tasks(tasks, NOW)
    await store.cancel(None, tasks[0].id, NOW)
    seen = []
    token = ""
    while True:
        page = await store.list_tasks(tenant.id, TaskFilter(), 2, token)
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert seen == [t.id for t in tasks]
    only = await store.list_tasks(tenant.id, TaskFilter(statuses=[S.CANCELLED]), 10, "")
    assert [t.id for t in only.tasks] == [tasks[0].id]
    with pytest.raises(InvalidArgument):
        await store.list_tasks(tenant.id, TaskFilter(), 10, "garbage")


def _bad_inputs(tenant: Tenant) -> list[tuple[object, str]]:
    naive = datetime(2026, 3, 10, 12, 0)
    return [
        (new_task(tenant, tenant_id=uuid.uuid4()), "tenant"),
        (new_task(tenant, payload=[1, 2]), "payload"),
        (new_task(tenant, payload="text"), "payload"),
        (new_task(tenant, payload={"x": object()}), "payload"),
        (new_task(tenant, payload={"big": "x" * 1024 * 1024}), "payload"),
        (new_task(tenant, payload={"nul": "\x00"}), "payload"),
        (new_task(tenant, type="t" * 65), "type"),
        (new_task(tenant, type=""), "type"),
        (new_task(tenant, idempotency_key="k" * 129), "idempotency_key"),
        (new_task(tenant, scheduled_at=naive), "scheduled_at"),
        (new_task(tenant, due_at=naive), "due_at"),
        (new_task(tenant, max_retries=-1), "max_retries"),
        (new_task(tenant, shard_id=-1), "shard_id"),
        (new_task(tenant, timeout_s=float("nan")), "timeout_s"),
        (new_task(tenant, trace_context="x"), "trace_context"),
        (new_task(tenant, initial_state=S.RUNNING), "initial_state"),
    ]


async def test_bad_input_gets_a_typed_error_and_writes_nothing(
    store: Store, tenant: Tenant
) -> None:
    good = new_task(tenant)
    for bad, field in _bad_inputs(tenant):
        with pytest.raises((InvalidArgument, NotFound)) as info:
            await store.insert_tasks([good, bad], NOW)  # type: ignore[list-item]
        err = info.value
        if isinstance(err, InvalidArgument):
            assert err.field.startswith("tasks[1].")
            assert err.field.endswith(field)
        else:
            assert err.kind == field
    page = await store.list_tasks(tenant.id, TaskFilter(), 10, "")
    assert page.tasks == ()
    with pytest.raises(InvalidArgument):
        await store.claim_preload(None, datetime(2026, 1, 1), 1, NOW)


async def test_payload_limit_is_configurable() -> None:
    from scheduler.store import open_store

    s = await open_store("sqlite://:memory:", payload_limit_bytes=100)
    try:
        t = await s.create_tenant(Tenant(id=uuid.uuid4(), name="x"))
        with pytest.raises(InvalidArgument, match="over the 100-byte limit"):
            await s.insert_tasks([new_task(t, payload={"a": "x" * 100})], NOW)
    finally:
        await s.close()


ALL_PAIRS = [(f, t) for f in S for t in S]


async def test_state_machine_every_pair(store: Store, tenant: Tenant) -> None:
    """Legal moves succeed; illegal ones raise InvalidTransition and change nothing."""
    tasks = [new_task(tenant) for _ in ALL_PAIRS]
    await store.insert_tasks(tasks, NOW)
    later = NOW + timedelta(seconds=1)
    for task, (f, t) in zip(tasks, ALL_PAIRS, strict=True):
        key = TaskKey(task.id, task.scheduled_at)
        await force_status(store, key, f)
        before = await store.get_task(None, task.id)
        if (f, t) in __import__("scheduler.states").states.TRANSITIONS:
            moved = await store.transition(key, t, later)
            assert moved.status is t, (f, t)
            assert (await store.transitions_of(task.id))[-1].to_state is t
        else:
            with pytest.raises(InvalidTransition):
                await store.transition(key, t, later)
            assert await store.get_task(None, task.id) == before, (f, t)
            assert await store.transitions_of(task.id) == []


async def test_sql_guards_alone_refuse_illegal_moves(store: Store, tenant: Tenant) -> None:
    """The SQL guard (generated from the state machine) without the check in code."""
    from scheduler.states import is_legal

    tasks = [new_task(tenant) for _ in ALL_PAIRS]
    await store.insert_tasks(tasks, NOW)
    for task, (f, t) in zip(tasks, ALL_PAIRS, strict=True):
        key = TaskKey(task.id, task.scheduled_at)
        await force_status(store, key, f)
        ok = await store._guarded_set_status_unchecked(key, t, NOW)  # type: ignore[attr-defined]
        assert ok == is_legal(f, t), (f, t)
        assert (await store.get_task(None, task.id)).status is (t if ok else f)


async def test_tenants_and_api_keys(store: Store, tenant: Tenant) -> None:
    assert (await store.get_tenant(tenant.id)).name == "acme"
    upd = await store.update_tenant(tenant.id, {"rate_limit_rps": 5})
    assert upd.rate_limit_rps == 5
    with pytest.raises(InvalidArgument):
        await store.update_tenant(tenant.id, {"id": uuid.uuid4()})
    with pytest.raises(NotFound):
        await store.get_tenant(uuid.uuid4())
    key = await store.create_api_key(tenant.id, "ci", b"hash-1")
    assert key.tenant_id == tenant.id
    assert await store.tenant_for_key_hash(b"hash-1") == tenant.id
    assert await store.tenant_for_key_hash(b"nope") is None


async def test_close_twice(store: Store) -> None:
    await store.close()
    await store.close()


def test_record_fields_cover_new_task() -> None:
    from scheduler.types import NewTask, TaskRecord

    new = {f.name for f in dataclasses.fields(NewTask)} - {"initial_state", "depends_on"}
    assert new <= {f.name for f in dataclasses.fields(TaskRecord)}
    assert UTC


async def test_assignment_matches_the_row_and_a_repeated_request_gets_none(
    store: Store, tenant: Tenant
) -> None:
    [res] = await store.insert_tasks(
        [new_task(tenant, payload={"n": 1, "s": "é"}, trace_context={"traceparent": "00-a"})], NOW
    )
    key = res.task.key
    await force_status(store, key, S.PRELOADED)
    other_lease = LEASE + timedelta(minutes=1)
    a, again = await store.mark_dispatched(
        [
            DispatchRequest(key=key, worker_id="w1", lease_expires_at=LEASE),
            DispatchRequest(key=key, worker_id="w2", lease_expires_at=other_lease),
        ],
        NOW,
    )
    assert again is None
    assert a is not None
    row = await store.get_task(tenant.id, key.id)
    assert a.key == row.key
    assert (a.worker_id, a.lease_expires_at) == (row.worker_id, row.lease_expires_at)
    assert (a.worker_id, a.lease_expires_at) == ("w1", LEASE)
    assert a.fencing_token == row.fencing_token == 2
    assert a.attempt == row.retry_count + 1
    assert (a.tenant_id, a.type, a.pool, a.due_at) == (
        row.tenant_id,
        row.type,
        row.pool,
        row.due_at,
    )
    assert (a.max_retries, a.timeout_s) == (row.max_retries, row.timeout_s)
    assert as_dict(a.payload) == as_dict(row.payload) == {"n": 1, "s": "é"}
    assert a.trace_context == row.trace_context == {"traceparent": "00-a"}
    assert a.checkpoint is None
    trail = await store.transitions_of(key.id)
    assert [(t.from_state, t.to_state) for t in trail][-1] == (S.PRELOADED, S.DISPATCHED)
