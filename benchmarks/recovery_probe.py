"""Recover a database's PRELOADED tasks into a fresh engine and report what it cost.

Run in a process of its own (``benchmarks/test_memory.py`` starts it), so its RSS is the
engine's and nothing else's:

    .venv/bin/python -m benchmarks.recovery_probe DSN [--tracemalloc] [--profile FILE]
    .venv/bin/python -m benchmarks.recovery_probe synthetic:N [--due]

Prints one JSON object: ``n`` (tasks in the wheel), ``recover_s`` (wall time of
``Engine.start``, which loads every PRELOADED row before it returns), ``recover_cpu_s``
(this process's CPU seconds over it), ``server_cpu_s`` (the database backends' CPU
seconds over it), ``rss_before_mb`` (after imports and the store's
pool, before the engine), ``rss_after_mb`` (after recovery, a full collection and
``gc.freeze()`` as ``tickwheel serve`` does), ``bytes_per_timer`` ((after - before) / n),
``gc2_ms`` (one full collection after recovery, before the freeze) and, with
``--tracemalloc``, the top allocation sites of what stays.

``synthetic:N`` fills a timeline without a database (RSS per timer in the wheel); with
``--due`` it then fires every timer into the ready queues as the dispatcher does (no
worker takes them: the backlog of a stampede) and reports the RSS per task due and
waiting too (``due_bytes_per_task``, over the same ``rss_before_mb``), and the CPU µs
per task of the firing and of handing every task out again (``pop_us_per_task``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import time
import tracemalloc
from typing import Any

import asyncpg
import psutil

from scheduler.engine import Engine, EngineConfig
from scheduler.store import StoreConfig
from scheduler.store.postgres import PostgresStore


async def _backend_cpu(dsn: str) -> float:
    """CPU seconds so far of every PostgreSQL backend of ``dsn``'s database (the
    server runs on this machine in the benchmarks)."""
    conn = await asyncpg.connect(dsn)
    try:
        pids = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    total = 0.0
    for r in pids:
        try:
            t = psutil.Process(r["pid"]).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


async def probe(dsn: str, *, trace: bool, profile: str | None) -> dict[str, Any]:
    proc = psutil.Process()
    store = await PostgresStore.open(dsn, StoreConfig())
    engine = Engine(store, EngineConfig(lease_ttl_s=30.0, canary_interval_s=0.0))
    gc.collect()
    out: dict[str, Any] = {"rss_before_mb": proc.memory_info().rss / 2**20}
    if trace:
        tracemalloc.start(8)
    prof = cProfile.Profile() if profile else None
    pg0 = await _backend_cpu(dsn)
    cpu0 = proc.cpu_times()
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    await engine.start()
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)  # type: ignore[arg-type]
    out["recover_s"] = time.perf_counter() - t0
    cpu1 = proc.cpu_times()
    out["recover_cpu_s"] = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    out["n"] = engine.stats.preloaded
    # The pool's connections outlive the load, so their CPU now less before is the
    # server's share of it (a connection opened meanwhile counts from zero).
    out["server_cpu_s"] = await _backend_cpu(dsn) - pg0
    t0 = time.perf_counter()
    gc.collect()
    out["gc2_ms"] = (time.perf_counter() - t0) * 1000.0
    gc.freeze()
    out["rss_after_mb"] = proc.memory_info().rss / 2**20
    n = max(1, out["n"])
    out["bytes_per_timer"] = (out["rss_after_mb"] - out["rss_before_mb"]) * 2**20 / n
    out["gc_tracked_objects"] = len(gc.get_objects())
    if trace:
        snap = tracemalloc.take_snapshot()
        tracemalloc.stop()
        stats = snap.statistics("lineno")
        out["traced_bytes_per_timer"] = sum(s.size for s in stats) / n
        out["top"] = [
            {"site": str(s.traceback[0]), "bytes_per_timer": s.size / n, "count": s.count}
            for s in stats[:12]
        ]
    await engine.stop()
    await store.close()
    return out


def synthetic(n: int, *, due: bool = False) -> dict[str, Any]:
    """Fill a timeline with ``n`` tasks through the path recovery takes (packed pages
    into ``Timeline.add_packed``), without a database: RSS per timer at any size."""
    import array
    import logging
    import os
    import resource
    import uuid
    from datetime import UTC, datetime

    from scheduler._aio import Background
    from scheduler.engine._index_mirror import IndexMirror
    from scheduler.engine._ready import ReadyQueues
    from scheduler.engine._shard_state import ShardState
    from scheduler.engine._stats import EngineStats
    from scheduler.engine._timeline import Timeline, to_ms, to_us
    from scheduler.types import Pool, PreloadedGroup, PreloadedPage

    class Owned:
        node_id = "n"
        shard_count = 256

        def owned(self) -> frozenset[int]:
            return frozenset(range(256))

    proc = psutil.Process()
    config = EngineConfig()
    stats = EngineStats()
    mirror = IndexMirror(None, config, stats, Background(logging.getLogger("probe")), lambda: None)
    now = datetime.now(UTC)
    timeline = Timeline(
        config, ShardState(Owned(), clustered=False), mirror, stats, lambda: None, to_ms(now)
    )  # type: ignore[arg-type]
    tenants = [uuid.uuid4() for _ in range(8)]
    gc.collect()
    out: dict[str, Any] = {"rss_before_mb": proc.memory_info().rss / 2**20}
    start = to_us(now) + 600_000_000
    page = 50_000
    t0 = time.perf_counter()
    for first in range(0, n, page):
        k = min(page, n - first)
        times = array.array("q", range(start + first * 270, start + (first + k) * 270, 270))
        groups = tuple(
            PreloadedGroup(
                tenant_id=tenants[g],
                type=f"type{g % 4}",
                pool=Pool.STANDARD,
                ids=os.urandom(16 * len(times[g::8])),
                scheduled_us=times[g::8],
                due_us=times[g::8],
                shards=array.array("q", [(first + i) % 256 for i in range(len(times[g::8]))]),
            )
            for g in range(8)
        )
        timeline.add_packed(PreloadedPage(groups=groups, count=k, last=None))
    out["fill_s"] = time.perf_counter() - t0  # mostly building the synthetic pages
    out["n"] = len(timeline)
    gc.collect()
    out["rss_after_mb"] = proc.memory_info().rss / 2**20
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["c_bytes_per_timer"] = timeline.memory_bytes() / max(1, n)
    out["bytes_per_timer"] = (out["rss_after_mb"] - out["rss_before_mb"]) * 2**20 / max(1, n)
    if not due:
        return out
    # Every timer due, fired in 200 dispatcher-like rounds into the ready queues (the
    # engine's wiring: they share the timeline's rows), none handed out.
    shared = hasattr(timeline, "fire_handles")  # a tree before issue 41: objects
    ready = ReadyQueues(lambda _t: 1, timeline.rows) if shared else ReadyQueues(lambda _t: 1)
    end_ms = (start + n * 270) // 1000 + 1
    step = max(1, (end_ms - start // 1000) // 200)
    until = start // 1000
    c0 = time.process_time()
    while len(timeline):
        until += step
        if shared:
            ready.extend_handles(timeline.fire_handles(until))
        else:
            ready.extend(timeline.fire(until))
    out["fire_us_per_task"] = (time.process_time() - c0) * 1e6 / max(1, n)
    gc.collect()
    out["due_waiting"] = len(ready)
    out["due_rss_mb"] = proc.memory_info().rss / 2**20
    out["due_bytes_per_task"] = (out["due_rss_mb"] - out["rss_before_mb"]) * 2**20 / max(1, n)
    c0 = time.process_time()
    popped = 0
    while ready.pop(Pool.STANDARD, None, None) is not None:
        popped += 1
    out["pop_us_per_task"] = (time.process_time() - c0) * 1e6 / max(1, n)
    out["popped"] = popped
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dsn", help="a database to recover from, or 'synthetic:N'")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--profile")
    parser.add_argument("--due", action="store_true", help="synthetic: fire all into ready")
    args = parser.parse_args()
    if args.dsn.startswith("synthetic:"):
        print(json.dumps(synthetic(int(args.dsn.split(":", 1)[1]), due=args.due)))
        return
    print(json.dumps(asyncio.run(probe(args.dsn, trace=args.tracemalloc, profile=args.profile))))


if __name__ == "__main__":
    main()
