"""Ready queues: due tasks waiting for a worker slot, per pool, fair between tenants.

Inside a pool, tenants share by weight with deficit round robin (Shreedhar & Varghese):
each active tenant sits in a ring; a visit grants it ``weight`` credits and it is
served one task per credit before the ring moves on, so over any window the tasks
handed out per tenant follow their weights, and a tenant with a million bulk tasks
cannot starve a tenant with a hundred. Inside one tenant, tasks of the same type go
out in due order.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Iterable

from scheduler.types import Pool, Preloaded

POOL_ORDER: tuple[Pool, ...] = (Pool.CRITICAL, Pool.STANDARD, Pool.BULK)
"""Critical is first in line for every free slot, then standard, then bulk."""


class _PoolQueue:
    __slots__ = ("count", "deficit", "ring", "tenants")

    def __init__(self) -> None:
        self.tenants: dict[uuid.UUID, dict[str, collections.deque[Preloaded]]] = {}
        self.ring: collections.deque[uuid.UUID] = collections.deque()
        self.deficit: dict[uuid.UUID, int] = {}
        self.count = 0

    def push(self, p: Preloaded, *, front: bool = False) -> None:
        by_type = self.tenants.get(p.tenant_id)
        if by_type is None:
            by_type = self.tenants[p.tenant_id] = {}
            self.ring.append(p.tenant_id)
            self.deficit[p.tenant_id] = 0
        queue = by_type.get(p.type)
        if queue is None:
            queue = by_type[p.type] = collections.deque()
        if front:
            queue.appendleft(p)
        else:
            queue.append(p)
        self.count += 1

    def _pop_type(self, tenant: uuid.UUID, types: frozenset[str] | None) -> Preloaded | None:
        by_type = self.tenants[tenant]
        best: collections.deque[Preloaded] | None = None
        candidates: list[collections.deque[Preloaded] | None]
        if types is None:  # any type (a broker outlet)
            candidates = list(by_type.values())
        elif len(types) <= len(by_type):
            candidates = [by_type.get(t) for t in types]
        else:
            candidates = [q for t, q in by_type.items() if t in types]
        for queue in candidates:
            if queue and (best is None or queue[0].due_at < best[0].due_at):
                best = queue
        if best is None:
            return None
        task = best.popleft()
        if not best:
            del by_type[task.type]
        self.count -= 1
        return task

    def _drop_if_empty(self, tenant: uuid.UUID) -> bool:
        if self.tenants[tenant]:
            return False
        del self.tenants[tenant]
        del self.deficit[tenant]
        self.ring.remove(tenant)
        return True

    def pop(
        self,
        weight: Callable[[uuid.UUID], int],
        types: frozenset[str] | None,
        tenant: uuid.UUID | None,
        allow: Callable[[uuid.UUID], bool],
    ) -> Preloaded | None:
        if tenant is not None:  # a tenant-scoped worker: only its own tasks
            if tenant not in self.tenants or not allow(tenant):
                return None
            task = self._pop_type(tenant, types)
            if task is not None:
                # Its own workers' tasks use up the share it banked, never below none:
                # a debt here would starve the shared workers of this tenant for good.
                self.deficit[tenant] = max(0, self.deficit[tenant] - 1)
                self._drop_if_empty(tenant)
            return task
        for _ in range(2 * len(self.ring) + 1):
            if not self.ring:
                return None
            head = self.ring[0]
            if self.deficit[head] < 1:
                self.deficit[head] += max(1, weight(head))
                self.ring.rotate(-1)
                continue
            task = self._pop_type(head, types) if allow(head) else None
            if task is None:
                self.ring.rotate(-1)  # nothing this worker can run: keep its credit
                continue
            self.deficit[head] -= 1
            self._drop_if_empty(head)
            return task
        return None

    def tenant_counts(self) -> dict[uuid.UUID, int]:
        return {t: sum(len(q) for q in by_type.values()) for t, by_type in self.tenants.items()}


class ReadyQueues:
    """Due tasks per pool; :meth:`pop` picks the next one a worker may run."""

    def __init__(self, weight: Callable[[uuid.UUID], int]) -> None:
        self._weight = weight
        self._pools = {pool: _PoolQueue() for pool in POOL_ORDER}

    def __len__(self) -> int:
        return sum(q.count for q in self._pools.values())

    def depth(self, pool: Pool) -> int:
        """Tasks waiting in ``pool``."""
        return self._pools[pool].count

    def push(self, task: Preloaded, *, front: bool = False) -> None:
        """Queue a due task (``front``: it was taken and is being given back)."""
        self._pools[task.pool].push(task, front=front)

    def extend(self, tasks: Iterable[Preloaded]) -> None:
        """Queue many due tasks."""
        for task in tasks:
            self.push(task)

    def pop(
        self,
        pool: Pool,
        types: frozenset[str] | None,
        tenant: uuid.UUID | None,
        allow: Callable[[uuid.UUID], bool] = lambda _t: True,
    ) -> Preloaded | None:
        """The next task of ``pool`` with a type in ``types`` (None: any type);
        ``tenant`` None means any
        tenant (a shared worker), chosen by weighted deficit round robin. ``allow``
        vetoes tenants that are out of quota."""
        return self._pools[pool].pop(self._weight, types, tenant, allow)

    def remove(self, task_id: uuid.UUID) -> bool:
        """Drop a task (cancelled while waiting); O(queue) but rare."""
        for pq in self._pools.values():
            for tenant, by_type in list(pq.tenants.items()):
                for type_, queue in list(by_type.items()):
                    for item in queue:
                        if item.key.id == task_id:
                            queue.remove(item)
                            pq.count -= 1
                            if not queue:
                                del by_type[type_]
                            pq._drop_if_empty(tenant)
                            return True
        return False

    def remove_where(self, drop: Callable[[Preloaded], bool]) -> int:
        """Drop every waiting task ``drop`` picks (shards this node lost); O(n)."""
        removed = 0
        for pq in self._pools.values():
            for tenant in list(pq.tenants):
                by_type = pq.tenants[tenant]
                for type_ in list(by_type):
                    queue = by_type[type_]
                    keep = collections.deque(p for p in queue if not drop(p))
                    removed += len(queue) - len(keep)
                    pq.count -= len(queue) - len(keep)
                    if keep:
                        by_type[type_] = keep
                    else:
                        del by_type[type_]
                pq._drop_if_empty(tenant)
        return removed

    def tenants(self) -> set[uuid.UUID]:
        """Tenants with waiting tasks."""
        return {t for q in self._pools.values() for t in q.tenants}

    def tenant_counts(self) -> dict[uuid.UUID, int]:
        """Waiting tasks per tenant over all pools."""
        out: collections.Counter[uuid.UUID] = collections.Counter()
        for q in self._pools.values():
            out.update(q.tenant_counts())
        return dict(out)
