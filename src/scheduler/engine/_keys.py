"""Concurrency keys on this node: the tasks the store held back, until a slot frees.

A leaf (imports value types only). Owns, per (tenant, type, key), the PRELOADED tasks
whose dispatch the store answered :class:`~scheduler.types.Held` (the key had as many
tasks running as its limit), kept in due order out of the ready queues, and the keyed
tasks this node dispatched. Nothing is polled per task: a keyed task of this node that
leaves its worker (:meth:`KeyGate.freed`, from the slots ledger) sends the next waiting
task of its key back to the ready queues; and every ``recheck_s`` each key that still
waits sends up to its limit back (a slot freed by another node, or by a task this node
did not dispatch; the bound on how late such a slot is used). The store decides: a
task sent back may be held again. Called by the dispatcher.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Callable

from scheduler.types import Held, Preloaded

Key = tuple[uuid.UUID, str, str]
"""(tenant, type, concurrency key)."""


class _Waiting:
    __slots__ = ("due", "limit", "tasks")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.tasks: list[Preloaded] = []
        self.due: list[tuple[float, int]] = []  # (due, id) of tasks[i], for bisect

    def add(self, p: Preloaded) -> None:
        """Keep ``p`` in due order; a task held twice (a reload found it again) once."""
        at = (p.due_at.timestamp(), p.key.id.int)
        i = bisect.bisect_left(self.due, at)
        if i < len(self.due) and self.due[i] == at:
            return
        self.due.insert(i, at)
        self.tasks.insert(i, p)

    def take(self, n: int) -> list[Preloaded]:
        out, self.tasks, self.due = self.tasks[:n], self.tasks[n:], self.due[n:]
        return out


class KeyGate:
    """Held keyed tasks and the wake-ups that send them back."""

    def __init__(self, recheck_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._recheck_s = recheck_s
        self._clock = clock
        self._waiting: dict[Key, _Waiting] = {}
        self._running: dict[uuid.UUID, Key] = {}
        self._freed: dict[Key, int] = {}
        self._next_recheck = 0.0

    def __len__(self) -> int:
        """Tasks held back."""
        return sum(len(w.tasks) for w in self._waiting.values())

    @property
    def keys_waiting(self) -> int:
        """Keys with held tasks."""
        return len(self._waiting)

    def hold(self, p: Preloaded, held: Held) -> None:
        """The store held ``p`` back: it waits, in due order, for a slot of its key."""
        k = (p.tenant_id, p.type, held.concurrency_key)
        w = self._waiting.get(k)
        if w is None:
            w = self._waiting[k] = _Waiting(held.limit)
            if not self._next_recheck:
                self._next_recheck = self._clock() + self._recheck_s
        w.limit = held.limit
        w.add(p)

    def dispatched(self, task_id: uuid.UUID, tenant_id: uuid.UUID, type_: str, key: str) -> None:
        """A keyed task went to a worker from this node."""
        self._running[task_id] = (tenant_id, type_, key)

    @property
    def running_keyed(self) -> bool:
        """Whether a task with a concurrency key runs (else :meth:`freed` is a no-op)."""
        return bool(self._running)

    def freed(self, task_id: uuid.UUID) -> bool:
        """A task left its worker; True when it frees a slot that a held task waits for."""
        k = self._running.pop(task_id, None)
        if k is None or k not in self._waiting:
            return False
        self._freed[k] = self._freed.get(k, 0) + 1
        return True

    def forget(self, task_id: uuid.UUID) -> None:
        """A keyed task's dispatch was undone (given back before it reached a worker)."""
        self._running.pop(task_id, None)

    def recheck_in(self) -> float | None:
        """Seconds until the next re-check of the keys that wait (None: none wait)."""
        if not self._waiting:
            return None
        return max(0.0, self._next_recheck - self._clock())

    def release(self) -> list[Preloaded]:
        """The held tasks to try again now: one per slot freed on this node, and at the
        re-check up to its limit of every key that waits; the first due first."""
        if not self._waiting:
            self._freed.clear()
            self._next_recheck = 0.0
            return []
        out: list[Preloaded] = []
        now = self._clock()
        if now >= self._next_recheck:
            self._next_recheck = now + self._recheck_s
            want = {k: w.limit for k, w in self._waiting.items()}
            for k, n in self._freed.items():
                if k in want:
                    want[k] = max(want[k], n)
        else:
            want = self._freed
        for k, n in want.items():
            w = self._waiting.get(k)
            if w is None:
                continue
            out.extend(w.take(n))
            if not w.tasks:
                del self._waiting[k]
        self._freed = {}
        return out
