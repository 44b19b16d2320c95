"""The dead man's switch facts of expectations: what the database says about each
expected job (last completion, oldest running attempt, dead letters since).

Owns :class:`JobFacts` and the reads that gather them, on PostgreSQL
(:func:`pg_job_facts`, over any asyncpg connection) and SQLite
(:func:`sqlite_job_facts`). No driver import: used by the watchdog's own read-only
connection (:mod:`scheduler.watchdog`) and by the stores' ``expectation_facts``
(ListExpectations' status), so both judge an expectation from the same facts.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Matching: a schedule expectation matches its schedule id; a job expectation matches
# the ledger's job id (the schedule name) or the task type.
PG_JOBS = {
    "expectations": """
        SELECT id, tenant_id, job_id, interval_s, tolerance_s, schedule_id, max_runtime_s,
            created_at FROM job_expectations
        WHERE $1::uuid IS NULL OR tenant_id = $1 ORDER BY tenant_id, job_id""",
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
}

SQLITE_JOBS = {
    "expectations": """
        SELECT id, tenant_id, job_id, interval_s, tolerance_s, schedule_id, max_runtime_s,
            created_at FROM job_expectations
        WHERE ?1 IS NULL OR tenant_id = ?1 ORDER BY tenant_id, job_id""",
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


class PgConn(Protocol):
    """The two asyncpg calls the PostgreSQL read makes."""

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...


async def pg_job_facts(c: PgConn, tenant_id: uuid.UUID | None = None) -> list[JobFacts]:
    """Every expectation (of ``tenant_id``; None: of every tenant) with its facts."""
    out = []
    for e in await c.fetch(PG_JOBS["expectations"], tenant_id):
        args = (e["tenant_id"], e["schedule_id"], e["job_id"])
        last = await c.fetchval(PG_JOBS["last_completed"], *args)
        running = await c.fetchval(PG_JOBS["oldest_running"], *args)
        dead = await c.fetchval(PG_JOBS["dead_since"], *args, last or EPOCH)
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


def _dt(us: Any) -> datetime | None:
    return None if us is None else EPOCH + timedelta(microseconds=int(us))


def sqlite_job_facts(conn: sqlite3.Connection, tenant_id: str | None = None) -> list[JobFacts]:
    """Every expectation (of ``tenant_id``; None: of every tenant) with its facts."""
    jobs = []
    for e in conn.execute(SQLITE_JOBS["expectations"], (tenant_id,)).fetchall():
        args = (e[1], e[5], e[2])
        (last,) = conn.execute(SQLITE_JOBS["last_completed"], args).fetchone()
        (running,) = conn.execute(SQLITE_JOBS["oldest_running"], args).fetchone()
        (dead,) = conn.execute(SQLITE_JOBS["dead_since"], (*args, last or 0)).fetchone()
        jobs.append(
            JobFacts(
                uuid.UUID(e[1]),
                e[2],
                None if e[5] is None else uuid.UUID(e[5]),
                e[3],
                e[4],
                e[6],
                _dt(e[7]) or EPOCH,
                _dt(last),
                _dt(running),
                int(dead),
            )
        )
    return jobs
