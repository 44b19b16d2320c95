"""Task rows: the node's PRELOADED tasks in memory, one compact C row each (issue 41).

A task the node holds is a row of one ``TaskTable`` (id, ``scheduled_at``, ``due_at``,
shard and a group number for the interned (tenant, type, pool, rate limit key): 40
bytes in C, no
Python object), found by its handle or by its id. The timeline's wheel holds the
handles of the timers; when they fire, the dispatcher hands the same handles to the
ready queues, so a due task waiting for a worker costs its row and an 8-byte handle in
its queue, not a ``Preloaded`` object (about 420 bytes with its UUID, key and
datetimes). A row is *timed* while its handle is in the wheel and *waiting* once the
ready queues hold it; the ready queues give a task back as a ``Preloaded`` only when
they hand it out (:meth:`TaskRows.take`, which frees the row).

Owned by the timeline (which creates it and sets :attr:`TaskRows.wheel`) and shared
with the ready queues; calls only the task table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from scheduler.ids import uuid_of_int
from scheduler.types import Pool, Preloaded, TaskKey
from scheduler.wheel import TaskTable, TimingWheel

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)

Group = tuple[uuid.UUID, str, Pool, str]
"""(tenant, type, pool, rate limit key): what every row of one group shares."""


class TaskRows:
    """The task table, its interned groups and the wheel that times some of its rows."""

    __slots__ = ("_group_of", "_last", "groups", "on_group", "table", "wheel")

    def __init__(self) -> None:
        self.table = TaskTable()
        self.groups: list[Group] = []
        """(tenant, type, pool, rate limit key) by group number: a handful per node."""
        self._group_of: dict[Group, int] = {}
        self._last: tuple[int, datetime, int, datetime] = (0, _EPOCH, 0, _EPOCH)
        """The times :meth:`rebuild` built last (µs and datetime: scheduled, due)."""
        self.wheel: TimingWheel | None = None
        """The wheel whose keys are this table's handles (None: nothing is timed)."""
        self.on_group: Callable[[int, Pool], None] | None = None
        """Told each group number as it is interned, with its pool (the timeline keeps
        the latest due time of a reserve's pool per group, so no task pays for it)."""

    def __len__(self) -> int:
        return len(self.table)

    def group(self, tenant_id: uuid.UUID, type_: str, pool: Pool, rate_key: str = "") -> int:
        """The group number of (tenant, type, pool, rate limit key), interned on first use."""
        key = (tenant_id, type_, pool, rate_key)
        n = self._group_of.get(key)
        if n is None:
            n = self._group_of[key] = len(self.groups)
            self.groups.append(key)
            if self.on_group is not None:
                self.on_group(n, pool)
        return n

    def add(self, p: Preloaded) -> int:
        """A row for ``p``; its handle, or -1 if the task has a row already."""
        key = p.key
        return self.table.add(
            key.id.int,
            (key.scheduled_at - _EPOCH) // _US,
            (p.due_at - _EPOCH) // _US,
            self.group(p.tenant_id, p.type, p.pool, p.rate_key),
            p.shard_id,
        )

    def find(self, task_id: uuid.UUID) -> int:
        """The handle of ``task_id``'s row, or -1."""
        return self.table.find(task_id.int)

    def timed(self, handle: int) -> bool:
        """Whether the row's task waits in the wheel (not in the ready queues)."""
        wheel = self.wheel
        return wheel is not None and handle in wheel

    def untime(self, handle: int) -> None:
        """Take a timed row's task out of the wheel and forget the row (it is queued
        ready instead, from the object the caller holds)."""
        if self.wheel is not None:
            self.wheel.cancel(handle)
        self.table.discard(handle)

    def preloaded(self, handle: int) -> Preloaded:
        """The row as a ``Preloaded`` (the row stays)."""
        return self.rebuild(self.table.get(handle))

    def take(self, handle: int) -> Preloaded:
        """The row as a ``Preloaded``, and the row freed."""
        return self.rebuild(self.table.pop(handle))

    def discard(self, handle: int) -> None:
        """Free a row."""
        self.table.discard(handle)

    def rebuild(self, row: tuple[int, int, int, int, int]) -> Preloaded:
        """A ``Preloaded`` from a row of the table."""
        task_id, scheduled_us, due_us, group, shard = row
        tenant_id, type_, pool, rate_key = self.groups[group]
        # The last times built are used again (datetimes are immutable): the tasks of a
        # stampede share one scheduled_at, and a burst's one due time.
        last = self._last
        same = scheduled_us == last[0]
        scheduled = last[1] if same else _EPOCH + timedelta(0, 0, scheduled_us)
        if due_us == scheduled_us:
            due = scheduled
        elif due_us == last[2]:
            due = last[3]
        else:
            due = _EPOCH + timedelta(0, 0, due_us)
        self._last = (scheduled_us, scheduled, due_us, due)
        return Preloaded(
            TaskKey(uuid_of_int(task_id), scheduled),
            due,
            tenant_id,
            shard,
            pool,
            type_,
            rate_key,
        )
