"""The value types every layer shares: tasks, keys, pools, assignments and outcomes.

The store, the engine, the index, the Kafka wire format and both SDKs speak these types;
they import nothing but the state machine, the jitter modes and the error root, so an
SDK that names a task never loads the persistence package (River's ``rivertype``).
"""

from __future__ import annotations

import array
import dataclasses
import enum
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from scheduler._errors import NotFound, StaleFencingToken
from scheduler._frozen import fast_init
from scheduler.jitter import JitterMode
from scheduler.states import TaskState

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
class Tenant:
    """A tenant and its isolation quotas."""

    id: uuid.UUID
    name: str
    tier: str = "STANDARD"
    rate_limit_rps: int = 1000
    max_concurrent_workers: int = 200
    home_region: str = "local"
    created_at: datetime | None = None


class Scope(enum.StrEnum):
    """What an API key may do (docs/keys.md has the RPC of each)."""

    SUBMIT = "submit"
    """Submit and change the tenant's tasks, workflows, schedules and expectations."""
    READ = "read"
    """Get and list anything of the tenant."""
    WORK = "work"
    """The WorkerService: the worker stream, CompleteTask, FailTask."""
    ADMIN = "admin"
    """Administer its own tenant's API keys (never another tenant's)."""


DEFAULT_SCOPES: frozenset[Scope] = frozenset({Scope.SUBMIT, Scope.READ, Scope.WORK})
"""A key created without scopes (and every key made before scopes existed) has these:
everything but ``admin``, so older clients keep working."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ApiKey:
    """An API key's public part; the secret is stored only as a hash."""

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    created_at: datetime | None = None
    revoked: bool = False
    scopes: frozenset[Scope] = DEFAULT_SCOPES
    expires_at: datetime | None = None
    """None: never expires."""
    revoked_at: datetime | None = None
    """When it was revoked (None for keys revoked before this was recorded)."""
    last_used_at: datetime | None = None
    """Last authentication, written at most once a minute per key and node."""
    rotated_from: uuid.UUID | None = None
    """The key this one replaced by a rotation."""

    def usable_at(self, now: datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        return not self.revoked and (self.expires_at is None or now < self.expires_at)


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


class Preloaded(NamedTuple):
    """A task that is PRELOADED and belongs in the wheel at ``due_at``.

    A named tuple, not a dataclass: the timeline rebuilds one from its compact row for
    every task that fires, and a tuple is built several times faster than a frozen
    dataclass."""

    key: TaskKey
    due_at: datetime
    tenant_id: uuid.UUID
    shard_id: int
    pool: Pool
    type: str


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)


