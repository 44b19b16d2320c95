"""The task protocol: submission, the hot path, worker writes and operator moves.

Owns :class:`TaskStore`, the largest part of :class:`~scheduler.store.Store`. Imports only
value types (:mod:`scheduler.types`, :mod:`scheduler.states`); the backends
(``scheduler.store.postgres.tasks`` and friends, ``scheduler.store.sqlite.*``) implement
it and the engine calls it through ``Store``.

Conventions:
- Every hot-path call is batched: it takes a sequence and makes one statement (or a
  handful) for the whole batch, never a round trip per task.
- Tasks are addressed by :class:`TaskKey` = (id, scheduled_at); ``scheduled_at`` is the
  partition key, so every statement names it and PostgreSQL prunes to one partition.
- Time comes in as an argument (``now``), never from the database clock, so tests and
  the engine move time without sleeping.
- Worker writes (ack, heartbeat, checkpoint, complete, fail, release) carry the fencing
  token and succeed only when it is current and the status is legal. Batched calls
  return an :class:`Outcome` per item instead of raising, so one zombie does not fail
  the batch.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.states import TaskState
from scheduler.types import (
    JSON,
    ActivityBucket,
    Assignment,
    CancelResult,
    CompleteResult,
    Completion,
    DispatchRequest,
    FailResult,
    Failure,
    FencedWrite,
    Forecast,
    InsertResult,
    NewTask,
    Outcome,
    OverdueGroup,
    Page,
    Pool,
    Preloaded,
    PreloadedPage,
    RawJSON,
    ReclaimResult,
    RefusedWrite,
    Release,
    TaskCounts,
    TaskFilter,
    TaskKey,
    TaskRecord,
    Transition,
)


class TaskStore(Protocol):
    """Tasks: submission, pre-load, dispatch, worker writes, lease expiry, operator moves."""

    # -- submission ------------------------------------------------------------
    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many; a result per item, in order. Idempotent per (tenant, key)."""
        ...

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id (scheduled_at found through the id index); NotFound for other tenants."""
        ...

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """A page of the tenant's tasks matching ``flt``, keyset-paginated in its order.
        With ``flt.idempotency_key``: the one task with that key (through the key
        index), when it passes the rest of the filter."""
        ...

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        """The tasks matching ``flt`` (its order and idempotency key ignored), grouped by
        state, type and pool, and by tenant when ``tenant_id`` is None (every tenant):
        at most MAX_COUNT_GROUPS groups, the total exact over all of them."""
        ...

    async def forecast(
        self,
        tenant_id: uuid.UUID | None,
        start: datetime,
        bucket_s: int,
        buckets: int,
        pools: Sequence[Pool],
    ) -> Forecast:
        """SCHEDULED, PRELOADED and RETRYING tasks (of ``tenant_id``, None: every
        tenant; of ``pools``, empty: any) per bucket ``i`` of ``[start + i * bucket_s,
        start + (i + 1) * bucket_s)``: by ``due_at`` (firing, jitter applied) and by
        ``scheduled_at`` (nominal); and per pool those with ``due_at`` before ``start``
        (overdue). ``bucket_s`` 1 or 60, ``buckets`` 1-3600 (InvalidArgument else)."""
        ...

    async def overdue(self, tenant_id: uuid.UUID | None, now: datetime) -> list[OverdueGroup]:
        """SCHEDULED, PRELOADED and RETRYING tasks (of ``tenant_id``, None: every
        tenant) with ``due_at`` before ``now`` (the forecast's overdue ones), grouped by
        tenant, type and pool: at most MAX_OVERDUE_GROUPS groups, the oldest first."""
        ...

    # -- the hot path ------------------------------------------------------------
    async def claim_preload(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        now: datetime,
        retry_horizon: datetime | None = None,
    ) -> list[Preloaded]:
        """SCHEDULED (no unresolved deps) tasks with due_at <= horizon and RETRYING tasks
        with due_at <= ``retry_horizon`` (None: ``horizon``) in ``shards`` (None = all)
        -> PRELOADED. Returns what it moved. A RETRYING task waits out its backoff as
        RETRYING; the engine passes a retry horizon just ahead of now."""
        ...

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        """Tasks already PRELOADED (recovery after restart or shard takeover), keyset
        paginated by ``after``; with ``changed_since``, only rows whose last change
        (``updated_at``, written by every transition) is at or after it."""
        ...

    async def load_preloaded_packed(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> PreloadedPage:
        """The same rows and pages as :meth:`load_preloaded`, packed per (tenant, type,
        pool) as columns: a whole load (recovery, a takeover, a reconcile) builds no
        Python object per task. ``PreloadedPage.count`` < ``limit`` marks the last page;
        ``PreloadedPage.last`` is the ``after`` of the next."""
        ...

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | None]:
        """PRELOADED -> DISPATCHED (RUNNING for a request with ``running``), fencing
        token + 1, lease set. None for a task no longer PRELOADED (cancelled meanwhile):
        it must not be delivered."""
        ...

    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING (a repeated ack on RUNNING with the same token is OK)."""
        ...

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """Extend the lease of DISPATCHED/RUNNING tasks held with the current token."""
        ...

    async def checkpoint(
        self, key: TaskKey, token: int, data: JSON | RawJSON, now: datetime
    ) -> Outcome: ...

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        """RUNNING -> COMPLETED; writes the completion ledger and decrements DAG
        children in the same transaction."""
        ...

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        """RUNNING -> RETRYING (attempts remain and retryable) or DEAD_LETTER; a workflow
        task that dead-letters has its upstream policy applied in the same transaction."""
        ...

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        """RUNNING/DISPATCHED -> PRELOADED without using an attempt (graceful drain); with
        a cancel pending -> CANCELLED, and a workflow task then has its upstream policy
        applied in the same transaction."""
        ...

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry per the state table to tasks whose lease lapsed; workflow
        tasks that dead-letter or are cancelled have their upstream policy applied in the
        same transaction."""
        ...

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING (cancel requested) -> CANCELLED, confirmed by the worker; a workflow
        task has its upstream policy applied in the same transaction."""
        ...

    # -- operator actions ----------------------------------------------------------
    async def cancel(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime
    ) -> CancelResult:
        """Cancel at any state: immediate from SCHEDULED/PRELOADED/RETRYING, requested
        (worker told) from DISPATCHED/RUNNING; InvalidTransition from a terminal one. An
        immediate cancel of a workflow task applies its upstream policy in the same
        transaction."""
        ...

    async def redrive(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime, due_at: datetime
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED with retry_count reset (audited)."""
        ...

    async def transition(
        self, key: TaskKey, to_state: TaskState, now: datetime, *, actor: str = "operator"
    ) -> TaskRecord:
        """Move a task to ``to_state`` (operator/repair tool). Checked against the state
        machine in code and again by the SQL guard: InvalidTransition, and nothing
        written, when the move is illegal. A workflow task moved to DEAD_LETTER or
        CANCELLED has its upstream policy applied in the same transaction."""
        ...

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task, oldest first."""
        ...

    async def record_refused(self, writes: Sequence[RefusedWrite]) -> None:
        """Record worker writes that were refused (stale token, another session's
        task): called only on a refusal. The store adds the task's tenant and current
        token; a task that no longer exists gets no row."""
        ...

    async def refused_writes_of(self, key: TaskKey) -> list[RefusedWrite]:
        """A task's refused writes, oldest first (the last 1,000)."""
        ...

    async def activity(
        self, tenant_id: uuid.UUID | None, start: datetime, end: datetime, bucket_s: int
    ) -> list[ActivityBucket]:
        """From the audit: per bucket of ``bucket_s`` from ``start`` (every bucket up to
        ``end``, empty ones included), dispatches, completions, failed attempts and
        dispatch lateness p50/p99 of a tenant (None: every tenant)."""
        ...
