"""The task protocol (``protocol/tasks.py``): submission and the reads of tasks."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._errors import (
    InvalidArgument,
    NotFound,
)
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Pool,
    TaskFilter,
    Tenant,
)
from tests.support.stores import (
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
    from scheduler.types import NewTask, TaskRecord

    new = {f.name for f in dataclasses.fields(NewTask)} - {"initial_state", "depends_on"}
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
