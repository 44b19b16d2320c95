"""In a cluster, PRELOADED rows another node wrote for this node's shards reach its wheel.

The periodic reconcile reads only rows changed since the previous one began (less the
clock-skew allowance); every ``full_reconcile_interval_s`` it reads them all. The test
drives ``Engine.reconcile`` directly, so what each pass reads does not depend on timing.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from scheduler.cluster import LocalMembership
from scheduler.engine import Engine, EngineConfig
from scheduler.ids import uuid7
from scheduler.jitter import shard_of
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import NewTask


def _written_elsewhere(tenant: uuid.UUID, engine: Engine) -> NewTask:
    """A task another node inserted straight into PRELOADED (due in 10 minutes)."""
    task_id = uuid7()
    when = engine.now() + timedelta(minutes=10)
    return NewTask(
        id=task_id,
        tenant_id=tenant,
        type="t",
        payload={},
        scheduled_at=when,
        due_at=when,
        idempotency_key=str(task_id),
        shard_id=shard_of(tenant, task_id, engine.config.shard_count),
        initial_state=TaskState.PRELOADED,
    )


async def test_reconcile_reads_recent_changes_and_everything_on_the_full_pass(
    store: Store,
) -> None:
    config = EngineConfig(
        preload_interval_s=0.05, reconcile_interval_s=3600, full_reconcile_interval_s=3600
    )
    engine = Engine(store, config, membership=LocalMembership(config.shard_count, node_id="n1"))
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        await engine.preloader.reconcile()  # a first pass: from now on, passes are incremental
        fresh = _written_elsewhere(tenant, engine)
        stale = _written_elsewhere(tenant, engine)
        await store.insert_tasks([fresh], engine.now())
        # Written (updated_at) an hour ago by its clock: outside the incremental window.
        await store.insert_tasks([stale], engine.now() - timedelta(hours=1))
        assert not engine.in_wheel(fresh.id)

        await engine.preloader.reconcile()
        assert engine.in_wheel(fresh.id)
        assert not engine.in_wheel(stale.id)

        await engine.preloader.reconcile(full=True)
        assert engine.in_wheel(stale.id)
    finally:
        await engine.stop()


def test_reconcile_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="reconcile_skew_s"):
        EngineConfig(reconcile_skew_s=-1)
    with pytest.raises(ValueError, match="full_reconcile_interval_s"):
        EngineConfig(full_reconcile_interval_s=0)
