"""What the watchdog reads: expectations, the completion ledger, live and dead-lettered
tasks, canaries. Its own small SQL, read-only; PostgreSQL (asyncpg) or the SQLite file."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import asyncpg

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Matching: a schedule expectation matches its schedule id; a job expectation matches
# the ledger's job id (the schedule name) or the task type.
_PG = {
    "expectations": """
        SELECT id, tenant_id, job_id, interval_s, tolerance_s, schedule_id, max_runtime_s,
            created_at FROM job_expectations ORDER BY tenant_id, job_id""",
    "last_completed": """
        SELECT max(completed_at) FROM task_completions
        WHERE tenant_id = $1 AND (CASE WHEN $2::uuid IS NOT NULL THEN schedule_id = $2
                                       ELSE job_id = $3 OR type = $3 END)""",
    "oldest_running": """
        SELECT min((SELECT max(x.at) FROM task_transitions x
                    WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED'))
        FROM tasks t
        WHERE t.tenant_id = $1 AND t.status IN ('DISPATCHED', 'RUNNING')
          AND (CASE WHEN $2::uuid IS NOT NULL THEN t.schedule_id = $2 ELSE t.type = $3 END)""",
    "dead_since": """
        SELECT count(*) FROM tasks t
        WHERE t.tenant_id = $1 AND t.status = 'DEAD_LETTER' AND t.updated_at > $4
          AND (CASE WHEN $2::uuid IS NOT NULL THEN t.schedule_id = $2 ELSE t.type = $3 END)""",
    "canary": """
        SELECT (SELECT max(completed_time) FROM canary_executions),
               (SELECT min(scheduled_time) FROM canary_executions),
               l.scheduled_time, l.dispatched_time
        FROM (SELECT 1) one LEFT JOIN LATERAL (
            SELECT scheduled_time, dispatched_time FROM canary_executions
            WHERE dispatched_time IS NOT NULL ORDER BY scheduled_time DESC LIMIT 1) l ON TRUE""",
}

_SQLITE = {
    "expectations": """
        SELECT id, tenant_id, job_id, interval_s, tolerance_s, schedule_id, max_runtime_s,
            created_at FROM job_expectations ORDER BY tenant_id, job_id""",
    "last_completed": """
        SELECT max(completed_at) FROM task_completions
        WHERE tenant_id = ?1 AND (CASE WHEN ?2 IS NOT NULL THEN schedule_id = ?2
                                       ELSE job_id = ?3 OR type = ?3 END)""",
    "oldest_running": """
        SELECT min((SELECT max(x.at) FROM task_transitions x
                    WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED'))
        FROM tasks t
        WHERE t.tenant_id = ?1 AND t.status IN ('DISPATCHED', 'RUNNING')
          AND (CASE WHEN ?2 IS NOT NULL THEN t.schedule_id = ?2 ELSE t.type = ?3 END)""",
    "dead_since": """
        SELECT count(*) FROM tasks t
        WHERE t.tenant_id = ?1 AND t.status = 'DEAD_LETTER' AND t.updated_at > ?4
          AND (CASE WHEN ?2 IS NOT NULL THEN t.schedule_id = ?2 ELSE t.type = ?3 END)""",
    "canary": """
        SELECT (SELECT max(completed_time) FROM canary_executions),
               (SELECT min(scheduled_time) FROM canary_executions),
               (SELECT scheduled_time FROM canary_executions WHERE dispatched_time IS NOT NULL
                ORDER BY scheduled_time DESC LIMIT 1),
               (SELECT dispatched_time FROM canary_executions WHERE dispatched_time IS NOT NULL
                ORDER BY scheduled_time DESC LIMIT 1)""",
}


@dataclasses.dataclass(frozen=True, slots=True)
class JobFacts:
    """One expectation and what the database says about its job."""

    tenant_id: uuid.UUID
    job_id: str
    schedule_id: uuid.UUID | None
    interval_s: int
    tolerance_s: int
    max_runtime_s: int | None
    registered_at: datetime
    last_completed: datetime | None
    oldest_running_since: datetime | None
    dead_lettered_since_completion: int


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
        c = await self._c()
        out = []
        for e in await c.fetch(_PG["expectations"]):
            args = (e["tenant_id"], e["schedule_id"], e["job_id"])
            last = await c.fetchval(_PG["last_completed"], *args)
            running = await c.fetchval(_PG["oldest_running"], *args)
            dead = await c.fetchval(_PG["dead_since"], *args, last or _EPOCH)
            out.append(
                JobFacts(
                    e["tenant_id"],
                    e["job_id"],
                    e["schedule_id"],
                    e["interval_s"],
                    e["tolerance_s"],
                    e["max_runtime_s"],
                    e["created_at"],
                    last,
                    running,
                    int(dead),
                )
            )
        return out

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
    return None if us is None else _EPOCH + timedelta(microseconds=int(us))


class SqliteSource:
    """Reads the embedded SQLite file (read-only URI) on a worker thread."""

    def __init__(self, path: str) -> None:
        self._path = path

    def _query(self) -> tuple[list[JobFacts], CanaryFacts]:
        conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True, timeout=5)
        try:
            jobs = []
            for e in conn.execute(_SQLITE["expectations"]).fetchall():
                args = (e[1], e[5], e[2])
                (last,) = conn.execute(_SQLITE["last_completed"], args).fetchone()
                (running,) = conn.execute(_SQLITE["oldest_running"], args).fetchone()
                (dead,) = conn.execute(_SQLITE["dead_since"], (*args, last or 0)).fetchone()
                jobs.append(
                    JobFacts(
                        uuid.UUID(e[1]),
                        e[2],
                        None if e[5] is None else uuid.UUID(e[5]),
                        e[3],
                        e[4],
                        e[6],
                        _dt(e[7]) or _EPOCH,
                        _dt(last),
                        _dt(running),
                        int(dead),
                    )
                )
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
