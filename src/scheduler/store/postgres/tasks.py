"""Task submission and reads on PostgreSQL (:class:`~scheduler.store.protocol.TaskStore`).

Owns :class:`Tasks`: ``insert_tasks`` (one statement through ``task_keys``, idempotent per
tenant and key whatever the time; DAG edges; the SCHEDULED ones noticed to their shard's
owner), ``get_task`` (by id through ``task_keys``), ``list_tasks``, ``count_tasks`` and
``forecast``. Calls :class:`~scheduler.store.postgres._db.Db`, :mod:`.rows`,
:mod:`.notices`, the shared validation and, on the store, the ``tenants`` and
``partitions`` parts (the tenants and days an insert needs: it inherits them);
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from scheduler._aio import slices
from scheduler._errors import InvalidArgument, NotFound, StoreError, TenantMoving
from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store._records import record_from_new, unresolved
from scheduler.store.postgres import rows, submit_flow
from scheduler.store.postgres._db import column, scope_of, scope_of_all, uniform
from scheduler.store.postgres.notices import notify_work
from scheduler.store.postgres.partitions import Partitions, utc_day
from scheduler.store.postgres.tenants import Tenants
from scheduler.store.protocol.tasks import TaskStore
from scheduler.types import (
    MAX_COUNT_GROUPS,
    MAX_OVERDUE_GROUPS,
    Forecast,
    InsertResult,
    NewTask,
    OverdueGroup,
    Page,
    Pool,
    TaskCounts,
    TaskFilter,
    TaskRecord,
)


def _alone(t: NewTask) -> bool:
    """Whether ``t`` is inserted alone, under its debounce or throttle key's lock."""
    return t.flow is not None and (t.flow.debounce is not None or t.flow.throttle is not None)


_FLOW = operator.attrgetter("flow")
_CONCURRENCY_KEY = operator.attrgetter("concurrency_key")
_RATE_LIMIT_KEY = operator.attrgetter("rate_limit_key")


def _flowing(tasks: Sequence[NewTask]) -> bool:
    """Whether a task of ``tasks`` has flow options (debounce, throttle, a key window):
    one pass in C (``map`` of an ``attrgetter``), no Python call a task."""
    return any(map(_FLOW, tasks))


def in_due_order(
    tasks: Sequence[NewTask], encoded: Sequence[tuple[str, str | None]]
) -> tuple[Sequence[NewTask], Sequence[tuple[str, str | None]]]:
    """``tasks`` (and their ``encoded`` JSON) in the order their rows are written: by
    due time, stably, so the heap pages of a batch hold tasks due together.

    A stampede's batch is due all over the jitter window in the order it was submitted:
    written so, each heap page held tasks due a whole window apart, and the dispatch
    changed each page again and again through the window (after every checkpoint, a
    full-page image each time). In due order a page's tasks go within a moment of each
    other. A batch naming one idempotency key twice keeps the request's order: the first
    of the two in the request is the one created (``insert_tasks``, keys first)."""
    due = [t.due_at for t in tasks]
    order = sorted(range(len(tasks)), key=due.__getitem__)
    if all(i == k for i, k in enumerate(order)):
        return tasks, encoded
    if len({(t.tenant_id, t.idempotency_key) for t in tasks}) < len(tasks):
        return tasks, encoded
    return [tasks[i] for i in order], [encoded[i] for i in order]


