"""The in-flight ledger: which tasks are on workers now, per pool and per tenant.

A leaf (imports no part). Owns the task -> (pool, tenant) map, the count per pool that
the pool gates read, and the per-tenant count of tasks that came back since the quota
was last told. Written by the dispatcher (take, and give back on a failed commit) and by
whoever sees a task leave its worker (the completer, the reaper); the ``on_free``
callback it is given lets an outlet's capacity and the dispatcher know.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Iterable

from scheduler.engine._ready import POOL_ORDER
from scheduler.engine._stats import UNKNOWN, Labels
from scheduler.types import Pool, Preloaded


class Slots:
    """Worker slots in use on this node."""

    def __init__(
        self,
        on_free: Callable[[uuid.UUID], None],
        on_free_many: Callable[[list[uuid.UUID]], None] | None = None,
    ) -> None:
        self._on_free = on_free
        self._on_free_many = on_free_many
        """Told the tasks one :meth:`free_many` freed, in one call (None: ``on_free``
        per task)."""
        self._inflight: dict[uuid.UUID, tuple[Pool, uuid.UUID, str]] = {}
        self._by_pool: dict[Pool, int] = dict.fromkeys(POOL_ORDER, 0)
        self._finished: collections.Counter[uuid.UUID] = collections.Counter()

    def __len__(self) -> int:
        return len(self._inflight)

    def in_pool(self, pool: Pool) -> int:
        """Tasks of ``pool`` on workers now."""
        return self._by_pool[pool]

    def labels(self, task_id: uuid.UUID) -> Labels:
        """(pool, type) of a task on a worker of this node; ``unknown`` for another's
        (the metrics' labels of a write that arrives after a restart, say)."""
        held = self._inflight.get(task_id)
        if held is None:
            return (UNKNOWN, UNKNOWN)
        return (held[0].value, held[2])

    def take(self, task: Preloaded) -> None:
        """``task`` was matched to a worker."""
        self._inflight[task.key.id] = (task.pool, task.tenant_id, task.type)
        self._by_pool[task.pool] += 1

    def give_back(self, task: Preloaded) -> None:
        """The match of ``task`` was undone before it reached a worker (no quota unit
        comes back: the dispatcher refunds its grant instead)."""
        if self._inflight.pop(task.key.id, None) is not None:
            self._by_pool[task.pool] -= 1

    def free(self, task_id: uuid.UUID) -> None:
        """The task left its worker: its pool slot and its tenant's in-flight quota
        unit come back (the quota is told in one batch per round). Idempotent."""
        held = self._inflight.pop(task_id, None)
        if held is not None:
            pool, tenant_id, _type = held
            self._by_pool[pool] -= 1
            self._finished[tenant_id] += 1
            self._on_free(task_id)

    def free_many(self, task_ids: Iterable[uuid.UUID]) -> None:
        """:meth:`free` for each of ``task_ids``, the callback told once (a completion
        batch: one call, not a chain of them a task)."""
        pop, by_pool, finished = self._inflight.pop, self._by_pool, self._finished
        freed: list[uuid.UUID] = []
        for task_id in task_ids:
            held = pop(task_id, None)
            if held is not None:
                by_pool[held[0]] -= 1
                finished[held[1]] += 1
                freed.append(task_id)
        if not freed:
            return
        if self._on_free_many is not None:
            self._on_free_many(freed)
        else:
            for task_id in freed:
                self._on_free(task_id)

    def take_finished(self) -> collections.Counter[uuid.UUID]:
        """Per tenant, the tasks that came back since the last call."""
        done, self._finished = self._finished, collections.Counter()
        return done
