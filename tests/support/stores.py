"""The one ``store`` fixture (every backend) and the builders of store tests.

- ``store``: a fresh store on SQLite (a file in the test's directory) and on PostgreSQL
  (a database of the test's own, cloned from the migrated template), opened with the
  ``store_config`` fixture (``StoreConfig()`` unless a package overrides it: the store
  package turns the pre-load sweep on for every claim). Registered for every
  integration test by ``tests/integration/conftest.py``; a package that needs a store
  of one backend only (the SQLite-only spill tests) opens its own.
- ``NOW``, :func:`new_task`, :func:`running` (a task dispatched and acked),
  :func:`force_status`, :func:`count_rows` and :func:`system_conn`: set-ups that go
  behind the store's back where a test needs a state the protocol does not make.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler.ids import uuid7
from scheduler.states import TaskState
from scheduler.store import Store, StoreConfig, open_store
from scheduler.store.postgres import PostgresStore
from scheduler.store.sqlite import SqliteStore
from scheduler.types import DispatchRequest, FencedWrite, NewTask, Outcome, TaskKey, Tenant

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
LEASE = NOW + timedelta(seconds=30)
_keys = itertools.count()


@pytest.fixture
def store_config() -> StoreConfig:
    """The config ``store`` opens with (a package's conftest may override it)."""
    return StoreConfig()


@pytest.fixture(params=["sqlite", "postgres"])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, store_config: StoreConfig
) -> AsyncIterator[Store]:
    """A fresh store on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/tickwheel.db"
    else:
        url = request.getfixturevalue("pg_dsn")
    s = await open_store(url, config=store_config)
    try:
        yield s
    finally:
        await s.close()


def new_task(tenant: Tenant, when: datetime = NOW, **kw: Any) -> NewTask:
    """A valid NewTask due at ``when`` (fields overridable)."""
    task_id = kw.pop("id", None) or uuid7()
    fields: dict[str, Any] = {
        "id": task_id,
        "tenant_id": tenant.id,
        "type": "email.send",
        "payload": {"to": "a@example.com"},
        "scheduled_at": when,
        "due_at": when,
        "idempotency_key": f"k-{next(_keys)}",
        "shard_id": 3,
    }
    fields.update(kw)
    return NewTask(**fields)


async def running(store: Store, tenant: Tenant, **kw: object) -> tuple[TaskKey, int]:
    """Insert, pre-load, dispatch (lease :data:`LEASE`, worker ``w1``) and ack one task;
    its (key, token)."""
    [res] = await store.insert_tasks([new_task(tenant, **kw)], NOW)
    key = res.task.key
    await force_status(store, key, TaskState.PRELOADED)
    [a] = await store.mark_dispatched(
        [DispatchRequest(key=key, worker_id="w1", lease_expires_at=LEASE)], NOW
    )
    assert a is not None
    assert await store.ack([FencedWrite(key=key, token=a.fencing_token)], LEASE, NOW) == [
        Outcome.OK
    ]
    return key, a.fencing_token


@contextlib.asynccontextmanager
async def system_conn(store: PostgresStore) -> AsyncIterator[Any]:
    """A pooled connection of the store in a transaction of the system scope (its pool's
    connections see no row outside a scoped transaction: row-level security)."""
    async with store._pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL tickwheel.tenant = '*'")
        yield conn


async def force_status(store: Store, key: TaskKey, state: TaskState, **cols: Any) -> None:
    """Put a task in ``state`` behind the store's back (test set-up only)."""
    if isinstance(store, PostgresStore):
        sets = ", ".join(f"{c} = ${i + 4}" for i, c in enumerate(cols))
        sql = f"UPDATE tasks SET status = $3{', ' + sets if sets else ''}"
        sql += " WHERE id = $1 AND scheduled_at = $2"
        async with system_conn(store) as conn:
            await conn.execute(sql, key.id, key.scheduled_at, state.value, *cols.values())
    else:
        assert isinstance(store, SqliteStore)
        sets = "".join(f", {c} = ?" for c in cols)
        vals = [
            int((v - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))
            if isinstance(v, datetime)
            else v
            for v in cols.values()
        ]
        await store._db.tx(
            lambda c: c.execute(
                f"UPDATE tasks SET status = ?{sets} WHERE id = ?",
                (state.value, *vals, str(key.id)),
            )
        )


async def count_rows(store: Store, table: str) -> int:
    """Rows in a table (ledger checks)."""
    if isinstance(store, PostgresStore):
        async with system_conn(store) as conn:
            return int(await conn.fetchval(f"SELECT count(*) FROM {table}"))
    assert isinstance(store, SqliteStore)
    found = await store._db.tx(lambda c: c.execute(f"SELECT count(*) FROM {table}").fetchone())
    return int(found[0])


def new_tenant(name: str = "acme") -> Tenant:
    """A tenant with an id of its own (to create)."""
    return Tenant(id=uuid.uuid4(), name=name)
