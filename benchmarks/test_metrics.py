"""What the metrics cost per task and per scrape, in-process (no server).

- ``counting``: on, the counter work the engine does per task whatever the endpoint
  (submitted, dispatched, ready-queue wait, lateness, completed with its labels from
  the slots ledger, one batched-write record per 500 tasks), in ns per task; compare
  with the lifecycle's time per task (~300 us at ~3,000 tasks/s, docs/benchmarks.md).
- ``scrape``: one ``/metrics`` exposition of a node with 200 task types in 3 pools.

Run: ``.venv/bin/pytest benchmarks/test_metrics.py --benchmark-only -p no:cacheprovider``
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from scheduler.engine import Engine, EngineConfig
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.metrics import DepthPoller, EngineCollector, MetricsConfig
from scheduler.store import open_store
from scheduler.types import Pool, Preloaded, TaskKey

N = 10_000


@pytest.mark.parametrize("counting", ["off", "on"])
def test_counting_per_task(benchmark: Any, counting: str) -> None:
    """The per-task bookkeeping the engine does anyway (the slots ledger), with and
    without the metric counters: the difference is what counting costs per task."""
    now = datetime.now(UTC)
    tasks = [
        Preloaded(TaskKey(uuid.uuid4(), now), now, uuid.uuid4(), 0, Pool.STANDARD, f"t{i % 20}")
        for i in range(N)
    ]

    def run() -> None:
        stats = EngineStats()
        slots = Slots(lambda _id: None)
        submitted, dispatched = stats.tasks["submitted"], stats.tasks["dispatched"]
        completed = stats.tasks["completed"]
        wait, lateness = stats.ready_wait_s, stats.lateness_s
        if counting == "off":
            for p in tasks:
                slots.take(p)
                slots.free(p.key.id)
            return
        for i, p in enumerate(tasks):
            submitted[(p.pool.value, p.type)] += 1
            slots.take(p)
            dispatched[(p.pool.value, p.type)] += 1
            wait[p.pool].observe(0.003)
            lateness.observe(0.004)
            completed[slots.labels(p.key.id)] += 1
            slots.free(p.key.id)
            if i % 500 == 0:
                stats.write("complete", 500, 0.002)

    benchmark.pedantic(run, rounds=20, iterations=1)
    per_task_ns = benchmark.stats.stats.mean / N * 1e9
    benchmark.extra_info["ns_per_task"] = per_task_ns


def test_scrape(benchmark: Any) -> None:
    async def build() -> tuple[CollectorRegistry, Any]:
        store = await open_store("sqlite://:memory:")
        engine = Engine(store, EngineConfig())
        for pool in Pool:
            for t in range(200):
                for event in engine.stats.tasks:
                    engine.stats.count(event, pool, f"type-{t}", 5)
        depth = DepthPoller(store, 0)
        await depth.refresh(datetime.now(UTC) + timedelta(0))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(EngineCollector(engine, depth, MetricsConfig()))
        return registry, store

    loop = asyncio.new_event_loop()
    try:
        registry, store = loop.run_until_complete(build())
        body = benchmark(generate_latest, registry)
        benchmark.extra_info["bytes"] = len(body)
        loop.run_until_complete(store.close())
    finally:
        loop.close()
