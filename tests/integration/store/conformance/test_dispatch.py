"""The dispatch protocol (``protocol/dispatch.py``): pre-load, dispatch, lease expiry."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from scheduler._errors import (
    InvalidArgument,
)
from scheduler.jsonbytes import as_dict
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Completion,
    DispatchRequest,
    FencedWrite,
    Outcome,
    Pool,
    TaskKey,
    Tenant,
)
from tests.support.stores import (
    LEASE,
    NOW,
    force_status,
    new_task,
    running,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


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
