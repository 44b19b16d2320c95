"""The dispatch protocol: the scheduler's own task moves, pre-load, dispatch and lease
expiry (the hot path).

Owns :class:`DispatchStore` (part of :class:`~scheduler.store.Store`). Imports only
value types; implemented by ``scheduler.store.postgres.dispatch`` and
``scheduler.store.sqlite.dispatch``; called by the engine's pre-loader, dispatcher,
shard handler and reaper.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.types import (
    Assignment,
    DispatchRequest,
    Held,
    Preloaded,
    PreloadedPage,
    ReclaimResult,
    TaskKey,
)


class DispatchStore(Protocol):
    """The scheduler's own task moves: pre-load, dispatch, lease expiry."""

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
    ) -> list[Assignment | Held | None]:
        """PRELOADED -> DISPATCHED (RUNNING for a request with ``running``), fencing
        token + 1, lease set. None for a task no longer PRELOADED (cancelled meanwhile):
        it must not be delivered. :class:`Held` for a task whose concurrency key has as
        many tasks DISPATCHED or RUNNING as its limit: it stays PRELOADED. The count is
        exact across every node and connection: two calls never both take a key's last
        slot, and a slot frees as its task leaves DISPATCHED/RUNNING by any path."""
        ...

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry per the state table to tasks whose lease lapsed; workflow
        tasks that dead-letter or are cancelled have their upstream policy applied in the
        same transaction."""
        ...
