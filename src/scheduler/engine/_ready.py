"""Ready queues: due tasks waiting for a worker slot, per pool, fair between tenants.

Inside a pool, tenants share by weight with deficit round robin (Shreedhar & Varghese):
each active tenant sits in a ring; a visit grants it ``weight`` credits and it is
served one task per credit before the ring moves on, so over any window the tasks
handed out per tenant follow their weights, and a tenant with a million bulk tasks
cannot starve a tenant with a hundred. Inside one tenant, tasks go out in due order
(the earliest head among the types a worker runs), whatever path brought them here: the
wheel, a takeover's index load or store check, a reconcile, a release, a retry, a
failed commit giving them back (issue 17: a FIFO queue sent 71 tasks found late by a
takeover 44 s after their due time, behind tasks due 27 s after them).
"""

from __future__ import annotations

import array
import asyncio
import collections
import heapq
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta

from scheduler.engine._rows import TaskRows
from scheduler.types import Pool, Preloaded
from scheduler.wheel import TaskTable

POOL_ORDER: tuple[Pool, ...] = (Pool.CRITICAL, Pool.STANDARD, Pool.BULK)
"""Critical is first in line for every free slot, then standard, then bulk."""

Veto = Callable[[Pool, uuid.UUID, str, str], bool]
"""Issue 43's per-round gate: ``veto(pool, tenant, type, rate_key)`` is True when that
lane's tasks must wait this round (a paused type or pool, a rate limit key out of
tokens). The lane's tasks stay where they are, in due order."""


Paused = Callable[[uuid.UUID, str, Pool], bool]
"""``paused(tenant, type, pool)``: whether a dispatch pause holds that lane."""


def lane_of(type_: str, rate_key: str) -> str:
    """A tenant's queue name for a type and rate limit key: the type alone without a
    key (a type is printable ASCII without spaces, so the separator cannot clash)."""
    return f"{type_}\x1f{rate_key}" if rate_key else type_


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_NEVER = -(1 << 63)


_COMPACT = 4096
"""A run drops its popped head once it is this long and over half the run."""


class _DueQueue:
    """One tenant's tasks of one lane (a type, and a rate limit key when the tasks name
    one; row handles), popped in due order whatever order they came in.

    Most tasks arrive in due order (the wheel fires them so): their handles go on the
    ``run``, an ``array('q')`` whose due times never decrease (8 bytes a task; ``head``
    is the next one, the popped prefix is dropped in bulk), in O(1). A task older than
    the run's last (found late by a takeover's store check or a reconcile, released by
    a worker, given back after a failed commit) goes on the ``late`` heap, keyed by
    (due µs, seq), in O(log n). The next task is the earlier of the two heads.
    """

    __slots__ = ("head", "lane", "last", "late", "rate_key", "run", "type")

    def __init__(self, type_: str, rate_key: str = "") -> None:
        self.type = type_
        self.rate_key = rate_key
        self.lane = lane_of(type_, rate_key)
        self.run = array.array("q")
        self.head = 0
        self.last = _NEVER  # due µs of the run's last task
        self.late: list[tuple[int, int, int]] = []

    def __len__(self) -> int:
        return len(self.run) - self.head + len(self.late)

    def push(self, handle: int, due_us: int, seq: Iterator[int]) -> None:
        if due_us >= self.last or len(self.run) == self.head:
            self.run.append(handle)
            self.last = due_us
        else:
            heapq.heappush(self.late, (due_us, next(seq), handle))

    def head_due(self, table: TaskTable) -> int:
        """The due time (µs) of the next task (the queue is not empty)."""
        run, late = self.run, self.late
        if len(run) == self.head:
            return late[0][0]
        due = table.due_us(run[self.head])
        return late[0][0] if late and late[0][0] < due else due

    def pop(self, table: TaskTable) -> int:
        """The handle of the task due first (the queue is not empty)."""
        run, late, head = self.run, self.late, self.head
        if late and (len(run) == head or late[0][0] < table.due_us(run[head])):
            return heapq.heappop(late)[2]
        handle = run[head]
        head += 1
        if head == len(run):
            del run[:]
            head = 0
        elif head >= _COMPACT and 2 * head >= len(run):
            del run[:head]
            head = 0
        self.head = head
        return handle

    def handles(self) -> list[int]:
        return [*self.run[self.head :], *(e[2] for e in self.late)]

    def discard(self, handle: int) -> bool:
        """Drop ``handle``; whether it was here. O(n), for a cancel."""
        try:
            i = self.run.index(handle, self.head)
        except ValueError:
            pass
        else:
            del self.run[i]
            return True
        for i, e in enumerate(self.late):
            if e[2] == handle:
                self.late[i] = self.late[-1]
                self.late.pop()
                heapq.heapify(self.late)
                return True
        return False

    def keep(self, keep: Callable[[int], bool]) -> int:
        """Drop the handles ``keep`` refuses; how many went."""
        before = len(self)
        self.run = array.array("q", [h for h in self.run[self.head :] if keep(h)])
        self.head = 0
        self.late = [e for e in self.late if keep(e[2])]
        heapq.heapify(self.late)
        return before - len(self)


