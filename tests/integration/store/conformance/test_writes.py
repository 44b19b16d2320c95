"""The worker-write protocol (``protocol/writes.py``): every write fenced by the current token."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from scheduler._errors import (
    InvalidTransition,
    StaleFencingToken,
)
from scheduler.jsonbytes import as_dict
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Completion,
    DispatchRequest,
    Failure,
    FencedWrite,
    Outcome,
    Release,
    TaskKey,
    Tenant,
    raise_for_outcome,
)
from tests.support.stores import (
    LEASE,
    NOW,
    count_rows,
    force_status,
    new_task,
    running,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


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


async def test_confirm_cancel_ends_a_task_whose_cancel_was_requested(
    store: Store, tenant: Tenant
) -> None:
    key, token = await running(store, tenant)
    await store.cancel(tenant.id, key.id, NOW)
    assert await store.confirm_cancel([FencedWrite(key=key, token=token - 1)], NOW) == [
        Outcome.STALE
    ]
    assert await store.confirm_cancel([FencedWrite(key=key, token=token)], NOW) == [Outcome.OK]
    assert (await store.get_task(None, key.id)).status is S.CANCELLED
    assert await store.confirm_cancel([], NOW) == []
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
