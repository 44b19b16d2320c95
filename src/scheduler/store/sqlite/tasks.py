"""Task submission and reads on SQLite (:class:`~scheduler.store.protocol.TaskStore`).

Owns :class:`Tasks`: ``insert_tasks`` (idempotent per tenant and key, DAG edges),
``get_task``, ``list_tasks``, ``count_tasks`` and ``forecast``. Calls
:class:`~scheduler.store.sqlite._db.Db`, :mod:`.rows` and the shared validation;
inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from scheduler._errors import InvalidArgument, NotFound, StoreError
from scheduler.store import _common, _validate
from scheduler.store._records import unresolved
from scheduler.store.protocol.tasks import TaskStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import (
    MAX_OVERDUE_GROUPS,
    DebouncePayload,
    Forecast,
    InsertResult,
    NewTask,
    OverdueGroup,
    Page,
    Pool,
    TaskCounts,
    TaskFilter,
    TaskRecord,
    debounced_due,
)


class Tasks(Part, TaskStore):
    """Inserts and reads of ``tasks`` and ``task_transitions``."""

    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many in one transaction; a result per item (created or duplicate)."""
        _validate.aware("now", now)
        if not tasks:
            return []
        encoded = _validate.new_tasks(tasks, self.config.payload_limit_bytes)
        n = rows.us(now)
        q = self._q

        def fn(c: sqlite3.Connection) -> list[InsertResult]:
            tenants = {str(t.tenant_id) for t in tasks}
            for tid in sorted(tenants):
                if c.execute(q["known_tenant"], (tid,)).fetchone() is None:
                    raise NotFound("tenant", tid)
            out = []
            for t, (payload, trace) in zip(tasks, encoded, strict=True):
                if t.flow is not None and t.flow.debounce is not None:
                    pushed = _debounce(c, t, payload, now)
                    if pushed is not None:
                        out.append(InsertResult(rows.task(pushed), False, debounced=True))
                        continue
                if t.flow is not None and t.flow.throttle is not None:
                    held = _throttle(c, t)
                    if held is not None:
                        out.append(InsertResult(rows.task(held), False, throttled=True))
                        continue
                out.append(_insert(c, t, payload, trace))
            return out

        def _insert(
            c: sqlite3.Connection, t: NewTask, payload: str, trace: str | None, retire: bool = True
        ) -> InsertResult:
            cur = c.execute(
                q["insert_task"],
                (
                    str(t.id),
                    str(t.tenant_id),
                    t.type,
                    rows.us(t.scheduled_at),
                    rows.us(t.due_at),
                    t.initial_state.value,
                    t.idempotency_key,
                    t.max_retries,
                    payload,
                    unresolved(t),
                    t.shard_id,
                    t.pool.value,
                    int(t.strict_timing),
                    t.jitter_mode.value,
                    float(t.timeout_s),
                    trace,
                    rows.opt_str(t.workflow_id),
                    rows.opt_str(t.schedule_id),
                    n,
                    n,
                    _common.retry_policy_json(t.retry_policy),
                    t.concurrency_key,
                    t.rate_limit_key or None,
                ),
            )
            created = cur.rowcount == 1
            if created:
                c.executemany(
                    q["insert_dependency"],
                    [(str(t.workflow_id), str(p), str(t.id)) for p in dict.fromkeys(t.depends_on)],
                )
            window = _common.key_window(t, now) if created else None
            if window is not None:
                expires, until = window
                expires_us = None if expires is None else rows.us(expires)
                c.execute(q["set_key_window"], (expires_us, int(until), str(t.id)))
            row = c.execute(
                q["task_by_idempotency"], (str(t.tenant_id), t.idempotency_key)
            ).fetchone()
            if not created and retire and _common.key_window_over(row, n):
                c.execute(q["retire_key"], (row["id"],))
                return _insert(c, t, payload, trace, retire=False)
            return InsertResult(rows.task(row), created)

        def _throttle(c: sqlite3.Connection, t: NewTask) -> sqlite3.Row | None:
            # The period's task when ``t`` is due before the key's next allowed time;
            # else the key moves to ``t`` (inserted next) and None.
            assert t.flow is not None
            assert t.flow.throttle is not None
            th = t.flow.throttle
            tenant = str(t.tenant_id)
            key = c.execute(q["throttle_key"], (tenant, th.key)).fetchone()
            if key is not None and rows.us(t.due_at) < key["next_at"]:
                held: sqlite3.Row = c.execute(q["get_task"], (key["task_id"],)).fetchone()
                return held
            next_at = rows.us(t.due_at + timedelta(seconds=th.period_s))
            c.execute(q["set_throttle_key"], (tenant, th.key, str(t.id), next_at))
            return None

        def _debounce(
            c: sqlite3.Connection, t: NewTask, payload: str, now: datetime
        ) -> sqlite3.Row | None:
            # One writer at a time (the store's transaction): the burst's task, if still
            # pending, takes the submission; else the key points at the new task.
            assert t.flow is not None
            assert t.flow.debounce is not None
            d = t.flow.debounce
            tenant = str(t.tenant_id)
            key = c.execute(q["debounce_key"], (tenant, d.key)).fetchone()
            if key is not None:
                due = debounced_due(now, rows.dt(key["first_at"]), d)
                latest = None if d.payload is DebouncePayload.FIRST else payload
                cur = c.execute(q["debounce_push"], (rows.us(due), latest, n, key["task_id"]))
                if cur.rowcount == 1:
                    pushed: sqlite3.Row = c.execute(q["get_task"], (key["task_id"],)).fetchone()
                    return pushed
            c.execute(q["set_debounce_key"], (tenant, d.key, str(t.id), n))
            return None

        try:
            return await self._db.tx(fn)
        except StoreError as exc:
            if isinstance(exc.__cause__, sqlite3.IntegrityError) and "tasks.id" in str(exc):
                raise InvalidArgument("tasks.id", "a task with this id already exists") from exc
            raise

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id; NotFound for other tenants."""
        q = self._q

        def fn(c: sqlite3.Connection) -> TaskRecord:
            row = c.execute(q["get_task"], (str(task_id),)).fetchone()
            if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
                raise NotFound("task", str(task_id))
            return rows.task(row)

        return await self._db.tx(fn)

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """Keyset-paginated by (scheduled_at, id) or by id, in ``flt.order``."""
        if not 1 <= page_size <= 1000:
            raise InvalidArgument("page_size", "must be between 1 and 1000")
        after = _common.page_start(flt, page_token)
        lo = rows.us(_validate.aware("scheduled_from", flt.scheduled_from or _common.FAR_PAST))
        hi = rows.us(_validate.aware("scheduled_to", flt.scheduled_to or _common.FAR_FUTURE))
        a_t, a_id = rows.us(after.scheduled_at), str(after.id)
        statuses = json.dumps([s.value for s in flt.statuses]) if flt.statuses else None
        pools = json.dumps([p.value for p in flt.pools]) if flt.pools else None
        args = (str(tenant_id), statuses, flt.type, lo, hi, a_t, a_id, page_size + 1, pools)
        q = self._q
        if flt.idempotency_key is not None:
            key = (str(tenant_id), flt.idempotency_key)

            def by_key(c: sqlite3.Connection) -> list[sqlite3.Row]:
                return c.execute(q["task_by_idempotency"], key).fetchall()

            one = [rows.task(r) for r in await self._db.tx(by_key)]
            return _common.page_of_one(one, flt, after)

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(q[flt.order.query], args).fetchall()

        found = await self._db.tx(fn)
        tasks = tuple(rows.task(r) for r in found[:page_size])
        token = _common.encode_page_token(tasks[-1].key) if len(found) > page_size else ""
        return Page(tasks, token)

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        """Tasks matching ``flt`` grouped by state, type and pool (and tenant for None)."""
        lo = rows.us(_validate.aware("scheduled_from", flt.scheduled_from or _common.FAR_PAST))
        hi = rows.us(_validate.aware("scheduled_to", flt.scheduled_to or _common.FAR_FUTURE))
        args = (
            None if tenant_id is None else str(tenant_id),
            json.dumps([s.value for s in flt.statuses]) if flt.statuses else None,
            flt.type,
            json.dumps([p.value for p in flt.pools]) if flt.pools else None,
            lo,
            hi,
        )
        q = self._q

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(q["count_tasks"], args).fetchall()

        found = await self._db.tx(fn)
        return _common.counts_of(
            _common.task_count(
                None if r["tenant"] is None else uuid.UUID(r["tenant"]),
                r["status"],
                r["type"],
                r["pool"],
                r["n"],
            )
            for r in found
        )

    async def forecast(
        self,
        tenant_id: uuid.UUID | None,
        start: datetime,
        bucket_s: int,
        buckets: int,
        pools: Sequence[Pool],
    ) -> Forecast:
        """SCHEDULED, PRELOADED and RETRYING tasks per bucket (see the protocol)."""
        _validate.aware("start", start)
        end = _common.window_end(start, bucket_s, buckets)
        args = (
            None if tenant_id is None else str(tenant_id),
            rows.us(start),
            bucket_s * 1_000_000,
            rows.us(end),
            json.dumps([p.value for p in pools]) if pools else None,
        )
        q = self._q

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(q["forecast"], args).fetchall()

        found = await self._db.tx(fn)
        return _common.forecast_of((r[0], r[1], r[2], r[3]) for r in found)

    async def overdue(self, tenant_id: uuid.UUID | None, now: datetime) -> list[OverdueGroup]:
        """Tasks due before ``now`` and not yet dispatched, by tenant, type and pool."""
        args = (
            None if tenant_id is None else str(tenant_id),
            rows.us(_validate.aware("now", now)),
            MAX_OVERDUE_GROUPS,
        )
        q = self._q

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(q["overdue"], args).fetchall()

        found = await self._db.tx(fn)
        return [
            OverdueGroup(uuid.UUID(r[0]), r[1], Pool(r[2]), int(r[3]), rows.dt(r[4])) for r in found
        ]
