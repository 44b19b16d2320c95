"""Delivery: committed assignments held in memory until their due tick (or their
early window, to a worker that holds early pushes), then pushed.

Owns the heap of (push instants, session, assignment) waiting for them, an id index of
what it holds, and the cancels that arrived while a task was held (the notice must
follow the task, not reach the worker before it). Calls only the sessions it holds
assignments for (their ``deliver`` and ``notify_cancel``). Called by the dispatcher
(``hold`` after a commit) and by the engine's cancel (``cancel_on_delivery``); runs
its own loop, separate from the dispatcher's so a slow commit never delays a delivery
that was already committed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import uuid
from collections.abc import Callable
from datetime import datetime

from scheduler._aio import wait_event
from scheduler.engine._pacing import EARLY_SHARE
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import to_us
from scheduler.types import Assignment


class Delivery:
    """Commit ahead, deliver on time (brief §12)."""

    def __init__(self, now_us: Callable[[], int], stats: EngineStats) -> None:
        self._now_us = now_us
        """Epoch microseconds: due and now are compared exactly, never to the
        millisecond (the wheel fires ahead by design; this is the gate)."""
        self._stats = stats
        self._heap: list[tuple[int, int, WorkerSession, Assignment, int]] = []
        """``(latest, seq, session, assignment, earliest)``: the push instants in epoch
        microseconds, ordered by the latest (see :meth:`hold`)."""
        self._seq = itertools.count()
        self._holding: dict[uuid.UUID, int] = {}
        """How many times each task is held (a plain dict: a Counter's missing key is a
        Python call, a task)."""
        self._last_due: tuple[datetime | None, int] = (None, 0)
        """The last due time converted, and its microseconds (a burst shares one)."""
        self._cancel: set[uuid.UUID] = set()
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._heap)

    def hold(self, session: WorkerSession, a: Assignment) -> None:
        """Deliver ``a`` to ``session`` at its due tick, or, to a session that holds
        early pushes (``WorkerSession.early_us``), between ``early_us`` and two
        thirds of it (:data:`~scheduler.engine._pacing.EARLY_SHARE`) before it.

        The window lets one wake-up push what many due instants hold: the loop wakes
        at the latest push instant of the earliest task and takes along every task
        whose earliest has come. A flat stream's due instants are microseconds apart,
        and a wake-up a due instant cost serve as much CPU as its tasks did (issue 41:
        a stream of 1,000 tasks a second cost serve 470 µs a task). A task is never
        pushed sooner than ``early_us`` ahead, the most the worker said it holds."""
        due, due_us = self._last_due
        if a.due_at != due:
            due_us = to_us(a.due_at)
            self._last_due = (a.due_at, due_us)
        early = session.early_us
        earliest = due_us - early
        latest = earliest + int(early * EARLY_SHARE)
        heapq.heappush(self._heap, (latest, next(self._seq), session, a, earliest))
        holding = self._holding
        task_id = a.key.id
        holding[task_id] = holding.get(task_id, 0) + 1

    def wake(self) -> None:
        """New assignments are held: look at the earliest again."""
        self._wake.set()

    def cancel_on_delivery(self, task_id: uuid.UUID) -> bool:
        """A cancel for ``task_id``: if it is held for its due tick, its notice follows
        it (True); else the caller tells the worker that holds it now (False)."""
        if not self._holding.get(task_id):
            return False
        self._cancel.add(task_id)
        return True

    def deliver_due(self, now_us: int) -> None:
        """Once the earliest task's latest push instant has come (``now_us``, epoch
        microseconds, at or after it), push it and every task after it whose earliest
        push instant has come (:meth:`hold`), grouped per session. The lateness
        recorded is each push's against its latest instant (0 if before it)."""
        heap = self._heap
        if not heap or heap[0][0] > now_us:
            return
        per_session: dict[str, tuple[WorkerSession, list[Assignment]]] = {}
        holding = self._holding
        lateness_ms = self._stats.lateness_ms
        lateness_s = self._stats.lateness_s
        pop = heapq.heappop
        last: WorkerSession | None = None
        batch: list[Assignment] = []
        while heap and heap[0][4] <= now_us:
            latest, _, session, a, _ = pop(heap)
            task_id = a.key.id
            left = holding[task_id] - 1
            if left > 0:
                holding[task_id] = left
            else:
                del holding[task_id]
            late_us = now_us - latest if now_us > latest else 0
            lateness_ms.append(late_us / 1000.0)
            lateness_s.observe(late_us / 1e6)
            if session is not last:  # a run of one session's: one lookup, not one a task
                batch = per_session.setdefault(session.session_id, (session, []))[1]
                last = session
            batch.append(a)
        for session, batch in per_session.values():
            self._stats.delivered += len(batch)
            session.deliver(tuple(batch))
            if self._cancel:
                # Cancelled while held for its due tick: the notice follows the task.
                for a in batch:
                    if a.key.id in self._cancel:
                        self._cancel.discard(a.key.id)
                        session.notify_cancel(a.key, a.fencing_token)

    async def run(self) -> None:
        """Deliver at each due tick until cancelled."""
        while True:
            self._wake.clear()
            self.deliver_due(self._now_us())
            timeout = None
            if self._heap:
                timeout = max(0.0, (self._heap[0][0] - self._now_us()) / 1_000_000.0)
                if timeout == 0.0:
                    await asyncio.sleep(0)
                    continue
            await wait_event(self._wake, timeout)
