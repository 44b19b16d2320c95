"""Dispatch and the fenced writes: what a worker is assigned, what it writes back
(complete, fail, release) and what each write did (``scheduler.types`` re-exports them)."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import datetime

from scheduler._errors import NotFound, StaleFencingToken
from scheduler._frozen import fast_init
from scheduler.states import TaskState
from scheduler.types._preloaded import Preloaded
from scheduler.types._tasks import JSON, Pool, RawJSON, TaskKey, TaskRecord


@fast_init  # built per task: scheduler._frozen
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


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """What a worker receives: everything needed to run and fence the task."""

    key: TaskKey
    tenant_id: uuid.UUID
    type: str
    payload: JSON | RawJSON
    fencing_token: int
    attempt: int
    """1 for the first run; retry_count + 1."""
    max_retries: int
    due_at: datetime
    lease_expires_at: datetime
    checkpoint: JSON | RawJSON | None
    trace_context: JSON | None
    pool: Pool
    worker_id: str
    timeout_s: float
    concurrency_key: str | None = None
    """The task's concurrency key: the slot of its key is held until the task leaves
    DISPATCHED/RUNNING (docs/flow-control.md)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Held:
    """A dispatch the store refused because the task's concurrency key is at its limit:
    the task stays PRELOADED (``Store.mark_dispatched``)."""

    concurrency_key: str
    limit: int
    """The key's limit (its type's): how many of its tasks may run at once."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """How many tasks of one concurrency key of a (tenant, type) may run at once."""

    tenant_id: uuid.UUID
    type: str
    limit: int


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


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FencedWrite:
    """A worker's fenced write on one task."""

    key: TaskKey
    token: int


@fast_init  # built per task: scheduler._frozen
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """A fenced success."""

    key: TaskKey
    token: int
    result: JSON | RawJSON | None = None
    acked_at: datetime | None = None
    """Set by the engine when the task's ack was not yet written: the ack is written
    with the completion (DISPATCHED -> RUNNING -> COMPLETED in one write, both audit
    rows, the ack's at this time). None: the task must be RUNNING."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A fenced failure; the store decides RETRYING vs DEAD_LETTER."""

    key: TaskKey
    token: int
    error: str
    retryable: bool = True
    retry_at: datetime | None = None
    """When the retry becomes due (engine computes backoff + jitter) for a task without
    a retry policy of its own."""
    error_type: str = ""
    """The error's type (exception class name): a type the task's retry policy lists
    dead-letters at once."""
    spread: float = 1.0
    """The deterministic spread factor (1 to 1.25) the store applies to the backoff of
    a task with its own retry policy."""
    traceback: str = ""
    """The error's traceback as the worker sent it (kept as ``last_traceback``)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """A fenced lease release (graceful drain); RUNNING/DISPATCHED -> PRELOADED."""

    key: TaskKey
    token: int
    checkpoint: JSON | RawJSON | None = None
    dispatched_only: bool = False
    """A closed stream's give-back: only a DISPATCHED (never acked) task goes back; a
    RUNNING one keeps its lease (another node's stream of the same worker may have
    acked it) and the write answers STALE."""


@fast_init  # built per task: scheduler._frozen
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


def raise_for_outcome(outcome: Outcome, key: TaskKey, token: int) -> None:
    """For single (unbatched) callers: STALE -> StaleFencingToken, NOT_FOUND -> NotFound."""
    if outcome is Outcome.STALE:
        raise StaleFencingToken(str(key.id), token)
    if outcome is Outcome.NOT_FOUND:
        raise NotFound("task", str(key.id))
