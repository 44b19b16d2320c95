"""PostgreSQL schema migrations: numbered files, or ``schema.sql`` on a fresh database.

Owns :func:`migrate` (re-exported as ``scheduler.store.postgres.migrate`` and
``scheduler.store.migrate``). Calls asyncpg, :mod:`scheduler.store._sql` (the migration
files) and :func:`~scheduler.store.postgres._db.driver_errors`; called by the CLI
(``tickwheel migrate``) and the test harness.
"""

from __future__ import annotations

import asyncpg

from scheduler.store import _sql
from scheduler.store.postgres._db import driver_errors

MIGRATIONS_TABLE = "tickwheel_schema_migrations"
MIGRATE_LOCK = 7429000
"""The advisory lock that serialises concurrent ``migrate`` runs."""


async def migrate(dsn: str, *, use_schema_file: bool = True) -> list[int]:
    """Bring the database at ``dsn`` to the newest schema; returns the versions applied.

    Idempotent and safe to run concurrently (an advisory lock serialises runs). A fresh
    database gets ``schema.sql`` and every version recorded (``use_schema_file=False``
    applies the numbered migrations one by one instead, which the test suite compares
    with the fresh install).
    """
    async with driver_errors():
        # The system scope: a migration that moves rows must see all of them (0007).
        conn = await asyncpg.connect(dsn, timeout=30, server_settings={"tickwheel.tenant": "*"})
        try:
            await conn.execute("SELECT pg_advisory_lock($1)", MIGRATE_LOCK)
            try:
                return await _apply(conn, use_schema_file)
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATE_LOCK)
        finally:
            await conn.close()


async def _apply(conn: asyncpg.Connection, use_schema_file: bool) -> list[int]:
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW())"
    )
    done = {r["version"] for r in await conn.fetch(f"SELECT version FROM {MIGRATIONS_TABLE}")}
    steps = _sql.migrations()
    pending = [s for s in steps if s[0] not in done]
    if not pending:
        return []
    fresh = not done and await conn.fetchval("SELECT to_regclass('public.tasks')") is None
    async with conn.transaction():
        if fresh and use_schema_file:
            await conn.execute(_sql.read_text("postgres", "schema.sql"))
        else:
            for _version, _name, text in pending:
                await conn.execute(text)
        await conn.executemany(
            f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES ($1, $2)",
            [(v, n) for v, n, _ in pending],
        )
    return [v for v, _, _ in pending]
