"""The store protocol: what the engine needs from the durable record.

Two implementations satisfy it (PostgreSQL for production, SQLite for the embedded
default) and one conformance suite runs against both.

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

import dataclasses
import enum
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from scheduler._errors import NotFound, StaleFencingToken
from scheduler.jitter import JitterMode
from scheduler.states import TaskState

JSON = dict[str, Any]


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
class Tenant:
    """A tenant and its isolation quotas."""

    id: uuid.UUID
    name: str
    tier: str = "STANDARD"
    rate_limit_rps: int = 1000
    max_concurrent_workers: int = 200
    home_region: str = "local"
    created_at: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """An API key's public part; the secret is stored only as a hash."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    created_at: datetime | None = None
    revoked: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """A task to insert. The engine fills ids, shard and the effective due time."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    type: str
    payload: JSON
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
    depends_on: tuple[uuid.UUID, ...] = ()
    """DAG parents (task ids, same ``workflow_id``): the store writes the edges in the
    inserting transaction and sets ``unresolved_dependencies`` to their number. Parents
    must not have completed yet (insert a workflow as one batch, parents first)."""


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
    payload: JSON
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

    @property
    def key(self) -> TaskKey:
        """(id, scheduled_at)."""
        return TaskKey(self.id, self.scheduled_at)


@dataclasses.dataclass(frozen=True, slots=True)
class InsertResult:
    """Per-item result of :meth:`Store.insert_tasks`."""

    task: TaskRecord
    created: bool
    """False when the idempotency key already named a task (``task`` is that one)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Preloaded:
    """A task that is PRELOADED and belongs in the wheel at ``due_at``."""

    key: TaskKey
    due_at: datetime
    tenant_id: uuid.UUID
    shard_id: int
    pool: Pool
    type: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DispatchRequest:
    """One task to move PRELOADED -> DISPATCHED (or RUNNING) for a given worker."""

    key: TaskKey
    worker_id: str
    lease_expires_at: datetime
    epoch: int | None = None
    """The dispatching node's epoch for the task's shard: the dispatch is accepted only
    while the shard's epoch is still this one (None: no check, a single node)."""
    running: bool = False
    """The worker starts tasks on delivery and sends no ack: commit RUNNING instead of
    DISPATCHED (the attempt starts with the dispatch)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """What a worker receives: everything needed to run and fence the task."""

    key: TaskKey
    tenant_id: uuid.UUID
    type: str
    payload: JSON
    fencing_token: int
    attempt: int
    """1 for the first run; retry_count + 1."""
    max_retries: int
    due_at: datetime
    lease_expires_at: datetime
    checkpoint: JSON | None
    trace_context: JSON | None
    pool: Pool
    worker_id: str
    timeout_s: float


@dataclasses.dataclass(frozen=True, slots=True)
class ShardClaim:
    """One change of a shard's owner."""

    shard_id: int
    epoch: int
    owner: str
    claimed_at: datetime


