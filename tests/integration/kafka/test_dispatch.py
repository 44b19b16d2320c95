"""Kafka dispatch end to end: engine + gRPC server + Kafka-mode workers (Tansu)."""

from __future__ import annotations

import asyncio
import collections
import logging
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from scheduler.engine import EngineConfig
from scheduler.kafka import topic_name
from scheduler.states import TaskState
from scheduler.types import Pool
from scheduler.worker import TaskContext, Worker
from tests.integration.kafka.conftest import KafkaStack, MakeStack
from tests.support.clock import FakeClock
from tests.support.waiting import eventually

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
pytestmark = pytest.mark.timeout(90)


async def _run(worker: Worker) -> asyncio.Task[None]:
    task = asyncio.create_task(worker.run(), name="test-kafka-worker")
    joined = worker.kafka_joined
    assert joined is not None
    try:
        await asyncio.wait_for(joined.wait(), 30)
    except BaseException:
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(task, 15)
        raise
    return task


async def _stop(worker: Worker, task: asyncio.Task[None]) -> None:
    await worker.shutdown(grace_s=5)
    await asyncio.wait_for(task, 15)


async def _records(stack: KafkaStack, n: int) -> list[object]:
    consumer = AIOKafkaConsumer(
        topic_name(stack.kafka.topic_prefix, Pool.CRITICAL),
        bootstrap_servers=stack.kafka.bootstrap_servers,
        group_id=f"audit-{uuid.uuid4().hex[:6]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        out: list[object] = []
        async with asyncio.timeout(30):
            while len(out) < n:
                batch = await consumer.getmany(timeout_ms=500)
                out += [r for rs in batch.values() for r in rs]
        return out
    finally:
        await consumer.stop()


async def test_kafka_pool_completes_exactly_once_with_trace_headers(
    make_stack: MakeStack,
) -> None:
    stack = await make_stack()
    calls: collections.Counter[uuid.UUID] = collections.Counter()
    seen_traces: dict[uuid.UUID, dict[str, str] | None] = {}

    async def handle(ctx: TaskContext) -> dict[str, object]:
        calls[ctx.task_id] += 1
        seen_traces[ctx.task_id] = ctx.trace_context
        return {"token": ctx.fencing_token}

    worker = stack.worker({"email": handle})
    run = await _run(worker)
    client = await stack.client()
    try:
        tasks = [
            await client.submit(
                "email",
                {"n": i},
                pool=Pool.CRITICAL,
                strict_timing=True,
                trace_context={"traceparent": TRACEPARENT, "tracestate": "k=v"},
            )
            for i in range(5)
        ]
        ids = [t.id for t in tasks]
        done = await eventually(
            lambda: asyncio.gather(*(client.get(i) for i in ids)),
            until=lambda ts: all(t.state is TaskState.COMPLETED for t in ts),
            what="all completed",
        )
        assert all(t.result == {"token": t.fencing_token} for t in done)
        assert calls == {i: 1 for i in ids}
        for i in ids:
            assert seen_traces[i] == {"traceparent": TRACEPARENT, "tracestate": "k=v"}
        records = await _records(stack, 5)
        assert {dict(r.headers)["traceparent"] for r in records} == {TRACEPARENT.encode()}  # type: ignore[attr-defined]
        assert {r.key for r in records} == {str(i).encode() for i in ids}  # type: ignore[attr-defined]
        report = await worker.shutdown(grace_s=5)
        assert report.clean
        await asyncio.wait_for(run, 15)
    finally:
        await client.close()
        await worker.shutdown(grace_s=0)


async def test_zombie_completion_is_rejected_and_the_task_completes_once(
    make_stack: MakeStack, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    config = EngineConfig(
        lease_ttl_s=10, heartbeat_interval_s=3, preload_interval_s=0.05, retry_base_s=0.2
    )
    stack = await make_stack(config, clock=clock)
    gate = asyncio.Event()
    started: list[TaskContext] = []

    async def handle(ctx: TaskContext) -> dict[str, object]:
        started.append(ctx)
        if ctx.attempt == 1:
            await gate.wait()  # paused past its lease: a zombie when it wakes
        return {"attempt": ctx.attempt}

    # No heartbeats: the first attempt's lease must lapse while it is paused.
    worker = stack.worker({"job": handle}, heartbeat_interval_s=3600)
    run = await _run(worker)
    client = await stack.client()
    try:
        task = await client.submit("job", pool=Pool.CRITICAL, strict_timing=True)
        await eventually(lambda: _n(started), until=lambda n: n == 1, what="attempt 1 running")
        first = started[0]
        assert (await client.get(task.id)).state is TaskState.RUNNING
        first_record = (await _records(stack, 1))[0]

        clock.advance(config.lease_ttl_s + 1)  # lease lapses: RUNNING -> RETRYING
        # The reaper wakes the pre-loader for the retry at once, so RETRYING may already
        # have moved on (PRELOADED, or attempt 2 under a new token) when we look.
        await eventually(
            lambda: _woken(stack, client.get(task.id)),
            until=lambda t: t.state is TaskState.RETRYING or t.fencing_token > first.fencing_token,
            what="the lapsed lease counted",
        )
        clock.advance(5)  # backoff over: dispatched again (token + 1) through Kafka
        done = await eventually(
            lambda: _woken(stack, client.get(task.id)),
            until=lambda t: t.state is TaskState.COMPLETED,
            what="second attempt completed",
        )
        assert done.fencing_token > first.fencing_token
        assert done.result == {"attempt": 2}
        assert first.cancel_reason == "lease_lost"

        caplog.set_level(logging.WARNING, logger="tickwheel.worker")
        gate.set()  # the zombie wakes and tries to complete with its old token
        await eventually(
            lambda: _zombie_logged(caplog), what="zombie completion rejected and logged"
        )
        # At-least-once: the old record delivered again is fenced off at the ack.
        stale_before = stack.engine.stats.stale_writes
        producer = AIOKafkaProducer(bootstrap_servers=stack.kafka.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(
                first_record.topic,  # type: ignore[attr-defined]
                first_record.value,  # type: ignore[attr-defined]
                key=first_record.key,  # type: ignore[attr-defined]
                headers=list(first_record.headers),  # type: ignore[attr-defined]
            )
        finally:
            await producer.stop()
        await eventually(lambda: _stale(stack), until=lambda n: n > stale_before, what="stale ack")
        final = await client.get(task.id)
        assert final.state is TaskState.COMPLETED
        assert final.result == {"attempt": 2}
        assert len(started) == 2
        await _stop(worker, run)
    finally:
        gate.set()
        await client.close()
        await worker.shutdown(grace_s=0)


async def test_drain_leaves_the_consumer_group_at_once(make_stack: MakeStack) -> None:
    stack = await make_stack()

    async def handle(ctx: TaskContext) -> None:
        return None

    # Without LeaveGroup the partitions would move only once the member's session
    # timed out. (Tansu also waits half the session timeout at each rebalance, so the
    # timeout is kept short to keep the test quick.)
    source = stack.source(session_timeout_s=10.0, heartbeat_interval_s=0.5)
    worker = stack.worker({"job": handle}, source=source)
    run = await _run(worker)
    other = AIOKafkaConsumer(
        *source.topics,
        bootstrap_servers=source.bootstrap_servers,
        group_id=source.group_id,
        enable_auto_commit=False,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
        request_timeout_ms=30_000,
    )
    await other.start()
    admin = AIOKafkaAdminClient(bootstrap_servers=source.bootstrap_servers)
    await admin.start()
    try:
        await eventually(
            lambda: _poll_assignment(other),
            until=lambda parts: 0 < len(parts) < source.partitions,
            what="partitions shared by two members",
        )
        assert await _members(admin, source.group_id) == 2
        loop = asyncio.get_running_loop()
        began = loop.time()
        await _stop(worker, run)
        await eventually(
            lambda: _poll_assignment(other),
            until=lambda parts: len(parts) == source.partitions,
            what="the remaining member owns every partition",
        )
        assert loop.time() - began < source.session_timeout_s
        assert await _members(admin, source.group_id) == 1
    finally:
        await admin.close()
        await other.stop()
        await worker.shutdown(grace_s=0)


async def _n(items: list[TaskContext]) -> int:
    return len(items)


async def _woken(stack: KafkaStack, probe: object) -> object:
    stack.engine.wake()
    return await probe  # type: ignore[misc]


async def _zombie_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        "zombie" in r.getMessage() and "completion" in r.getMessage() for r in caplog.records
    )


async def _stale(stack: KafkaStack) -> int:
    return stack.engine.stats.stale_writes


async def _poll_assignment(consumer: AIOKafkaConsumer) -> frozenset[object]:
    await consumer.getmany(timeout_ms=200)
    return frozenset(consumer.assignment())


async def _members(admin: AIOKafkaAdminClient, group: str) -> int:
    [resp] = await admin.describe_consumer_groups([group])
    [desc] = resp.groups
    return len(desc[5] if isinstance(desc, tuple) else desc.members)
