"""Flow control by key (issue 43) through a real ``tickwheel serve`` and workers: a rate
limited key is held and starts in due order; a paused type does not dispatch until
resumed, then starts in due order."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.client import NotFound, Pool, TaskSpec, TaskState
from tests.acceptance.conftest import HANDLERS, Cluster
from tests.support.waiting import eventually

FAST = {"fast": f"{HANDLERS}:fast", "work": f"{HANDLERS}:work"}


async def _done(cluster: Cluster, n: int) -> None:
    await eventually(
        cluster.status_counts,
        until=lambda c: c.get("COMPLETED", 0) == n,
        what=f"{n} tasks COMPLETED",
        timeout_s=60,
    )


def _starts(cluster: Cluster, ids: set[str]) -> list[tuple[float, str]]:
    return sorted((r["at"], r["task_id"]) for r in cluster.records("done") if r["task_id"] in ids)


async def test_a_rate_limited_key_is_held_and_starts_in_due_order(cluster: Cluster) -> None:
    c = cluster.client
    limit = await c.set_rate_limit("partner-api", rate=4, burst=1)
    assert (limit.key, limit.rate, limit.burst) == ("partner-api", 4.0, 1)
    assert [r.key for r in await c.list_rate_limits()] == ["partner-api"]
    await cluster.worker("w1", FAST, slots=20)
    base = datetime.now(UTC) + timedelta(seconds=1)
    keyed = [
        TaskSpec(
            type="fast",
            scheduled_at=base + timedelta(milliseconds=i),
            strict_timing=True,
            rate_limit_key="partner-api",
        )
        for i in range(12)
    ]
    free = [TaskSpec(type="fast", scheduled_at=base, strict_timing=True) for _ in range(12)]
    tasks = await c.submit_many(keyed + free)
    keyed_ids = [str(t.id) for t in tasks[:12]]
    await _done(cluster, 24)

    starts = _starts(cluster, set(keyed_ids))
    # Due order: the key's tasks started in the order they were due.
    assert [tid for _, tid in starts] == keyed_ids
    # Held: 12 tasks at 4/s with a burst of 1 cannot all start in less than 11/4 s (a
    # lower bound, so a slow machine cannot fail it; a missing limit would).
    assert starts[-1][0] - starts[0][0] >= 11 / 4 * 0.9
    free_starts = _starts(cluster, {str(t.id) for t in tasks[12:]})
    # The tasks without a key were not held behind the key.
    assert free_starts[-1][0] < starts[-1][0]

    await c.delete_rate_limit("partner-api")
    assert await c.list_rate_limits() == []


async def test_a_paused_type_waits_preloaded_until_resumed_then_fires_in_due_order(
    cluster: Cluster,
) -> None:
    c = cluster.client
    pause = await c.pause_dispatch("work")
    assert (pause.task_type, pause.pool, pause.tenant_id) == ("work", None, cluster.tenant_id)
    assert [p.task_type for p in await c.list_dispatch_pauses()] == ["work"]
    await cluster.worker("w1", FAST, slots=1)
    base = datetime.now(UTC)
    paused = await c.submit_many(
        [
            TaskSpec(type="work", scheduled_at=base + timedelta(milliseconds=i), strict_timing=True)
            for i in range(5)
        ]
    )
    # A type that is not paused goes out meanwhile, on the same worker.
    other = await c.submit_many([TaskSpec(type="fast", strict_timing=True) for _ in range(3)])
    await _done(cluster, 3)
    assert {r["task_id"] for r in cluster.records("done")} == {str(t.id) for t in other}
    for t in paused:
        assert (await c.get(t.id)).state is TaskState.PRELOADED

    await c.resume_dispatch("work")
    assert await c.list_dispatch_pauses() == []
    await _done(cluster, 8)
    ids = [str(t.id) for t in paused]
    assert [tid for _, tid in _starts(cluster, set(ids))] == ids


async def test_a_paused_pool_holds_only_that_pool(cluster: Cluster) -> None:
    c = cluster.client
    await c.pause_dispatch(pool=Pool.BULK)
    await cluster.worker("w1", FAST, slots=4)
    bulk = await c.submit("fast", pool=Pool.BULK, strict_timing=True)
    std = await c.submit("fast", strict_timing=True)
    await _done(cluster, 1)
    assert (await c.get(std.id)).state is TaskState.COMPLETED
    assert (await c.get(bulk.id)).state is TaskState.PRELOADED
    await c.resume_dispatch(pool=Pool.BULK)
    await _done(cluster, 2)
    assert (await c.get(bulk.id)).state is TaskState.COMPLETED


async def test_the_cli_sets_lists_and_deletes_limits_and_pauses(cluster: Cluster) -> None:
    from click.testing import CliRunner

    from scheduler.cli import main

    conn = ["--target", cluster.server.target, "--api-key", cluster.api_key]

    def run(*args: str) -> str:
        result = CliRunner().invoke(main, [*args, *conn], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    async def cli(*args: str) -> str:
        return await asyncio.to_thread(run, *args)

    assert "partner-api: 2.5/s, burst 3" in await cli(
        "rate-limits", "set", "partner-api", "--rate", "2.5", "--burst", "3"
    )
    assert "partner-api" in await cli("rate-limits", "list")
    assert [(r.key, r.rate, r.burst) for r in await cluster.client.list_rate_limits()] == [
        ("partner-api", 2.5, 3)
    ]
    await cli("rate-limits", "delete", "partner-api")
    assert await cluster.client.list_rate_limits() == []

    assert "type work, pool bulk" in await cli("pause", "--type", "work", "--pool", "bulk")
    assert "work" in await cli("pauses")
    [p] = await cluster.client.list_dispatch_pauses()
    assert (p.task_type, p.pool) == ("work", Pool.BULK)
    await cli("resume", "--type", "work", "--pool", "bulk")
    assert await cluster.client.list_dispatch_pauses() == []
    task = json.loads(
        await cli("submit", "work", "--rate-limit-key", "partner-api", "--json", "--in", "3600")
    )
    stored = await cluster.db.fetchval(
        "SELECT rate_limit_key FROM tasks WHERE id = $1", uuid.UUID(task["id"])
    )
    assert stored == "partner-api"


async def test_only_the_admin_token_pauses_every_tenant(cluster: Cluster) -> None:
    import grpc

    from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
    from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
    from scheduler.client import PermissionDenied
    from tests.support.processes import ADMIN_TOKEN

    with pytest.raises(PermissionDenied, match="all_tenants"):
        await cluster.client.pause_dispatch(pool=Pool.BULK, all_tenants=True)
    admin = (("x-admin-token", ADMIN_TOKEN),)
    async with grpc.aio.insecure_channel(cluster.server.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        resp = await stub.PauseDispatch(
            pb.PauseDispatchRequest(pool=pb.POOL_BULK, all_tenants=True), metadata=admin
        )
        assert (resp.pause.tenant_id, resp.pause.pool) == ("", pb.POOL_BULK)
        # Every tenant sees it, the tenant's own key included.
        [p] = await cluster.client.list_dispatch_pauses()
        assert (p.tenant_id, p.pool) == (None, Pool.BULK)
        await cluster.worker("w1", FAST, slots=2)
        bulk = await cluster.client.submit("fast", pool=Pool.BULK, strict_timing=True)
        std = await cluster.client.submit("fast", strict_timing=True)
        await _done(cluster, 1)
        assert (await cluster.client.get(bulk.id)).state is TaskState.PRELOADED
        assert (await cluster.client.get(std.id)).state is TaskState.COMPLETED
        # A tenant cannot lift an all-tenants pause: its own resume names its own pause.
        with pytest.raises(NotFound):
            await cluster.client.resume_dispatch(pool=Pool.BULK)
        await stub.ResumeDispatch(
            pb.ResumeDispatchRequest(pool=pb.POOL_BULK, all_tenants=True), metadata=admin
        )
    await _done(cluster, 2)
