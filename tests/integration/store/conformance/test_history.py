"""The history protocol (``protocol/history.py``): audit trail, refused writes, activity."""

from __future__ import annotations

import uuid
from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Completion,
    Failure,
    RefusedWrite,
    TaskKey,
    Tenant,
)
from tests.support.stores import (
    NOW,
    new_task,
    new_tenant,
    running,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


async def test_transitions_of_is_the_audit_trail_oldest_first(store: Store, tenant: Tenant) -> None:
    [r] = await store.insert_tasks([new_task(tenant)], NOW)
    assert await store.transitions_of(r.task.id) == []
    later = NOW + timedelta(seconds=5)
    await store.cancel(tenant.id, r.task.id, later)
    [t] = await store.transitions_of(r.task.id)
    assert (t.from_state, t.to_state, t.at) == (S.SCHEDULED, S.CANCELLED, later)
    assert await store.transitions_of(uuid.uuid4()) == []


async def test_refused_writes_are_recorded_with_the_current_token(
    store: Store, tenant: Tenant
) -> None:
    key, token = await running(store, tenant)
    gone = TaskKey(uuid.uuid4(), NOW)
    await store.record_refused([])
    await store.record_refused(
        [
            RefusedWrite(
                key=key, token=token - 1, actor="w9", write="complete", reason="stale token", at=NOW
            ),
            RefusedWrite(
                key=gone, token=1, actor="w9", write="heartbeat", reason="no task", at=NOW
            ),
        ]
    )
    [w] = await store.refused_writes_of(key)
    assert (w.key, w.token, w.current_token, w.actor, w.write, w.reason, w.at) == (
        key,
        token - 1,
        token,
        "w9",
        "complete",
        "stale token",
        NOW,
    )
    assert await store.refused_writes_of(gone) == []  # a task that no longer exists


async def test_activity_buckets_dispatches_completions_and_failures(
    store: Store, tenant: Tenant
) -> None:
    other = await store.create_tenant(new_tenant("other"))
    done, done_token = await running(store, tenant)
    await store.complete([Completion(key=done, token=done_token)], NOW)
    failed, failed_token = await running(store, tenant)
    await store.fail([Failure(key=failed, token=failed_token, error="x")], NOW)
    start = NOW - timedelta(seconds=60)
    buckets = await store.activity(tenant.id, start, NOW + timedelta(seconds=59), 60)
    assert [b.start for b in buckets] == [start, NOW]
    assert (buckets[0].dispatched, buckets[0].completed, buckets[0].failed) == (0, 0, 0)
    assert (buckets[1].dispatched, buckets[1].completed, buckets[1].failed) == (2, 1, 1)
    assert buckets[1].lateness_p50_s == 0.0  # dispatched when due
    theirs = await store.activity(other.id, start, NOW + timedelta(seconds=59), 60)
    assert sum(b.dispatched for b in theirs) == 0
    every = await store.activity(None, start, NOW + timedelta(seconds=59), 60)
    assert sum(b.dispatched for b in every) == 2
