"""Schedules over the engine and a real store: occurrences become tasks exactly once,
overlap policies, catch-up after downtime, pause / resume / delete."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from scheduler import AlreadyExists
from scheduler.engine import Engine
from scheduler.engine._schedules import ScheduleSpec
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import OverlapPolicy, TaskFilter, TaskRecord
from tests.support.clock import FakeClock
from tests.support.engine import engine_config, started

# The background pass runs at start and on wake only: the tests drive run_once().
CONFIG = engine_config(schedule_interval_s=3600, schedule_lead_s=0)


@pytest.fixture
async def engine(store: Store, clock: FakeClock) -> AsyncIterator[Engine]:
    async with started(store, CONFIG, clock=clock) as e:
        yield e


@pytest.fixture
async def tenant(engine: Engine) -> uuid.UUID:
    return (await engine.tenancy.create_tenant(name="acme")).id


async def tasks_of(engine: Engine, tenant: uuid.UUID) -> list[TaskRecord]:
    page = await engine.list_tasks(tenant, TaskFilter(type="report"), 1000, "")
    return list(page.tasks)


async def test_each_occurrence_becomes_one_task_even_with_two_nodes(
    engine: Engine, store: Store, tenant: uuid.UUID, clock: FakeClock
) -> None:
    s = await engine.schedules.create(
        tenant,
        ScheduleSpec(
            name="every10s",
            task_type="report",
            cron="*/10 * * * * *",
            overlap_policy=OverlapPolicy.ALLOW,
        ),
    )
    assert s.next_fire_at is not None
    other = Engine(store, CONFIG, clock=clock, node_id="node-2")  # a second node, not started
    for _ in range(3):
        clock.current = s.next_fire_at
        await engine.schedules.run_once()
        await other.schedules.run_once()
        await engine.schedules.run_once()
        s = await engine.schedules.get(tenant, s.id)
    got = await tasks_of(engine, tenant)
    assert len(got) == 3
    assert len({t.scheduled_at for t in got}) == 3
    assert all(t.schedule_id == s.id for t in got)
    assert all(t.idempotency_key.startswith(f"sched:{s.id}:") for t in got)
    assert all(t.scheduled_at.second % 10 == 0 for t in got)


async def test_skip_overlap_and_catch_up_window(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    s = await engine.schedules.create(
        tenant,
        ScheduleSpec(name="minutely", task_type="report", interval_s=60, catchup_window_s=150),
    )
    assert s.next_fire_at is not None
    # The engine's own schedule loop may run an occurrence before this test's
    # run_once() does (a cancel nudges it): count tasks, not run_once()'s return.
    clock.current = s.next_fire_at
    await engine.schedules.run_once()
    assert len(await tasks_of(engine, tenant)) == 1
    # The first task is still live (nobody runs it): the next occurrence is skipped.
    clock.advance(60)
    await engine.schedules.run_once()
    assert len(await tasks_of(engine, tenant)) == 1
    for t in await tasks_of(engine, tenant):
        await engine.cancel(tenant, t.id)
    # Ten minutes of downtime: only occurrences inside the window count, started once.
    clock.advance(600)
    await engine.schedules.run_once()
    await engine.schedules.run_once()
    assert len(await tasks_of(engine, tenant)) == 2
    latest = max(t.scheduled_at for t in await tasks_of(engine, tenant))
    assert clock.current - latest < __import__("datetime").timedelta(seconds=60)
    s = await engine.schedules.get(tenant, s.id)
    assert s.next_fire_at is not None
    assert s.next_fire_at > clock.current


async def test_buffer_one_starts_the_held_occurrence_when_the_live_one_ends(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    s = await engine.schedules.create(
        tenant,
        ScheduleSpec(
            name="buffered",
            task_type="report",
            interval_s=60,
            overlap_policy=OverlapPolicy.BUFFER_ONE,
        ),
    )
    assert s.next_fire_at is not None
    clock.current = s.next_fire_at
    await engine.schedules.run_once()
    clock.advance(60)
    await engine.schedules.run_once()  # held
    clock.advance(60)
    await engine.schedules.run_once()  # dropped: one is already held
    s = await engine.schedules.get(tenant, s.id)
    assert s.buffered_at is not None
    (first,) = await tasks_of(engine, tenant)
    await engine.cancel(tenant, first.id)
    assert await engine.schedules.run_once() == 1
    got = await tasks_of(engine, tenant)
    assert len(got) == 2
    assert (await engine.schedules.get(tenant, s.id)).buffered_at is None


async def test_pause_resume_delete(engine: Engine, tenant: uuid.UUID, clock: FakeClock) -> None:
    spec = ScheduleSpec(
        name="p", task_type="report", interval_s=60, overlap_policy=OverlapPolicy.ALLOW
    )
    s = await engine.schedules.create(tenant, spec)
    with pytest.raises(AlreadyExists):
        await engine.schedules.create(tenant, spec)
    await engine.schedules.pause(tenant, s.id)
    clock.advance(600)
    assert await engine.schedules.run_once() == 0
    resumed = await engine.schedules.resume(tenant, s.id)
    assert resumed.enabled
    assert resumed.next_fire_at is not None
    assert resumed.next_fire_at > clock.current  # no catch-up of the pause
    clock.current = resumed.next_fire_at
    assert await engine.schedules.run_once() == 1
    (task,) = await tasks_of(engine, tenant)
    assert task.status is TaskState.PRELOADED
    await engine.schedules.delete(tenant, s.id)
    assert await engine.schedules.list(tenant) == []
    assert (await engine.store.get_task(tenant, task.id)).schedule_id == s.id
