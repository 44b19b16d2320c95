"""Issue 18's dashboard RPCs served by the real node, on SQLite and PostgreSQL: a task's
history with reasons and refused writes, GetActivity, the two-step bulk actions, a
schedule's upcoming fire times and an expectation's watchdog status."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.engine import AssignmentBatch, SubmitSpec, WorkerHello
from scheduler.engine._types import FailureReport
from scheduler.server._bulk import decode_plan, encode_plan
from scheduler.types import Completion, FencedWrite
from tests.integration.transport.conftest import ADMIN_TOKEN, Stack, eventually, running_stack


@pytest.fixture(params=["sqlite", "postgres"])
async def any_stack(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[Stack]:
    """The node on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/t.db"
    else:
        url = request.getfixturevalue("pg_dsn")
    async with running_stack(url) as s:
        yield s


@dataclasses.dataclass
class Api:
    stub: pbg.SchedulerServiceStub
    key: str

    def md(self, key: str | None = None) -> tuple[tuple[str, str], ...]:
        return (("x-api-key", key or self.key),)


@pytest.fixture
async def api(any_stack: Stack) -> AsyncIterator[Api]:
    async with grpc.aio.insecure_channel(any_stack.target) as channel:
        yield Api(pbg.SchedulerServiceStub(channel), any_stack.key_a)  # type: ignore[no-untyped-call]


def _hello(stack: Stack, worker_id: str = "w") -> WorkerHello:
    return WorkerHello(
        worker_id=worker_id,
        tenant_id=uuid.UUID(stack.tenant_a),
        task_types=frozenset({"email"}),
        slots=100,
    )


async def _dead_letters(stack: Stack, n: int) -> list[uuid.UUID]:
    """``n`` tasks of tenant A failed for good by a worker session."""
    tenant = uuid.UUID(stack.tenant_a)
    session = await stack.engine.open_session(_hello(stack))
    specs = [SubmitSpec(type="email", payload={}, strict_timing=True, max_retries=0)] * n
    await stack.engine.submit(tenant, specs)
    got = []
    while len(got) < n:
        event = await asyncio.wait_for(session.next_event(), 10)
        if isinstance(event, AssignmentBatch):
            got.extend(event.assignments)
    for a in got:
        await session.ack([FencedWrite(key=a.key, token=a.fencing_token)])
        report = FailureReport(key=a.key, token=a.fencing_token, error="boom", retryable=False)
        assert await session.fail([report]) == ["ok"]
    await session.close()
    return [a.key.id for a in got]


async def test_history_shows_reasons_and_a_refused_completion(any_stack: Stack, api: Api) -> None:
    tenant = uuid.UUID(any_stack.tenant_a)
    session = await any_stack.engine.open_session(_hello(any_stack))
    await any_stack.engine.submit(tenant, [SubmitSpec(type="email", payload={})])
    event = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(event, AssignmentBatch)
    (a,) = event.assignments
    await session.ack([FencedWrite(key=a.key, token=a.fencing_token)])
    assert await session.complete([Completion(key=a.key, token=a.fencing_token + 5)]) == ["stale"]
    assert await session.complete([Completion(key=a.key, token=a.fencing_token)]) == ["ok"]
    await session.close()
    resp = await api.stub.GetTaskHistory(
        pb.GetTaskHistoryRequest(task_id=str(a.key.id)), metadata=api.md(), timeout=10
    )
    assert [t.reason for t in resp.transitions] == ["dispatched", "acked", "completed"]
    (refused,) = resp.refused_writes
    assert (refused.write, refused.fencing_token, refused.current_token, refused.actor) == (
        "complete",
        a.fencing_token + 5,
        a.fencing_token,
        "w",
    )
    assert refused.reason == "stale_fencing_token"
    # Tenant B: NOT_FOUND, as for a task that does not exist.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await api.stub.GetTaskHistory(
            pb.GetTaskHistoryRequest(task_id=str(a.key.id)),
            metadata=api.md(any_stack.key_b),
            timeout=10,
        )
    assert err.value.code() is grpc.StatusCode.NOT_FOUND


