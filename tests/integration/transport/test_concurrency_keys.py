"""Concurrency keys through the API (issue 43): the admin RPCs, the task's key in the
answers, and an in-process worker that never runs more of a key than its limit while
keys without a limit run one at a time and tasks without a key run freely."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

from scheduler.client import TaskSpec
from scheduler.states import TaskState
from scheduler.worker import TaskContext, Worker
from tests.integration.transport.conftest import Stack
from tests.support.waiting import eventually


async def test_limits_round_trip_and_the_key_is_on_the_task(stack: Stack) -> None:
    tenant = uuid.UUID(stack.tenant_a)
    assert await stack.admin.concurrency_limits(tenant) == {}
    assert await stack.admin.set_concurrency_limit(tenant, "sync", 3) == 3
    assert await stack.admin.concurrency_limits(tenant) == {"sync": 3}
    assert await stack.admin.set_concurrency_limit(tenant, "sync", None) == 1
    assert await stack.admin.concurrency_limits(tenant) == {}
    async with await stack.client() as client:
        task = await client.submit("sync", {"c": "acme"}, concurrency_key="acme")
        row = await stack.engine.store.get_task(tenant, task.id)
        assert row.concurrency_key == "acme"


async def test_a_worker_runs_at_most_the_limit_of_each_key(stack: Stack) -> None:
    tenant = uuid.UUID(stack.tenant_a)
    await stack.admin.set_concurrency_limit(tenant, "sync", 2)
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()

    async def handler(ctx: TaskContext) -> dict[str, Any]:
        key = str(ctx.payload["key"])
        running[key] += 1
        most[key] = max(most[key], running[key])
        await asyncio.sleep(0.03)
        running[key] -= 1
        return {}

    specs = [TaskSpec(type="sync", payload={"key": "a"}, concurrency_key="a") for _ in range(12)]
    specs += [TaskSpec(type="sync", payload={"key": "b"}, concurrency_key="b") for _ in range(6)]
    specs += [TaskSpec(type="other", payload={"key": "c"}, concurrency_key="c") for _ in range(4)]
    specs += [TaskSpec(type="sync", payload={"key": "-"}) for _ in range(8)]
    worker = Worker(
        stack.target, api_key=stack.key_a, handlers={"sync": handler, "other": handler}, slots=20
    )
    run = asyncio.create_task(worker.run(), name="test-worker-run")
    try:
        async with await stack.client() as client:
            tasks = await client.submit_many(specs)
            for t in tasks:
                await eventually(
                    lambda t=t: client.get(t.id),
                    lambda got: got.state is TaskState.COMPLETED,
                    timeout_s=60,
                )
    finally:
        await worker.shutdown(grace_s=2)
        await asyncio.wait_for(run, 15)
    assert most["a"] == 2  # its type's limit, reached and never passed
    assert most["b"] == 2
    assert most["c"] == 1  # a type without a limit: one per key
    assert most["-"] > 2  # no key: no limit
