"""A task's audit trail and refused writes, and recent activity, on PostgreSQL
(:class:`~scheduler.store.protocol.HistoryStore`).

Owns :class:`History`: ``transitions_of``, ``record_refused`` (a refused worker write,
one statement, only on refusal), ``refused_writes_of`` and ``activity`` (GetActivity's
buckets from the audit, read through the BRIN index on ``task_transitions.at``). Calls
:class:`~scheduler.store.postgres._db.Db`; inherited by
:class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store.postgres._db import SYSTEM, Part, scope_of
from scheduler.store.protocol.history import HistoryStore
from scheduler.types import ActivityBucket, RefusedWrite, TaskKey, Transition


class History(Part, HistoryStore):
    """The audit trail, refused writes and activity."""

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["transitions_of"], task_id)
        return [
            Transition(TaskState(r[0]), TaskState(r[1]), r[2], r[3], r[4], r[5], r[6], r[7])
            for r in found
        ]

    async def record_refused(self, writes: Sequence[RefusedWrite]) -> None:
        """Append one row per refused write (a task that no longer exists gets none)."""
        if not writes:
            return
        for w in writes:
            _validate.aware("at", w.at)
        async with self._db.conn(SYSTEM) as conn:
            await conn.execute(
                self._q["record_refused"],
                [w.key.id for w in writes],
                [w.key.scheduled_at for w in writes],
                [w.token for w in writes],
                [w.actor for w in writes],
                [w.write for w in writes],
                [w.reason for w in writes],
                writes[0].at,
            )

    async def refused_writes_of(self, key: TaskKey) -> list[RefusedWrite]:
        """The task's refused writes, oldest first (the last 1,000)."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["refused_of"], key.id)
        return [
            RefusedWrite(
                key=key,
                at=r[0],
                token=r[1],
                current_token=r[2],
                actor=r[3],
                write=r[4],
                reason=r[5],
            )
            for r in found
        ]

    async def activity(
        self, tenant_id: uuid.UUID | None, start: datetime, end: datetime, bucket_s: int
    ) -> list[ActivityBucket]:
        """Every bucket of ``bucket_s`` from ``start`` to ``end``, empty ones included."""
        _validate.aware("start", start)
        _validate.aware("end", end)
        async with self._db.conn(scope_of(tenant_id)) as conn:
            last = _common.bucket_count(start, end, bucket_s) - 1
            found = await conn.fetch(
                self._q["activity"], start, end, float(bucket_s), tenant_id, last
            )
        rows = {r[0]: (r[1], r[2], r[3], r[4], r[5]) for r in found}
        return _common.fill_buckets(start, end, bucket_s, rows)
