"""The task itself: its key, pool, payload text, retry policy, the row to insert and
the row the store holds (``scheduler.types`` re-exports every name)."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import datetime
from typing import Any, NamedTuple

from scheduler._frozen import fast_init
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types._flow import FlowOptions

JSON = dict[str, Any]


class RawJSON(str):
    """The text of one JSON object that was checked already (``scheduler.jsonbytes``):
    what a client sent as ``payload_json`` bytes, or a stored JSONB's text. Held where a
    payload, result or checkpoint may be (``JSON | RawJSON``) so the store writes it
    and the server forwards it without parsing it again; ``jsonbytes.as_dict`` reads it.
    """

    __slots__ = ()


class TaskKey(NamedTuple):
    """The primary key of a task row: its id and its (partition) scheduled time."""

    id: uuid.UUID
    scheduled_at: datetime


class Pool(enum.StrEnum):
    """Priority pools (brief §8)."""

    CRITICAL = "critical"
    STANDARD = "standard"
    BULK = "bulk"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """A task's own retry policy, beside the server's defaults.

    A retryable failure is due again after
    ``min(max_backoff_s, initial_backoff_s * 2 ** (attempt - 1))`` seconds plus a
    deterministic spread of up to 25%; ``max_attempts`` counts the first attempt (1 =
    no retry). 0 in any number means the server's default. ``non_retryable``: error
    types (exception classes or their names) that dead-letter at once; the worker SDK
    reports a raised exception's class name, and the server matches the name.
    """

    initial_backoff_s: float = 0.0
    max_backoff_s: float = 0.0
    max_attempts: int = 0
    non_retryable: tuple[str | type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "non_retryable", tuple(self.non_retryable))
        for name in ("initial_backoff_s", "max_backoff_s", "max_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value != value or value < 0:
                raise ValueError(f"RetryPolicy.{name} must be a number >= 0, got {value!r}")
        for t in self.non_retryable:
            if not isinstance(t, str) and not (
                isinstance(t, type) and issubclass(t, BaseException)
            ):
                raise ValueError(f"RetryPolicy.non_retryable: {t!r} is not an exception type")

    def error_types(self) -> tuple[str, ...]:
        """The non-retryable error type names, as the wire and the store carry them."""
        return tuple(t if isinstance(t, str) else t.__name__ for t in self.non_retryable)

    def exception_types(self) -> tuple[type[BaseException], ...]:
        """The non-retryable types given as classes (the worker SDK matches subclasses)."""
        return tuple(t for t in self.non_retryable if not isinstance(t, str))


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """A task to insert. The engine fills ids, shard and the effective due time."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    type: str
    payload: JSON | RawJSON
    scheduled_at: datetime
    """What the client asked for (timezone-aware); the partition key."""
    due_at: datetime
    """Effective due time after jitter; moved later by retry backoff."""
    idempotency_key: str
    shard_id: int
    pool: Pool = Pool.STANDARD
    strict_timing: bool = False
    jitter_mode: JitterMode = JitterMode.SYMMETRIC
    max_retries: int = 3
    timeout_s: float = 0.0
    """Task run-time limit in seconds; 0 means none beyond the lease."""
    trace_context: JSON | None = None
    """W3C traceparent/tracestate captured at submission."""
    workflow_id: uuid.UUID | None = None
    unresolved_dependencies: int = 0
    schedule_id: uuid.UUID | None = None
    initial_state: TaskState = TaskState.SCHEDULED
    """SCHEDULED normally; PRELOADED when the task is due inside the look-ahead and
    goes straight into this node's wheel (saves the pre-load round trip)."""
    retry_policy: RetryPolicy | None = None
    """The task's own retry policy, resolved (backoffs both set or both 0, error types
    as names); None: the server's defaults."""
    depends_on: tuple[uuid.UUID, ...] = ()
    """DAG parents (task ids, same ``workflow_id``): the store writes the edges in the
    inserting transaction and sets ``unresolved_dependencies`` to their number. Parents
    must not have completed yet (insert a workflow as one batch, parents first)."""
    flow: FlowOptions | None = None
    """Debounce, throttle or an idempotency window (issue 43): the store inserts such a
    task alone, in its own transaction (``scheduler.types._flow``)."""
    concurrency_key: str | None = None
    """At most the type's concurrency limit of the tasks of this (tenant, type, key) run
    at once, cluster-wide (docs/flow-control.md); None: no key, no limit."""
    rate_limit_key: str = ""
    """The task's rate limit key (issue 43); empty: none."""


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecord:
    """A task row as the store holds it."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    type: str
    status: TaskState
    scheduled_at: datetime
    due_at: datetime
    idempotency_key: str
    shard_id: int
    pool: Pool
    strict_timing: bool
    jitter_mode: JitterMode
    fencing_token: int
    retry_count: int
    max_retries: int
    timeout_s: float
    payload: JSON | RawJSON
    """A dict, or the JSON text a client sent as bytes (a task just inserted)."""
    result_payload: JSON | None
    checkpoint: JSON | None
    trace_context: JSON | None
    last_error: str | None
    worker_id: str | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    workflow_id: uuid.UUID | None
    unresolved_dependencies: int
    schedule_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    retry_policy: RetryPolicy | None = None
    """The task's own retry policy (None: the server's defaults)."""
    last_error_type: str | None = None
    """The type the worker named for the last failed attempt's error (``Failure.error_type``)."""
    last_traceback: str | None = None
    """The traceback the worker sent with the last failed attempt (``Failure.traceback``)."""
    concurrency_key: str | None = None
    """The task's concurrency key (``NewTask.concurrency_key``); None: none."""
    rate_limit_key: str = ""
    """The task's rate limit key (issue 43); empty: none."""

    @property
    def key(self) -> TaskKey:
        """(id, scheduled_at)."""
        return TaskKey(self.id, self.scheduled_at)


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True)
class InsertResult:
    """Per-item result of :meth:`Store.insert_tasks`."""

    task: TaskRecord
    created: bool
    """False when the idempotency key already named a task (``task`` is that one)."""
    debounced: bool = False
    """The submission replaced its debounce key's pending task (``task``, not created)."""
    throttled: bool = False
    """The submission fell inside its throttle key's period: ``task`` is the one that
    opened the period (not created)."""
