"""A task's full history (reasons, refused writes) and the audit's activity buckets
(issue 18), through the real engine on PostgreSQL and SQLite."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from scheduler.engine import AssignmentBatch, Engine, SubmitSpec
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._types import FailureReport
from scheduler.states import TaskState
from scheduler.types import Assignment, Completion, FencedWrite
from tests.integration.engine.conftest import hello


async def dispatched(
    engine: Engine, tenant: uuid.UUID, max_retries: int = 3
) -> tuple[WorkerSession, Assignment]:
    """A session of worker "w" and the task it was given (acked: RUNNING)."""
    session = await engine.open_session(hello(tenant))
    spec = SubmitSpec(type="email", payload={}, strict_timing=True, max_retries=max_retries)
    await engine.submit(tenant, [spec])
    event = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    assert await session.ack([FencedWrite(key=a.key, token=a.fencing_token)]) == ["ok"]
    return session, a


async def test_every_transition_has_a_reason(engine: Engine, tenant: uuid.UUID) -> None:
    session, a = await dispatched(engine, tenant)
    assert await session.complete([Completion(key=a.key, token=a.fencing_token)]) == ["ok"]
    transitions, refused = await engine.history.full_history(tenant, a.key.id)
    # Due at once, it was inserted PRELOADED (an insert is no transition).
    assert [(t.to_state, t.reason) for t in transitions] == [
        (TaskState.DISPATCHED, "dispatched"),
        (TaskState.RUNNING, "acked"),
        (TaskState.COMPLETED, "completed"),
    ]
    assert refused == []
    await session.close()


async def test_a_failure_says_why(engine: Engine, tenant: uuid.UUID) -> None:
    session, a = await dispatched(engine, tenant, max_retries=0)
    report = FailureReport(key=a.key, token=a.fencing_token, error="boom", retryable=True)
    assert await session.fail([report]) == ["ok"]
    transitions, _ = await engine.history.full_history(tenant, a.key.id)
    assert [(t.to_state, t.reason) for t in transitions[-2:]] == [
        (TaskState.RETRYING, "failed: boom"),
        (TaskState.DEAD_LETTER, "no attempts left"),
    ]
    await engine.redrive(tenant, a.key.id)
    transitions, _ = await engine.history.full_history(tenant, a.key.id)
    reasons = [(t.to_state, t.reason) for t in transitions]
    assert (TaskState.SCHEDULED, "redriven") in reasons  # then preloaded again, at once
    await session.close()


async def test_refused_writes_are_recorded_with_both_tokens(
    engine: Engine, tenant: uuid.UUID
) -> None:
    """A stale token from the holder (refused by the store) and a write from another
    worker's stream (refused by the session check) both show in the history."""
    session, a = await dispatched(engine, tenant)
    stale = Completion(key=a.key, token=a.fencing_token - 1)
    assert await session.complete([stale]) == ["stale"]
    other = await engine.open_session(hello(tenant, "intruder", slots=0))
    write = FencedWrite(key=a.key, token=a.fencing_token)
    assert await other.heartbeat([write]) == ["stale"]
    _, refused = await engine.history.full_history(tenant, a.key.id)
    assert [(r.write, r.token, r.current_token, r.actor, r.reason) for r in refused] == [
        ("complete", a.fencing_token - 1, a.fencing_token, "w", "stale_fencing_token"),
        ("heartbeat", a.fencing_token, a.fencing_token, "intruder", "stale_fencing_token"),
    ]
    # Another tenant sees neither the task nor its history.
    stranger = (await engine.tenancy.create_tenant(name="other")).id
    with pytest.raises(Exception, match="not found"):
        await engine.history.full_history(stranger, a.key.id)
    await other.close()
    await session.close()


async def test_activity_counts_the_audit(engine: Engine, tenant: uuid.UUID) -> None:
    session, a = await dispatched(engine, tenant)
    assert await session.complete([Completion(key=a.key, token=a.fencing_token)]) == ["ok"]
    buckets = await engine.history.activity(tenant, 900, 60)
    assert len(buckets) == 15
    assert buckets[-1].start + (buckets[1].start - buckets[0].start) == engine.now()
    assert sum(b.dispatched for b in buckets) == 1
    assert sum(b.completed for b in buckets) == 1
    assert sum(b.failed for b in buckets) == 0
    assert all(b.lateness_p50_s >= 0 and b.lateness_p99_s >= b.lateness_p50_s for b in buckets)
    everyone = await engine.history.activity(None, 900, 60)
    assert sum(b.completed for b in everyone) == 1
    stranger = (await engine.tenancy.create_tenant(name="other")).id
    assert sum(b.dispatched for b in await engine.history.activity(stranger, 900, 60)) == 0
    await session.close()
