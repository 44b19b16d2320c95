"""An ack written by its task's completion (issue #20): one write records DISPATCHED ->
RUNNING -> COMPLETED with both audit rows, fenced like each write alone. Both backends.
"""

from __future__ import annotations

from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.store.postgres import PostgresStore
from scheduler.types import (
    Completion,
    DispatchRequest,
    FencedWrite,
    Outcome,
    TaskKey,
    Tenant,
)
from tests.support.stores import NOW, count_rows, force_status, new_task, system_conn

S = TaskState
LEASE = NOW + timedelta(seconds=30)
ACKED = NOW + timedelta(milliseconds=3)
DONE = NOW + timedelta(milliseconds=9)


async def dispatched(store: Store, tenant: Tenant) -> tuple[TaskKey, int]:
    """One task DISPATCHED to worker "w1" and never acked; (key, token)."""
    [res] = await store.insert_tasks([new_task(tenant)], NOW)
    key = res.task.key
    await force_status(store, key, S.PRELOADED)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    return key, a.fencing_token


async def test_a_completion_with_its_ack_writes_both_steps(store: Store, tenant: Tenant) -> None:
    key, token = await dispatched(store, tenant)
    [r] = await store.complete(
        [Completion(key=key, token=token, result={"n": 1}, acked_at=ACKED)], DONE
    )
    assert r.outcome is Outcome.OK
    task = await store.get_task(tenant.id, key.id)
    assert (task.status, task.fencing_token, task.result_payload) == (
        S.COMPLETED,
        token,
        {"n": 1},
    )
    steps = [
        (t.from_state, t.to_state, t.fencing_token, t.actor, t.at, t.reason)
        for t in await store.transitions_of(key.id)
    ]
    assert steps[-2:] == [
        (S.DISPATCHED, S.RUNNING, token, "w1", ACKED, "acked"),
        (S.RUNNING, S.COMPLETED, token, "w1", DONE, "completed"),
    ]
    assert await count_rows(store, "task_completions") == 1
    if isinstance(store, PostgresStore):
        # One statement, one transaction: both audit rows have the same xmin.
        async with system_conn(store) as conn:
            xmins = await conn.fetch(
                "SELECT xmin::text FROM task_transitions WHERE task_id = $1"
                " AND to_status IN ('RUNNING', 'COMPLETED')",
                key.id,
            )
        assert len({x[0] for x in xmins}) == 1


async def test_a_folded_ack_with_a_stale_token_is_refused(store: Store, tenant: Tenant) -> None:
    key, token = await dispatched(store, tenant)
    before = await store.transitions_of(key.id)
    stale = Completion(key=key, token=token - 1, acked_at=ACKED)
    [r] = await store.complete([stale], DONE)
    assert r.outcome is Outcome.STALE
    task = await store.get_task(tenant.id, key.id)
    assert (task.status, task.fencing_token) == (S.DISPATCHED, token)
    assert await store.transitions_of(key.id) == before
    assert await count_rows(store, "task_completions") == 0


async def test_a_folded_ack_of_a_task_no_longer_dispatched_is_refused(
    store: Store, tenant: Tenant
) -> None:
    """The lease lapsed and the task went back (PRELOADED, same token until its next
    dispatch): the completion carrying the ack matches nothing."""
    key, token = await dispatched(store, tenant)
    await force_status(store, key, S.PRELOADED)
    [r] = await store.complete([Completion(key=key, token=token, acked_at=ACKED)], DONE)
    assert r.outcome is Outcome.STALE
    assert (await store.get_task(tenant.id, key.id)).status is S.PRELOADED
    assert await count_rows(store, "task_completions") == 0


async def test_a_folded_ack_of_a_task_acked_meanwhile_completes_it_once(
    store: Store, tenant: Tenant
) -> None:
    """The ack was written another way first (RUNNING): the completion still lands, with
    one completion row and no second ack row."""
    key, token = await dispatched(store, tenant)
    assert await store.ack([FencedWrite(key=key, token=token)], LEASE, NOW) == [Outcome.OK]
    [r] = await store.complete([Completion(key=key, token=token, acked_at=ACKED)], DONE)
    assert r.outcome is Outcome.OK
    steps = [(t.from_state, t.to_state) for t in await store.transitions_of(key.id)]
    assert steps.count((S.DISPATCHED, S.RUNNING)) == 1
    assert steps.count((S.RUNNING, S.COMPLETED)) == 1
    assert await count_rows(store, "task_completions") == 1


async def test_a_batch_mixes_folded_and_plain_completions(store: Store, tenant: Tenant) -> None:
    k1, t1 = await dispatched(store, tenant)
    k2, t2 = await dispatched(store, tenant)
    assert await store.ack([FencedWrite(key=k2, token=t2)], LEASE, NOW) == [Outcome.OK]
    k3, t3 = await dispatched(store, tenant)  # no ack sent, none folded: refused
    results = await store.complete(
        [
            Completion(key=k1, token=t1, acked_at=ACKED),
            Completion(key=k2, token=t2),
            Completion(key=k3, token=t3),
        ],
        DONE,
    )
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK, Outcome.STALE]
    assert (await store.get_task(tenant.id, k3.id)).status is S.DISPATCHED
    assert await count_rows(store, "task_completions") == 2