class _Tenant:
    """One tenant's waiting tasks in one pool, by lane (type, and rate limit key when
    the task names one), and its banked share."""

    __slots__ = ("deficit", "id", "keyed", "types")

    def __init__(self, tenant_id: uuid.UUID) -> None:
        self.id = tenant_id
        self.types: dict[str, _DueQueue] = {}
        """By lane (:func:`lane_of`)."""
        self.deficit = 0
        self.keyed = False
        """A task with a rate limit key came (its lane is not named by its type)."""

    def pop(
        self,
        types: frozenset[str] | None,
        table: TaskTable,
        veto: Veto | None = None,
        pool: Pool = Pool.STANDARD,
    ) -> int:
        """The handle of the task due first among ``types`` (None: any type) in the
        lanes ``veto`` lets through, or -1."""
        by_type = self.types
        best: _DueQueue | None = None
        if len(by_type) == 1:  # the common case: one type per tenant
            for queue in by_type.values():
                if (types is None or queue.type in types) and (
                    veto is None or not veto(pool, self.id, queue.type, queue.rate_key)
                ):
                    best = queue
        else:
            candidates: Iterable[_DueQueue | None]
            if veto is not None:
                candidates = [
                    q
                    for q in by_type.values()
                    if (types is None or q.type in types)
                    and not veto(pool, self.id, q.type, q.rate_key)
                ]
            elif types is None:  # any type (a broker outlet)
                candidates = by_type.values()
            elif self.keyed:
                candidates = [q for q in by_type.values() if q.type in types]
            elif len(types) <= len(by_type):
                candidates = [by_type.get(t) for t in types]
            else:
                candidates = [q for t, q in by_type.items() if t in types]
            best_due = 0
            for candidate in candidates:
                if candidate is None:
                    continue
                due = candidate.head_due(table)
                if best is None or due < best_due:
                    best, best_due = candidate, due
        if best is None:
            return -1
        handle = best.pop(table)
        if not best.late and len(best.run) == best.head:  # empty (no __len__ call a task)
            del by_type[best.lane]
        return handle


class _PoolQueue:
    __slots__ = ("count", "ring", "tenants")

    def __init__(self) -> None:
        # By the tenant id's int: a UUID hashes in Python, an int in C.
        self.tenants: dict[int, _Tenant] = {}
        self.ring: collections.deque[_Tenant] = collections.deque()
        self.count = 0

    def queue(self, tenant_id: uuid.UUID, type_: str, rate_key: str = "") -> _DueQueue:
        """The queue of (tenant, lane), made (and the tenant put in the ring) if new."""
        key = tenant_id.int
        tenant = self.tenants.get(key)
        if tenant is None:
            tenant = self.tenants[key] = _Tenant(tenant_id)
            self.ring.append(tenant)
        lane = lane_of(type_, rate_key) if rate_key else type_
        queue = tenant.types.get(lane)
        if queue is None:
            queue = tenant.types[lane] = _DueQueue(type_, rate_key)
            if rate_key:
                tenant.keyed = True
        return queue

    def drop_if_empty(self, tenant: _Tenant) -> None:
        if not tenant.types:
            del self.tenants[tenant.id.int]
            self.ring.remove(tenant)

    def pop(
        self,
        weight: Callable[[uuid.UUID], int],
        types: frozenset[str] | None,
        tenant_id: uuid.UUID | None,
        allow: Callable[[uuid.UUID], bool],
        table: TaskTable,
        veto: Veto | None = None,
        pool: Pool = Pool.STANDARD,
    ) -> int:
        if tenant_id is not None:  # a tenant-scoped worker: only its own tasks
            scoped = self.tenants.get(tenant_id.int)
            if scoped is None or not allow(tenant_id):
                return -1
            handle = scoped.pop(types, table, veto, pool)
            if handle >= 0:
                # Its own workers' tasks use up the share it banked, never below none:
                # a debt here would starve the shared workers of this tenant for good.
                scoped.deficit = max(0, scoped.deficit - 1)
                self.count -= 1
                self.drop_if_empty(scoped)
            return handle
        ring = self.ring
        for _ in range(2 * len(ring) + 1):
            if not ring:
                return -1
            head = ring[0]
            if head.deficit < 1:
                head.deficit += max(1, weight(head.id))
                ring.rotate(-1)
                continue
            handle = head.pop(types, table, veto, pool) if allow(head.id) else -1
            if handle < 0:
                ring.rotate(-1)  # nothing this worker can run: keep its credit
                continue
            head.deficit -= 1
            self.count -= 1
            if not head.types:
                self.drop_if_empty(head)
            return handle
        return -1

    def tenant_counts(self) -> dict[uuid.UUID, int]:
        return {
            tenant.id: sum(len(q) for q in tenant.types.values())
            for tenant in self.tenants.values()
        }


