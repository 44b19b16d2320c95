"""The operator-action protocol: cancel, redrive and the repair tool's transition.

Owns :class:`ActionStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.actions`` and
``scheduler.store.sqlite.actions``; called by the engine (CancelTask, RedriveTask) and the
CLI's repair tool. Every move is checked against the state machine in code and again
by the SQL guard.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

from scheduler.states import TaskState
from scheduler.types import (
    CancelResult,
    TaskKey,
    TaskRecord,
)


class ActionStore(Protocol):
    """Operator moves: cancel, redrive, transition."""

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
