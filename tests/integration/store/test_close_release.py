"""A stream's close gives back only DISPATCHED tasks (issue #15): the close-release
write is DISPATCHED-only in the store, so a task another node's stream acked meanwhile
(RUNNING, same token) is never taken from its worker."""

from __future__ import annotations

from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import DispatchRequest, Failure, Outcome, Release, Tenant
from tests.support.stores import NOW, force_status, new_task, running

LEASE = NOW + timedelta(seconds=30)


async def test_close_release_leaves_a_running_task_alone(store: Store, tenant: Tenant) -> None:
    key, token = await running(store, tenant)
    out = await store.release([Release(key=key, token=token, dispatched_only=True)], NOW)
    assert out == [Outcome.STALE]
    task = await store.get_task(tenant.id, key.id)
    assert (task.status, task.fencing_token) == (TaskState.RUNNING, token)
    assert task.lease_expires_at is not None


async def test_close_release_gives_back_a_dispatched_task(store: Store, tenant: Tenant) -> None:
    [res] = await store.insert_tasks([new_task(tenant)], NOW)
    key = res.task.key
    await force_status(store, key, TaskState.PRELOADED)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    out = await store.release([Release(key=key, token=a.fencing_token, dispatched_only=True)], NOW)
    assert out == [Outcome.OK]
    task = await store.get_task(tenant.id, key.id)
    assert (task.status, task.retry_count) == (TaskState.PRELOADED, 0)


async def test_a_drain_release_still_gives_back_a_running_task(
    store: Store, tenant: Tenant
) -> None:
    key, token = await running(store, tenant)
    assert await store.release([Release(key=key, token=token)], NOW) == [Outcome.OK]
    assert (await store.get_task(tenant.id, key.id)).status is TaskState.PRELOADED


async def test_a_retrying_task_is_claimed_only_by_the_retry_horizon(
    store: Store, tenant: Tenant
) -> None:
    """Issue #15 case 4: a RETRYING task waits out its backoff as RETRYING, although its
    retry time is well inside the look-ahead; SCHEDULED tasks are claimed as before."""
    key, token = await running(store, tenant)
    retry_at = NOW + timedelta(seconds=5)
    [f] = await store.fail([Failure(key=key, token=token, error="boom", retry_at=retry_at)], NOW)
    assert f.new_state is TaskState.RETRYING
    [other] = await store.insert_tasks([new_task(tenant, NOW + timedelta(minutes=30))], NOW)
    horizon = NOW + timedelta(minutes=60)
    soon = NOW + timedelta(seconds=1)
    claimed = await store.claim_preload(None, horizon, 10, NOW, soon)
    assert [p.key.id for p in claimed] == [other.task.id]
    assert (await store.get_task(tenant.id, key.id)).status is TaskState.RETRYING
    [p] = await store.claim_preload(None, horizon, 10, NOW, retry_at)
    assert p.key.id == key.id
    trail = [(x.from_state, x.to_state) for x in await store.transitions_of(key.id)][-2:]
    assert trail == [
        (TaskState.RUNNING, TaskState.RETRYING),
        (TaskState.RETRYING, TaskState.PRELOADED),
    ]
