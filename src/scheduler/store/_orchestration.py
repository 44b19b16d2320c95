"""Store types for DAG workflows, cron schedules, expectations and canaries (issue 8).

The methods that read and write them are :class:`OrchestrationStore`; both store
implementations provide it (``_pg_orchestration.py``, ``_sqlite_orchestration.py``), and
the :class:`~scheduler.store.Store` protocol includes it.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # Annotations only: _protocol imports this module to build the Store protocol.
    from scheduler.store._protocol import JSON, Pool, TaskRecord

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


class OrchestrationStore(Protocol):
    """Workflow, schedule, expectation and canary records (part of the Store)."""

    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the tenant's workflow with the same idempotency key
        (``created`` False)."""
        ...

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow with all its tasks and edges; NotFound for other tenants."""
        ...

    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists when the tenant has a schedule of that name."""
        ...

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """NotFound for other tenants."""
        ...

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules by name."""
        ...

    async def set_schedule_enabled(
        self,
        tenant_id: uuid.UUID | None,
        schedule_id: uuid.UUID,
        enabled: bool,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> Schedule:
        """Pause (False) or resume (True, from ``next_fire_at``)."""
        ...

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete; its tasks stay (they keep ``schedule_id``)."""
        ...

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Enabled schedules with ``next_fire_at <= now`` or a buffered occurrence."""
        ...

    async def advance_schedule(
        self,
        schedule_id: uuid.UUID,
        expected_next: datetime | None,
        next_fire_at: datetime | None,
        last_fired_at: datetime | None,
        buffered_at: datetime | None,
        now: datetime,
    ) -> bool:
        """Compare-and-set: move ``next_fire_at`` only if it still is ``expected_next``
        (another node did not advance it first)."""
        ...

    async def active_schedule_tasks(
        self, schedule_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, int]:
        """Non-terminal (and not dead-lettered) tasks per schedule."""
        ...

    async def register_expectation(self, expectation: Expectation) -> Expectation:
        """Insert or replace the tenant's expectation for ``job_id``."""
        ...

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """A tenant's expectations (None: all tenants)."""
        ...

    async def record_canary(
        self,
        canary_id: uuid.UUID,
        scheduled_at: datetime,
        *,
        dispatched_at: datetime | None = None,
        completed_at: datetime | None = None,
    ) -> bool:
        """Create the canary row (idempotent) and record its dispatch / completion times.
        Returns True when the row was created by this call."""
        ...
