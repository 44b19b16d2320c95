"""What the reads answer: task listing and counting, forecasts, the audit of transitions
and refused writes, activity, maintenance (``scheduler.types`` re-exports them)."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from scheduler.states import TaskState
from scheduler.types._tasks import Pool, TaskKey, TaskRecord


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
