"""SchedulerService through the public client, over the real engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import (
    Client,
    InvalidTransition,
    JitterMode,
    NotFound,
    Pool,
    TaskSpec,
    TaskState,
)
from tests.integration.transport.conftest import Stack

LATER = timedelta(hours=2)


async def test_submit_get_cancel(client: Client) -> None:
    when = datetime.now(UTC) + LATER
    task = await client.submit(
        "email",
        {"to": "a@example.com", "n": 3, "nested": {"x": [1, 2.5]}},
        scheduled_at=when,
        pool=Pool.CRITICAL,
        jitter_mode=JitterMode.LATE_ONLY,
        max_retries=5,
        timeout_s=2.5,
    )
    assert task.created
    assert task.state is TaskState.SCHEDULED
    assert task.payload == {"to": "a@example.com", "n": 3, "nested": {"x": [1, 2.5]}}
    assert task.pool is Pool.CRITICAL
    assert task.max_retries == 5
    assert abs((task.scheduled_at - when).total_seconds()) < 0.001
    assert task.due_at >= task.scheduled_at  # late-only jitter
    got = await client.get(task.id)
    assert got.id == task.id
    assert got.type == "email"
    cancelled = await client.cancel(task.id)
    assert cancelled.state is TaskState.CANCELLED
    with pytest.raises(InvalidTransition):
        await client.cancel(task.id)


async def test_idempotent_resubmit_returns_the_same_task(client: Client) -> None:
    when = datetime.now(UTC) + LATER
    first = await client.submit("t", {}, scheduled_at=when, idempotency_key="k-1")
    again = await client.submit("t", {}, scheduled_at=when + LATER, idempotency_key="k-1")
    assert first.created
    assert not again.created
    assert again.id == first.id


async def test_submit_many_and_list_pages(client: Client) -> None:
    when = datetime.now(UTC) + LATER
    specs = [TaskSpec(type="bulk", payload={"i": i}, scheduled_at=when) for i in range(5)]
    specs.append(TaskSpec(type="other", scheduled_at=when))
    tasks = await client.submit_many(specs)
    assert [t.payload.get("i") for t in tasks[:5]] == list(range(5))
    page = await client.list_page(type="bulk", page_size=2)
    assert len(page.tasks) == 2
    assert page.next_page_token
    listed = [t async for t in client.list(type="bulk", page_size=2)]
    assert sorted(t.payload["i"] for t in listed) == list(range(5))
    scheduled = [t async for t in client.list(states=[TaskState.SCHEDULED])]
    assert len(scheduled) == 6


async def test_get_unknown_task_is_not_found(client: Client) -> None:
    with pytest.raises(NotFound):
        await client.get("0190d6c4-0000-7000-8000-000000000000")


async def test_redrive_a_live_task_is_failed_precondition(client: Client) -> None:
    task = await client.submit("t", {}, scheduled_at=datetime.now(UTC) + LATER)
    with pytest.raises(InvalidTransition):
        await client.redrive(task.id)


async def test_trace_context_from_call_metadata(stack: Stack) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with grpc.aio.insecure_channel(stack.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        resp = await stub.SubmitTask(
            pb.SubmitTaskRequest(task=pb.TaskSpec(type="traced")),
            metadata=(("x-api-key", stack.key_a), ("traceparent", traceparent)),
            timeout=10,
        )
        assert resp.task.trace_context.traceparent == traceparent
        explicit = "00-11111111111111111111111111111111-2222222222222222-01"
        resp = await stub.SubmitTask(
            pb.SubmitTaskRequest(
                task=pb.TaskSpec(type="traced", trace_context=pb.TraceContext(traceparent=explicit))
            ),
            metadata=(("x-api-key", stack.key_a), ("traceparent", traceparent)),
            timeout=10,
        )
        assert resp.task.trace_context.traceparent == explicit
