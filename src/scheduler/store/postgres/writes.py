"""Fenced worker writes on PostgreSQL: ack, heartbeat, checkpoint, complete, fail,
release and confirm_cancel (:class:`~scheduler.store.protocol.WriteStore`).

Owns :class:`WorkerWrites` and :func:`outcomes` (OK, or STALE / NOT_FOUND for an item
whose ``(id, token)`` did not match: one extra query only when something missed). Every
batch is one ``UPDATE … FROM unnest`` guarded by token, status and the batch's
``scheduled_at`` bounds. Calls :class:`~scheduler.store.postgres._db.Db`, :mod:`.rows`,
:mod:`.notices` (children released by a completion) and, for workflow tasks moved to
DEAD_LETTER or CANCELLED, :func:`.upstream.apply_upstream` in the same transaction;
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store.postgres import rows, upstream
from scheduler.store.postgres._db import GENERIC_BELOW, SYSTEM, Part, column, uniform
from scheduler.store.postgres.notices import notify_work
from scheduler.store.protocol.writes import WriteStore
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

if TYPE_CHECKING:
    from scheduler.store.postgres._db import Conn


async def outcomes(
    conn: Conn,
    q: Mapping[str, str],
    keys: Sequence[TaskKey],
    tokens: Sequence[int],
    ok: set[tuple[uuid.UUID, int]],
) -> list[Outcome]:
    """OK where (id, token) matched; else STALE if the task exists, else NOT_FOUND."""
    missed = [k for k, t in zip(keys, tokens, strict=True) if (k.id, t) not in ok]
    exists: set[uuid.UUID] = set()
    if missed:
        lo, hi = _common.bounds(missed)
        found = await conn.fetch(
            q["existing_keys"], [k.id for k in missed], [k.scheduled_at for k in missed], lo, hi
        )
        exists = {r[0] for r in found}
    return [
        Outcome.OK if (k.id, t) in ok else Outcome.STALE if k.id in exists else Outcome.NOT_FOUND
        for k, t in zip(keys, tokens, strict=True)
    ]


class WorkerWrites(Part, WriteStore):
    """The writes a worker makes with its fencing token."""

    async def _fenced(
        self, name: str, writes: Sequence[FencedWrite], lease: datetime, now: datetime
    ) -> list[Outcome]:
        _validate.aware("lease_expires_at", lease)
        _validate.aware("now", now)
        if not writes:
            return []
        _validate.keys("writes", writes)
        keys = [w.key for w in writes]
        lo, hi = _common.bounds(keys)
        ids = [k.id for k in keys]
        times = [k.scheduled_at for k in keys]
        tokens = [w.token for w in writes]
        small = len(writes) < GENERIC_BELOW
        async with self._db.conn(SYSTEM, by_key=True, generic=small) as conn:
            if name == "ack":
                found = await conn.fetch(self._q["ack"], ids, times, tokens, lease, now, lo, hi)
                ok: set[tuple[uuid.UUID, int]] = {(r[0], r[1]) for r in found}
                states = [TaskState.RUNNING.value]  # a repeated ack is OK
            else:
                ok = set()
                states = [TaskState.DISPATCHED.value, TaskState.RUNNING.value]
            rest = [w for w in writes if (w.key.id, w.token) not in ok]
            if rest:
                found = await conn.fetch(
                    self._q["heartbeat"],
                    [w.key.id for w in rest],
                    [w.key.scheduled_at for w in rest],
                    [w.token for w in rest],
                    lease,
                    now,
                    *_common.bounds([w.key for w in rest]),
                    states,
                )
                ok |= {(r[0], r[1]) for r in found}
            return await outcomes(conn, self._q, keys, tokens, ok)

    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING with the current token."""
        return await self._fenced("ack", writes, lease_expires_at, now)

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """Extend leases held with the current token."""
        return await self._fenced("heartbeat", writes, lease_expires_at, now)

    async def checkpoint(
        self, key: TaskKey, token: int, data: dict[str, Any] | RawJSON, now: datetime
    ) -> Outcome:
        """Save a RUNNING task's progress (fenced)."""
        _validate.keys("key", [FencedWrite(key=key, token=token)])
        _validate.aware("now", now)
        encoded = _validate.json_object("data", data, self.config.payload_limit_bytes)
        async with self._db.conn(SYSTEM, by_key=True) as conn:
            row = await conn.fetchval(
                self._q["checkpoint"], key.id, key.scheduled_at, token, encoded, now
            )
            if row is not None:
                return Outcome.OK
            return (await outcomes(conn, self._q, [key], [token], set()))[0]

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        """RUNNING -> COMPLETED, ledger row and DAG decrement in one transaction; an item
        with ``acked_at`` writes its task's ack too (DISPATCHED -> RUNNING -> COMPLETED)."""
        _validate.aware("now", now)
        if not items:
            return []
        _validate.keys("items", items)
        limit = self.config.payload_limit_bytes
        results = [
            None
            if c.result is None
            else _validate.json_object(f"items[{i}].result", c.result, limit)
            for i, c in enumerate(items)
        ]
        keys = [c.key for c in items]
        lo, hi = _common.bounds(keys)
        acked = [c.acked_at for c in items]
        for i, a in enumerate(acked):
            if a is not None:
                _validate.aware(f"items[{i}].acked_at", a)
        async with self._db.conn(
            SYSTEM, tx=True, by_key=True, generic=len(items) < GENERIC_BELOW
        ) as conn:
            found = await conn.fetch(
                self._q["complete"],
                [k.id for k in keys],
                uniform([k.scheduled_at for k in keys]),
                [c.token for c in items],
                column(results),
                now,
                lo,
                hi,
                column(acked),
            )
            ok = {(r[0], r[1]) for r in found}
            if len(found) < len(items) and any(a is not None for a in acked):
                # A completion carrying its ack found its task RUNNING already (the ack
                # was written by another way meanwhile): completed as a plain one.
                again = [
                    i
                    for i, c in enumerate(items)
                    if c.acked_at is not None and (c.key.id, c.token) not in ok
                ]
                if again:
                    more = await conn.fetch(
                        self._q["complete"],
                        [keys[i].id for i in again],
                        [keys[i].scheduled_at for i in again],
                        [items[i].token for i in again],
                        [results[i] for i in again],
                        now,
                        *_common.bounds([keys[i] for i in again]),
                        [None] * len(again),
                    )
                    ok |= {(r[0], r[1]) for r in more}
                    found = [*found, *more]
            parents = [r[0] for r in found if r["workflow_id"] is not None]
            children: dict[uuid.UUID, list[Preloaded]] = {}
            if parents:
                ready = await conn.fetch(
                    self._q["release_children"], parents, now, self.config.actor
                )
                await notify_work(conn, {r["shard_id"] for r in ready}, reconcile=True)
                order = [r[0] for r in found]
                children = _common.assign_children(
                    order, [(rows.preloaded(r), r["parents"]) for r in ready]
                )
            outs = await outcomes(conn, self._q, keys, [c.token for c in items], ok)
        return _common.complete_results(keys, outs, children)

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        """RUNNING -> RETRYING, or on to DEAD_LETTER when no attempt remains; a workflow
        task's upstream policy is applied in the same transaction."""
        _validate.aware("now", now)
        if not items:
            return []
        _validate.keys("items", items)
        _validate.failures(items)
        keys = [f.key for f in items]
        lo, hi = _common.bounds(keys)
        async with self._db.conn(
            SYSTEM, tx=True, by_key=True, generic=len(items) < GENERIC_BELOW
        ) as conn:
            found = await conn.fetch(
                self._q["fail"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [f.token for f in items],
                [f.error for f in items],
                [f.retryable for f in items],
                [f.retry_at for f in items],
                now,
                lo,
                hi,
                [f.error_type for f in items],
                [f.spread for f in items],
                [f.traceback for f in items],
            )
            state = {r[0]: TaskState(r[2]) for r in found}
            dead = [r for r in found if r["status"] == TaskState.DEAD_LETTER]
            if wf := [r for r in dead if r["workflow_id"] is not None]:
                await upstream.apply_upstream(
                    conn, self._q, rows.keys_of(keys, wf), now, self.config.actor
                )
            tokens = [f.token for f in items]
            outs = await outcomes(conn, self._q, keys, tokens, {(r[0], r[1]) for r in found})
        return [
            FailResult(o, state.get(k.id) if o is Outcome.OK else None)
            for k, o in zip(keys, outs, strict=True)
        ]

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        """RUNNING/DISPATCHED -> PRELOADED (attempt not counted), saving a checkpoint; with
        a cancel pending -> CANCELLED and the upstream policy, in one transaction."""
        _validate.aware("now", now)
        if not items:
            return []
        _validate.keys("items", items)
        limit = self.config.payload_limit_bytes
        cps = [
            None
            if r.checkpoint is None
            else _validate.json_object(f"items[{i}].checkpoint", r.checkpoint, limit)
            for i, r in enumerate(items)
        ]
        keys = [r.key for r in items]
        lo, hi = _common.bounds(keys)
        async with self._db.conn(
            SYSTEM, tx=True, by_key=True, generic=len(items) < GENERIC_BELOW
        ) as conn:
            found = await conn.fetch(
                self._q["release"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [r.token for r in items],
                cps,
                now,
                lo,
                hi,
                [r.dispatched_only for r in items],
            )
            # A cancel was pending: the task went CANCELLED, not back to PRELOADED.
            gone = [r for r in found if r["status"] == TaskState.CANCELLED]
            if wf := [r for r in gone if r["workflow_id"] is not None]:
                await upstream.apply_upstream(
                    conn, self._q, rows.keys_of(keys, wf), now, self.config.actor
                )
            tokens = [r.token for r in items]
            return await outcomes(conn, self._q, keys, tokens, {(r[0], r[1]) for r in found})

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING with a cancel pending -> CANCELLED (the worker confirmed), with the
        upstream policy of workflow tasks in the same transaction."""
        _validate.aware("now", now)
        if not writes:
            return []
        _validate.keys("writes", writes)
        keys = [w.key for w in writes]
        lo, hi = _common.bounds(keys)
        async with self._db.conn(
            SYSTEM, tx=True, by_key=True, generic=len(writes) < GENERIC_BELOW
        ) as conn:
            found = await conn.fetch(
                self._q["confirm_cancel"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [w.token for w in writes],
                now,
                lo,
                hi,
            )
            if wf := [r for r in found if r["workflow_id"] is not None]:
                await upstream.apply_upstream(
                    conn, self._q, rows.keys_of(keys, wf), now, self.config.actor
                )
            tokens = [w.token for w in writes]
            return await outcomes(conn, self._q, keys, tokens, {(r[0], r[1]) for r in found})
