"""Cron schedules, dead man's switch expectations and canary records on SQLite
(:class:`~scheduler.store.protocol.ScheduleStore`).

Owns :class:`Schedules`. Calls :class:`~scheduler.store.sqlite._db.Db` and :mod:`.rows`;
inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store._facts import JobFacts, sqlite_job_facts
from scheduler.store.protocol.schedules import ScheduleStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import Expectation, Schedule


class Schedules(Part, ScheduleStore):
    """Schedules, expectations and canaries; each call one transaction."""

    # -- schedules ----------------------------------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists for a duplicate name."""
        s = schedule
        created = rows.us(s.created_at) if s.created_at else 0

        def fn(c: sqlite3.Connection) -> Schedule:
            row = c.execute(
                self._q["insert_schedule"],
                (
                    str(s.id),
                    str(s.tenant_id),
                    s.name,
                    s.cron_expr,
                    s.timezone,
                    s.task_type,
                    json.dumps(s.payload),
                    s.pool.value,
                    s.max_retries,
                    int(s.enabled),
                    rows.opt_us(s.next_fire_at),
                    created,
                    created,
                    s.interval_s,
                    s.overlap_policy.value,
                    s.catchup_window_s,
                    s.jitter_s,
                    s.timeout_s,
                ),
            ).fetchone()
            if row is None:
                raise AlreadyExists("schedule", s.name)
            return rows.schedule(row)

        return await self._db.tx(fn)

    def _own_schedule(
        self, c: sqlite3.Connection, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID
    ) -> sqlite3.Row:
        row: sqlite3.Row | None = c.execute(self._q["get_schedule"], (str(schedule_id),)).fetchone()
        if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
            raise NotFound("schedule", str(schedule_id))
        return row

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """One schedule; NotFound for other tenants."""
        return await self._db.tx(
            lambda c: rows.schedule(self._own_schedule(c, tenant_id, schedule_id))
        )

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules."""
        return await self._db.tx(
            lambda c: [
                rows.schedule(r) for r in c.execute(self._q["list_schedules"], (str(tenant_id),))
            ]
        )

    async def set_schedule_enabled(
        self,
        tenant_id: uuid.UUID | None,
        schedule_id: uuid.UUID,
        enabled: bool,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> Schedule:
        """Pause or resume."""

        def fn(c: sqlite3.Connection) -> Schedule:
            self._own_schedule(c, tenant_id, schedule_id)
            row = c.execute(
                self._q["set_schedule_enabled"],
                (int(enabled), rows.opt_us(next_fire_at), rows.us(now), str(schedule_id)),
            ).fetchone()
            return rows.schedule(row)

        return await self._db.tx(fn)

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete the schedule (its tasks stay)."""

        def fn(c: sqlite3.Connection) -> None:
            self._own_schedule(c, tenant_id, schedule_id)
            c.execute(self._q["delete_schedule"], (str(schedule_id),))

        await self._db.tx(fn)

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Schedules with an occurrence due (or buffered)."""
        return await self._db.tx(
            lambda c: [
                rows.schedule(r) for r in c.execute(self._q["due_schedules"], (rows.us(now), limit))
            ]
        )

    async def advance_schedule(
        self,
        schedule_id: uuid.UUID,
        expected_next: datetime | None,
        next_fire_at: datetime | None,
        last_fired_at: datetime | None,
        buffered_at: datetime | None,
        now: datetime,
    ) -> bool:
        """Compare-and-set on ``next_fire_at``."""
        args = (
            rows.opt_us(next_fire_at),
            rows.opt_us(last_fired_at),
            rows.opt_us(buffered_at),
            rows.us(now),
            str(schedule_id),
            rows.opt_us(expected_next),
        )
        return await self._db.tx(
            lambda c: c.execute(self._q["advance_schedule"], args).fetchone() is not None
        )

    async def active_schedule_tasks(
        self, schedule_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, int]:
        """Live tasks per schedule."""

        def fn(c: sqlite3.Connection) -> dict[uuid.UUID, int]:
            out = {}
            for sid in schedule_ids:
                (count,) = c.execute(self._q["active_schedule_tasks"], (str(sid),)).fetchone()
                if count:
                    out[sid] = int(count)
            return out

        return await self._db.tx(fn)

    # -- expectations and canaries ----------------------------------------------------------
    async def register_expectation(self, expectation: Expectation) -> Expectation:
        """Insert or replace by (tenant, job_id)."""
        e = expectation
        args = (
            str(e.id),
            str(e.tenant_id),
            e.job_id,
            e.interval_s,
            e.tolerance_s,
            rows.us(e.created_at) if e.created_at else 0,
            None if e.schedule_id is None else str(e.schedule_id),
            e.max_runtime_s,
        )
        return await self._db.tx(
            lambda c: rows.expectation(c.execute(self._q["upsert_expectation"], args).fetchone())
        )

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """Expectations of a tenant (None: all)."""
        t = None if tenant_id is None else str(tenant_id)
        return await self._db.tx(
            lambda c: [rows.expectation(r) for r in c.execute(self._q["list_expectations"], (t, t))]
        )

    async def expectation_facts(self, tenant_id: uuid.UUID | None) -> list[JobFacts]:
        """The watchdog's facts of a tenant's expectations (None: all)."""
        t = None if tenant_id is None else str(tenant_id)
        return await self._db.tx(lambda c: sqlite_job_facts(c, t))

    async def delete_expectation(self, tenant_id: uuid.UUID, job_id: str) -> bool:
        """Delete the tenant's expectation for ``job_id``; whether there was one."""
        q = self._q
        return await self._db.tx(
            lambda c: c.execute(q["delete_expectation"], (str(tenant_id), job_id)).rowcount > 0
        )

    async def record_canary(
        self,
        canary_id: uuid.UUID,
        scheduled_at: datetime,
        *,
        dispatched_at: datetime | None = None,
        completed_at: datetime | None = None,
    ) -> bool:
        """Create the canary row if new, then record the times given."""
        d, done = rows.opt_us(dispatched_at), rows.opt_us(completed_at)

        def fn(c: sqlite3.Connection) -> bool:
            row = c.execute(
                self._q["canary_insert"], (str(canary_id), rows.us(scheduled_at))
            ).fetchone()
            if d is not None or done is not None:
                c.execute(self._q["canary_update"], (d, done, done, d, str(canary_id)))
            return row is not None

        return await self._db.tx(fn)
