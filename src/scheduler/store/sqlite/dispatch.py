"""The scheduler's own task moves on SQLite: pre-load, dispatch and lease expiry.

Owns :class:`Dispatch`: ``claim_preload``, ``load_preloaded``, ``mark_dispatched`` and
``reclaim_expired`` (:class:`~scheduler.store.protocol.DispatchStore`). Calls
:class:`~scheduler.store.sqlite._db.Db`, :mod:`.rows`, :mod:`.audit` and, for workflow
tasks that lapse into DEAD_LETTER or CANCELLED, :func:`.upstream.apply_upstream` in the
same transaction; inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime

from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store._records import FAILED
from scheduler.store.protocol.dispatch import DispatchStore
from scheduler.store.sqlite import rows, upstream
from scheduler.store.sqlite._db import Part
from scheduler.store.sqlite.audit import audit, lease_expired
from scheduler.types import (
    Assignment,
    DispatchRequest,
    Held,
    Preloaded,
    PreloadedPage,
    ReclaimResult,
    TaskKey,
)


class Dispatch(Part, DispatchStore):
    """SCHEDULED/RETRYING -> PRELOADED -> DISPATCHED, and back on lease expiry."""

    async def claim_preload(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        now: datetime,
        retry_horizon: datetime | None = None,
    ) -> list[Preloaded]:
        """SCHEDULED due by ``horizon`` and RETRYING due by ``retry_horizon`` (None:
        ``horizon``) -> PRELOADED."""
        h = rows.us(_validate.aware("horizon", horizon))
        rh = h
        if retry_horizon is not None:
            rh = rows.us(_validate.aware("retry_horizon", retry_horizon))
        n = rows.us(_validate.aware("now", now))
        allowed = None if shards is None else set(shards)
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Preloaded]:
            out: list[Preloaded] = []
            for row in c.execute(q["claim_candidates"], (h, rh)).fetchall():
                if len(out) >= limit:
                    break
                if allowed is not None and row["shard_id"] not in allowed:
                    continue
                # The guard again on the write itself (like every other write).
                moved = c.execute(q["claim_preload"], (n, row["id"], h, rh)).fetchone()
                if moved is None:
                    continue
                audit(
                    c,
                    q,
                    row["id"],
                    moved["scheduled_at"],
                    TaskState(row["status"]),
                    TaskState.PRELOADED,
                    moved["fencing_token"],
                    actor,
                    n,
                    reason="retry due" if row["status"] == TaskState.RETRYING else "preloaded",
                )
                out.append(rows.preloaded(moved))
            return out

        return await self._db.tx(fn)

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        """PRELOADED tasks (recovery), keyset-paginated by (scheduled_at, id)."""
        h = rows.us(_validate.aware("horizon", horizon))
        since = (
            None
            if changed_since is None
            else rows.us(_validate.aware("changed_since", changed_since))
        )
        a_t = rows.us(after.scheduled_at) if after else rows.us(_common.FAR_PAST)
        a_id = str(after.id) if after else str(_common.ZERO_UUID)
        allowed = None if shards is None else set(shards)
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Preloaded]:
            out: list[Preloaded] = []
            for row in c.execute(q["load_preloaded"], (h, since, since, a_t, a_t, a_id)):
                if allowed is not None and row["shard_id"] not in allowed:
                    continue
                out.append(rows.preloaded(row))
                if len(out) >= limit:
                    break
            return out

        return await self._db.tx(fn)

    async def load_preloaded_packed(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> PreloadedPage:
        """``load_preloaded``'s page, packed (an embedded node's loads are small)."""
        page = await self.load_preloaded(shards, horizon, limit, after, changed_since)
        return PreloadedPage.of(page)

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | Held | None]:
        """PRELOADED -> DISPATCHED (RUNNING when ``running``) with token + 1; a task with
        a concurrency key only while its key has a free slot, else :class:`Held` (the
        one writer's transaction counts and dispatches alone: exact)."""
        n = rows.us(_validate.aware("now", now))
        _validate.keys("requests", requests)
        _validate.dispatch_requests(requests)
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Assignment | Held | None]:
            out: list[Assignment | Held | None] = []
            for r in requests:
                state = TaskState.RUNNING if r.running else TaskState.DISPATCHED
                args = (
                    state.value,
                    r.worker_id,
                    rows.us(r.lease_expires_at),
                    n,
                    str(r.key.id),
                    rows.us(r.key.scheduled_at),
                    r.epoch,
                    r.epoch,
                )
                row = c.execute(q["mark_dispatched"], (*args, 0)).fetchone()
                if row is None:
                    # Gone, or keyed: a key's slots are counted only then (a file
                    # without keys pays nothing more).
                    keyed = c.execute(q["concurrency_of"], (args[4], args[5])).fetchone()
                    if keyed is not None and keyed["active"] >= keyed["lim"]:
                        out.append(Held(keyed["concurrency_key"], keyed["lim"]))
                        continue
                    if keyed is not None:
                        row = c.execute(q["mark_dispatched"], (*args, 1)).fetchone()
                if row is None:
                    out.append(None)
                    continue
                audit(
                    c,
                    q,
                    row["id"],
                    row["scheduled_at"],
                    TaskState.PRELOADED,
                    state,
                    row["fencing_token"],
                    actor,
                    n,
                    reason="dispatched, started on delivery" if r.running else "dispatched",
                    due_at=row["due_at"],
                )
                out.append(rows.assignment(row))
            return out

        return await self._db.tx(fn)

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry per the state table."""
        n = rows.us(_validate.aware("now", now))
        allowed = None if shards is None else set(shards)
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> ReclaimResult:
            requeued, retrying, dead, cancelled = [], [], [], []
            failed: list[tuple[str, int]] = []
            count = 0
            for old in c.execute(q["expired"], (n,)).fetchall():
                if count >= limit:
                    break
                if allowed is not None and old["shard_id"] not in allowed:
                    continue
                count += 1
                row = c.execute(q["reclaim_one"], (n, n, old["id"])).fetchone()
                status = TaskState(row["status"])
                audit(
                    c,
                    q,
                    row["id"],
                    row["scheduled_at"],
                    TaskState(old["status"]),
                    status,
                    row["fencing_token"],
                    actor,
                    n,
                    reason=lease_expired,
                )
                key = TaskKey(uuid.UUID(row["id"]), rows.dt(row["scheduled_at"]))
                if status is TaskState.PRELOADED:
                    requeued.append(rows.preloaded(row))
                elif status is TaskState.RETRYING:
                    retrying.append(key)
                elif status is TaskState.DEAD_LETTER:
                    dead.append(key)
                else:
                    cancelled.append(key)
                if status in FAILED and row["workflow_id"] is not None:
                    failed.append((row["id"], row["scheduled_at"]))
            if failed:
                upstream.apply_upstream(c, q, failed, n, actor)
            return ReclaimResult(tuple(requeued), tuple(retrying), tuple(dead), tuple(cancelled))

        return await self._db.tx(fn)
