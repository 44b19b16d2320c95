"""Cron schedules, dead man's switch expectations and canary records on PostgreSQL
(:class:`~scheduler.store.protocol.ScheduleStore`).

Owns :class:`Schedules`. Calls :class:`~scheduler.store.postgres._db.Db` and :mod:`.rows`;
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store._facts import JobFacts, pg_job_facts
from scheduler.store.postgres import rows
from scheduler.store.postgres._db import SYSTEM, Part, scope_of
from scheduler.store.protocol.schedules import ScheduleStore
from scheduler.types import Expectation, Schedule


class Schedules(Part, ScheduleStore):
    """Schedules, expectations and canaries."""

    # -- schedules ----------------------------------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists for a duplicate name."""
        s = schedule
        async with self._db.conn(s.tenant_id) as conn:
            row = await conn.fetchrow(
                self._q["insert_schedule"],
                s.id,
                s.tenant_id,
                s.name,
                s.cron_expr,
                s.timezone,
                s.task_type,
                json.dumps(s.payload),
                s.pool.value,
                s.max_retries,
                s.enabled,
                s.next_fire_at,
                s.created_at,
                s.interval_s,
                s.overlap_policy.value,
                s.catchup_window_s,
                s.jitter_s,
                s.timeout_s,
            )
        if row is None:
            raise AlreadyExists("schedule", s.name)
        return rows.schedule(row)

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """One schedule; NotFound for other tenants."""
        async with self._db.conn(scope_of(tenant_id)) as conn:
            row = await conn.fetchrow(self._q["get_schedule"], schedule_id)
        if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
            raise NotFound("schedule", str(schedule_id))
        return rows.schedule(row)

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules."""
        async with self._db.conn(tenant_id) as conn:
            found = await conn.fetch(self._q["list_schedules"], tenant_id)
        return [rows.schedule(r) for r in found]

    async def set_schedule_enabled(
        self,
        tenant_id: uuid.UUID | None,
        schedule_id: uuid.UUID,
        enabled: bool,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> Schedule:
        """Pause or resume."""
        await self.get_schedule(tenant_id, schedule_id)
        async with self._db.conn(scope_of(tenant_id)) as conn:
            row = await conn.fetchrow(
                self._q["set_schedule_enabled"], schedule_id, enabled, next_fire_at, now
            )
        if row is None:
            raise NotFound("schedule", str(schedule_id))
        return rows.schedule(row)

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete the schedule (its tasks stay)."""
        await self.get_schedule(tenant_id, schedule_id)
        async with self._db.conn(scope_of(tenant_id)) as conn:
            await conn.execute(self._q["delete_schedule"], schedule_id)

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Schedules with an occurrence due (or buffered)."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["due_schedules"], now, limit)
        return [rows.schedule(r) for r in found]

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
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(
                self._q["advance_schedule"],
                schedule_id,
                expected_next,
                next_fire_at,
                last_fired_at,
                buffered_at,
                now,
            )
        return row is not None

    async def active_schedule_tasks(
        self, schedule_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, int]:
        """Live tasks per schedule."""
        if not schedule_ids:
            return {}
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["active_schedule_tasks"], list(schedule_ids))
        return {r[0]: r[1] for r in found}

    # -- expectations and canaries ----------------------------------------------------------
    async def register_expectation(self, expectation: Expectation) -> Expectation:
        """Insert or replace by (tenant, job_id)."""
        e = expectation
        async with self._db.conn(e.tenant_id) as conn:
            row = await conn.fetchrow(
                self._q["upsert_expectation"],
                e.id,
                e.tenant_id,
                e.job_id,
                e.interval_s,
                e.tolerance_s,
                e.created_at,
                e.schedule_id,
                e.max_runtime_s,
            )
        assert row is not None
        return rows.expectation(row)

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """Expectations of a tenant (None: all)."""
        async with self._db.conn(scope_of(tenant_id)) as conn:
            found = await conn.fetch(self._q["list_expectations"], tenant_id)
        return [rows.expectation(r) for r in found]

    async def expectation_facts(self, tenant_id: uuid.UUID | None) -> list[JobFacts]:
        """The watchdog's facts of a tenant's expectations (None: all)."""
        async with self._db.conn(scope_of(tenant_id)) as conn:
            return await pg_job_facts(conn, tenant_id)

    async def delete_expectation(self, tenant_id: uuid.UUID, job_id: str) -> bool:
        """Delete the tenant's expectation for ``job_id``; whether there was one."""
        async with self._db.conn(tenant_id) as conn:
            status = await conn.execute(self._q["delete_expectation"], tenant_id, job_id)
        return bool(status.endswith(" 1"))

    async def record_canary(
        self,
        canary_id: uuid.UUID,
        scheduled_at: datetime,
        *,
        dispatched_at: datetime | None = None,
        completed_at: datetime | None = None,
    ) -> bool:
        """Create the canary row if new, then record the times given."""
        async with self._db.conn(SYSTEM) as conn:
            created = await conn.fetchrow(self._q["canary_insert"], canary_id, scheduled_at)
            if dispatched_at is not None or completed_at is not None:
                await conn.execute(self._q["canary_update"], canary_id, dispatched_at, completed_at)
        return created is not None
