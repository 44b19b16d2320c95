"""What a paused node can hold up (issue 42): a node frozen (SIGSTOP, a long GC pause)
or cut off between two statements of a transaction keeps that transaction open, and
with it the row locks of its batch. The node that took its shards then waited, inside
its own dispatch commit, until the frozen one thawed.

Every pooled session now starts with ``idle_in_transaction_session_timeout``: the
server ends the frozen session and its locks go with it, so the successor's dispatch
of those tasks goes through. Here the frozen node is a real session of one store's
pool left inside its transaction with a task's row locked; the successor is a second
store on the same database.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import asyncpg
import pytest

from scheduler.states import TaskState
from scheduler.store import StoreConfig, open_store
from scheduler.types import DispatchRequest, Tenant
from tests.support.stores import NOW, force_status, new_task

IDLE_S = 1.0


@pytest.mark.timeout(60)
async def test_a_frozen_peers_open_transaction_does_not_hold_the_successor(
    pg_dsn: str,
) -> None:
    config = StoreConfig(idle_in_transaction_timeout_s=IDLE_S)
    frozen_node = await open_store(pg_dsn, config=config)
    successor = await open_store(pg_dsn, config=config)
    try:
        tenant = await successor.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
        [res] = await successor.insert_tasks([new_task(tenant)], NOW)
        key = res.task.key
        await force_status(successor, key, TaskState.PRELOADED)
        # The frozen node: inside a transaction of its own pool, the task's row locked
        # (a dispatch commit it had sent), then nothing more: it was stopped.
        pool: asyncpg.Pool = frozen_node._pool  # type: ignore[attr-defined]
        held = await pool.acquire()
        await held.execute("BEGIN; SET LOCAL tickwheel.tenant = '*'")
        await held.execute(
            "UPDATE tasks SET updated_at = updated_at WHERE id = $1 AND scheduled_at = $2",
            key.id,
            key.scheduled_at,
        )
        lease = NOW + timedelta(seconds=30)
        request = DispatchRequest(key=key, worker_id="w-successor", lease_expires_at=lease)
        # Without the bound this waits until the frozen node thaws (here: for ever).
        [a] = await asyncio.wait_for(successor.mark_dispatched([request], NOW), 30)
        assert a is not None
        assert a.worker_id == "w-successor"
        task = await successor.get_task(tenant.id, key.id)
        assert task.status is TaskState.DISPATCHED
        # The frozen node's session was ended by the server, its transaction rolled back.
        with pytest.raises((asyncpg.PostgresError, asyncpg.InterfaceError)):
            await held.execute("COMMIT")
        await pool.release(held)
    finally:
        await frozen_node.close()
        await successor.close()


def test_every_session_starts_with_the_bounds() -> None:
    settings = StoreConfig(idle_in_transaction_timeout_s=2.5, lock_timeout_s=4).session_settings()
    assert settings["idle_in_transaction_session_timeout"] == "2500"
    assert settings["lock_timeout"] == "4000"
    assert settings["tcp_keepalives_idle"] == "5"