def _us(ts: datetime) -> int:
    return (ts - _EPOCH) // _US


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PreloadedGroup:
    """PRELOADED tasks of one (tenant, type, pool) as packed columns: a whole load's
    lean form (recovery, a shard takeover, a reconcile), with no Python object per task.
    Item ``i`` of every column is the same task."""

    tenant_id: uuid.UUID
    type: str
    pool: Pool
    ids: bytes
    """16 bytes per task: each id's ``UUID.bytes`` (big-endian)."""
    scheduled_us: array.array[int]
    """``scheduled_at`` per task, epoch microseconds (``array('q')``)."""
    due_us: array.array[int]
    """``due_at`` per task, epoch microseconds (``array('q')``)."""
    shards: array.array[int]
    """``shard_id`` per task (``array('q')``)."""

    def __len__(self) -> int:
        return len(self.scheduled_us)

    def unpack(self) -> list[Preloaded]:
        """The tasks as ``Preloaded`` (for the paths that need objects)."""
        ids = self.ids
        return [
            Preloaded(
                TaskKey(uuid.UUID(bytes=ids[16 * i : 16 * i + 16]), _EPOCH + s * _US),
                _EPOCH + d * _US,
                self.tenant_id,
                shard,
                self.pool,
                self.type,
            )
            for i, (s, d, shard) in enumerate(
                zip(self.scheduled_us, self.due_us, self.shards, strict=True)
            )
        ]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PreloadedPage:
    """One keyset page of PRELOADED tasks, packed per (tenant, type, pool)."""

    groups: tuple[PreloadedGroup, ...]
    count: int
    """Tasks in the page (a page shorter than asked for is the last)."""
    last: TaskKey | None
    """The page's last key in (scheduled_at, id) order: where the next page starts."""

    @classmethod
    def of(cls, items: Sequence[Preloaded]) -> PreloadedPage:
        """Pack ``items`` (in (scheduled_at, id) order, as a page is)."""
        by_group: dict[tuple[uuid.UUID, str, Pool], list[Preloaded]] = {}
        for p in items:
            by_group.setdefault((p.tenant_id, p.type, p.pool), []).append(p)
        groups = tuple(
            PreloadedGroup(
                tenant_id=tenant_id,
                type=type_,
                pool=pool,
                ids=b"".join(p.key.id.bytes for p in ps),
                scheduled_us=array.array("q", [_us(p.key.scheduled_at) for p in ps]),
                due_us=array.array("q", [_us(p.due_at) for p in ps]),
                shards=array.array("q", [p.shard_id for p in ps]),
            )
            for (tenant_id, type_, pool), ps in by_group.items()
        )
        return cls(groups=groups, count=len(items), last=items[-1].key if items else None)

    def unpack(self) -> list[Preloaded]:
        """Every task as ``Preloaded``, in (scheduled_at, id) order."""
        out = [p for g in self.groups for p in g.unpack()]
        out.sort(key=lambda p: (p.key.scheduled_at, p.key.id))
        return out


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


class TaskOrder(enum.Enum):
    """The order of :meth:`Store.list_tasks`: by requested time (``scheduled_at``) or by
    creation (the UUIDv7 id), each either way; a page token continues its own order."""

    SCHEDULED_ASC = "scheduled_asc"
    SCHEDULED_DESC = "scheduled_desc"
    CREATED_ASC = "created_asc"
    CREATED_DESC = "created_desc"

    @property
    def descending(self) -> bool:
        """Whether the keyset runs downwards (the first page starts at the top)."""
        return self in (TaskOrder.SCHEDULED_DESC, TaskOrder.CREATED_DESC)

    @property
    def query(self) -> str:
        """The name of the store's query for this order."""
        return "list_tasks" if self is TaskOrder.SCHEDULED_ASC else f"list_tasks_{self.value}"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TaskFilter:
    """Filters for :meth:`Store.list_tasks`; all optional, AND-ed; and the order."""

    statuses: Sequence[TaskState] = ()
    type: str | None = None
    scheduled_from: datetime | None = None
    scheduled_to: datetime | None = None
    order: TaskOrder = TaskOrder.SCHEDULED_ASC
    pools: Sequence[Pool] = ()
    idempotency_key: str | None = None
    """Only the task with this key (looked up through the key index: one row at most)."""

    def matches(self, task: TaskRecord) -> bool:
        """Whether ``task`` passes every narrowing of the filter (the order aside)."""
        return (
            (not self.statuses or task.status in self.statuses)
            and (self.type is None or task.type == self.type)
            and (not self.pools or task.pool in self.pools)
            and (self.idempotency_key is None or task.idempotency_key == self.idempotency_key)
            and (self.scheduled_from is None or task.scheduled_at >= self.scheduled_from)
            and (self.scheduled_to is None or task.scheduled_at < self.scheduled_to)
        )


MAX_COUNT_GROUPS = 10_000
"""Groups one :meth:`Store.count_tasks` answer lists at most (its total stays exact)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCount:
    """The number of tasks in one (tenant, state, type, pool) group."""

    tenant_id: uuid.UUID | None
    """The tenant; None unless the count was made for every tenant."""
    state: TaskState
    type: str
    pool: Pool
    count: int


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCounts:
    """:meth:`Store.count_tasks`: the groups (at most :data:`MAX_COUNT_GROUPS`, ordered
    by tenant, state, type, pool) and the exact total over every group."""

    groups: tuple[TaskCount, ...]
    total: int
    truncated: bool


FORECAST_STATES: tuple[TaskState, ...] = (
    TaskState.SCHEDULED,
    TaskState.PRELOADED,
    TaskState.RETRYING,
)
"""The states a forecast counts: tasks that are still to fire."""


@dataclasses.dataclass(frozen=True, slots=True)
class Forecast:
    """:meth:`Store.forecast`: per (bucket index, pool), the tasks whose ``due_at``
    (``firing``) or ``scheduled_at`` (``nominal``) falls in the bucket; per pool, those
    due before the window's start (``overdue``). Missing keys are zero."""

    firing: dict[tuple[int, Pool], int]
    nominal: dict[tuple[int, Pool], int]
    overdue: dict[Pool, int]


