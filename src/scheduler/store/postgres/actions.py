"""Operator actions on PostgreSQL: cancel, redrive and the repair tool's ``transition``
(:class:`~scheduler.store.protocol.ActionStore`).

Owns :class:`Actions`. Every move locks the row, is checked against the state machine in
code and again by the SQL guard (``set_status``: ``status = ANY(sources(target))``), and
is audited step by step. Calls :class:`~scheduler.store.postgres._db.Db`, :mod:`.rows`
and :func:`.upstream.apply_upstream` (same transaction);
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from scheduler._errors import InvalidTransition, NotFound, TenantMoving
from scheduler.states import TaskState, check_transition, sources
from scheduler.store import _validate
from scheduler.store._records import FAILED
from scheduler.store.postgres import rows, upstream
from scheduler.store.postgres._db import SYSTEM, Part, scope_of
from scheduler.store.protocol.actions import ActionStore
from scheduler.types import CancelResult, FencedWrite, TaskKey, TaskRecord

if TYPE_CHECKING:
    from scheduler.store.postgres._db import Conn


class Actions(Part, ActionStore):
    """Cancel, redrive, transition."""

    async def _locked(
        self,
        conn: Conn,
        tenant_id: uuid.UUID | None,
        task_id: uuid.UUID,
    ) -> TaskRecord:
        row = await conn.fetchrow(self._q["get_task"], task_id)
        if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
            raise NotFound("task", str(task_id))
        locked = await conn.fetchrow(self._q["lock_task"], row["id"], row["scheduled_at"])
        if locked is None:
            raise NotFound("task", str(task_id))
        return rows.task(locked)

    async def _move(
        self,
        conn: Conn,
        task: TaskRecord,
        steps: Sequence[TaskState],
        now: datetime,
        actor: str,
        due_at: datetime | None = None,
        guard: Sequence[TaskState] | None = None,
        *,
        reason: str,
    ) -> TaskRecord:
        """Walk ``task`` through ``steps`` (each checked in code), one guarded UPDATE."""
        current = task.status
        for step in steps:
            check_transition(str(task.id), current, step)
            current = step
        target = steps[-1]
        allowed = (
            guard if guard is not None else sources(target) if len(steps) == 1 else (task.status,)
        )
        row = await conn.fetchrow(
            self._q["set_status"],
            task.id,
            task.scheduled_at,
            target.value,
            [s.value for s in allowed],
            now,
            due_at,
        )
        if row is None:
            raise InvalidTransition(str(task.id), task.status.value, target.value, "guard refused")
        froms = [task.status, *steps[:-1]]
        await self._audit(conn, task, list(zip(froms, steps, strict=True)), now, actor, reason)
        return rows.task(row)

    async def _audit(
        self,
        conn: Conn,
        task: TaskRecord,
        moves: Sequence[tuple[TaskState, TaskState]],
        now: datetime,
        actor: str,
        reason: str,
    ) -> None:
        n = len(moves)
        await conn.execute(
            self._q["audit"],
            [task.id] * n,
            [task.scheduled_at] * n,
            [f.value for f, _ in moves],
            [t.value for _, t in moves],
            [task.fencing_token] * n,
            [actor] * n,
            [now] * n,
            [reason] * n,
        )

    async def cancel(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime
    ) -> CancelResult:
        """Immediate from SCHEDULED/PRELOADED/RETRYING; requested from DISPATCHED/RUNNING."""
        _validate.aware("now", now)
        async with self._db.conn(scope_of(tenant_id), tx=True) as conn:
            task = await self._locked(conn, tenant_id, task_id)
            if task.status in (TaskState.DISPATCHED, TaskState.RUNNING):
                if task.cancel_requested:
                    return CancelResult(task, task.worker_id)
                row = await conn.fetchrow(
                    self._q["request_cancel"], task.id, task.scheduled_at, now
                )
                assert row is not None
                return CancelResult(rows.task(row), task.worker_id)
            moved = await self._move(
                conn, task, [TaskState.CANCELLED], now, self.config.actor, reason="cancelled"
            )
            if moved.workflow_id is not None:
                await upstream.apply_upstream(conn, self._q, [moved.key], now, self.config.actor)
            return CancelResult(moved, None)

    async def redrive(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime, due_at: datetime
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED, retry_count reset, due at ``due_at``."""
        _validate.aware("now", now)
        _validate.aware("due_at", due_at)
        async with self._db.conn(scope_of(tenant_id), tx=True) as conn:
            task = await self._locked(conn, tenant_id, task_id)
            # A tenant whose home is moving away (or moved) gets no live row back here:
            # it would be behind the move's copy (migration 0012; the flip's lock waits
            # for a redrive that checked before the freeze).
            if await conn.fetchval(self._q["moving_tenant"], [task.tenant_id]) is not None:
                raise TenantMoving(str(task.tenant_id))
            return await self._move(
                conn, task, [TaskState.SCHEDULED], now, "operator", due_at, reason="redriven"
            )

    async def transition(
        self, key: TaskKey, to_state: TaskState, now: datetime, *, actor: str = "operator"
    ) -> TaskRecord:
        """Operator move to ``to_state``; InvalidTransition (nothing written) if illegal."""
        _validate.aware("now", now)
        _validate.keys("key", [FencedWrite(key=key, token=0)])
        async with self._db.conn(SYSTEM, tx=True) as conn:
            row = await conn.fetchrow(self._q["lock_task"], key.id, key.scheduled_at)
            if row is None:
                raise NotFound("task", str(key.id))
            moved = await self._move(
                conn, rows.task(row), [to_state], now, actor, reason=f"set to {to_state.value}"
            )
            if moved.workflow_id is not None and to_state in FAILED:
                await upstream.apply_upstream(conn, self._q, [moved.key], now, self.config.actor)
            return moved

    async def _guarded_set_status_unchecked(
        self, key: TaskKey, to_state: TaskState, now: datetime
    ) -> bool:
        """The SQL guard alone, without the check in code (for tests of the guard)."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(
                self._q["set_status"],
                key.id,
                key.scheduled_at,
                to_state.value,
                [s.value for s in sources(to_state)],
                now,
                None,
            )
        return row is not None