async def test_activity_buckets(any_stack: Stack, api: Api) -> None:
    await _dead_letters(any_stack, 2)
    resp = await api.stub.GetActivity(
        pb.GetActivityRequest(window_s=600, bucket_s=60), metadata=api.md(), timeout=10
    )
    assert resp.bucket_s == 60
    assert len(resp.buckets) == 10
    starts = [b.start.ToDatetime(tzinfo=UTC) for b in resp.buckets]
    assert all(b - a == timedelta(seconds=60) for a, b in itertools.pairwise(starts))
    assert sum(b.dispatched for b in resp.buckets) == 2
    assert sum(b.failed for b in resp.buckets) == 2
    assert sum(b.completed for b in resp.buckets) == 0
    default = await api.stub.GetActivity(pb.GetActivityRequest(), metadata=api.md(), timeout=10)
    assert (default.bucket_s, len(default.buckets)) == (60, 15)
    other = await api.stub.GetActivity(
        pb.GetActivityRequest(), metadata=api.md(any_stack.key_b), timeout=10
    )
    assert sum(b.dispatched for b in other.buckets) == 0
    # The admin token: every tenant, or the one in x-tenant-id.
    admin = (("x-admin-token", ADMIN_TOKEN),)
    everyone = await api.stub.GetActivity(pb.GetActivityRequest(), metadata=admin, timeout=10)
    assert sum(b.dispatched for b in everyone.buckets) == 2
    for tenant, dispatched in ((any_stack.tenant_a, 2), (any_stack.tenant_b, 0)):
        one = await api.stub.GetActivity(
            pb.GetActivityRequest(), metadata=(*admin, ("x-tenant-id", tenant)), timeout=10
        )
        assert sum(b.dispatched for b in one.buckets) == dispatched


async def test_bulk_cancel_acts_on_exactly_the_plan(any_stack: Stack, api: Api) -> None:
    later = datetime.now(UTC) + timedelta(hours=2)
    tenant = uuid.UUID(any_stack.tenant_a)
    specs = [SubmitSpec(type="report", payload={}, scheduled_at=later)] * 3
    await any_stack.engine.submit(tenant, specs)
    await any_stack.engine.submit(
        tenant, [SubmitSpec(type="other", payload={}, scheduled_at=later)]
    )
    plan = await api.stub.PlanBulkAction(
        pb.PlanBulkActionRequest(action=pb.BULK_ACTION_CANCEL, filter=pb.TaskFilter(type="report")),
        metadata=api.md(),
        timeout=10,
    )
    assert plan.count == 3
    assert plan.action == pb.BULK_ACTION_CANCEL
    assert plan.filter.type == "report"
    assert pb.TASK_STATE_DEAD_LETTER not in plan.filter.states
    assert pb.TASK_STATE_SCHEDULED in plan.filter.states
    # A task created after the plan is not part of it.
    await any_stack.engine.submit(
        tenant, [SubmitSpec(type="report", payload={}, scheduled_at=later)]
    )
    # Another tenant cannot run it.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await api.stub.RunBulkAction(
            pb.RunBulkActionRequest(plan_token=plan.plan_token),
            metadata=api.md(any_stack.key_b),
            timeout=10,
        )
    assert err.value.code() is grpc.StatusCode.PERMISSION_DENIED
    ran = await api.stub.RunBulkAction(
        pb.RunBulkActionRequest(plan_token=plan.plan_token), metadata=api.md(), timeout=30
    )
    assert (ran.matched, ran.changed, ran.filter.type) == (3, 3, "report")
    # Running it again matches nothing: the plan never widens.
    again = await api.stub.RunBulkAction(
        pb.RunBulkActionRequest(plan_token=plan.plan_token), metadata=api.md(), timeout=30
    )
    assert (again.matched, again.changed) == (0, 0)
    page = await api.stub.ListTasks(
        pb.ListTasksRequest(states=[pb.TASK_STATE_CANCELLED]), metadata=api.md(), timeout=10
    )
    assert len(page.tasks) == 3
    history = await api.stub.GetTaskHistory(
        pb.GetTaskHistoryRequest(task_id=page.tasks[0].id), metadata=api.md(), timeout=10
    )
    assert history.transitions[-1].reason == "cancelled"


