"""The worker-write protocol: ack, heartbeat, checkpoint, complete, fail, release and
confirm_cancel, each fenced by the task's current token.

Owns :class:`WriteStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.writes`` and
``scheduler.store.sqlite.writes``; called by the engine's completer (its batchers).
Batched calls return an :class:`Outcome` per item instead of raising, so one zombie
does not fail the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler.types import (
    JSON,
    CompleteResult,
    Completion,
    FailResult,
    Failure,
    FencedWrite,
    Outcome,
    RawJSON,
    Release,
    TaskKey,
)


class WriteStore(Protocol):
    """The writes a worker makes with its fencing token."""

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
    ) -> Outcome:
        """Save a RUNNING task's progress (``data``, a JSON object) with the current
        token: OK, or STALE / NOT_FOUND and nothing written."""
        ...

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

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING (cancel requested) -> CANCELLED, confirmed by the worker; a workflow
        task has its upstream policy applied in the same transaction."""
        ...
