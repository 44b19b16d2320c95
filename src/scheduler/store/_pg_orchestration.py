"""PostgreSQL side of :class:`~scheduler.store.protocol.workflows.WorkflowStore` and
:class:`~scheduler.store.protocol.schedules.ScheduleStore`.

A mixin of :class:`~scheduler.store.postgres.PostgresStore` (kept apart so the hot-path
module stays about tasks); SQL in ``sql/postgres/orchestration.sql``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store import _common, _sql
from scheduler.store._config import StoreConfig
from scheduler.store._pg_notices import notify_work
from scheduler.types import (
    UPSTREAM_FAILED,
    Expectation,
    OverlapPolicy,
    Pool,
    Schedule,
    TaskKey,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
)

if TYPE_CHECKING:
    Conn = asyncpg.pool.PoolConnectionProxy[asyncpg.Record]

Q = _sql.parse_sections(_sql.read_text("postgres", "orchestration.sql"))
log = logging.getLogger(__name__)


def _workflow(r: asyncpg.Record) -> Workflow:
    return Workflow(
        id=r["id"],
        tenant_id=r["tenant_id"],
        name=r["name"],
        idempotency_key=r["idempotency_key"],
        on_upstream_failure=UpstreamPolicy(r["on_upstream_failure"]),
        node_count=r["node_count"],
        created_at=r["created_at"],
    )


def _schedule(r: asyncpg.Record) -> Schedule:
    return Schedule(
        id=r["id"],
        tenant_id=r["tenant_id"],
        name=r["name"],
        cron_expr=r["cron_expr"],
        interval_s=r["interval_s"],
        timezone=r["timezone"],
        task_type=r["task_type"],
        payload=json.loads(r["payload"]),
        pool=Pool(r["pool"]),
        max_retries=r["max_retries"],
        timeout_s=r["timeout_s"],
        overlap_policy=OverlapPolicy(r["overlap_policy"]),
        catchup_window_s=r["catchup_window_s"],
        jitter_s=r["jitter_s"],
        enabled=r["enabled"],
        next_fire_at=r["next_fire_at"],
        last_fired_at=r["last_fired_at"],
        buffered_at=r["buffered_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


def _expectation(r: asyncpg.Record) -> Expectation:
    return Expectation(
        id=r["id"],
        tenant_id=r["tenant_id"],
        job_id=r["job_id"],
        interval_s=r["interval_s"],
        tolerance_s=r["tolerance_s"],
        schedule_id=r["schedule_id"],
        max_runtime_s=r["max_runtime_s"],
        created_at=r["created_at"],
    )


class PostgresOrchestration:
    """Workflows, schedules, expectations and canaries on PostgreSQL."""

    config: StoreConfig

    def _conn(self) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    # -- workflows ----------------------------------------------------------------------
    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the existing workflow of the same idempotency key."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["insert_workflow"],
                workflow.id,
                workflow.tenant_id,
                workflow.name,
                workflow.idempotency_key,
                workflow.on_upstream_failure.value,
                workflow.node_count,
                workflow.created_at,
            )
            if row is not None:
                return _workflow(row), True
            row = await conn.fetchrow(
                Q["workflow_by_key"], workflow.tenant_id, workflow.idempotency_key
            )
        if row is None:
            raise NotFound("workflow", workflow.idempotency_key)
        return _workflow(row), False

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow, its tasks and edges."""
        from scheduler.store.postgres import _task

        async with self._conn() as conn:
            row = await conn.fetchrow(Q["get_workflow"], workflow_id)
            if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
                raise NotFound("workflow", str(workflow_id))
            tasks = await conn.fetch(Q["workflow_tasks"], workflow_id)
            edges = await conn.fetch(Q["workflow_edges"], workflow_id)
        return WorkflowView(
            _workflow(row), tuple(_task(t) for t in tasks), tuple((e[0], e[1]) for e in edges)
        )

    async def _apply_upstream(self, conn: Conn, keys: Sequence[TaskKey], now: datetime) -> int:
        """Apply the upstream policy of the workflow tasks among ``keys`` that are now
        DEAD_LETTER or CANCELLED, on ``conn`` inside the caller's open transaction (the
        one that moved them). Policy cancel: every waiting descendant -> CANCELLED with
        ``upstream_failed`` (audited); continue: the direct children's counters go down
        and they stay SCHEDULED for the pre-loader. Returns how many were cancelled.

        Callers pass only keys they just moved that carry a ``workflow_id``, so a batch
        without any costs no query.
        """
        if not keys:
            return 0
        lo, hi = _common.bounds(keys)
        rows = await conn.fetch(
            Q["failed_parent_policies"],
            [k.id for k in keys],
            [k.scheduled_at for k in keys],
            lo,
            hi,
        )
        cancel = [r[0] for r in rows if r[2] == UpstreamPolicy.CANCEL.value]
        cont = [r[0] for r in rows if r[2] == UpstreamPolicy.CONTINUE.value]
        cancelled = 0
        if cancel:
            done = await conn.fetch(
                Q["cancel_descendants"], cancel, now, UPSTREAM_FAILED, self.config.actor
            )
            cancelled = len(done)
            if cancelled:
                log.info("cancelled %d descendants (upstream_failed)", cancelled)
        if cont:
            freed = await conn.fetch(Q["resolve_children"], cont, now)
            # At zero they are the pre-loader's; their owner may be another node.
            await notify_work(
                conn,
                {r["shard_id"] for r in freed if r["unresolved_dependencies"] == 0},
                reconcile=False,
            )
        return cancelled

    # -- schedules ----------------------------------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists for a duplicate name."""
        s = schedule
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["insert_schedule"],
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
        return _schedule(row)

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """One schedule; NotFound for other tenants."""
        async with self._conn() as conn:
            row = await conn.fetchrow(Q["get_schedule"], schedule_id)
        if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
            raise NotFound("schedule", str(schedule_id))
        return _schedule(row)

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules."""
        async with self._conn() as conn:
            rows = await conn.fetch(Q["list_schedules"], tenant_id)
        return [_schedule(r) for r in rows]

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
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["set_schedule_enabled"], schedule_id, enabled, next_fire_at, now
            )
        if row is None:
            raise NotFound("schedule", str(schedule_id))
        return _schedule(row)

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete the schedule (its tasks stay)."""
        await self.get_schedule(tenant_id, schedule_id)
        async with self._conn() as conn:
            await conn.execute(Q["delete_schedule"], schedule_id)

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Schedules with an occurrence due (or buffered)."""
        async with self._conn() as conn:
            rows = await conn.fetch(Q["due_schedules"], now, limit)
        return [_schedule(r) for r in rows]

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
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["advance_schedule"],
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
        async with self._conn() as conn:
            rows = await conn.fetch(Q["active_schedule_tasks"], list(schedule_ids))
        return {r[0]: r[1] for r in rows}

    # -- expectations and canaries ----------------------------------------------------------
    async def register_expectation(self, expectation: Expectation) -> Expectation:
        """Insert or replace by (tenant, job_id)."""
        e = expectation
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["upsert_expectation"],
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
        return _expectation(row)

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """Expectations of a tenant (None: all)."""
        async with self._conn() as conn:
            rows = await conn.fetch(Q["list_expectations"], tenant_id)
        return [_expectation(r) for r in rows]

    async def record_canary(
        self,
        canary_id: uuid.UUID,
        scheduled_at: datetime,
        *,
        dispatched_at: datetime | None = None,
        completed_at: datetime | None = None,
    ) -> bool:
        """Create the canary row if new, then record the times given."""
        async with self._conn() as conn:
            created = await conn.fetchrow(Q["canary_insert"], canary_id, scheduled_at)
            if dispatched_at is not None or completed_at is not None:
                await conn.execute(Q["canary_update"], canary_id, dispatched_at, completed_at)
        return created is not None


__all__ = ["PostgresOrchestration"]
