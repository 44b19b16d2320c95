"""A batch handler against a single-task handler, one Redis round trip per call (issue 43).

A real ``tickwheel serve`` on PostgreSQL (fsync on), a real Redis, and in this process
one SDK ``Worker`` of ``SLOTS`` slots. ``N`` strict tasks, all due at one instant T after
their submission has ended (batches of 5,000), are drained by the worker with, in the
same run, each on a fresh database:

- ``single``: an async handler making one pipelined ``redis.asyncio`` round trip per
  task (``INCR`` + ``EXPIRE``, ``benchmarks/redis_handler.py``);
- ``batch``: ``Batch(size=100, max_wait_s=0.05)``, one pipelined round trip per batch
  (``INCRBY n`` + ``EXPIRE``), each task completing on its own.

The Redis client has ``TW_BENCH_BATCH_POOL`` connections (default 4): a downstream that
takes a few calls at once, which is what a batch handler is for. ``tasks_per_s`` is
``N`` over the first to the last ``completed_at`` of the ledger (the drain);
``from_due_tasks_per_s`` counts from T; ``worker_cpu_us_per_task`` is this process's
CPU (the worker and its Redis client) from T to the last completion, per task: the
figure least moved by other load on a shared machine. Target (issue 43): batch >= 3x
single.

``TW_BENCH_BATCH_TASKS`` sets ``N`` (default 50,000), ``TW_BENCH_BATCH_SLOTS`` the
worker's slots (default 1,000: ten batches of 100 in flight; 200 holds a batch handler
to two), ``TW_BENCH_BATCH_START`` = ``on_delivery`` runs the worker with
``start_on_delivery`` (default: ack first).

Run: ``.venv/bin/pytest benchmarks/test_batch_handler.py --benchmark-only -p
no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis.asyncio as aioredis
from tests.support.processes import ADMIN_TOKEN, ProcessGroup
from tests.support.servers import RedisServer

from scheduler.client import AdminClient, Client, TaskSpec
from scheduler.worker import Batch, TaskContext, Worker

N = int(os.environ.get("TW_BENCH_BATCH_TASKS", "50000"))
POOL = int(os.environ.get("TW_BENCH_BATCH_POOL", "4"))
ON_DELIVERY = os.environ.get("TW_BENCH_BATCH_START", "ack") == "on_delivery"
SLOTS = int(os.environ.get("TW_BENCH_BATCH_SLOTS", "1000"))
SIZE = 100
KEY = "tw:bench:batch"

FIGURES: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module", autouse=True)
def batch_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not FIGURES:
        return
    tr.write_line("")
    tr.write_line(
        f"batch handler vs single-task handler: {N:,} tasks, {SLOTS} slots, "
        f"one Redis round trip a call, {POOL} Redis connections"
    )
    for name, figures in FIGURES.items():
        cells = ", ".join(f"{k}={v:,.1f}" for k, v in figures.items())
        tr.write_line(f"  {name:<7} {cells}")
    if {"single", "batch"} <= FIGURES.keys():
        ratio = FIGURES["batch"]["tasks_per_s"] / FIGURES["single"]["tasks_per_s"]
        tr.write_line(f"  batch / single tasks/s: {ratio:.2f}x")


async def _key(target: str) -> str:
    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant(
            "batch-bench", rate_limit_rps=1_000_000, max_concurrent_workers=1_000_000
        )
        return (await admin.create_api_key(tenant.id, "bench")).secret


async def _completed(dsn: str, n: int, timeout_s: float) -> tuple[float, float]:
    """Poll until ``n`` tasks completed; the first and last ``completed_at`` (epoch s)."""
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            done = await conn.fetchval("SELECT count(*) FROM task_completions WHERE type = 'io'")
            if done >= n:
                row: Any = await conn.fetchrow(
                    "SELECT min(completed_at), max(completed_at) FROM task_completions"
                    " WHERE type = 'io'"
                )
                return row[0].timestamp(), row[1].timestamp()
            if time.monotonic() > deadline:
                raise AssertionError(f"only {done} of {n} tasks completed in {timeout_s} s")
            await asyncio.sleep(0.25)
    finally:
        await conn.close()


async def _scenario(target: str, dsn: str, redis_url: str, mode: str) -> dict[str, float]:
    key = await _key(target)
    pool = aioredis.BlockingConnectionPool.from_url(redis_url, max_connections=POOL, timeout=60)
    r = aioredis.Redis(connection_pool=pool)
    calls = 0

    async def single(ctx: TaskContext) -> None:
        nonlocal calls
        calls += 1
        async with r.pipeline(transaction=False) as pipe:
            pipe.incr(KEY)
            pipe.expire(KEY, 600)
            await pipe.execute()

    async def many(ctxs: list[TaskContext]) -> None:
        nonlocal calls
        calls += 1
        async with r.pipeline(transaction=False) as pipe:
            pipe.incrby(KEY, len(ctxs))
            pipe.expire(KEY, 600)
            await pipe.execute()

    handler: Any = single if mode == "single" else Batch(many, size=SIZE, max_wait_s=0.05)
    worker = Worker(
        target,
        api_key=key,
        handlers={"io": handler},
        slots=SLOTS,
        start_on_delivery=ON_DELIVERY,
    )
    run = asyncio.create_task(worker.run(), name="bench-worker")
    client = await Client.connect(target, api_key=key)
    try:
        await r.delete(KEY)
        # T: after the submission (at a pessimistic 5,000 a second) and a margin, so the
        # drain is measured alone.
        due = datetime.now(UTC) + timedelta(seconds=N / 5000 + 3.0)
        for at in range(0, N, 5000):
            specs = [
                TaskSpec(type="io", scheduled_at=due, strict_timing=True)
                for _ in range(min(5000, N - at))
            ]
            await client.submit_many(specs)
        if datetime.now(UTC) >= due - timedelta(seconds=0.5):
            raise AssertionError(f"submission ended after T - 0.5 s ({due:%H:%M:%S.%f})")
        await asyncio.sleep((due - datetime.now(UTC)).total_seconds())
        cpu0 = time.process_time()
        first, last = await _completed(dsn, N, 600)
        cpu = time.process_time() - cpu0
        assert int(await r.get(KEY) or 0) >= N
    finally:
        await client.close()
        await worker.shutdown(grace_s=0)
        await asyncio.wait_for(run, 30)
        await r.aclose()
        await pool.disconnect()
    return {
        "tasks_per_s": N / (last - first),
        "from_due_tasks_per_s": N / (last - due.timestamp()),
        "redis_calls": float(calls),
        "worker_cpu_us_per_task": cpu / N * 1e6,
    }


@pytest.mark.parametrize("mode", ["single", "batch"])
def test_batch_handler_against_single_task_handler(
    benchmark: Any, slice_dsn: str, redis_server: RedisServer, tmp_path: Path, mode: str
) -> None:
    group = ProcessGroup(tmp_path / "procs")
    try:
        server = group.serve(slice_dsn, lease_ttl_s=30.0, extra_args=("--canary-interval-s", "0"))
        figures: dict[str, float] = benchmark.pedantic(
            lambda: asyncio.run(_scenario(server.target, slice_dsn, redis_server.url, mode)),
            rounds=1,
            iterations=1,
        )
    finally:
        group.stop_all()
    benchmark.extra_info.update(figures)
    FIGURES[mode] = figures
