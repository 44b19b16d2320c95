"""A handler that does I/O as a user's would, and the same call in a bare asyncio loop.

``call(ctx)`` is the task handler of ``benchmarks/test_worker_handler.py``: one
pipelined ``redis.asyncio`` round trip (``INCR`` and ``EXPIRE`` of one key) per task,
on a connection pool of ``TW_BENCH_REDIS_POOL`` connections (default 16) to
``TW_BENCH_REDIS_URL``. Run as a module it is the baseline: the same call ``--calls``
times in a bare asyncio loop with ``--concurrency`` calls in flight (on the event loop
the CLI runs on, uvloop where installed), printing one JSON line (calls, wall
seconds, this process's CPU seconds over the calls).

    .venv/bin/python -m benchmarks.redis_handler --url redis://127.0.0.1:6379/0 \
        --calls 20000 --concurrency 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import redis.asyncio as aioredis

from scheduler.cli._runner import run_coro

KEY = "tw:bench:handler"
_client: aioredis.Redis | None = None


def client(url: str | None = None, pool: int | None = None) -> aioredis.Redis:
    """The process's one Redis client (made on first use, inside the running loop)."""
    global _client
    if _client is None:
        size = pool or int(os.environ.get("TW_BENCH_REDIS_POOL", "16"))
        connections = aioredis.BlockingConnectionPool.from_url(
            url or os.environ["TW_BENCH_REDIS_URL"], max_connections=size, timeout=30
        )
        _client = aioredis.Redis(connection_pool=connections)
    return _client


async def one_call(r: aioredis.Redis) -> None:
    """The handler's I/O: one pipelined round trip of two commands."""
    async with r.pipeline(transaction=False) as pipe:
        pipe.incr(KEY)
        pipe.expire(KEY, 600)
        await pipe.execute()


async def call(ctx: Any) -> None:
    """The task handler: one pipelined redis.asyncio call, no result."""
    await one_call(client())


async def paced(r: aioredis.Redis, calls: int, rate: float) -> None:
    """``calls`` calls started at ``rate`` a second (a batch every 10 ms), as a worker
    receives tasks from a server that delivers no faster."""
    tasks: list[asyncio.Task[None]] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    while len(tasks) < calls:
        due = min(calls, int((loop.time() - start) * rate) + 1)
        tasks.extend(asyncio.create_task(one_call(r)) for _ in range(due - len(tasks)))
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)


async def bare(
    url: str, calls: int, concurrency: int, pool: int, rate: float = 0.0
) -> dict[str, float]:
    """``calls`` calls with ``concurrency`` in flight (or started at ``rate`` a second);
    wall and CPU seconds of them."""
    r = client(url, pool)
    await asyncio.gather(*(one_call(r) for _ in range(min(concurrency, 200))))  # warm
    if rate > 0:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await paced(r, calls, rate)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        await r.aclose()
        return {"calls": calls, "wall_s": wall, "cpu_s": cpu}
    left = calls

    async def lane() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one_call(r)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    await r.aclose()
    return {"calls": calls, "wall_s": wall, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=2_000)
    parser.add_argument("--pool", type=int, default=16)
    parser.add_argument("--rate", type=float, default=0.0, help="calls/s; 0: as fast as it can")
    args = parser.parse_args()
    # On the loop `tickwheel worker` runs on (TICKWHEEL_EVENT_LOOP: uvloop where
    # installed), so that the comparison is of the SDK, not of the event loop.
    figures = run_coro(
        bare(args.url, args.calls, args.concurrency, args.pool, args.rate), loop="uvloop"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()


async def noop(ctx: Any) -> None:
    """A handler without I/O: the worker's own cost per task (for comparison)."""
