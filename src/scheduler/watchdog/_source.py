"""What the watchdog reads: expectations, the completion ledger, live and dead-lettered
tasks (the job facts, shared with the stores: :mod:`scheduler.store._facts`), canaries.
Read-only; PostgreSQL (asyncpg) or the SQLite file."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from datetime import datetime, timedelta
from typing import Any, Protocol

import asyncpg

from scheduler.store._facts import EPOCH, JobFacts, pg_job_facts, sqlite_job_facts

_PG = {
    "canary": """
        SELECT (SELECT max(completed_time) FROM canary_executions),
               (SELECT min(scheduled_time) FROM canary_executions),
               l.scheduled_time, l.dispatched_time
        FROM (SELECT 1) one LEFT JOIN LATERAL (
            SELECT scheduled_time, dispatched_time FROM canary_executions
            WHERE dispatched_time IS NOT NULL ORDER BY scheduled_time DESC LIMIT 1) l ON TRUE""",
}

_SQLITE = {
    "canary": """
        SELECT (SELECT max(completed_time) FROM canary_executions),
               (SELECT min(scheduled_time) FROM canary_executions),
               (SELECT scheduled_time FROM canary_executions WHERE dispatched_time IS NOT NULL
                ORDER BY scheduled_time DESC LIMIT 1),
               (SELECT dispatched_time FROM canary_executions WHERE dispatched_time IS NOT NULL
                ORDER BY scheduled_time DESC LIMIT 1)""",
}


@dataclasses.dataclass(frozen=True, slots=True)
class CanaryFacts:
    """The canary ledger: last completion, first canary, latest dispatched one."""

    last_completed: datetime | None
    first_scheduled: datetime | None
    latest_scheduled: datetime | None
    latest_dispatched: datetime | None


class Source(Protocol):
    """Read-only access to the facts."""

    async def jobs(self) -> list[JobFacts]: ...

    async def canary(self) -> CanaryFacts: ...

    async def close(self) -> None: ...


class PostgresSource:
    """Reads PostgreSQL (primary or read replica) through one asyncpg connection."""

    def __init__(self, dsn: str, timeout_s: float = 10.0) -> None:
        self._dsn = dsn
        self._timeout_s = timeout_s
        self._conn: asyncpg.Connection | None = None

    async def _c(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            # Every tenant's facts: the system scope of the row-level security policies
            # (docs/security.md), set for this read-only connection of its own.
            self._conn = await asyncpg.connect(
                self._dsn,
                timeout=self._timeout_s,
                command_timeout=self._timeout_s,
                server_settings={"tickwheel.tenant": "*"},
            )
        return self._conn

    async def jobs(self) -> list[JobFacts]:
        """Every expectation with its facts."""
        return await pg_job_facts(await self._c())

    async def canary(self) -> CanaryFacts:
        """The canary ledger."""
        c = await self._c()
        r = await c.fetchrow(_PG["canary"])
        assert r is not None
        return CanaryFacts(r[0], r[1], r[2], r[3])

    async def close(self) -> None:
        """Close the connection; safe twice."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()


def _dt(us: Any) -> datetime | None:
    return None if us is None else EPOCH + timedelta(microseconds=int(us))


class SqliteSource:
    """Reads the embedded SQLite file (read-only URI) on a worker thread."""

    def __init__(self, path: str) -> None:
        self._path = path

    def _query(self) -> tuple[list[JobFacts], CanaryFacts]:
        conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, timeout=5)
        try:
            jobs = sqlite_job_facts(conn)
            r = conn.execute(_SQLITE["canary"]).fetchone()
            return jobs, CanaryFacts(_dt(r[0]), _dt(r[1]), _dt(r[2]), _dt(r[3]))
        finally:
            conn.close()

    async def jobs(self) -> list[JobFacts]:
        """Every expectation with its facts."""
        return (await asyncio.to_thread(self._query))[0]

    async def canary(self) -> CanaryFacts:
        """The canary ledger."""
        return (await asyncio.to_thread(self._query))[1]

    async def close(self) -> None:
        """Nothing held between checks."""


def open_source(url: str) -> Source:
    """PostgreSQL for ``postgresql://``, SQLite for ``sqlite:///path``."""
    if url.startswith("sqlite:///"):
        return SqliteSource(url[len("sqlite:///") :])
    return PostgresSource(url)
