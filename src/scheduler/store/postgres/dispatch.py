"""The scheduler's own task moves on PostgreSQL: pre-load, dispatch and lease expiry.

Owns :class:`Dispatch`: ``claim_preload`` (one statement per day partition of the
look-ahead window, every ``preload_sweep_interval_s`` a sweep of all of them; the time of
the last sweep is this part's state), ``load_preloaded`` (and its packed form),
``mark_dispatched`` and ``reclaim_expired``
(:class:`~scheduler.store.protocol.DispatchStore`). Calls
:class:`~scheduler.store.postgres._db.Db`, :mod:`.rows` and, for workflow tasks that lapse
into DEAD_LETTER or CANCELLED, :func:`.upstream.apply_upstream` in the same transaction;
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from scheduler.jitter import JITTER_WINDOW_S
from scheduler.states import TaskState
from scheduler.store import _common, _validate
from scheduler.store._config import StoreConfig
from scheduler.store._records import FAILED
from scheduler.store.postgres import rows, upstream
from scheduler.store.postgres._db import GENERIC_BELOW, SYSTEM, Db, Part, column, uniform
from scheduler.store.protocol.dispatch import DispatchStore
from scheduler.types import (
    Assignment,
    DispatchRequest,
    Held,
    Preloaded,
    PreloadedPage,
    RawJSON,
    ReclaimResult,
    TaskKey,
)

if TYPE_CHECKING:
    from scheduler.store.postgres._db import Conn


class Dispatch(Part, DispatchStore):
    """SCHEDULED/RETRYING -> PRELOADED -> DISPATCHED, and back on lease expiry."""

    def __init__(self, db: Db, q: Mapping[str, str], config: StoreConfig) -> None:
        super().__init__(db, q, config)
        self._last_sweep: datetime | None = None

    async def claim_preload(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        now: datetime,
        retry_horizon: datetime | None = None,
    ) -> list[Preloaded]:
        """Move due SCHEDULED/RETRYING tasks to PRELOADED, one statement per day partition
        of the look-ahead window; every ``preload_sweep_interval_s`` also every day."""
        _validate.aware("horizon", horizon)
        _validate.aware("now", now)
        if retry_horizon is not None:
            _validate.aware("retry_horizon", retry_horizon)
        if limit <= 0:
            return []
        jitter = timedelta(seconds=JITTER_WINDOW_S)
        hi = horizon + jitter + timedelta(microseconds=1)
        sweep = self._last_sweep is None or (now - self._last_sweep).total_seconds() >= (
            self.config.preload_sweep_interval_s
        )
        if sweep:
            self._last_sweep = now
            windows = [(_common.FAR_PAST, hi)]
        else:
            windows = _common.day_windows(_common.day_start(min(now, horizon) - jitter), hi)
        shard_list = list(shards) if shards is not None else None
        out: list[Preloaded] = []
        async with self._db.conn(SYSTEM, by_key=True) as conn:
            for lo, end in windows:
                found = await conn.fetch(
                    self._q["claim_preload"],
                    horizon,
                    shard_list,
                    lo,
                    end,
                    limit - len(out),
                    now,
                    self.config.actor,
                    horizon if retry_horizon is None else retry_horizon,
                )
                out.extend(rows.preloaded(r) for r in found)
                if len(out) >= limit:
                    break
        out.sort(key=lambda p: p.due_at)
        return out

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        """PRELOADED tasks (recovery), keyset-paginated by (scheduled_at, id)."""
        found = await self._fetch_preloaded(
            "load_preloaded", shards, horizon, limit, after, changed_since
        )
        return [rows.preloaded(r) for r in found]

    async def _fetch_preloaded(
        self,
        query: str,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None,
    ) -> list[Any]:
        """One keyset page of PRELOADED rows by ``query`` (plain or packed)."""
        _validate.aware("horizon", horizon)
        if changed_since is not None:
            _validate.aware("changed_since", changed_since)
        async with self._db.conn(SYSTEM, by_key=True) as conn:
            return list(
                await conn.fetch(
                    self._q[query],
                    horizon,
                    list(shards) if shards is not None else None,
                    after.scheduled_at if after else _common.FAR_PAST,
                    after.id if after else _common.ZERO_UUID,
                    limit,
                    changed_since,
                )
            )

    async def load_preloaded_packed(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> PreloadedPage:
        """The pages of :meth:`load_preloaded`, packed per (tenant, type, pool): one
        result row and a few bytes objects per group, not a record per task."""
        found = await self._fetch_preloaded(
            "load_preloaded_packed", shards, horizon, limit, after, changed_since
        )
        return rows.preloaded_page(found)

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | Held | None]:
        """PRELOADED -> DISPATCHED (RUNNING when ``running``) with token + 1, in one
        statement; a task with a concurrency key only while its key has a free slot
        (:meth:`_dispatch_keyed`, in the same transaction), else :class:`Held`."""
        _validate.aware("now", now)
        if not requests:
            return []
        _validate.keys("requests", requests)
        _validate.dispatch_requests(requests)
        # One row per task: the first request for a key wins, a repeat gets None.
        first: dict[uuid.UUID, DispatchRequest] = {}
        for r in requests:
            first.setdefault(r.key.id, r)
        todo = list(first.values())
        lo, hi = _common.bounds([r.key for r in todo])
        small = len(todo) < GENERIC_BELOW
        held: dict[uuid.UUID, Held] = {}
        async with self._db.conn(SYSTEM, by_key=True, generic=small) as conn:
            found = await conn.fetch(
                self._q["mark_dispatched"], *self._dispatch_args(todo, now, lo, hi), False
            )
            by_id: dict[uuid.UUID, Any] = {r[0]: r for r in found}
            if len(by_id) < len(todo):
                # A task not dispatched was cancelled meanwhile, or has a concurrency key
                # (rare: looked up only then, so a deployment without keys pays nothing):
                # the keyed path, in the same transaction (no second BEGIN and COMMIT).
                missing = [r for r in todo if r.key.id not in by_id]
                keyed, held = await self._dispatch_keyed(conn, missing, now)
                by_id.update(keyed)
        return self._assignments(requests, by_id, held)

    def _dispatch_args(
        self, todo: Sequence[DispatchRequest], now: datetime, lo: datetime, hi: datetime
    ) -> tuple[Any, ...]:
        return (
            [r.key.id for r in todo],
            uniform([r.key.scheduled_at for r in todo]),
            uniform([r.worker_id for r in todo]),
            uniform([r.lease_expires_at for r in todo]),
            now,
            lo,
            hi,
            self.config.actor,
            column([r.epoch for r in todo]),
            uniform([r.running for r in todo]),
        )

    async def _dispatch_keyed(
        self, conn: Conn, missing: Sequence[DispatchRequest], now: datetime
    ) -> tuple[dict[uuid.UUID, Any], dict[uuid.UUID, Held]]:
        """Dispatch the tasks of ``missing`` that have a concurrency key, as many per key
        as its free slots (in request order: the dispatcher's due order); the rest are
        :class:`Held`. Exact across nodes: ``lock_keyed`` names each task's key and takes
        one advisory lock per distinct key, held to the commit; then
        ``mark_dispatched_keyed`` counts each distinct key's DISPATCHED/RUNNING tasks
        once and dispatches, in a later statement whose snapshot sees every dispatch
        committed before the locks were granted. The requests are grouped by key here (a
        rank per request, the keys once; every key once when as many distinct key hashes
        were locked as tasks found), so that statement probes no task but the ones it
        writes and sorts nothing. A task that leaves PRELOADED between the two
        statements still takes its rank: a later task of its key may be held until the
        key's re-check (the engine's ``KeyGate``), never dispatched over the limit."""
        lo, hi = _common.bounds([r.key for r in missing])
        found = await conn.fetch(
            self._q["lock_keyed"],
            [r.key.id for r in missing],
            uniform([r.key.scheduled_at for r in missing]),
            lo,
            hi,
        )
        if not found:
            return {}, {}
        of = {r[0]: r for r in found}  # id, tenant, type, key, limit, locked
        go = [r for r in missing if r.key.id in of]
        rows = [of[r.key.id] for r in go]
        index: list[int] | None = None
        rank: list[int] = [1]
        if found[0][5] != len(found):  # fewer distinct key hashes locked than tasks
            # A key repeats: each request's key (1-based, in order of first request) and
            # its rank among its key's requests.
            slot: dict[tuple[uuid.UUID, str, str], int] = {}
            first: list[Any] = []
            taken: list[int] = []
            index, rank = [], []
            for row in rows:
                i = slot.setdefault((row[1], row[2], row[3]), len(first))
                if i == len(first):
                    first.append(row)
                    taken.append(0)
                taken[i] += 1
                index.append(i + 1)
                rank.append(taken[i])
            rows = first
        glo, ghi = _common.bounds([r.key for r in go])
        done = await conn.fetch(
            self._q["mark_dispatched_keyed"],
            *self._dispatch_args(go, now, glo, ghi),
            index,
            uniform(rank),
            uniform([r[1] for r in rows]),
            uniform([r[2] for r in rows]),
            [r[3] for r in rows],  # the keys' count: never one value for all
            uniform([r[4] for r in rows]),
        )
        by_id = {r[0]: r for r in done}
        held = {
            r.key.id: Held(of[r.key.id][3], of[r.key.id][4]) for r in go if r.key.id not in by_id
        }
        return by_id, held

    @staticmethod
    def _assignments(
        requests: Sequence[DispatchRequest],
        by_id: dict[uuid.UUID, Any],
        held: dict[uuid.UUID, Held],
    ) -> list[Assignment | Held | None]:
        # The key, worker and lease are the request's (written as given); the rest is
        # the row's. Payload and checkpoint stay the JSONB's text (RawJSON): a worker
        # that takes bytes gets them without a parse here. Columns by position, in
        # mark_dispatched's SELECT order.
        pools = rows.POOLS
        loads = json.loads
        out: list[Assignment | Held | None] = []
        append = out.append
        for req in requests:
            row = by_id.pop(req.key.id, None)
            if row is None:
                append(held.pop(req.key.id, None))
                continue
            (
                _id,
                tenant,
                typ,
                payload,
                token,
                retries,
                max_retries,
                due,
                cp,
                trace,
                pool,
                tmo,
                ckey,
            ) = row
            append(
                Assignment(
                    key=req.key,
                    tenant_id=tenant,
                    type=typ,
                    payload=RawJSON(payload),
                    fencing_token=token,
                    attempt=retries + 1,
                    max_retries=max_retries,
                    due_at=due,
                    lease_expires_at=req.lease_expires_at,
                    checkpoint=None if cp is None else RawJSON(cp),
                    trace_context=None if trace is None else loads(trace),
                    pool=pools[pool],
                    worker_id=req.worker_id,
                    timeout_s=tmo,
                    concurrency_key=ckey,
                )
            )
        return out

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry (state table): DISPATCHED -> PRELOADED, RUNNING ->
        RETRYING / DEAD_LETTER, pending cancels -> CANCELLED."""
        _validate.aware("now", now)
        async with self._db.conn(SYSTEM, tx=True, by_key=True) as conn:
            found = await conn.fetch(
                self._q["reclaim_expired"],
                now,
                list(shards) if shards is not None else None,
                limit,
                self.config.actor,
            )
            failed = [
                TaskKey(r["id"], r["scheduled_at"])
                for r in found
                if r["workflow_id"] is not None and r["status"] in FAILED
            ]
            if failed:
                await upstream.apply_upstream(conn, self._q, failed, now, self.config.actor)
        requeued, retrying, dead, cancelled = [], [], [], []
        for r in found:
            key = TaskKey(r["id"], r["scheduled_at"])
            status = TaskState(r["status"])
            if status is TaskState.PRELOADED:
                requeued.append(rows.preloaded(r))
            elif status is TaskState.RETRYING:
                retrying.append(key)
            elif status is TaskState.DEAD_LETTER:
                dead.append(key)
            else:
                cancelled.append(key)
        return ReclaimResult(tuple(requeued), tuple(retrying), tuple(dead), tuple(cancelled))
