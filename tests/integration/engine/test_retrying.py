"""A retryable failure is RETRYING until its backoff has elapsed (issue #15, case 4).

The brief's table: RUNNING -> RETRYING (with the backoff's due time) -> PRELOADED (the
pre-loader takes it into the wheel near its due time) -> DISPATCHED. The fail response,
the stored row and the audit trail agree.
"""

from __future__ import annotations

import asyncio
import uuid

from scheduler.engine import (
    AssignmentBatch,
    Engine,
    SubmitSpec,
    WorkerHello,
    WorkerSession,
)
from scheduler.engine._types import FailureReport
from scheduler.states import TaskState
from scheduler.types import Assignment, FencedWrite
from tests.integration.engine.conftest import CONFIG
from tests.support.clock import FakeClock

S = TaskState


async def _next_assignment(session: WorkerSession) -> Assignment:
    event = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    return a


async def _running(engine: Engine, tenant: uuid.UUID) -> tuple[WorkerSession, Assignment]:
    session = await engine.open_session(
        WorkerHello(worker_id="w", tenant_id=tenant, task_types=frozenset({"email"}), slots=2)
    )
    await engine.submit(tenant, [SubmitSpec(type="email", payload={}, strict_timing=True)])
    a = await _next_assignment(session)
    assert await session.ack([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    return session, a


async def test_unary_fail_answers_and_stores_retrying_until_the_backoff(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    session, a = await _running(engine, tenant)
    rec = await engine.fail(tenant, a.key.id, a.fencing_token, "boom")
    assert rec.status is S.RETRYING
    assert rec.due_at > clock()
    # Several pre-load passes later (the clock has not moved) it is still RETRYING.
    await asyncio.sleep(CONFIG.preload_interval_s * 6)
    task = await engine.store.get_task(tenant, a.key.id)
    assert (task.status, task.retry_count) == (S.RETRYING, 1)
    # The backoff elapses: pre-loaded, dispatched again with a new token, attempt 2.
    clock.advance((rec.due_at - clock()).total_seconds() + 0.1)
    again = await _next_assignment(session)
    assert (again.key.id, again.fencing_token, again.attempt) == (
        a.key.id,
        a.fencing_token + 1,
        2,
    )
    trail = [(x.from_state, x.to_state) for x in await engine.store.transitions_of(a.key.id)]
    assert trail[-3:] == [
        (S.RUNNING, S.RETRYING),
        (S.RETRYING, S.PRELOADED),
        (S.PRELOADED, S.DISPATCHED),
    ]
    await session.close()


async def test_a_stream_failure_stores_retrying(
    engine: Engine, tenant: uuid.UUID, clock: FakeClock
) -> None:
    session, a = await _running(engine, tenant)
    report = FailureReport(key=a.key, token=a.fencing_token, error="boom")
    assert await session.fail([report]) == ["ok"]
    await asyncio.sleep(CONFIG.preload_interval_s * 6)
    task = await engine.store.get_task(tenant, a.key.id)
    assert task.status is S.RETRYING
    assert task.due_at > clock()
    await session.close()
