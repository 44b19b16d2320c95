"""Fenced worker writes on SQLite: ack, heartbeat, checkpoint, complete, fail, release and
confirm_cancel (:class:`~scheduler.store.protocol.WriteStore`).

Owns :class:`WorkerWrites`. Each batch is a loop inside one transaction; an item that
misses gets STALE (the task exists) or NOT_FOUND. Calls
:class:`~scheduler.store.sqlite._db.Db`, :mod:`.rows`, :mod:`.audit` and, for workflow
tasks moved to DEAD_LETTER or CANCELLED, :func:`.upstream.apply_upstream` in the same
transaction; inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store.protocol.writes import WriteStore
from scheduler.store.sqlite import rows, upstream
from scheduler.store.sqlite._db import Part
from scheduler.store.sqlite.audit import audit, fail_reason
from scheduler.types import (
    CompleteResult,
    Completion,
    FailResult,
    Failure,
    FencedWrite,
    Outcome,
    Preloaded,
    RawJSON,
    Release,
    TaskKey,
)


def miss(c: sqlite3.Connection, q: Mapping[str, str], key: TaskKey) -> Outcome:
    """Why a fenced write matched nothing: STALE if the task exists, else NOT_FOUND."""
    found = c.execute(q["exists_key"], (str(key.id), rows.us(key.scheduled_at))).fetchone()
    return Outcome.STALE if found else Outcome.NOT_FOUND


def ack_one(
    c: sqlite3.Connection, q: Mapping[str, str], key: TaskKey, token: int, lease: int, at: int
) -> bool:
    """DISPATCHED -> RUNNING of one task under ``token`` at ``at`` (µs) with its audit
    row; whether it applied."""
    row = c.execute(q["ack"], (lease, at, str(key.id), rows.us(key.scheduled_at), token)).fetchone()
    if row is None:
        return False
    audit(
        c,
        q,
        str(key.id),
        rows.us(key.scheduled_at),
        TaskState.DISPATCHED,
        TaskState.RUNNING,
        row["fencing_token"],
        row["worker_id"],
        at,
        reason="acked",
    )
    return True


class WorkerWrites(Part, WriteStore):
    """The writes a worker makes with its fencing token."""

    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING with the current token (a repeated ack is OK)."""
        lease = rows.us(_validate.aware("lease_expires_at", lease_expires_at))
        n = rows.us(_validate.aware("now", now))
        _validate.keys("writes", writes)
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            for w in writes:
                args = (lease, n, str(w.key.id), rows.us(w.key.scheduled_at), w.token)
                if (
                    ack_one(c, q, w.key, w.token, lease, n)
                    or c.execute(q["extend_running"], args).fetchone() is not None
                ):
                    out.append(Outcome.OK)
                else:
                    out.append(miss(c, q, w.key))
            return out

        return await self._db.tx(fn)

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """Extend leases held with the current token."""
        lease = rows.us(_validate.aware("lease_expires_at", lease_expires_at))
        n = rows.us(_validate.aware("now", now))
        _validate.keys("writes", writes)
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            for w in writes:
                row = c.execute(
                    q["heartbeat"], (lease, n, str(w.key.id), rows.us(w.key.scheduled_at), w.token)
                ).fetchone()
                out.append(Outcome.OK if row is not None else miss(c, q, w.key))
            return out

        return await self._db.tx(fn)

    async def checkpoint(
        self, key: TaskKey, token: int, data: dict[str, Any] | RawJSON, now: datetime
    ) -> Outcome:
        """Save a RUNNING task's progress (fenced)."""
        _validate.keys("key", [FencedWrite(key=key, token=token)])
        n = rows.us(_validate.aware("now", now))
        encoded = _validate.json_object("data", data, self.config.payload_limit_bytes)
        q = self._q

        def fn(c: sqlite3.Connection) -> Outcome:
            row = c.execute(
                q["checkpoint"], (encoded, n, str(key.id), rows.us(key.scheduled_at), token)
            ).fetchone()
            return Outcome.OK if row is not None else miss(c, q, key)

        return await self._db.tx(fn)

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        """RUNNING -> COMPLETED, ledger row and DAG decrement in one transaction."""
        n = rows.us(_validate.aware("now", now))
        _validate.keys("items", items)
        for i, item in enumerate(items):
            if item.acked_at is not None:
                _validate.aware(f"items[{i}].acked_at", item.acked_at)
        results = [
            _validate.json_object(
                f"items[{i}].result", c.result, self.config.payload_limit_bytes, optional=True
            )
            for i, c in enumerate(items)
        ]
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> list[CompleteResult]:
            outcomes = []
            ready: list[tuple[Preloaded, list[uuid.UUID]]] = []
            for item, result in zip(items, results, strict=True):
                if item.acked_at is not None:
                    # Its ack first, in the same transaction (DISPATCHED -> RUNNING at
                    # the ack's time); a task RUNNING already completes as it is.
                    ack_one(c, q, item.key, item.token, n, rows.us(item.acked_at))
                row = c.execute(
                    q["complete"],
                    (result, n, str(item.key.id), rows.us(item.key.scheduled_at), item.token),
                ).fetchone()
                if row is None:
                    outcomes.append(miss(c, q, item.key))
                    continue
                outcomes.append(Outcome.OK)
                c.execute(
                    q["ledger"],
                    (
                        row["id"],
                        row["scheduled_at"],
                        row["tenant_id"],
                        row["type"],
                        row["schedule_id"],
                        row["schedule_id"],
                        row["fencing_token"],
                        row["worker_id"],
                        n,
                    ),
                )
                audit(
                    c,
                    q,
                    row["id"],
                    row["scheduled_at"],
                    TaskState.RUNNING,
                    TaskState.COMPLETED,
                    row["fencing_token"],
                    row["worker_id"],
                    n,
                    reason="completed",
                )
                if row["workflow_id"] is None:
                    continue
                for (child,) in c.execute(q["children"], (row["id"],)).fetchall():
                    ch = c.execute(q["decrement_child"], (n, child)).fetchone()
                    if ch is not None and ch["status"] == TaskState.PRELOADED.value:
                        audit(
                            c,
                            q,
                            ch["id"],
                            ch["scheduled_at"],
                            TaskState.SCHEDULED,
                            TaskState.PRELOADED,
                            ch["fencing_token"],
                            actor,
                            n,
                            reason="dependencies met",
                        )
                        ready.append((rows.preloaded(ch), [item.key.id]))
            order = [i.key.id for i, o in zip(items, outcomes, strict=True) if o is Outcome.OK]
            children = _common.assign_children(order, ready)
            return _common.complete_results([i.key for i in items], outcomes, children)

        return await self._db.tx(fn)

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        """RUNNING -> RETRYING, or on to DEAD_LETTER when no attempt remains; a workflow
        task's upstream policy is applied in the same transaction."""
        n = rows.us(_validate.aware("now", now))
        _validate.keys("items", items)
        _validate.failures(items)
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> list[FailResult]:
            out = []
            dead: list[tuple[str, int]] = []
            for f in items:
                retry_at = rows.us(f.retry_at) if f.retry_at is not None else n
                row = c.execute(
                    q["fail"],
                    (
                        int(f.retryable),
                        f.error_type,
                        int(f.retryable),
                        f.error_type,
                        retry_at,
                        n,
                        f.spread,
                        f.error,
                        f.error_type,
                        f.traceback,
                        n,
                        str(f.key.id),
                        rows.us(f.key.scheduled_at),
                        f.token,
                    ),
                ).fetchone()
                if row is None:
                    out.append(FailResult(miss(c, q, f.key)))
                    continue
                state = TaskState(row["status"])
                audit(
                    c,
                    q,
                    str(f.key.id),
                    rows.us(f.key.scheduled_at),
                    TaskState.RUNNING,
                    state,
                    row["fencing_token"],
                    row["worker_id"],
                    n,
                    reason=fail_reason(
                        f.error, f.retryable, row["retry_count"], row["max_retries"], state
                    ),
                )
                if state is TaskState.DEAD_LETTER and row["workflow_id"] is not None:
                    dead.append((str(f.key.id), rows.us(f.key.scheduled_at)))
                out.append(FailResult(Outcome.OK, state))
            if dead:
                upstream.apply_upstream(c, q, dead, n, actor)
            return out

        return await self._db.tx(fn)

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        """RUNNING/DISPATCHED -> PRELOADED (attempt not counted), saving a checkpoint; with
        a cancel pending -> CANCELLED and the upstream policy, in one transaction."""
        n = rows.us(_validate.aware("now", now))
        _validate.keys("items", items)
        cps = [
            _validate.json_object(
                f"items[{i}].checkpoint",
                r.checkpoint,
                self.config.payload_limit_bytes,
                optional=True,
            )
            for i, r in enumerate(items)
        ]
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            gone: list[tuple[str, int]] = []
            for r, cp in zip(items, cps, strict=True):
                key = (str(r.key.id), rows.us(r.key.scheduled_at), r.token)
                # A closed stream's give-back (dispatched_only) never takes a RUNNING task.
                states = (
                    TaskState.DISPATCHED if r.dispatched_only else TaskState.RUNNING,
                    TaskState.DISPATCHED,
                )
                old = c.execute(q["lock_fenced"], (*key, *(s.value for s in states))).fetchone()
                row = c.execute(q["release"], (cp, n, *key)).fetchone() if old is not None else None
                if row is None:
                    out.append(miss(c, q, r.key))
                    continue
                audit(
                    c,
                    q,
                    key[0],
                    key[1],
                    TaskState(old["status"]),
                    TaskState(row["status"]),
                    r.token,
                    old["worker_id"],
                    n,
                    reason=lambda to: "cancelled" if to is TaskState.CANCELLED else "released",
                )
                # A cancel was pending: the task went CANCELLED, not back to PRELOADED.
                if row["status"] == TaskState.CANCELLED and row["workflow_id"] is not None:
                    gone.append((key[0], key[1]))
                out.append(Outcome.OK)
            if gone:
                upstream.apply_upstream(c, q, gone, n, actor)
            return out

        return await self._db.tx(fn)

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING with a cancel pending -> CANCELLED, with the upstream policy of workflow
        tasks in the same transaction."""
        n = rows.us(_validate.aware("now", now))
        _validate.keys("writes", writes)
        actor = self.config.actor
        q = self._q

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            gone: list[tuple[str, int]] = []
            for w in writes:
                row = c.execute(
                    q["confirm_cancel"], (n, str(w.key.id), rows.us(w.key.scheduled_at), w.token)
                ).fetchone()
                if row is None:
                    out.append(miss(c, q, w.key))
                    continue
                audit(
                    c,
                    q,
                    str(w.key.id),
                    rows.us(w.key.scheduled_at),
                    TaskState.RUNNING,
                    TaskState.CANCELLED,
                    row["fencing_token"],
                    row["worker_id"],
                    n,
                    reason="cancelled, worker confirmed",
                )
                if row["workflow_id"] is not None:
                    gone.append((str(w.key.id), rows.us(w.key.scheduled_at)))
                out.append(Outcome.OK)
            if gone:
                upstream.apply_upstream(c, q, gone, n, actor)
            return out

        return await self._db.tx(fn)