async def test_bulk_redrive_and_bad_tokens(any_stack: Stack, api: Api) -> None:
    dead = await _dead_letters(any_stack, 3)
    plan = await api.stub.PlanBulkAction(
        pb.PlanBulkActionRequest(action=pb.BULK_ACTION_REDRIVE), metadata=api.md(), timeout=10
    )
    assert plan.count == 3
    assert list(plan.filter.states) == [pb.TASK_STATE_DEAD_LETTER]
    ran = await api.stub.RunBulkAction(
        pb.RunBulkActionRequest(plan_token=plan.plan_token), metadata=api.md(), timeout=30
    )
    assert (ran.matched, ran.changed) == (3, 3)
    for task_id in dead:
        task = await any_stack.engine.store.get_task(uuid.UUID(any_stack.tenant_a), task_id)
        assert task.status.value != "DEAD_LETTER"

    async def run(token: str) -> grpc.StatusCode:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await api.stub.RunBulkAction(
                pb.RunBulkActionRequest(plan_token=token), metadata=api.md(), timeout=10
            )
        assert "plan_token" in (err.value.details() or "")
        return err.value.code()

    expired = dataclasses.replace(
        decode_plan(plan.plan_token), expires_at=datetime.now(UTC) - timedelta(seconds=1)
    )
    assert await run(encode_plan(expired)) is grpc.StatusCode.FAILED_PRECONDITION
    assert await run("not a token") is grpc.StatusCode.INVALID_ARGUMENT
    assert await run("") is grpc.StatusCode.INVALID_ARGUMENT
    assert await run(plan.plan_token[:-4]) is grpc.StatusCode.INVALID_ARGUMENT


async def test_schedule_upcoming_fire_times(api: Api) -> None:
    created = await api.stub.CreateSchedule(
        pb.CreateScheduleRequest(
            schedule=pb.ScheduleSpec(name="hourly", task_type="t", cron="0 * * * *")
        ),
        metadata=api.md(),
        timeout=10,
    )
    s = created.schedule
    times = [t.ToDatetime(tzinfo=UTC) for t in s.upcoming_fire_at]
    assert len(times) == 5
    assert times[0] == s.next_fire_at.ToDatetime(tzinfo=UTC)
    assert all(t.minute == 0 and t.second == 0 for t in times)
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(times))
    listed = await api.stub.ListSchedules(pb.ListSchedulesRequest(), metadata=api.md(), timeout=10)
    assert list(listed.schedules[0].upcoming_fire_at) == list(s.upcoming_fire_at)
    paused = await api.stub.PauseSchedule(
        pb.PauseScheduleRequest(schedule_id=s.id), metadata=api.md(), timeout=10
    )
    assert list(paused.schedule.upcoming_fire_at) == []
    got = await api.stub.GetSchedule(
        pb.GetScheduleRequest(schedule_id=s.id), metadata=api.md(), timeout=10
    )
    assert list(got.schedule.upcoming_fire_at) == []


async def test_expectation_status_follows_the_watchdog(api: Api) -> None:
    await api.stub.RegisterExpectation(
        pb.RegisterExpectationRequest(job_id="nightly", interval_s=3600, tolerance_s=60),
        metadata=api.md(),
        timeout=10,
    )
    await api.stub.RegisterExpectation(
        pb.RegisterExpectationRequest(job_id="often", interval_s=1, tolerance_s=0),
        metadata=api.md(),
        timeout=10,
    )

    async def listed() -> dict[str, pb.Expectation]:
        resp = await api.stub.ListExpectations(
            pb.ListExpectationsRequest(), metadata=api.md(), timeout=10
        )
        return {e.job_id: e for e in resp.expectations}

    now = await listed()
    nightly = now["nightly"]
    assert nightly.status == pb.EXPECTATION_STATUS_OK
    assert not nightly.HasField("last_completed_at")
    deadline = nightly.deadline_at.ToDatetime(tzinfo=UTC)
    assert deadline - nightly.created_at.ToDatetime(tzinfo=UTC) == timedelta(seconds=3660)
    # Registered with a 1 s interval and nothing completes: the watchdog's rule says LATE.
    late = await eventually(listed, lambda e: e["often"].status == pb.EXPECTATION_STATUS_LATE)
    assert late["nightly"].status == pb.EXPECTATION_STATUS_OK