@dataclasses.dataclass(frozen=True, slots=True)
class OverdueGroup:
    """:meth:`Store.overdue`: the tasks of one (tenant, type, pool) still to be
    dispatched whose ``due_at`` has passed."""

    tenant_id: uuid.UUID
    type: str
    pool: Pool
    count: int
    oldest_due_at: datetime


MAX_OVERDUE_GROUPS = 1000
"""Groups :meth:`Store.overdue` answers at most (the oldest first)."""


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
    epoch: int | None = None
    """The shard claim's epoch the write was made under (PostgreSQL); None if unrecorded."""
    reason: str = ""
    """Why, in a few words ("dispatched", "failed: <error> (retry 1 of 3)", "lease
    expired"); empty for rows written before the store kept reasons."""
    due_at: datetime | None = None
    """On a dispatch row, the due time it was made for (the commit runs ahead of it:
    see :func:`dispatch_note`); None on other rows."""


def dispatch_note(at: datetime, due_at: datetime | None) -> str:
    """What a dispatch row's time means beside its due time, for ``tickwheel history``
    and the dashboard's timeline: the dispatch commit runs ahead of the due time (the
    node commits a batch a few tens of ms early, then the timing wheel hands each task
    to its worker at its due millisecond), so a history whose DISPATCHED row is earlier
    than the task's due time does not mean it started early. Empty without a due time."""
    if due_at is None:
        return ""
    due = due_at.astimezone(UTC).strftime("%H:%M:%S.%f")[:-3]
    ms = round((due_at - at).total_seconds() * 1000)
    if ms > 0:
        return (
            f"due {due}: committed {ms} ms ahead (the dispatch lead), pushed to the worker at due"
        )
    if ms < 0:
        return f"due {due}: dispatched {-ms} ms late"
    return f"due {due}: dispatched on time"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RefusedWrite:
    """A worker's write that was refused (stale fencing token, or a task held by
    another session): to record (``current_token`` is read by the store) and as read
    back for a task's history."""

    key: TaskKey
    token: int
    """The fencing token the write carried."""
    actor: str
    """The worker id that sent it."""
    write: str
    """What it tried: ack, heartbeat, checkpoint, complete, fail, release or cancel."""
    reason: str
    """The refusal reason sent back to the worker, e.g. ``stale_fencing_token``."""
    at: datetime
    current_token: int = 0
    """The task's fencing token when the write was refused (set when read back)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ActivityBucket:
    """What the audit says happened in one bucket of time (GetActivity)."""

    start: datetime
    dispatched: int = 0
    completed: int = 0
    failed: int = 0
    """Failed attempts (retried or dead-lettered, lease expiries included)."""
    lateness_p50_s: float = 0.0
    """Median of dispatch time minus due time, seconds (0 when nothing dispatched)."""
    lateness_p99_s: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class MaintenanceResult:
    """What :meth:`Store.maintain` did (PostgreSQL partitions; empty for SQLite)."""

    created: tuple[str, ...] = ()
    detached: tuple[str, ...] = ()


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


def raise_for_outcome(outcome: Outcome, key: TaskKey, token: int) -> None:
    """For single (unbatched) callers: STALE -> StaleFencingToken, NOT_FOUND -> NotFound."""
    if outcome is Outcome.STALE:
        raise StaleFencingToken(str(key.id), token)
    if outcome is Outcome.NOT_FOUND:
        raise NotFound("task", str(key.id))