def insert_args(
    tasks: Sequence[NewTask], encoded: Sequence[tuple[str, str | None]], now: datetime
) -> tuple[Any, ...]:
    """The arguments of ``insert_tasks`` for ``tasks``, whose payload and trace context
    ``encoded`` holds as JSON text (``_validate.new_tasks``); also the raw-SQL baseline's
    (``benchmarks/test_store.py``)."""
    return (
        [t.id for t in tasks],
        uniform([t.tenant_id for t in tasks]),
        uniform([t.type for t in tasks]),
        uniform([t.scheduled_at for t in tasks]),
        uniform([t.due_at for t in tasks]),
        uniform([t.initial_state.value for t in tasks]),
        [t.idempotency_key for t in tasks],
        uniform([t.max_retries for t in tasks]),
        [p for p, _ in encoded],
        uniform([unresolved(t) for t in tasks]),
        [t.shard_id for t in tasks],
        uniform([t.pool.value for t in tasks]),
        uniform([t.strict_timing for t in tasks]),
        uniform([t.jitter_mode.value for t in tasks]),
        uniform([float(t.timeout_s) for t in tasks]),
        column([tr for _, tr in encoded]),
        column([t.workflow_id for t in tasks]),
        column([t.schedule_id for t in tasks]),
        now,
        column([_common.retry_policy_json(t.retry_policy) for t in tasks]),
        # Without a key in the batch (flow control unused): no array at all, in one C
        # pass each (unnest pads the missing columns with NULLs).
        [t.concurrency_key for t in tasks] if any(map(_CONCURRENCY_KEY, tasks)) else None,
        [t.rate_limit_key or None for t in tasks] if any(map(_RATE_LIMIT_KEY, tasks)) else None,
    )


