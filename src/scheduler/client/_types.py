"""Plain result types of the client (never protobuf messages)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime
from typing import Any

from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import (
    Debounce,
    IdempotencyScope,
    OverlapPolicy,
    Pool,
    RetryPolicy,
    Scope,
    Throttle,
    UpstreamPolicy,
)

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """One task to submit (see :meth:`Client.submit` for the meaning of each field)."""

    type: str
    payload: JSON = dataclasses.field(default_factory=dict)
    scheduled_at: datetime | None = None
    idempotency_key: str | None = None
    pool: Pool = Pool.STANDARD
    strict_timing: bool = False
    jitter_mode: JitterMode | None = None
    max_retries: int | None = None
    timeout_s: float = 0.0
    trace_context: dict[str, str] | None = None
    retry_policy: RetryPolicy | None = None
    """This task's own backoff, attempts and non-retryable error types."""
    debounce: Debounce | None = None
    """Debounce by key (docs/flow-control.md): replace the key's pending task."""
    throttle: Throttle | None = None
    """Throttle by key: at most one task per period of due time per key."""
    idempotency_ttl_s: float = 0.0
    """The idempotency key dedupes for this long (0: as long as its task is kept)."""
    idempotency_scope: IdempotencyScope = IdempotencyScope.FOREVER
    """UNTIL_FINISHED: the key dedupes only while its task is not finished."""
    concurrency_key: str | None = None
    """At most the type's concurrency limit of this key's tasks run at once,
    cluster-wide (1-128 characters; docs/flow-control.md)."""
    rate_limit_key: str | None = None
    """The key whose rate limit paces this task's start (``Client.set_rate_limit``)."""

    def __post_init__(self) -> None:
        if self.scheduled_at is not None and self.scheduled_at.tzinfo is None:
            raise ValueError("TaskSpec.scheduled_at must be timezone-aware")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError("TaskSpec.max_retries must be >= 0")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """A task as the scheduler holds it."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    type: str
    state: TaskState
    scheduled_at: datetime
    due_at: datetime
    """Effective due time after jitter and retry backoff."""
    idempotency_key: str
    pool: Pool
    fencing_token: int
    retry_count: int
    max_retries: int
    payload: JSON
    result: JSON | None
    last_error: str | None
    checkpoint: JSON | None
    worker_id: str | None
    cancel_requested: bool
    shard_id: int
    strict_timing: bool
    trace_context: dict[str, str] | None
    created_at: datetime
    updated_at: datetime
    created: bool = True
    """From a submit: False when the idempotency key already named this task."""
    retry_policy: RetryPolicy | None = None
    """The task's own retry policy (None: the server's defaults)."""
    last_error_type: str | None = None
    """The error type the worker reported with the last failed attempt
    (``Failure.error_type``; the Python SDK sends the exception's class name)."""
    last_traceback: str | None = None
    """The traceback the worker sent with the last failed attempt."""
    workflow_id: uuid.UUID | None = None
    """The DAG workflow this task is a node of (None: not part of one)."""
    schedule_id: uuid.UUID | None = None
    """The schedule that fired this task (None: submitted directly)."""
    debounced: bool = False
    """From a submit: True when the submission joined its debounce key's pending task
    (this one: due time pushed, payload replaced unless the first one is kept)."""
    throttled: bool = False
    """From a submit: True when the submission fell inside its throttle key's period
    (this is the task that opened it; nothing was created)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TaskPage:
    """One page of :meth:`Client.list_page`; ``next_page_token`` is '' at the end."""

    tasks: tuple[Task, ...]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TenantInfo:
    """A tenant and its quotas."""

    id: uuid.UUID
    name: str
    tier: str
    rate_limit_rps: int
    max_concurrent_workers: int
    home_region: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeySecret:
    """A new API key; ``secret`` is shown only this once."""

    key_id: uuid.UUID
    secret: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowInfo:
    """A DAG workflow: its header, every node's task (and so its state), its edges."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    idempotency_key: str
    on_upstream_failure: UpstreamPolicy
    node_count: int
    created_at: datetime
    nodes: dict[str, Task]
    """Node id -> its task (``task.state`` is the node's state), in submission order."""
    edges: tuple[tuple[str, str], ...]
    """(parent, child) node ids. From :meth:`Client.submit_workflow`: as submitted."""
    created: bool = True
    """From a submit: False when the idempotency key already named this workflow."""

    def state_counts(self) -> dict[TaskState, int]:
        """How many nodes are in each state."""
        counts: dict[TaskState, int] = {}
        for task in self.nodes.values():
            counts[task.state] = counts.get(task.state, 0) + 1
        return counts


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleInfo:
    """A cron or fixed-interval schedule (see :meth:`Client.create_schedule`)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    cron: str | None
    """Cron expression; None for an interval schedule."""
    interval_s: float | None
    """Fixed interval; None for a cron schedule."""
    timezone: str
    task_type: str
    payload: JSON
    pool: Pool
    max_retries: int
    timeout_s: float
    overlap_policy: OverlapPolicy
    catchup_window_s: float
    jitter_s: float
    paused: bool
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    buffered_at: datetime | None
    """An occurrence held by ``buffer_one`` until the live task ends."""
    created_at: datetime | None
    updated_at: datetime | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExpectationInfo:
    """A dead man's switch entry checked by ``tickwheel watchdog``."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    job_id: str
    schedule_id: uuid.UUID | None
    interval_s: int
    tolerance_s: int
    max_runtime_s: int | None
    created_at: datetime | None
    status: str | None = None
    """What the watchdog would say now: ``ok``, ``late`` or ``stuck`` (docs/watchdog.md);
    ``None`` from a server that does not say."""
    last_completed_at: datetime | None = None
    """The last matching completion (``None`` before the first)."""
    deadline_at: datetime | None = None
    """When it becomes late unless a matching task completes first."""


# -- bulk actions (issue 18) -------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BulkPlan:
    """A planned bulk action: what the server counted, for exactly the filter shown."""

    action: str
    """``cancel`` or ``redrive``."""
    count: int
    """How many tasks the run would act on now."""
    plan_token: str
    """Pass this (and only this) to :meth:`Client.run_bulk`."""
    states: tuple[TaskState, ...]
    """The filter's states with the action's added (as the server understood them)."""
    type: str | None
    pools: tuple[Pool, ...]
    scheduled_from: datetime | None
    scheduled_to: datetime | None
    planned_at: datetime
    """The run acts only on tasks created at or before it."""
    expires_at: datetime


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BulkResult:
    """What a run of a plan did."""

    action: str
    matched: int
    """Tasks that matched when the run started."""
    changed: int
    """Tasks the run changed (one that finished in between is matched, not changed)."""


# -- API keys (issue 15) -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeyInfo:
    """An API key's public part (never its secret)."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    scopes: frozenset[Scope]
    created_at: datetime | None
    expires_at: datetime | None
    revoked: bool
    revoked_at: datetime | None
    last_used_at: datetime | None
    rotated_from: uuid.UUID | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RotatedApiKey:
    """A rotation: the old key (with its grace expiry), the new one and its secret."""

    old: ApiKeyInfo
    new: ApiKeyInfo
    secret: str
