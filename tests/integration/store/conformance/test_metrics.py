"""The metrics protocol (``protocol/metrics.py``): ``queue_depth`` and ``replication_lag``
(the ``/metrics`` reads)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.store.postgres import PostgresStore
from scheduler.types import Pool, Tenant
from tests.support.stores import NOW, force_status, new_task


async def test_queue_depth_groups_open_tasks_by_pool_state_and_horizon(
    store: Store, tenant: Tenant
) -> None:
    other = await store.create_tenant(Tenant(id=uuid.uuid4(), name="other"))
    offsets = {
        "due": timedelta(seconds=-10),
        "minute": timedelta(seconds=30),
        "hour": timedelta(minutes=30),
        "later": timedelta(days=2),
    }
    tasks = [new_task(tenant, NOW + d) for d in offsets.values()]
    tasks.append(new_task(other, NOW - timedelta(seconds=5), pool=Pool.BULK))
    finished = new_task(tenant, NOW - timedelta(minutes=5))
    tasks.append(finished)
    inserted = await store.insert_tasks(tasks, NOW - timedelta(hours=1))
    await force_status(store, inserted[-1].task.key, TaskState.COMPLETED)

    rows = await store.queue_depth(NOW)

    by_key = {(r.pool, r.horizon): r for r in rows}
    assert sum(r.count for r in rows) == 5  # the completed one is not open
    for horizon in offsets:
        assert by_key[("standard", horizon)].count == 1
    assert by_key[("standard", "due")].oldest_due == NOW - timedelta(seconds=10)
    assert by_key[("bulk", "due")].count == 1  # every tenant's rows (system scope)
    assert {r.state for r in rows} == {inserted[0].task.status.value}


async def test_replication_lag_is_none_on_sqlite_and_zero_standbys_on_a_lone_primary(
    store: Store,
) -> None:
    lag = await store.replication_lag()
    if isinstance(store, PostgresStore):
        assert lag is not None
        assert (lag.standbys, lag.lag_s, lag.lag_bytes) == (0, 0.0, 0.0)
    else:
        assert lag is None
