"""A parent's completion decrements its children exactly once: a duplicate completion
or a zombie's late completion (stale token) decrements nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scheduler.ids import uuid7
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import Completion, DispatchRequest, FencedWrite, NewTask, Outcome, Tenant

NOW = datetime.now(UTC).replace(microsecond=0)


def task(tenant: uuid.UUID, wf: uuid.UUID, *parents: uuid.UUID) -> NewTask:
    tid = uuid7()
    return NewTask(
        id=tid,
        tenant_id=tenant,
        type="step",
        payload={},
        scheduled_at=NOW,
        due_at=NOW,
        idempotency_key=str(tid),
        shard_id=1,
        workflow_id=wf,
        depends_on=parents,
        initial_state=TaskState.SCHEDULED if parents else TaskState.PRELOADED,
    )


async def run(store: Store, t: NewTask, worker: str) -> int:
    (a,) = await store.mark_dispatched(
        [
            DispatchRequest(
                key=(k := _key(t)), worker_id=worker, lease_expires_at=NOW + timedelta(seconds=30)
            )
        ],
        NOW,
    )
    assert a is not None
    assert await store.ack(
        [FencedWrite(key=k, token=a.fencing_token)], a.lease_expires_at, NOW
    ) == [Outcome.OK]
    return a.fencing_token


def _key(t: NewTask):  # type: ignore[no-untyped-def]
    from scheduler.types import TaskKey

    return TaskKey(t.id, t.scheduled_at)


async def test_duplicate_and_zombie_completions_decrement_once(store: Store) -> None:
    tenant = await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
    wf = uuid7()
    a, b = task(tenant.id, wf), task(tenant.id, wf)
    c = task(tenant.id, wf, a.id, b.id)
    await store.insert_tasks([a, b, c], NOW)

    # A completes, then the same completion arrives again (a retried RPC).
    token_a = await run(store, a, "w1")
    # Twice in one batch (two sessions' batches coalesced) and once more later.
    first = await store.complete([Completion(key=_key(a), token=token_a)] * 2, NOW)
    (again,) = await store.complete([Completion(key=_key(a), token=token_a)], NOW)
    assert first[0].outcome is Outcome.OK
    assert again.outcome is Outcome.STALE
    assert (await store.get_task(None, c.id)).unresolved_dependencies == 1

    # B: worker 1 stalls, its lease lapses, worker 2 gets it (token + 1) ...
    token_1 = await run(store, b, "w1")
    late = NOW + timedelta(seconds=31)
    reclaimed = await store.reclaim_expired(None, late, 100)
    assert [k.id for k in reclaimed.retrying] == [b.id]
    await store.claim_preload(None, late + timedelta(days=1), 100, late)
    token_2 = await run(store, b, "w2")
    assert token_2 > token_1
    # ... and the zombie's completion (old token) changes nothing.
    (zombie,) = await store.complete([Completion(key=_key(b), token=token_1)], NOW)
    assert zombie.outcome is Outcome.STALE
    assert zombie.ready_children == ()
    assert (await store.get_task(None, c.id)).unresolved_dependencies == 1

    (done,) = await store.complete([Completion(key=_key(b), token=token_2)], NOW)
    assert done.outcome is Outcome.OK
    assert [p.key.id for p in done.ready_children] == [c.id]
    child = await store.get_task(None, c.id)
    assert child.unresolved_dependencies == 0
    assert child.status is TaskState.PRELOADED
