"""Waiters: callers of WaitTask parked until their task settles (a leaf).

Owns one set of events per waited-for task id. The completer and the facade call
:meth:`Waiters.settled` after a write that made tasks COMPLETED, CANCELLED or
DEAD_LETTER on this node; :meth:`Engine.wait_task` parks on an event and re-reads the
store when it fires, and also every ``recheck_s`` so a task settled by another node,
the lease reaper or a workflow's upstream policy is seen too (a slow fallback, one
read per waiter per interval; the common paths wake at once).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from scheduler.states import TERMINAL, TaskState

SETTLED: frozenset[TaskState] = TERMINAL | {TaskState.DEAD_LETTER}
"""The states a WaitTask answers on: no worker will touch the task again unless an
operator redrives a dead letter."""

MAX_WAIT_S = 60.0
"""The longest one WaitTask call parks (clients call again to wait longer)."""


class Waiters:
    """Events per task id, set when the task settles."""

    def __init__(self) -> None:
        self._events: dict[uuid.UUID, set[asyncio.Event]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._events.values())

    @contextmanager
    def watch(self, task_id: uuid.UUID) -> Iterator[asyncio.Event]:
        """An event set when ``task_id`` settles on this node, for the block's length."""
        event = asyncio.Event()
        self._events.setdefault(task_id, set()).add(event)
        try:
            yield event
        finally:
            events = self._events.get(task_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._events[task_id]

    def settled(self, task_ids: Iterable[uuid.UUID]) -> None:
        """Tasks that reached a settled state: wake whoever waits for them."""
        if not self._events:
            return
        for task_id in task_ids:
            for event in self._events.get(task_id, ()):
                event.set()
