"""The schedule protocol (``protocol/schedules.py``): schedules, expectations, canaries."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest

from scheduler._errors import (
    AlreadyExists,
    NotFound,
)
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Expectation,
    Pool,
    Schedule,
    Tenant,
)
from tests.support.stores import (
    NOW,
    count_rows,
    new_task,
    new_tenant,
)

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


def _schedule(tenant: Tenant, name: str = "hourly", **kw: object) -> Schedule:
    fields: dict[str, object] = {
        "id": uuid.uuid4(),
        "tenant_id": tenant.id,
        "name": name,
        "cron_expr": "0 * * * *",
        "interval_s": 0.0,
        "timezone": "UTC",
        "task_type": "report",
        "payload": {"n": 1},
        "pool": Pool.STANDARD,
        "next_fire_at": NOW,
        "created_at": NOW - timedelta(hours=1),
    }
    fields.update(kw)
    return Schedule(**fields)  # type: ignore[arg-type]


async def test_schedules_are_made_read_listed_and_deleted(store: Store, tenant: Tenant) -> None:
    s = await store.create_schedule(_schedule(tenant))
    assert (s.name, s.cron_expr, s.payload, s.enabled, s.next_fire_at) == (
        "hourly",
        "0 * * * *",
        {"n": 1},
        True,
        NOW,
    )
    with pytest.raises(AlreadyExists):
        await store.create_schedule(_schedule(tenant))
    assert await store.get_schedule(tenant.id, s.id) == s
    assert await store.get_schedule(None, s.id) == s
    with pytest.raises(NotFound):
        await store.get_schedule(uuid.uuid4(), s.id)
    b = await store.create_schedule(_schedule(tenant, "b-daily"))
    assert [x.id for x in await store.list_schedules(tenant.id)] == [b.id, s.id]
    with pytest.raises(NotFound):
        await store.delete_schedule(uuid.uuid4(), s.id)
    await store.delete_schedule(tenant.id, s.id)
    assert [x.id for x in await store.list_schedules(tenant.id)] == [b.id]
    with pytest.raises(NotFound):
        await store.get_schedule(tenant.id, s.id)


async def test_pause_resume_due_and_advance(store: Store, tenant: Tenant) -> None:
    s = await store.create_schedule(_schedule(tenant))
    later = await store.create_schedule(
        _schedule(tenant, "later", next_fire_at=NOW + timedelta(hours=1))
    )
    assert [x.id for x in await store.due_schedules(NOW, 10)] == [s.id]
    paused = await store.set_schedule_enabled(tenant.id, s.id, False, None, NOW)
    assert not paused.enabled
    assert await store.due_schedules(NOW, 10) == []
    resumed = await store.set_schedule_enabled(tenant.id, s.id, True, NOW, NOW)
    assert (resumed.enabled, resumed.next_fire_at) == (True, NOW)
    with pytest.raises(NotFound):
        await store.set_schedule_enabled(uuid.uuid4(), s.id, False, None, NOW)
    nxt = NOW + timedelta(hours=1)
    # Compare-and-set: only from the next firing the caller read.
    assert not await store.advance_schedule(s.id, NOW - timedelta(hours=1), nxt, NOW, None, NOW)
    assert await store.advance_schedule(s.id, NOW, nxt, NOW, None, NOW)
    moved = await store.get_schedule(tenant.id, s.id)
    assert (moved.next_fire_at, moved.last_fired_at) == (nxt, NOW)
    assert await store.due_schedules(NOW, 10) == []
    assert {x.id for x in await store.due_schedules(nxt, 10)} == {s.id, later.id}


async def test_active_schedule_tasks_counts_live_tasks(store: Store, tenant: Tenant) -> None:
    s = await store.create_schedule(_schedule(tenant))
    idle = await store.create_schedule(_schedule(tenant, "idle"))
    tasks = [new_task(tenant, schedule_id=s.id) for _ in range(3)]
    await store.insert_tasks(tasks, NOW)
    await store.cancel(None, tasks[0].id, NOW)
    active = await store.active_schedule_tasks([s.id, idle.id])
    assert active[s.id] == 2
    assert active.get(idle.id, 0) == 0
    assert await store.active_schedule_tasks([]) == {}


async def test_expectations_and_their_facts(store: Store, tenant: Tenant) -> None:
    e = Expectation(
        id=uuid.uuid4(),
        tenant_id=tenant.id,
        job_id="backup",
        interval_s=3600,
        tolerance_s=300,
        created_at=NOW,
    )
    got = await store.register_expectation(e)
    assert (got.job_id, got.interval_s, got.tolerance_s) == ("backup", 3600, 300)
    replaced = await store.register_expectation(
        dataclasses.replace(e, id=uuid.uuid4(), tolerance_s=60)
    )
    assert replaced.tolerance_s == 60
    assert [x.tolerance_s for x in await store.list_expectations(tenant.id)] == [60]
    other = await store.create_tenant(new_tenant("other"))
    await store.register_expectation(
        Expectation(
            id=uuid.uuid4(),
            tenant_id=other.id,
            job_id="sync",
            interval_s=60,
            tolerance_s=10,
            created_at=NOW,
        )
    )
    assert {x.job_id for x in await store.list_expectations(None)} == {"backup", "sync"}
    await store.insert_tasks([new_task(tenant, type="backup")], NOW)
    [facts] = await store.expectation_facts(tenant.id)
    assert (facts.job_id, facts.interval_s, facts.tolerance_s, facts.last_completed) == (
        "backup",
        3600,
        60,
        None,
    )
    assert len(await store.expectation_facts(None)) == 2
    assert await store.delete_expectation(tenant.id, "backup")
    assert not await store.delete_expectation(tenant.id, "backup")
    assert await store.list_expectations(tenant.id) == []


async def test_record_canary_creates_once_then_records_times(store: Store) -> None:
    canary = uuid.uuid4()
    assert await store.record_canary(canary, NOW)
    assert not await store.record_canary(canary, NOW, dispatched_at=NOW + timedelta(seconds=1))
    assert not await store.record_canary(canary, NOW, completed_at=NOW + timedelta(seconds=2))
    assert await count_rows(store, "canary_executions") == 1