class ReadyQueues:
    """Due tasks per pool; :meth:`pop` picks the next one a worker may run.

    A waiting task is a row of the node's task table (``_rows.py``, shared with the
    timeline: a fired timer's row stays where it is and only its handle moves here) and
    a handle in its (tenant, type) queue; it becomes a ``Preloaded`` again only when
    :meth:`pop` hands it out. A task waits here at most once (a reconcile re-reads
    tasks that already wait: they stay PRELOADED in the store until their dispatch
    commits), and never in the wheel at the same time.
    """

    def __init__(self, weight: Callable[[uuid.UUID], int], rows: TaskRows | None = None) -> None:
        self._weight = weight
        self._rows = TaskRows() if rows is None else rows
        self._pools = {pool: _PoolQueue() for pool in POOL_ORDER}
        self._count = 0
        self._seq = itertools.count()
        self.paused: frozenset[uuid.UUID] = frozenset()
        """Tenants whose tasks wait without being dispatched: a home move froze them
        here or took them away (set by the engine's ``MoveWatch``)."""
        self.paused_known = asyncio.Event()
        """Set once :attr:`paused` has been read from the store: the dispatcher waits
        for it, so a node that (re)starts never dispatches a moved tenant's rows."""
        self.paused_known.set()  # a MoveWatch clears it until its first read

    def __len__(self) -> int:
        return self._count

    def __contains__(self, task_id: object) -> bool:
        if not isinstance(task_id, uuid.UUID):
            return False
        handle = self._rows.find(task_id)
        return handle >= 0 and not self._rows.timed(handle)

    def depth(self, pool: Pool) -> int:
        """Tasks waiting in ``pool``."""
        return self._pools[pool].count

    def push(self, task: Preloaded) -> None:
        """Queue a due task, in due order with what waits (a task given back after a
        failed commit goes out first again: it is the oldest). Ignored if it waits; a
        task still in the wheel leaves it (it waits here now)."""
        rows = self._rows
        handle = rows.find(task.key.id)
        if handle >= 0:
            if not rows.timed(handle):
                return
            rows.untime(handle)
        handle = rows.add(task)
        self._pools[task.pool].queue(task.tenant_id, task.type, task.rate_key).push(
            handle, (task.due_at - _EPOCH) // _US, self._seq
        )
        self._pools[task.pool].count += 1
        self._count += 1

    def extend(self, tasks: Iterable[Preloaded]) -> None:
        """Queue many due tasks."""
        for task in tasks:
            self.push(task)

    def extend_handles(self, handles: Iterable[int]) -> None:
        """Queue the rows ``handles`` (timers the wheel just fired, in due order; the
        rows stay in the shared table: no object is built)."""
        get = self._rows.table.get
        groups = self._rows.groups
        pools, seq = self._pools, self._seq
        queues: dict[int, tuple[_PoolQueue, _DueQueue]] = {}
        n = 0
        for handle in handles:
            _, _, due_us, group, _ = get(handle)
            found = queues.get(group)
            if found is None:
                tenant_id, type_, pool, rate_key = groups[group]
                pq = pools[pool]
                found = queues[group] = (pq, pq.queue(tenant_id, type_, rate_key))
            found[1].push(handle, due_us, seq)
            found[0].count += 1
            n += 1
        self._count += n

    def pop(
        self,
        pool: Pool,
        types: frozenset[str] | None,
        tenant: uuid.UUID | None,
        allow: Callable[[uuid.UUID], bool] = lambda _t: True,
        veto: Veto | None = None,
    ) -> Preloaded | None:
        """The next task of ``pool`` with a type in ``types`` (None: any type);
        ``tenant`` None means any
        tenant (a shared worker), chosen by weighted deficit round robin. ``allow``
        vetoes tenants that are out of quota, ``veto`` lanes that a flow rule holds
        (issue 43). Inside a tenant: the task due first."""
        handle = self._pools[pool].pop(
            self._weight, types, tenant, allow, self._rows.table, veto, pool
        )
        if handle < 0:
            return None
        self._count -= 1
        return self._rows.take(handle)

    def remove(self, task_id: uuid.UUID) -> bool:
        """Drop a task (cancelled while waiting); O(its queue) but rare."""
        rows = self._rows
        handle = rows.find(task_id)
        if handle < 0 or rows.timed(handle):
            return False
        p = rows.preloaded(handle)
        pq = self._pools[p.pool]
        tenant = pq.tenants.get(p.tenant_id.int)
        lane = lane_of(p.type, p.rate_key)
        queue = None if tenant is None else tenant.types.get(lane)
        if tenant is None or queue is None or not queue.discard(handle):
            return False
        rows.discard(handle)
        pq.count -= 1
        self._count -= 1
        if not queue:
            del tenant.types[lane]
        pq.drop_if_empty(tenant)
        return True

    def remove_where(self, drop: Callable[[Preloaded], bool]) -> int:
        """Drop every waiting task ``drop`` picks (shards this node lost); O(n)."""
        removed = 0
        rows = self._rows

        def keep(handle: int) -> bool:
            if drop(rows.preloaded(handle)):
                rows.discard(handle)
                return False
            return True

        for pq in self._pools.values():
            for tenant in list(pq.tenants.values()):
                for type_, queue in list(tenant.types.items()):
                    gone = queue.keep(keep)
                    removed += gone
                    pq.count -= gone
                    if not queue:
                        del tenant.types[type_]
                pq.drop_if_empty(tenant)
        self._count -= removed
        return removed

    def waiting(self) -> list[Preloaded]:
        """Every waiting task (O(n): for tests and probes)."""
        return [
            self._rows.preloaded(h)
            for pq in self._pools.values()
            for t in pq.tenants.values()
            for q in t.types.values()
            for h in q.handles()
        ]

    def waiting_for(
        self,
        pools: Iterable[Pool],
        types: frozenset[str] | None,
        tenant: uuid.UUID | None,
        paused: Paused | None = None,
    ) -> tuple[int, int]:
        """How many waiting tasks a worker of ``tenant`` (None: a shared worker, any
        tenant) running ``types`` (None: any) in ``pools`` could take, and apart from
        them how many of its lanes ``paused`` holds (a dispatch pause, issue 43);
        O(tenants x types), for the backlog reports (``_backlog.py``), never per task."""
        n = held = 0
        for pool in pools:
            pq = self._pools[pool]
            if not pq.count:
                continue
            if tenant is None:
                candidates: Iterable[_Tenant] = pq.tenants.values()
            else:
                scoped = pq.tenants.get(tenant.int)
                candidates = () if scoped is None else (scoped,)
            for t in candidates:
                if t.id in self.paused:
                    continue
                for queue in t.types.values():
                    if types is None or queue.type in types:
                        if paused is not None and paused(t.id, queue.type, pool):
                            held += len(queue)
                        else:
                            n += len(queue)
        return n, held

    def has_lane(self, tenant_id: uuid.UUID, task_type: str, pool: Pool, rate_key: str) -> bool:
        """Whether tasks of this lane wait."""
        t = self._pools[pool].tenants.get(tenant_id.int)
        return t is not None and lane_of(task_type, rate_key) in t.types

    def key_counts(self) -> dict[tuple[uuid.UUID, str], int]:
        """Waiting tasks per (tenant, rate limit key), over all pools; O(lanes)."""
        out: collections.Counter[tuple[uuid.UUID, str]] = collections.Counter()
        for q in self._pools.values():
            for t in q.tenants.values():
                if t.keyed:
                    for queue in t.types.values():
                        if queue.rate_key:
                            out[(t.id, queue.rate_key)] += len(queue)
        return dict(out)

    def held(self, veto: Veto) -> dict[tuple[uuid.UUID, str, Pool, str], int]:
        """Waiting tasks of the lanes ``veto`` holds, by (tenant, type, pool, rate
        key); O(lanes), once per round while a flow rule is set."""
        out: dict[tuple[uuid.UUID, str, Pool, str], int] = {}
        for pool, q in self._pools.items():
            for t in q.tenants.values():
                for queue in t.types.values():
                    if veto(pool, t.id, queue.type, queue.rate_key):
                        out[(t.id, queue.type, pool, queue.rate_key)] = len(queue)
        return out

    def tenants(self) -> set[uuid.UUID]:
        """Tenants with waiting tasks."""
        return {t.id for q in self._pools.values() for t in q.tenants.values()}

    def tenant_counts(self) -> dict[uuid.UUID, int]:
        """Waiting tasks per tenant over all pools."""
        out: collections.Counter[uuid.UUID] = collections.Counter()
        for q in self._pools.values():
            out.update(q.tenant_counts())
        return dict(out)
