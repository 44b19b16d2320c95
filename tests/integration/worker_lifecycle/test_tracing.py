"""One trace from submit to completion, across a one-hour delay and a retry."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from scheduler.client import TaskState
from scheduler.worker import TaskContext, Worker
from tests.integration.worker_lifecycle.conftest import Stack
from tests.support.clock import FakeClock
from tests.support.waiting import eventually


async def test_one_trace_across_delay_and_retry(
    clock_stack: Stack, clock: FakeClock, span_exporter: InMemorySpanExporter
) -> None:
    stack = clock_stack
    attempts: list[int] = []

    async def flaky(ctx: TaskContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")
        return {"ok": True}

    tracer = trace.get_tracer("test.app")
    with tracer.start_as_current_span("app.request") as root:
        # The client SDK carries the active span as W3C `traceparent` metadata.
        task = await stack.client.submit(
            "flaky", {}, scheduled_at=clock() + timedelta(hours=1), strict_timing=True
        )
    root_ctx = root.get_span_context()
    assert task.trace_context is not None
    assert format(root_ctx.trace_id, "032x") in task.trace_context["traceparent"]

    worker = Worker(stack.target, api_key=stack.key, handlers={"flaky": flaky})
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        await eventually(lambda: _value(stack.engine.watch.workers(None)), what="worker session")
        assert (await stack.client.get(task.id)).state is TaskState.PRELOADED
        clock.advance(3600)  # the hour passes on the store's clock, not in sleep
        stack.engine.wake()
        await eventually(
            lambda: stack.client.get(task.id),
            until=lambda t: (
                t.state in (TaskState.RETRYING, TaskState.PRELOADED) and t.retry_count == 1
            ),
            what="first attempt failed",
        )
        clock.advance(5)  # past the retry backoff
        stack.engine.wake()
        done = await eventually(
            lambda: stack.client.get(task.id),
            until=lambda t: t.state is TaskState.COMPLETED,
            what="completed",
        )
        assert done.result == {"ok": True}
    finally:
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(run, 15)
    assert attempts == [1, 2]

    def ours() -> list[ReadableSpan]:
        return [
            s
            for s in span_exporter.get_finished_spans()
            if s.context is not None and s.context.trace_id == root_ctx.trace_id
        ]

    spans = await eventually(
        lambda: _value(ours()),
        until=lambda ss: sum(s.kind is SpanKind.CONSUMER for s in ss) == 2,
        what="both attempt spans",
    )
    by_name: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    (submit,) = by_name["tickwheel.submit flaky"]
    assert submit.kind is SpanKind.SERVER
    assert submit.parent is not None
    assert submit.parent.span_id == root_ctx.span_id
    dispatches = by_name["tickwheel.dispatch flaky"]
    processes = sorted(
        by_name["tickwheel.process flaky"], key=lambda s: (s.attributes or {})["tickwheel.attempt"]
    )
    assert len(dispatches) == 2
    assert len(processes) == 2
    dispatch_ids = {d.context.span_id for d in dispatches if d.context is not None}
    for d in dispatches:
        assert d.kind is SpanKind.PRODUCER
        assert d.parent is not None
        assert d.parent.span_id == root_ctx.span_id
    for p in processes:
        assert p.kind is SpanKind.CONSUMER
        assert p.parent is not None
        assert p.parent.span_id in dispatch_ids
        (link,) = p.links
        assert link.context.trace_id == root_ctx.trace_id
        assert link.context.span_id == root_ctx.span_id
    first, second = processes
    assert first.status.status_code is StatusCode.ERROR
    assert (first.attributes or {})["tickwheel.outcome"] == "failed"
    assert (second.attributes or {})["tickwheel.outcome"] == "completed"
    assert (second.attributes or {})["tickwheel.task_id"] == str(task.id)
    # The whole path is one trace, an hour of store time long.
    assert {s.context.trace_id for s in spans if s.context is not None} == {root_ctx.trace_id}


async def test_untraced_task_carries_no_context(
    clock_stack: Stack, span_exporter: InMemorySpanExporter
) -> None:
    task = await clock_stack.client.submit("plain", {}, strict_timing=True)
    assert task.trace_context is None


async def _value(value: Any) -> Any:
    return value
