"""A task's audit trail and refused writes, and recent activity, on SQLite
(:class:`~scheduler.store.protocol.HistoryStore`).

Owns :class:`History`: ``transitions_of``, ``record_refused`` (a refused worker write,
only on refusal), ``refused_writes_of`` and ``activity`` (GetActivity's buckets from the
audit, read by the index on ``task_transitions.at``; percentiles ranked here). Calls
:class:`~scheduler.store.sqlite._db.Db` and :mod:`.rows`; inherited by
:class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store.protocol.history import HistoryStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import ActivityBucket, RefusedWrite, TaskKey, Transition


def percentile(ordered: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile of sorted values (PostgreSQL's percentile_cont)."""
    if not ordered:
        return 0.0
    pos = p * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


class History(Part, HistoryStore):
    """The audit trail, refused writes and activity."""

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task."""
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Transition]:
            found = c.execute(q["transitions_of"], (str(task_id),)).fetchall()
            return [
                Transition(
                    TaskState(r[0]),
                    TaskState(r[1]),
                    r[2],
                    r[3],
                    rows.dt(r[4]),
                    None,
                    r[5],
                    rows.opt_dt(r[6]),
                )
                for r in found
            ]

        return await self._db.tx(fn)

    async def record_refused(self, writes: Sequence[RefusedWrite]) -> None:
        """Append one row per refused write (a task that no longer exists gets none)."""
        if not writes:
            return
        args = [
            (
                str(w.key.id),
                rows.us(w.key.scheduled_at),
                rows.us(_validate.aware("at", w.at)),
                w.token,
                w.actor,
                w.write,
                w.reason,
            )
            for w in writes
        ]
        q = self._q

        def fn(c: sqlite3.Connection) -> None:
            c.executemany(q["record_refused"], args)

        await self._db.tx(fn)

    async def refused_writes_of(self, key: TaskKey) -> list[RefusedWrite]:
        """The task's refused writes, oldest first (the last 1,000)."""
        q = self._q

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(q["refused_of"], (str(key.id),)).fetchall()

        return [
            RefusedWrite(
                key=key,
                at=rows.dt(r[0]),
                token=r[1],
                current_token=r[2],
                actor=r[3],
                write=r[4],
                reason=r[5],
            )
            for r in await self._db.tx(fn)
        ]

    async def activity(
        self, tenant_id: uuid.UUID | None, start: datetime, end: datetime, bucket_s: int
    ) -> list[ActivityBucket]:
        """Every bucket of ``bucket_s`` from ``start`` to ``end``, empty ones included."""
        lo = rows.us(_validate.aware("start", start))
        hi = rows.us(_validate.aware("end", end))
        last = _common.bucket_count(start, end, bucket_s) - 1
        args = (lo, hi, None if tenant_id is None else str(tenant_id), bucket_s * 1_000_000, last)
        q = self._q

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(q["activity"], args).fetchall()

        counts: dict[int, list[int]] = {}
        lateness: dict[int, list[float]] = {}
        for b, dispatched, completed, failed, late in await self._db.tx(fn):
            c = counts.setdefault(b, [0, 0, 0])
            if dispatched:
                c[0] += 1
                lateness.setdefault(b, []).append(late / 1e6)
            c[1] += bool(completed)
            c[2] += bool(failed)
        out: dict[int, _common.ActivityRow] = {}
        for b, (d, done, f) in counts.items():
            ordered = sorted(lateness.get(b, []))
            out[b] = (d, done, f, percentile(ordered, 0.5), percentile(ordered, 0.99))
        return _common.fill_buckets(start, end, bucket_s, out)
