"""Backlog reports (scheduler.engine._backlog): when a figure is worth sending, and to
which sessions (pure logic over the ready queues and real sessions, no server)."""

from __future__ import annotations

import uuid
from typing import Any, cast

from scheduler.engine import BacklogNotice, EngineConfig, WorkerHello
from scheduler.engine._backlog import STALE_S, BacklogReporter, worth_reporting
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.types import ALL_TENANTS, DispatchPause, Pool
from tests.unit.engine.test_ready import T0, task


def test_worth_reporting_a_tenth_at_once_and_any_change_once_stale() -> None:
    assert not worth_reporting(0, 0, 10.0)
    assert worth_reporting(0, 1, 0.0)  # the first task waiting
    assert worth_reporting(100, 110, 0.0)  # a tenth
    assert not worth_reporting(100, 109, 0.0)  # less, and just reported
    assert worth_reporting(100, 109, STALE_S)  # less, but the report is old
    assert worth_reporting(100, 0, 0.0)  # nothing left is always told
    assert worth_reporting(5, 4, 0.0)  # small figures: a task is a tenth
    assert not worth_reporting(7, 7, 100.0)


def _sessions() -> Sessions:
    return Sessions(
        None,  # type: ignore[arg-type]  # opening a session touches neither
        EngineConfig(),
        None,  # type: ignore[arg-type]
        lambda: None,
        lambda _outlet, _batch: None,
    )


async def test_report_once_tells_only_sessions_that_asked_and_only_changes() -> None:
    tenant = uuid.UUID(int=7)
    sessions = _sessions()

    def hello(worker_id: str, backlog: bool) -> WorkerHello:
        return WorkerHello(
            worker_id=worker_id, tenant_id=tenant, task_types=frozenset({"t"}), backlog=backlog
        )

    asked = sessions.open(hello("asked", True), shared=False)
    silent = sessions.open(hello("silent", False), shared=False)
    ready = ReadyQueues(lambda _t: 1)
    now = [0.0]
    reporter = BacklogReporter(EngineConfig(), sessions, ready, clock=lambda: now[0])
    assert reporter.report_once() == 0  # nothing waits: nothing to tell
    ready.extend(task(tenant, at=i) for i in range(20))
    assert reporter.report_once() == 1
    assert await asked.next_event() == BacklogNotice(20)
    now[0] += 0.2
    ready.pop(Pool.STANDARD, frozenset({"t"}), tenant)
    assert reporter.report_once() == 0  # 19: less than a tenth, just reported
    now[0] += STALE_S
    assert reporter.report_once() == 1
    assert await asked.next_event() == BacklogNotice(19)
    assert reporter.reports == 2
    assert silent.backlog_reported == 0
    assert silent._queue.empty()


class _Pauses:
    """The part of FlowRules the reporter reads: which pauses hold."""

    def __init__(self, *pauses: DispatchPause) -> None:
        self.pauses = pauses

    def paused(self, tenant_id: uuid.UUID, task_type: str, pool: Pool) -> bool:
        return any(p.covers(tenant_id, task_type, pool) for p in self.pauses)


async def test_paused_tasks_are_counted_apart_and_left_out_of_the_report() -> None:
    """Issue 43: a report counted the tasks a dispatch pause holds as waiting, so a
    worker on several nodes sent its slots where nothing could start. (And a type's
    tasks naming a rate limit key, in a lane of their own, were not counted at all.)"""
    tenant = uuid.UUID(int=7)
    sessions = _sessions()
    hello = WorkerHello(
        worker_id="w", tenant_id=tenant, task_types=frozenset({"t", "u"}), backlog=True
    )
    session = sessions.open(hello, shared=False)
    ready = ReadyQueues(lambda _t: 1)
    ready.extend(task(tenant, type_="t", at=i) for i in range(5))
    ready.extend(task(tenant, type_="u", at=i) for i in range(3))
    ready.extend(task(tenant, type_="u")._replace(rate_key="api") for _ in range(2))
    ready.extend(task(tenant, Pool.BULK, type_="u") for _ in range(4))
    flow = _Pauses()
    reporter = BacklogReporter(EngineConfig(), sessions, ready, cast(Any, flow))
    assert reporter.figures(session) == (14, 0)
    flow.pauses = (DispatchPause(tenant_id=tenant, task_type="u", pool=None, paused_at=T0),)
    assert reporter.figures(session) == (5, 9)
    assert reporter.report_once() == 1
    assert await session.next_event() == BacklogNotice(5)
    flow.pauses = (
        DispatchPause(tenant_id=ALL_TENANTS, task_type="", pool=Pool.BULK, paused_at=T0),
    )
    assert reporter.figures(session) == (10, 4)
