"""Backlog reports: how much work waits on this node for each worker stream (issue 17).

A worker with a stream to every node of a cluster (``ClusterWorker``) can only send
its free slots (credit) where it knows work waits. Owns :class:`BacklogReporter`, one
loop that every ``backlog_interval_s`` (200 ms by default) counts, for each open
stream whose hello asked for it (``Hello.backlog``), the ready tasks it could take
(its tenant, types and pools: :meth:`ReadyQueues.waiting_for`) and pushes a
:class:`BacklogNotice` when :func:`worth_reporting` says the figure moved. It is a
timer over the open streams, never a cost per task, and it is advisory: dispatch still
pushes only against credit.

Tasks a dispatch pause holds (issue 43) are counted apart (:meth:`BacklogReporter.figures`)
and left out of the report: a worker that sent its free slots where only paused work
waits would leave them idle there until the resume, while other nodes' work waited.
ListWorkers shows both figures (``WorkerInfo.waiting``, ``WorkerInfo.paused``).

Calls the sessions, the ready queues and the flow rules (which pauses hold); built and
started by the facade.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from scheduler.engine._config import EngineConfig
from scheduler.engine._flow import FlowRules
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.engine._sessions import WorkerSession

STALE_S = 1.0
"""A figure that moved by less than a tenth is still reported once the last report
is this old (so a small backlog that stays is not left unreported for long)."""


def worth_reporting(last: int, waiting: int, since_s: float) -> bool:
    """Whether to report ``waiting`` after ``last`` was reported ``since_s`` ago: when
    it moved by a tenth (and at least one task), or moved at all and the last report
    is :data:`STALE_S` old. Reaching zero is always told (the node has nothing left)."""
    if waiting == last:
        return False
    if waiting == 0:
        return True
    return abs(waiting - last) >= max(1, last // 10) or since_s >= STALE_S


class BacklogReporter:
    """Reports each interested stream's waiting work (see the module docstring)."""

    def __init__(
        self,
        config: EngineConfig,
        sessions: Sessions,
        ready: ReadyQueues,
        flow: FlowRules | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval_s = config.backlog_interval_s
        self._sessions = sessions
        self._ready = ready
        self._flow = flow
        self._clock = clock
        self.reports = 0
        """Backlog notices pushed so far (for tests and metrics)."""

    async def run(self) -> None:
        """One :meth:`report_once` per interval until cancelled (nothing with 0)."""
        if self._interval_s <= 0:
            return
        while True:
            await asyncio.sleep(self._interval_s)
            self.report_once()

    def report_once(self) -> int:
        """Count and report for every interested stream; how many reports went out."""
        now = self._clock()
        sent = 0
        for session in self._sessions.streams():
            if not session.wants_backlog or session.closed:
                continue
            waiting, _paused = self.figures(session)
            last = session.backlog_reported
            if worth_reporting(last, waiting, now - session.backlog_reported_at):
                session.report_backlog(waiting, now)
                sent += 1
        self.reports += sent
        return sent

    def figures(self, session: WorkerSession) -> tuple[int, int]:
        """The tasks waiting here that ``session`` could take: (not paused, paused)."""
        flow = self._flow
        paused = flow.paused if flow is not None and flow.pauses else None
        return self._ready.waiting_for(session.pools, session.task_types, session.scope, paused)