class Outcome(enum.StrEnum):
    """Per-item result of a fenced batch write."""

    OK = "ok"
    STALE = "stale"
    """Token not current, or status not a legal source: the writer is a zombie."""
    NOT_FOUND = "not_found"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FencedWrite:
    """A worker's fenced write on one task."""

    key: TaskKey
    token: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A fenced success."""

    key: TaskKey
    token: int
    result: JSON | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A fenced failure; the store decides RETRYING vs DEAD_LETTER."""

    key: TaskKey
    token: int
    error: str
    retryable: bool = True
    retry_at: datetime | None = None
    """When the retry becomes due (engine computes backoff + jitter)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """A fenced lease release (graceful drain); RUNNING/DISPATCHED -> PRELOADED."""

    key: TaskKey
    token: int
    checkpoint: JSON | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CompleteResult:
    """Per-item result of :meth:`Store.complete`."""

    outcome: Outcome
    ready_children: tuple[Preloaded, ...] = ()
    """DAG children whose counter reached zero in this transaction and that are now
    PRELOADED (the engine puts them in the wheel at their ``due_at``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FailResult:
    """Per-item result of :meth:`Store.fail`."""

    outcome: Outcome
    new_state: TaskState | None = None
    """RETRYING or DEAD_LETTER when ``outcome`` is OK."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReclaimResult:
    """What :meth:`Store.reclaim_expired` did."""

    requeued: tuple[Preloaded, ...]
    """DISPATCHED past their lease, back to PRELOADED (into the wheel again)."""
    retrying: tuple[TaskKey, ...]
    """RUNNING past their lease: an attempt counted, now RETRYING."""
    dead_lettered: tuple[TaskKey, ...]
    cancelled: tuple[TaskKey, ...]
    """RUNNING with a pending cancel whose lease lapsed."""


@dataclasses.dataclass(frozen=True, slots=True)
class CancelResult:
    """What :meth:`Store.cancel` did."""

    task: TaskRecord
    notify_worker: str | None
    """Worker id to tell over its stream when the task was DISPATCHED/RUNNING (the
    task is marked ``cancel_requested``; it ends CANCELLED when the worker confirms or
    its lease lapses)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskFilter:
    """Filters for :meth:`Store.list_tasks`; all optional, AND-ed."""

    statuses: Sequence[TaskState] = ()
    type: str | None = None
    scheduled_from: datetime | None = None
    scheduled_to: datetime | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """A page of tasks and the opaque token of the next page ('' at the end)."""

    tasks: tuple[TaskRecord, ...]
    next_page_token: str


@dataclasses.dataclass(frozen=True, slots=True)
class Transition:
    """One row of the append-only audit of state changes."""

    from_state: TaskState
    to_state: TaskState
    fencing_token: int
    actor: str
    """The worker id for worker writes, else the store's configured actor."""
    at: datetime


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceResult:
    """What :meth:`Store.maintain` did (PostgreSQL partitions; empty for SQLite)."""

    created: tuple[str, ...] = ()
    detached: tuple[str, ...] = ()


# Imported here, not at the top: the orchestration types build on the ones above.
from scheduler.store._orchestration import OrchestrationStore  # noqa: E402


class Store(OrchestrationStore, Protocol):
    """The durable record. Every method is a coroutine and safe to call concurrently.

    Workflow, schedule, expectation and canary methods come from
    :class:`~scheduler.store._orchestration.OrchestrationStore`.
    """

    # -- lifecycle ---------------------------------------------------------
    async def close(self) -> None:
        """Release connections; safe to call twice."""
        ...

    # -- tenants and keys ----------------------------------------------------
    async def create_tenant(self, tenant: Tenant) -> Tenant: ...

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant: ...

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant: ...

    async def create_api_key(
        self, tenant_id: uuid.UUID, name: str, secret_hash: bytes
    ) -> ApiKey: ...

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None: ...

    # -- submission ------------------------------------------------------------
    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many; a result per item, in order. Idempotent per (tenant, key)."""
        ...

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id (scheduled_at found through the id index); NotFound for other tenants."""
        ...

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page: ...

    # -- the hot path ------------------------------------------------------------
    async def claim_preload(
        self, shards: Sequence[int] | None, horizon: datetime, limit: int, now: datetime
    ) -> list[Preloaded]:
        """SCHEDULED (no unresolved deps) and RETRYING tasks with due_at <= horizon in
        ``shards`` (None = all) -> PRELOADED. Returns what it moved."""
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

    async def checkpoint(self, key: TaskKey, token: int, data: JSON, now: datetime) -> Outcome: ...

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

    # -- shards (scale-out) -----------------------------------------------------------
    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """A node took these shards: each shard's epoch rises by one (recorded with its
        owner in the append-only ``shard_claims``). Returns shard -> new epoch."""
        ...

    async def shard_claims(self) -> list[ShardClaim]:
        """Every (shard, epoch, owner, when) claimed, for audits and tests."""
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

    # -- upkeep ----------------------------------------------------------------------
    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Create partitions ahead, detach expired ones (PostgreSQL); no-op for SQLite."""
        ...

    # -- work notices (a cluster's nodes share one store) -----------------------------
    async def listen_work(self, on_notice: WorkCallback) -> WorkNotices | None:
        """Hear, from any process, that a shard has work its owner should pick up:
        tasks inserted SCHEDULED (``reconcile=False``: the pre-loader claims them) and
        workflow children released to PRELOADED (``reconcile=True``: the owner re-reads
        its PRELOADED rows). Each write that makes such work sends one notice naming its
        shards, delivered when (and only if) it commits. ``None``: this store has no
        channel to other processes (SQLite; one process owns every shard)."""
        ...


WorkCallback = Callable[[frozenset[int], bool], None]
"""``on_notice(shards, reconcile)`` for :meth:`Store.listen_work`; called on the event
loop, must not block."""


class WorkNotices(Protocol):
    """An open :meth:`Store.listen_work` subscription."""

    async def wait_closed(self) -> None:
        """Return when the subscription ended (its connection was lost, or closed)."""
        ...

    async def close(self) -> None:
        """Stop listening; safe twice."""
        ...


def raise_for_outcome(outcome: Outcome, key: TaskKey, token: int) -> None:
    """For single (unbatched) callers: STALE -> StaleFencingToken, NOT_FOUND -> NotFound."""
    if outcome is Outcome.STALE:
        raise StaleFencingToken(str(key.id), token)
    if outcome is Outcome.NOT_FOUND:
        raise NotFound("task", str(key.id))
