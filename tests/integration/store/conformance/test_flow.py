"""The flow control protocol (``protocol/flow.py``, issue 43): rate limits per (tenant,
key), dispatch pauses, and a task's rate limit key carried to every PRELOADED read."""

from __future__ import annotations

import uuid
from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import ALL_TENANTS, DispatchRequest, Pool, Tenant
from tests.support.stores import LEASE, NOW, force_status, new_task

HORIZON = NOW + timedelta(minutes=60)


async def test_rate_limits_are_set_replaced_listed_and_deleted(
    store: Store, tenant: Tenant
) -> None:
    other = uuid.uuid4()
    a = await store.set_rate_limit(tenant.id, "b-key", 2.5, 3, NOW)
    assert (a.tenant_id, a.key, a.rate, a.burst, a.updated_at) == (tenant.id, "b-key", 2.5, 3, NOW)
    await store.set_rate_limit(tenant.id, "a-key", 100.0, 100, NOW)
    await store.set_rate_limit(other, "a-key", 1.0, 1, NOW)
    later = NOW + timedelta(seconds=5)
    replaced = await store.set_rate_limit(tenant.id, "b-key", 7.0, 9, later)
    assert (replaced.rate, replaced.burst, replaced.updated_at) == (7.0, 9, later)
    mine = await store.list_rate_limits(tenant.id)
    assert [(r.key, r.rate, r.burst) for r in mine] == [("a-key", 100.0, 100), ("b-key", 7.0, 9)]
    assert len(await store.list_rate_limits(None)) == 3
    assert await store.delete_rate_limit(tenant.id, "a-key")
    assert not await store.delete_rate_limit(tenant.id, "a-key")
    assert [r.key for r in await store.list_rate_limits(tenant.id)] == ["b-key"]
    assert [r.tenant_id for r in await store.list_rate_limits(other)] == [other]


async def test_pauses_are_kept_once_listed_per_tenant_and_resumed_exactly(
    store: Store, tenant: Tenant
) -> None:
    first = await store.pause_dispatch(tenant.id, "email.send", None, NOW)
    again = await store.pause_dispatch(tenant.id, "email.send", None, NOW + timedelta(hours=1))
    assert again == first  # kept as it was, its time too
    assert (first.task_type, first.pool, first.paused_at) == ("email.send", None, NOW)
    await store.pause_dispatch(tenant.id, "", Pool.BULK, NOW)
    everyone = await store.pause_dispatch(ALL_TENANTS, "report", None, NOW)
    await store.pause_dispatch(uuid.uuid4(), "x", None, NOW)
    mine = await store.list_dispatch_pauses(tenant.id)
    assert {(p.tenant_id, p.task_type, p.pool) for p in mine} == {
        (tenant.id, "email.send", None),
        (tenant.id, "", Pool.BULK),
        (ALL_TENANTS, "report", None),
    }
    assert everyone.covers(tenant.id, "report", Pool.CRITICAL)
    assert len(await store.list_dispatch_pauses(None)) == 4
    # Only the pause of exactly these fields goes.
    assert not await store.resume_dispatch(tenant.id, "email.send", Pool.STANDARD)
    assert await store.resume_dispatch(tenant.id, "email.send", None)
    assert not await store.resume_dispatch(tenant.id, "email.send", None)
    assert await store.resume_dispatch(tenant.id, "", Pool.BULK)
    assert await store.resume_dispatch(ALL_TENANTS, "report", None)
    assert await store.list_dispatch_pauses(tenant.id) == []


async def test_a_tasks_rate_limit_key_reaches_every_preloaded_read(
    store: Store, tenant: Tenant
) -> None:
    keyed = new_task(tenant, NOW + timedelta(minutes=1), rate_limit_key="partner|api")
    plain = new_task(tenant, NOW + timedelta(minutes=2))
    results = await store.insert_tasks([keyed, plain], NOW)
    assert [r.task.rate_limit_key for r in results] == ["partner|api", ""]
    assert (await store.get_task(tenant.id, keyed.id)).rate_limit_key == "partner|api"
    claimed = await store.claim_preload(None, HORIZON, 10, NOW)
    assert [(p.key.id, p.rate_key) for p in claimed] == [(keyed.id, "partner|api"), (plain.id, "")]
    loaded = await store.load_preloaded(None, HORIZON, 10, None)
    assert [p.rate_key for p in loaded] == ["partner|api", ""]
    page = await store.load_preloaded_packed(None, HORIZON, 10, None)
    assert sorted(p.rate_key for p in page.unpack()) == ["", "partner|api"]


async def test_a_requeued_task_keeps_its_rate_limit_key(store: Store, tenant: Tenant) -> None:
    """A dispatch whose lease lapsed unacked goes back PRELOADED with its key."""
    [res] = await store.insert_tasks([new_task(tenant, rate_limit_key="partner-api")], NOW)
    await force_status(store, res.task.key, TaskState.PRELOADED)
    await store.mark_dispatched(
        [DispatchRequest(key=res.task.key, worker_id="w", lease_expires_at=LEASE)], NOW
    )
    r = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
    assert [(p.key, p.rate_key) for p in r.requeued] == [(res.task.key, "partner-api")]
