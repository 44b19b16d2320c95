"""The task protocol (``protocol/tasks.py``): submission and the reads of tasks."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler._errors import (
    InvalidArgument,
    NotFound,
)
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
    Pool,
    TaskFilter,
    Tenant,
    Throttle,
)
from tests.support.stores import (
    LEASE,
    NOW,
    force_status,
    new_task,
    new_tenant,
    running,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


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


async def test_count_tasks_groups_by_state_type_and_pool(store: Store, tenant: Tenant) -> None:
    other = await store.create_tenant(new_tenant("other"))
    tasks = [
        new_task(tenant, type="a"),
        new_task(tenant, type="a"),
        new_task(tenant, type="b", pool=Pool.BULK),
        new_task(other, type="a"),
    ]
    await store.insert_tasks(tasks, NOW)
    await store.cancel(None, tasks[0].id, NOW)
    mine = await store.count_tasks(tenant.id, TaskFilter())
    assert (mine.total, mine.truncated) == (3, False)
    assert {(g.tenant_id, g.state, g.type, g.pool, g.count) for g in mine.groups} == {
        (None, S.CANCELLED, "a", Pool.STANDARD, 1),
        (None, S.SCHEDULED, "a", Pool.STANDARD, 1),
        (None, S.SCHEDULED, "b", Pool.BULK, 1),
    }
    only = await store.count_tasks(tenant.id, TaskFilter(statuses=[S.SCHEDULED], type="a"))
    assert only.total == 1
    every = await store.count_tasks(None, TaskFilter(type="a"))
    assert every.total == 3
    assert {g.tenant_id for g in every.groups} == {tenant.id, other.id}


async def test_forecast_counts_tasks_still_to_fire_per_bucket(store: Store, tenant: Tenant) -> None:
    jittered = new_task(tenant, NOW + timedelta(seconds=90), due_at=NOW + timedelta(seconds=150))
    bulk = new_task(tenant, NOW + timedelta(seconds=30), pool=Pool.BULK)
    overdue = new_task(tenant, NOW - timedelta(seconds=30))
    done = new_task(tenant, NOW + timedelta(seconds=30))
    res = await store.insert_tasks([jittered, bulk, overdue, done], NOW - timedelta(hours=1))
    await force_status(store, res[3].task.key, S.COMPLETED)
    f = await store.forecast(tenant.id, NOW, 60, 5, [])
    assert f.firing == {(2, Pool.STANDARD): 1, (0, Pool.BULK): 1}
    assert f.nominal == {(1, Pool.STANDARD): 1, (0, Pool.BULK): 1}
    assert f.overdue == {Pool.STANDARD: 1}
    only_bulk = await store.forecast(None, NOW, 60, 5, [Pool.BULK])
    assert only_bulk.firing == {(0, Pool.BULK): 1}
    with pytest.raises(InvalidArgument):
        await store.forecast(tenant.id, NOW, 7, 5, [])


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


def test_record_fields_cover_new_task() -> None:
    from scheduler.types import TaskRecord

    # flow: a submission's options, kept in the key tables (debounce, throttle,
    # task_keys' window), not on the task's row.
    new = {f.name for f in dataclasses.fields(NewTask)} - {"initial_state", "depends_on", "flow"}
    assert new <= {f.name for f in dataclasses.fields(TaskRecord)}
    assert UTC


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


# -- flow control at submission (issue 43): debounce, throttle, idempotency windows --
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
