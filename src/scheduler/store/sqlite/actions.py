"""Operator actions on SQLite: cancel, redrive and the repair tool's ``transition``
(:class:`~scheduler.store.protocol.ActionStore`).

Owns :class:`Actions`. Every move is checked against the state machine in code and again
by the SQL guard (``set_status``). Calls :class:`~scheduler.store.sqlite._db.Db`,
:mod:`.rows`, :mod:`.audit` and :func:`.upstream.apply_upstream` (same transaction);
inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping
from datetime import datetime

from scheduler._errors import InvalidTransition, NotFound
from scheduler.states import TaskState, check_transition, sources
from scheduler.store import _validate
from scheduler.store._records import FAILED
from scheduler.store.protocol.actions import ActionStore
from scheduler.store.sqlite import rows, upstream
from scheduler.store.sqlite._db import Part
from scheduler.store.sqlite.audit import audit
from scheduler.types import CancelResult, FencedWrite, TaskKey, TaskRecord


def move(
    c: sqlite3.Connection,
    q: Mapping[str, str],
    row: sqlite3.Row,
    to_state: TaskState,
    n: int,
    actor: str,
    due_at: int | None = None,
    *,
    reason: str,
) -> TaskRecord:
    """Move the task of ``row`` to ``to_state`` (checked in code, then by the guard)."""
    task = rows.task(row)
    check_transition(str(task.id), task.status, to_state)
    guard = json.dumps([s.value for s in sources(to_state)])
    new = c.execute(q["set_status"], (to_state.value, n, due_at, row["id"], guard)).fetchone()
    if new is None:
        raise InvalidTransition(str(task.id), task.status.value, to_state.value, "guard refused")
    audit(
        c,
        q,
        row["id"],
        row["scheduled_at"],
        task.status,
        to_state,
        task.fencing_token,
        actor,
        n,
        reason=reason,
    )
    return rows.task(new)


def find(
    c: sqlite3.Connection, q: Mapping[str, str], tenant_id: uuid.UUID | None, task_id: uuid.UUID
) -> sqlite3.Row:
    """The task's row; NotFound when absent or another tenant's."""
    row: sqlite3.Row | None = c.execute(q["get_task"], (str(task_id),)).fetchone()
    if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
        raise NotFound("task", str(task_id))
    return row


class Actions(Part, ActionStore):
    """Cancel, redrive, transition."""

    async def cancel(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime
    ) -> CancelResult:
        """Immediate from SCHEDULED/PRELOADED/RETRYING; requested from DISPATCHED/RUNNING."""
        n = rows.us(_validate.aware("now", now))
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> CancelResult:
            row = find(c, q, tenant_id, task_id)
            task = rows.task(row)
            if task.status in (TaskState.DISPATCHED, TaskState.RUNNING):
                if task.cancel_requested:
                    return CancelResult(task, task.worker_id)
                new = c.execute(q["request_cancel"], (n, row["id"])).fetchone()
                return CancelResult(rows.task(new), task.worker_id)
            moved = move(c, q, row, TaskState.CANCELLED, n, actor, reason="cancelled")
            if moved.workflow_id is not None:
                upstream.apply_upstream(c, q, [(row["id"], row["scheduled_at"])], n, actor)
            return CancelResult(moved, None)

        return await self._db.tx(fn)

    async def redrive(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime, due_at: datetime
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED, retry_count reset, due at ``due_at``."""
        n = rows.us(_validate.aware("now", now))
        due = rows.us(_validate.aware("due_at", due_at))
        q = self._q

        def fn(c: sqlite3.Connection) -> TaskRecord:
            row = find(c, q, tenant_id, task_id)
            return move(c, q, row, TaskState.SCHEDULED, n, "operator", due, reason="redriven")

        return await self._db.tx(fn)

    async def transition(
        self, key: TaskKey, to_state: TaskState, now: datetime, *, actor: str = "operator"
    ) -> TaskRecord:
        """Operator move to ``to_state``; InvalidTransition (nothing written) if illegal."""
        n = rows.us(_validate.aware("now", now))
        _validate.keys("key", [FencedWrite(key=key, token=0)])
        policy_actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> TaskRecord:
            row = c.execute(
                q["get_task_by_key"], (str(key.id), rows.us(key.scheduled_at))
            ).fetchone()
            if row is None:
                raise NotFound("task", str(key.id))
            moved = move(c, q, row, to_state, n, actor, reason=f"set to {to_state.value}")
            if moved.workflow_id is not None and to_state in FAILED:
                upstream.apply_upstream(c, q, [(row["id"], row["scheduled_at"])], n, policy_actor)
            return moved

        return await self._db.tx(fn)

    async def _guarded_set_status_unchecked(
        self, key: TaskKey, to_state: TaskState, now: datetime
    ) -> bool:
        """The SQL guard alone, without the check in code (for tests of the guard)."""
        guard = json.dumps([s.value for s in sources(to_state)])
        q = self._q

        def fn(c: sqlite3.Connection) -> bool:
            row = c.execute(
                q["set_status"], (to_state.value, rows.us(now), None, str(key.id), guard)
            ).fetchone()
            return row is not None

        return await self._db.tx(fn)