class Tasks(Tenants, Partitions, TaskStore):
    """Inserts and reads of ``tasks``. An insert needs the tenants and the day
    partitions it lands in: it inherits those parts and calls them on the store."""

    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many in one statement; a result per item (created or duplicate)."""
        _validate.aware("now", now)
        if not tasks:
            return []
        encoded = _validate.new_tasks(tasks, self.config.payload_limit_bytes)
        await self.check_tenants({t.tenant_id for t in tasks})
        await self.ensure_days({utc_day(t.scheduled_at) for t in tasks})
        try:
            return await self._insert_rows(tasks, encoded, now)
        except StoreError as exc:
            # A partition detached or dropped behind our back: forget, re-create, retry.
            if not isinstance(exc.__cause__, asyncpg.CheckViolationError):
                raise
            await self.load_partitions()
            await self.ensure_days({utc_day(t.scheduled_at) for t in tasks})
            return await self._insert_rows(tasks, encoded, now)

    async def _insert_rows(
        self, tasks: Sequence[NewTask], encoded: Sequence[tuple[str, str | None]], now: datetime
    ) -> list[InsertResult]:
        if _flowing(tasks) and any(_alone(t) for t in tasks):
            return await self._insert_flow(tasks, encoded, now)
        scope = scope_of_all(t.tenant_id for t in tasks)
        async with self._db.conn(scope, tx=True) as conn:
            return await self._insert_in(conn, tasks, encoded, now)

    async def _insert_flow(
        self, tasks: Sequence[NewTask], encoded: Sequence[tuple[str, str | None]], now: datetime
    ) -> list[InsertResult]:
        """A batch with debounced or throttled tasks: each of those alone, in its own
        transaction (its key's lock held as briefly as can be); the rest together."""
        out: list[InsertResult | None] = [None] * len(tasks)
        plain = [i for i, t in enumerate(tasks) if not _alone(t)]
        if plain:
            done = await self._insert_rows(
                [tasks[i] for i in plain], [encoded[i] for i in plain], now
            )
            for i, r in zip(plain, done, strict=True):
                out[i] = r
        for i, t in enumerate(tasks):
            if out[i] is not None:
                continue
            debounced = t.flow is not None and t.flow.debounce is not None
            async with self._db.conn(t.tenant_id, tx=True) as conn:
                if debounced:
                    pending = await submit_flow.debounce(conn, self._q, t, encoded[i][0], now)
                else:
                    pending = await submit_flow.throttle(conn, self._q, t)
                if pending is None:
                    (made,) = await self._insert_in(conn, [t], [encoded[i]], now)
                    out[i] = made
                    continue
            async with self._db.conn(t.tenant_id) as conn:
                row = await conn.fetchrow(self._q["get_task_by_key"], *pending)
            assert row is not None  # a row is never deleted (partitions are detached)
            task = rows.task(row)
            out[i] = InsertResult(task, False, debounced=debounced, throttled=not debounced)
        return [r for r in out if r is not None]

    async def _insert_in(
        self,
        conn: Any,
        tasks: Sequence[NewTask],
        encoded: Sequence[tuple[str, str | None]],
        now: datetime,
        *,
        retire: bool = True,
    ) -> list[InsertResult]:
        q = self._q
        args = insert_args(*in_due_order(tasks, encoded), now)
        edges = [
            (t.workflow_id, parent, t.id, t.scheduled_at)
            for t in tasks
            for parent in dict.fromkeys(t.depends_on)
        ]
        created = {r[0] for r in await conn.fetch(q["insert_tasks"], *args)}
        await notify_work(
            conn,
            {
                t.shard_id
                for t in tasks
                if t.id in created and t.initial_state is TaskState.SCHEDULED
            },
            reconcile=False,
        )
        if edges:
            created_edges = [e for e in edges if e[2] in created]
            if created_edges:
                await conn.execute(
                    q["insert_dependencies"],
                    [e[0] for e in created_edges],
                    [e[1] for e in created_edges],
                    [e[2] for e in created_edges],
                    [e[3] for e in created_edges],
                )
        spans = (
            [(t.id, w) for t in tasks if t.id in created and (w := _common.key_window(t, now))]
            if _flowing(tasks)
            else []
        )
        if spans:
            await conn.execute(
                q["set_key_window"],
                [i for i, _ in spans],
                [w[0] for _, w in spans],
                [w[1] for _, w in spans],
            )
        dups = [i for i, t in enumerate(tasks) if t.id not in created]
        existing: dict[int, TaskRecord] = {}
        if dups:
            found = await conn.fetch(
                q["tasks_by_idempotency"],
                [tasks[i].tenant_id for i in dups],
                [tasks[i].idempotency_key for i in dups],
            )
            existing = {dups[r["ord"] - 1]: rows.task(r) for r in found}
            stale = [dups[r["ord"] - 1] for r in found if _common.key_window_over(r, now)]
            if stale and retire:
                # The key's window is over (its TTL ran out, or its task finished): the
                # key is freed and these go in as new tasks (issue 43).
                await conn.execute(
                    q["retire_keys"],
                    [tasks[i].tenant_id for i in stale],
                    [tasks[i].idempotency_key for i in stale],
                    now,
                )
                again = await self._insert_in(
                    conn, [tasks[i] for i in stale], [encoded[i] for i in stale], now, retire=False
                )
                for i, r in zip(stale, again, strict=True):
                    if r.created:
                        created.add(tasks[i].id)
                    else:
                        existing[i] = r.task
        if len(existing) < len(dups):
            # Neither made nor a duplicate: its tenant is moving away (or moved).
            moving = await conn.fetchval(
                q["moving_tenant"], list({tasks[i].tenant_id for i in dups})
            )
            if moving is not None:
                raise TenantMoving(str(moving))
        out = []
        seen: set[uuid.UUID] = set()
        async for part in slices(len(tasks)):
            for i in part:
                t = tasks[i]
                if t.id in created and t.id not in seen:
                    seen.add(t.id)
                    out.append(InsertResult(record_from_new(t, *encoded[i], now), True))
                elif i in existing:
                    out.append(InsertResult(existing[i], False))
                else:
                    raise StoreError(f"task {t.id}: key conflict without a visible task")
        return out

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id alone: task_keys maps id -> scheduled_at, then one partition is read."""
        async with self._db.conn(scope_of(tenant_id)) as conn:
            row = await conn.fetchrow(self._q["get_task"], task_id)
        if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
            raise NotFound("task", str(task_id))
        return rows.task(row)

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """Keyset-paginated by (scheduled_at, id) or by id, in ``flt.order``."""
        if not 1 <= page_size <= 1000:
            raise InvalidArgument("page_size", "must be between 1 and 1000")
        after = _common.page_start(flt, page_token)
        lo = _validate.aware("scheduled_from", flt.scheduled_from or _common.FAR_PAST)
        hi = _validate.aware("scheduled_to", flt.scheduled_to or _common.FAR_FUTURE)
        if flt.idempotency_key is not None:
            # One row at most, found through task_keys' primary key.
            async with self._db.conn(tenant_id) as conn:
                found = await conn.fetch(
                    self._q["tasks_by_idempotency"], [tenant_id], [flt.idempotency_key]
                )
            return _common.page_of_one([rows.task(r) for r in found], flt, after)
        async with self._db.conn(tenant_id, custom=True) as conn:
            found = await conn.fetch(
                self._q[flt.order.query],
                tenant_id,
                [s.value for s in flt.statuses] or None,
                flt.type,
                lo,
                hi,
                after.scheduled_at,
                after.id,
                page_size + 1,
                [p.value for p in flt.pools] or None,
            )
        tasks = tuple(rows.task(r) for r in found[:page_size])
        token = _common.encode_page_token(tasks[-1].key) if len(found) > page_size else ""
        return Page(tasks, token)

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        """Tasks matching ``flt`` grouped by state, type and pool (and tenant for None:
        every tenant); at most MAX_COUNT_GROUPS groups, the total over all of them."""
        lo = _validate.aware("scheduled_from", flt.scheduled_from or _common.FAR_PAST)
        hi = _validate.aware("scheduled_to", flt.scheduled_to or _common.FAR_FUTURE)
        async with self._db.conn(scope_of(tenant_id), custom=tenant_id is not None) as conn:
            query = "count_tasks"  # every tenant, or a big one: a scan (tenant_is_big)
            if tenant_id is not None and not await conn.fetchval(
                self._q["tenant_is_big"], tenant_id, lo, hi
            ):
                query = "count_tenant_tasks"
            found = await conn.fetch(
                self._q[query],
                tenant_id,
                [s.value for s in flt.statuses] or None,
                flt.type,
                [p.value for p in flt.pools] or None,
                lo,
                hi,
                MAX_COUNT_GROUPS,
            )
        groups = tuple(
            _common.task_count(r["tenant"], r["status"], r["type"], r["pool"], r["n"])
            for r in found
        )
        if not found:
            return TaskCounts((), 0, False)
        return TaskCounts(groups, int(found[0]["total"]), found[0]["groups"] > len(groups))

    async def forecast(
        self,
        tenant_id: uuid.UUID | None,
        start: datetime,
        bucket_s: int,
        buckets: int,
        pools: Sequence[Pool],
    ) -> Forecast:
        """SCHEDULED, PRELOADED and RETRYING tasks per bucket of the window by due_at
        (firing) and scheduled_at (nominal), and those due before ``start``."""
        _validate.aware("start", start)
        end = _common.window_end(start, bucket_s, buckets)
        async with self._db.conn(scope_of(tenant_id)) as conn:
            found = await conn.fetch(
                self._q["forecast"],
                tenant_id,
                start,
                bucket_s,
                end,
                [p.value for p in pools] or None,
            )
        return _common.forecast_of((r["kind"], r["bucket"], r["pool"], r["n"]) for r in found)

    async def overdue(self, tenant_id: uuid.UUID | None, now: datetime) -> list[OverdueGroup]:
        """Tasks due before ``now`` and not yet dispatched, by tenant, type and pool."""
        _validate.aware("now", now)
        async with self._db.conn(scope_of(tenant_id)) as conn:
            found = await conn.fetch(self._q["overdue"], tenant_id, now, MAX_OVERDUE_GROUPS)
        return [
            OverdueGroup(r["tenant_id"], r["type"], Pool(r["pool"]), int(r["n"]), r["oldest"])
            for r in found
        ]
