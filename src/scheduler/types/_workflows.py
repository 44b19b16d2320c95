"""Workflows (DAGs of tasks), schedules and expectations: the records beside the tasks
(``scheduler.types`` re-exports them)."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import datetime

from scheduler.types._tasks import JSON, Pool, TaskRecord

UPSTREAM_FAILED = "upstream_failed"
"""``last_error`` of a task cancelled because a parent dead-lettered or was cancelled."""


class UpstreamPolicy(enum.StrEnum):
    """What a workflow does to a task's descendants when it dead-letters or is cancelled.

    The store applies it inside the transaction of the move itself (``fail``,
    ``release``, ``confirm_cancel``, ``reclaim_expired``, ``cancel``, ``transition``), so
    it cannot be lost to a crash between the two.
    """

    CANCEL = "cancel"
    """Cancel every waiting descendant with reason ``upstream_failed`` (the default)."""
    CONTINUE = "continue"
    """Count the failed parent as resolved: its children's counters go down and those at
    zero stay SCHEDULED for the pre-loader to claim, like any due task."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Workflow:
    """A DAG of tasks submitted together; its tasks carry ``workflow_id``."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    idempotency_key: str
    on_upstream_failure: UpstreamPolicy
    node_count: int
    created_at: datetime


@dataclasses.dataclass(frozen=True, slots=True)
class WorkflowView:
    """A workflow, every node's task, and its edges (parent id, child id)."""

    workflow: Workflow
    tasks: tuple[TaskRecord, ...]
    edges: tuple[tuple[uuid.UUID, uuid.UUID], ...]


class OverlapPolicy(enum.StrEnum):
    """What a schedule does when an occurrence falls due while the last one still runs."""

    SKIP = "skip"
    """Drop the occurrence."""
    ALLOW = "allow"
    """Start it anyway (runs overlap)."""
    BUFFER_ONE = "buffer_one"
    """Hold one occurrence and start it as soon as the running one ends; drop the rest."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A cron (or fixed-interval) schedule; each occurrence becomes one task."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    cron_expr: str
    """Cron with optional seconds first (6 fields); empty for an interval schedule."""
    interval_s: float
    """Fixed interval in seconds; 0 for a cron schedule."""
    timezone: str
    task_type: str
    payload: JSON
    pool: Pool
    max_retries: int = 3
    timeout_s: float = 0.0
    overlap_policy: OverlapPolicy = OverlapPolicy.SKIP
    catchup_window_s: float = 60.0
    """After downtime, occurrences older than this are skipped (the latest one inside
    the window still runs)."""
    jitter_s: float = 0.0
    """Late-only deterministic jitter per occurrence, in [0, jitter_s]."""
    enabled: bool = True
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    buffered_at: datetime | None = None
    """An occurrence held by ``buffer_one`` until the running task ends."""
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    """A dead man's switch entry: the job must complete every ``interval_s``."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: str
    """Matched against the ledger's task type and job id (schedule name)."""
    interval_s: int
    tolerance_s: int
    schedule_id: uuid.UUID | None = None
    """When set, matched against the ledger's schedule id instead of ``job_id``."""
    max_runtime_s: int | None = None
    created_at: datetime | None = None
