"""SQLite side of :class:`~scheduler.store.protocol.workflows.WorkflowStore` and
:class:`~scheduler.store.protocol.schedules.ScheduleStore`.

A mixin of :class:`~scheduler.store.sqlite.SqliteStore`; SQL in
``sql/sqlite/orchestration.sql``. Every method is one transaction on the store's thread.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from scheduler._errors import AlreadyExists, NotFound
from scheduler.states import TaskState
from scheduler.store import _common, _sql
from scheduler.store._config import StoreConfig
from scheduler.types import (
    UPSTREAM_FAILED,
    Expectation,
    OverlapPolicy,
    Pool,
    Schedule,
    UpstreamPolicy,
    Workflow,
    WorkflowView,
)

T = TypeVar("T")
Q = _sql.parse_sections(_sql.read_text("sqlite", "orchestration.sql"))
log = logging.getLogger(__name__)


def _us(t: datetime) -> int:
    return (t - _common.EPOCH) // timedelta(microseconds=1)


def _opt_us(t: datetime | None) -> int | None:
    return None if t is None else _us(t)


def _dt(us: int) -> datetime:
    return _common.EPOCH + timedelta(microseconds=us)


def _opt_dt(us: int | None) -> datetime | None:
    return None if us is None else _dt(us)


def _workflow(r: sqlite3.Row) -> Workflow:
    return Workflow(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        name=r["name"],
        idempotency_key=r["idempotency_key"],
        on_upstream_failure=UpstreamPolicy(r["on_upstream_failure"]),
        node_count=r["node_count"],
        created_at=_dt(r["created_at"]),
    )


def _schedule(r: sqlite3.Row) -> Schedule:
    return Schedule(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        name=r["name"],
        cron_expr=r["cron_expr"],
        interval_s=float(r["interval_s"]),
        timezone=r["timezone"],
        task_type=r["task_type"],
        payload=json.loads(r["payload"]),
        pool=Pool(r["pool"]),
        max_retries=r["max_retries"],
        timeout_s=float(r["timeout_s"]),
        overlap_policy=OverlapPolicy(r["overlap_policy"]),
        catchup_window_s=float(r["catchup_window_s"]),
        jitter_s=float(r["jitter_s"]),
        enabled=bool(r["enabled"]),
        next_fire_at=_opt_dt(r["next_fire_at"]),
        last_fired_at=_opt_dt(r["last_fired_at"]),
        buffered_at=_opt_dt(r["buffered_at"]),
        created_at=_dt(r["created_at"]),
        updated_at=_dt(r["updated_at"]),
    )


def _expectation(r: sqlite3.Row) -> Expectation:
    return Expectation(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        job_id=r["job_id"],
        interval_s=r["interval_s"],
        tolerance_s=r["tolerance_s"],
        schedule_id=None if r["schedule_id"] is None else uuid.UUID(r["schedule_id"]),
        max_runtime_s=r["max_runtime_s"],
        created_at=_dt(r["created_at"]),
    )


class SqliteOrchestration:
    """Workflows, schedules, expectations and canaries on SQLite."""

    config: StoreConfig

    async def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    # -- workflows ----------------------------------------------------------------------
    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the existing workflow of the same idempotency key."""
        w = workflow

        def fn(c: sqlite3.Connection) -> tuple[Workflow, bool]:
            row = c.execute(
                Q["insert_workflow"],
                (
                    str(w.id),
                    str(w.tenant_id),
                    w.name,
                    w.idempotency_key,
                    w.on_upstream_failure.value,
                    w.node_count,
                    _us(w.created_at),
                ),
            ).fetchone()
            if row is not None:
                return _workflow(row), True
            row = c.execute(Q["workflow_by_key"], (str(w.tenant_id), w.idempotency_key)).fetchone()
            if row is None:
                raise NotFound("workflow", w.idempotency_key)
            return _workflow(row), False

        return await self._tx(fn)

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow, its tasks and edges."""
        from scheduler.store.sqlite import _task

        def fn(c: sqlite3.Connection) -> WorkflowView:
            row = c.execute(Q["get_workflow"], (str(workflow_id),)).fetchone()
            if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
                raise NotFound("workflow", str(workflow_id))
            tasks = c.execute(Q["workflow_tasks"], (str(workflow_id),)).fetchall()
            edges = c.execute(Q["workflow_edges"], (str(workflow_id),)).fetchall()
            return WorkflowView(
                _workflow(row),
                tuple(_task(t) for t in tasks),
                tuple((uuid.UUID(e[0]), uuid.UUID(e[1])) for e in edges),
            )

        return await self._tx(fn)

    def _apply_upstream(
        self, c: sqlite3.Connection, keys: Sequence[tuple[str, int]], n: int
    ) -> int:
        """Apply the upstream policy of the workflow tasks among ``keys`` ((id, scheduled_at
        in microseconds)) that are now DEAD_LETTER or CANCELLED, on ``c`` inside the
        caller's transaction (the one that moved them). Policy cancel: every waiting
        descendant -> CANCELLED with ``upstream_failed`` (audited); continue: the direct
        children's counters go down and they stay SCHEDULED for the pre-loader. Returns
        how many were cancelled.

        Callers pass only keys they just moved that carry a ``workflow_id``.
        """
        from scheduler.store.sqlite import Q as TASK_Q
        from scheduler.store.sqlite import _audit

        actor = self.config.actor
        cancelled = 0
        for task_id, sched in dict.fromkeys(keys):
            pol = c.execute(Q["failed_parent_policy"], (task_id, sched)).fetchone()
            if pol is None:
                continue
            if pol[0] == UpstreamPolicy.CONTINUE.value:
                for (child,) in c.execute(TASK_Q["children"], (task_id,)).fetchall():
                    c.execute(Q["resolve_child"], (n, child))
                continue
            frontier = [task_id]
            seen: set[str] = set()
            while frontier:
                parent = frontier.pop()
                for (child,) in c.execute(TASK_Q["children"], (parent,)).fetchall():
                    if child in seen:
                        continue
                    seen.add(child)
                    frontier.append(child)
                    row = c.execute(Q["cancel_waiting"], (UPSTREAM_FAILED, n, child)).fetchone()
                    if row is not None:
                        _audit(
                            c,
                            row[0],
                            row[1],
                            TaskState.SCHEDULED,
                            TaskState.CANCELLED,
                            row[2],
                            actor,
                            n,
                        )
                        cancelled += 1
        if cancelled:
            log.info("cancelled %d descendants (upstream_failed)", cancelled)
        return cancelled

    # -- schedules ----------------------------------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists for a duplicate name."""
        s = schedule
        created = _us(s.created_at) if s.created_at else 0

        def fn(c: sqlite3.Connection) -> Schedule:
            row = c.execute(
                Q["insert_schedule"],
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
                    _opt_us(s.next_fire_at),
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
            return _schedule(row)

        return await self._tx(fn)

    @staticmethod
    def _own_schedule(
        c: sqlite3.Connection, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID
    ) -> sqlite3.Row:
        row: sqlite3.Row | None = c.execute(Q["get_schedule"], (str(schedule_id),)).fetchone()
        if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
            raise NotFound("schedule", str(schedule_id))
        return row

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """One schedule; NotFound for other tenants."""
        return await self._tx(lambda c: _schedule(self._own_schedule(c, tenant_id, schedule_id)))

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules."""
        return await self._tx(
            lambda c: [_schedule(r) for r in c.execute(Q["list_schedules"], (str(tenant_id),))]
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
                Q["set_schedule_enabled"],
                (int(enabled), _opt_us(next_fire_at), _us(now), str(schedule_id)),
            ).fetchone()
            return _schedule(row)

        return await self._tx(fn)

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete the schedule (its tasks stay)."""

        def fn(c: sqlite3.Connection) -> None:
            self._own_schedule(c, tenant_id, schedule_id)
            c.execute(Q["delete_schedule"], (str(schedule_id),))

        await self._tx(fn)

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Schedules with an occurrence due (or buffered)."""
        return await self._tx(
            lambda c: [_schedule(r) for r in c.execute(Q["due_schedules"], (_us(now), limit))]
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
            _opt_us(next_fire_at),
            _opt_us(last_fired_at),
            _opt_us(buffered_at),
            _us(now),
            str(schedule_id),
            _opt_us(expected_next),
        )
        return await self._tx(
            lambda c: c.execute(Q["advance_schedule"], args).fetchone() is not None
        )

    async def active_schedule_tasks(
        self, schedule_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, int]:
        """Live tasks per schedule."""

        def fn(c: sqlite3.Connection) -> dict[uuid.UUID, int]:
            out = {}
            for sid in schedule_ids:
                (count,) = c.execute(Q["active_schedule_tasks"], (str(sid),)).fetchone()
                if count:
                    out[sid] = int(count)
            return out

        return await self._tx(fn)

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
            _us(e.created_at) if e.created_at else 0,
            None if e.schedule_id is None else str(e.schedule_id),
            e.max_runtime_s,
        )
        return await self._tx(
            lambda c: _expectation(c.execute(Q["upsert_expectation"], args).fetchone())
        )

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """Expectations of a tenant (None: all)."""
        t = None if tenant_id is None else str(tenant_id)
        return await self._tx(
            lambda c: [_expectation(r) for r in c.execute(Q["list_expectations"], (t, t))]
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
        d, done = _opt_us(dispatched_at), _opt_us(completed_at)

        def fn(c: sqlite3.Connection) -> bool:
            row = c.execute(Q["canary_insert"], (str(canary_id), _us(scheduled_at))).fetchone()
            if d is not None or done is not None:
                c.execute(Q["canary_update"], (d, done, done, d, str(canary_id)))
            return row is not None

        return await self._tx(fn)


__all__ = ["SqliteOrchestration"]
