"""Flow control at submission (issue 43) in ``insert_tasks``, on every backend:
debounce (a submission joins its key's pending task, or starts a burst), throttle (one
task per period of due time per key) and idempotency windows (a TTL, or until the
key's task finishes)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

from scheduler.ids import uuid7
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Debounce,
    DebouncePayload,
    DispatchRequest,
    FlowOptions,
    IdempotencyScope,
    InsertResult,
    NewTask,
    Tenant,
    Throttle,
)
from tests.support.stores import LEASE, NOW, force_status, new_task, new_tenant

S = TaskState


def _debounced(
    tenant: Tenant,
    at: datetime,
    body: dict[str, Any],
    *,
    key: str = "k",
    period_s: float = 1.0,
    max_delay_s: float = 0.0,
    keep: DebouncePayload = DebouncePayload.LATEST,
) -> NewTask:
    d = Debounce(key=key, period_s=period_s, max_delay_s=max_delay_s, payload=keep)
    task_id = uuid7()
    return new_task(
        tenant,
        at,
        id=task_id,
        idempotency_key=str(task_id),
        due_at=at + timedelta(seconds=period_s),
        payload=body,
        flow=FlowOptions(debounce=d),
    )


async def test_a_burst_keeps_one_task_with_the_latest_payload_due_after_the_last(
    store: Store, tenant: Tenant
) -> None:
    [first] = await store.insert_tasks([_debounced(tenant, NOW, {"n": 0})], NOW)
    assert first.created
    assert not first.debounced
    for n in range(1, 4):
        at = NOW + timedelta(seconds=0.3 * n)
        [r] = await store.insert_tasks([_debounced(tenant, at, {"n": n})], at)
        assert not r.created
        assert r.debounced
        assert r.task.id == first.task.id
    task = await store.get_task(tenant.id, first.task.id)
    assert task.payload == {"n": 3}
    assert task.due_at == NOW + timedelta(seconds=0.9 + 1.0)


async def test_first_payload_and_max_delay(store: Store, tenant: Tenant) -> None:
    def sub(at: datetime, n: int) -> NewTask:
        return _debounced(
            tenant, at, {"n": n}, key="cap", max_delay_s=2.0, keep=DebouncePayload.FIRST
        )

    [first] = await store.insert_tasks([sub(NOW, 0)], NOW)
    at = NOW + timedelta(seconds=1.5)
    [r] = await store.insert_tasks([sub(at, 1)], at)
    assert r.task.id == first.task.id
    task = await store.get_task(tenant.id, first.task.id)
    assert task.payload == {"n": 0}
    assert task.due_at == NOW + timedelta(seconds=2.0)  # capped: first + max_delay


async def test_a_dispatched_task_ends_the_burst(store: Store, tenant: Tenant) -> None:
    [first] = await store.insert_tasks([_debounced(tenant, NOW, {"n": 0}, key="d")], NOW)
    await force_status(store, first.task.key, S.PRELOADED)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=first.task.key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    at = NOW + timedelta(seconds=0.5)
    [r] = await store.insert_tasks([_debounced(tenant, at, {"n": 1}, key="d")], at)
    assert r.created
    assert r.task.id != first.task.id
    # and the new burst is the one a later submission joins
    later = at + timedelta(seconds=0.1)
    [r2] = await store.insert_tasks([_debounced(tenant, later, {"n": 2}, key="d")], later)
    assert r2.debounced
    assert r2.task.id == r.task.id


async def test_keys_are_per_tenant_and_per_key(store: Store, tenant: Tenant) -> None:
    other_tenant = await store.create_tenant(new_tenant("other"))
    [a] = await store.insert_tasks([_debounced(tenant, NOW, {}, key="x")], NOW)
    [b] = await store.insert_tasks([_debounced(tenant, NOW, {}, key="y")], NOW)
    [c] = await store.insert_tasks([_debounced(other_tenant, NOW, {}, key="x")], NOW)
    assert a.created
    assert b.created
    assert c.created
    assert len({a.task.id, b.task.id, c.task.id}) == 3


async def test_concurrent_submissions_make_one_task(store: Store, tenant: Tenant) -> None:
    async def one(n: int) -> InsertResult:
        at = NOW + timedelta(milliseconds=n)
        [r] = await store.insert_tasks([_debounced(tenant, at, {"n": n}, key="c")], at)
        return r

    results = await asyncio.gather(*(one(n) for n in range(40)))
    assert len({r.task.id for r in results}) == 1
    assert sum(r.created for r in results) == 1


def _throttled(tenant: Tenant, due: datetime, *, key: str = "t", period_s: float = 10.0) -> NewTask:
    task_id = uuid7()
    return new_task(
        tenant,
        due,
        id=task_id,
        idempotency_key=str(task_id),
        flow=FlowOptions(throttle=Throttle(key=key, period_s=period_s)),
    )


async def test_throttle_answers_the_period_s_task_until_it_ends(
    store: Store, tenant: Tenant
) -> None:
    [first] = await store.insert_tasks([_throttled(tenant, NOW)], NOW)
    assert first.created
    assert not first.throttled
    inside = NOW + timedelta(seconds=9.999)
    [held] = await store.insert_tasks([_throttled(tenant, inside)], NOW)
    assert not held.created
    assert held.throttled
    assert held.task.id == first.task.id
    [other] = await store.insert_tasks([_throttled(tenant, inside, key="u")], NOW)
    assert other.created  # another key
    after = NOW + timedelta(seconds=10)
    [second] = await store.insert_tasks([_throttled(tenant, after)], NOW)
    assert second.created
    assert second.task.id != first.task.id
    [held2] = await store.insert_tasks([_throttled(tenant, after + timedelta(seconds=1))], NOW)
    assert held2.throttled
    assert held2.task.id == second.task.id


async def test_concurrent_throttled_submissions_make_one_task(store: Store, tenant: Tenant) -> None:
    async def one(n: int) -> InsertResult:
        at = NOW + timedelta(milliseconds=n)
        [r] = await store.insert_tasks([_throttled(tenant, at, key="c")], NOW)
        return r

    results = await asyncio.gather(*(one(n) for n in range(30)))
    assert sum(r.created for r in results) == 1
    assert len({r.task.id for r in results}) == 1


def _keyed(tenant: Tenant, key: str, **flow: Any) -> NewTask:
    return new_task(tenant, NOW, idempotency_key=key, flow=FlowOptions(**flow))


async def test_an_idempotency_key_with_a_ttl_expires(store: Store, tenant: Tenant) -> None:
    [a] = await store.insert_tasks([_keyed(tenant, "ttl", idempotency_ttl_s=60)], NOW)
    soon = NOW + timedelta(seconds=59)
    [b] = await store.insert_tasks([_keyed(tenant, "ttl", idempotency_ttl_s=60)], soon)
    assert a.created
    assert not b.created
    assert b.task.id == a.task.id
    later = NOW + timedelta(seconds=60)
    # A plain resubmission after the window makes a new task too: the key's window is
    # the one it was created with.
    [c] = await store.insert_tasks([new_task(tenant, NOW, idempotency_key="ttl")], later)
    assert c.created
    assert c.task.id != a.task.id
    [d] = await store.insert_tasks([new_task(tenant, NOW, idempotency_key="ttl")], later)
    assert not d.created
    assert d.task.id == c.task.id
    old = await store.get_task(tenant.id, a.task.id)
    assert old.idempotency_key == "ttl"  # the old task keeps its key and its id lookup


async def test_an_idempotency_key_until_finished(store: Store, tenant: Tenant) -> None:
    scope = IdempotencyScope.UNTIL_FINISHED
    [a] = await store.insert_tasks([_keyed(tenant, "uf", idempotency_scope=scope)], NOW)
    [b] = await store.insert_tasks([_keyed(tenant, "uf", idempotency_scope=scope)], NOW)
    assert b.task.id == a.task.id
    assert not b.created
    await store.cancel(tenant.id, a.task.id, NOW)
    [c] = await store.insert_tasks([_keyed(tenant, "uf", idempotency_scope=scope)], NOW)
    assert c.created
    assert c.task.id != a.task.id
    [d] = await store.insert_tasks([_keyed(tenant, "uf", idempotency_scope=scope)], NOW)
    assert not d.created
    assert d.task.id == c.task.id
