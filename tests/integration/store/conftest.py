"""Fixtures of the store conformance suite: every test runs on PostgreSQL and SQLite."""

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
from scheduler.types import NewTask, TaskKey, Tenant

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
_keys = itertools.count()


@pytest.fixture(params=["postgres", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL per backend (sync: the PostgreSQL template is made with asyncio.run)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_dsn"))
    return f"sqlite:///{tmp_path / 'tw.db'}"


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    """The store under test, on each backend."""
    s = await open_store(store_url, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def tenant(store: Store) -> Tenant:
    """A tenant of this test's own."""
    return await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))


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
