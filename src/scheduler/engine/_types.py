"""Value types the engine exchanges with its callers (the transport layer, tests)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from scheduler._frozen import fast_init
from scheduler.jitter import JitterMode
from scheduler.types import JSON, Assignment, FlowOptions, Pool, RawJSON, RetryPolicy, TaskKey


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SubmitSpec:
    """A client's request to run one task (validated by :meth:`Engine.submit`)."""

    type: str
    payload: JSON | RawJSON = dataclasses.field(default_factory=dict)
    """A dict, or JSON text checked already (``scheduler.jsonbytes``): stored as is."""
    scheduled_at: datetime | None = None
    """Timezone-aware; None means now."""
    idempotency_key: str | None = None
    """None: the task id is the key (no deduplication)."""
    pool: Pool = Pool.STANDARD
    strict_timing: bool = False
    jitter_mode: JitterMode | None = None
    """None: the default rule (late-only on a round instant, none otherwise)."""
    max_retries: int = 3
    timeout_s: float = 0.0
    trace_context: JSON | None = None
    retry_policy: RetryPolicy | None = None
    """The task's own backoff and non-retryable error types (max attempts are in
    ``max_retries``); None: the server's defaults."""
    flow: FlowOptions | None = None
    """Debounce, throttle or an idempotency window (issue 43); None: none."""
    concurrency_key: str | None = None
    """At most the type's concurrency limit of this key's tasks run at once,
    cluster-wide (docs/flow-control.md); None: no key."""
    rate_limit_key: str = ""
    """Issue 43: the key whose token bucket paces this task's dispatch; empty: none."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WorkerHello:
    """What a worker announces when it opens its stream."""

    worker_id: str
    tenant_id: uuid.UUID
    task_types: frozenset[str]
    pools: frozenset[Pool] = frozenset(Pool)
    slots: int = 1
    start_on_delivery: bool = False
    """The worker starts a task when it receives it and sends no ack: its dispatches
    commit RUNNING (the attempt starts with the dispatch) instead of DISPATCHED."""
    backlog: bool = False
    """The worker wants :class:`BacklogNotice` events (advisory: how much work waits
    here for it), to move its credit between the nodes of a cluster."""
    early_ms: int = 0
    """How far ahead of a task's due time the worker takes its push and holds it until
    then (``Hello.early_ms``); the session pushes up to the lesser of this and
    ``EngineConfig.push_ahead_ms`` early. 0: at the due instant."""


@dataclasses.dataclass(frozen=True, slots=True)
class AssignmentBatch:
    """Due tasks pushed to a session (never more than its free credit)."""

    assignments: tuple[Assignment, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class CancelNotice:
    """A client cancelled a task this session runs: stop it and confirm."""

    key: TaskKey
    token: int


@dataclasses.dataclass(frozen=True, slots=True)
class BacklogNotice:
    """Advisory: ``waiting`` ready tasks on this node match the session (its tenant,
    types and pools); sent only to a session whose hello asked for it."""

    waiting: int


SessionEvent = AssignmentBatch | CancelNotice | BacklogNotice


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FailureReport:
    """A worker's failed attempt; the engine computes the retry time."""

    key: TaskKey
    token: int
    error: str
    retryable: bool = True
    error_type: str = ""
    """The error's type (exception class name); one the task's policy lists dead-letters."""
    traceback: str = ""
    """The error's traceback as the worker sent it (shown by the dashboard)."""
    attempt: int = 0
    """The attempt that failed (1-based); 0 when unknown (the engine fills it)."""
    tenant_id: uuid.UUID | None = None
    """Owning tenant (the engine fills it; seeds the deterministic retry jitter)."""


class Outlet(Protocol):
    """Broker delivery for one pool (Kafka mode): the engine commits dispatches as
    usual and hands the assignments here at their due tick instead of to a stream.

    Workers consume from the broker and ack, heartbeat and complete over gRPC with the
    fencing token, so the store still decides: at-least-once delivery, exactly-once
    commit. A publish that fails costs a lease expiry (the task is dispatched again).
    """

    @property
    def name(self) -> str:
        """Label used in leases and logs (e.g. the topic)."""
        ...

    @property
    def pool(self) -> Pool:
        """The pool this outlet carries."""
        ...

    @property
    def capacity(self) -> int:
        """Most tasks outstanding through this outlet (dispatched, not yet back)."""
        ...

    async def publish(self, assignments: Sequence[Assignment]) -> None:
        """Hand due assignments to the broker (durably, before returning)."""
        ...
