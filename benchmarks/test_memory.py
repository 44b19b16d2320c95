"""Engine memory and recovery with many outstanding timers (issue 20).

For 1,000,000 PRELOADED tasks due in 10-55 minutes, a fresh process
(``benchmarks/recovery_probe.py``) starts an engine on the database and reports the
recovery time (``Engine.start`` loads every PRELOADED row into the wheel before it
returns), its CPU seconds and the database backends', and the engine's RSS per
outstanding timer (RSS after recovery, a full collection and ``gc.freeze()``, less RSS
before the engine). For 1M and 10M, the same process fills a timeline through the same
path without a database (``synthetic:N``): RSS and peak RSS (about 0.9 GB at 10M), then
fires every timer into the ready queues as the dispatcher does and reports the RSS per
task due and waiting (a stampede's backlog, issue 41), both over the same baseline.

Targets (issue 20): at most 200 bytes of engine RSS per outstanding timer (10M in at
most 2.5 GB) and 1M recovered in at most 3 s; issue 41: at most 150 bytes per
outstanding task at 1M, in the wheel or due and waiting (serve's own RSS is measured
end to end by ``benchmarks/test_stampede.py``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from scheduler.store import StoreConfig
from scheduler.store.postgres import PostgresStore
from scheduler.types import Tenant

ROOT = Path(__file__).resolve().parent.parent

#: benchmark -> figures, printed as one table at the end of the module.
MEMORY: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module", autouse=True)
def memory_table(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or not MEMORY:
        return
    w = tr.write_line
    w("")
    w("outstanding timers: recovery and engine RSS (fresh process per case)")
    for name, f in MEMORY.items():
        if name.startswith("rss "):
            w(
                f"  {name}: rss={f['rss_after_mb']:,.0f} MB, peak {f['peak_rss_mb']:,.0f} MB "
                f"({f['bytes_per_timer']:.0f} B/timer over {f['rss_before_mb']:.0f} MB; "
                f"C memory {f['c_bytes_per_timer']:.0f} B/timer); due and waiting: "
                f"{f['due_bytes_per_task']:.0f} B/task (fire {f['fire_us_per_task']:.2f}, "
                f"pop {f['pop_us_per_task']:.2f} µs/task)"
            )
            continue
        if name == "timeline":
            w(
                f"  timeline: add {f['add_us_per_task']:.2f} µs/task, "
                f"fire {f['fire_us_per_task']:.2f} µs/task (CPU)"
            )
            continue
        w(
            f"  {name:<6} n={f['n']:,} recover={f['recover_s']:.2f} s "
            f"(cpu {f['recover_cpu_s']:.2f} s) rss={f['rss_after_mb']:,.0f} MB "
            f"({f['bytes_per_timer']:.0f} B/timer over {f['rss_before_mb']:.0f} MB) "
            f"gc2={f['gc2_ms']:.0f} ms tracked={f['gc_tracked_objects']:,}"
        )


async def seed_preloaded(dsn: str, n: int, *, tenants: int = 8, types: int = 4) -> None:
    """``n`` PRELOADED tasks due in 10-55 minutes over ``tenants`` tenants and ``types``
    task types, written by PostgreSQL itself (set-up, not measured)."""
    store = await PostgresStore.open(dsn, StoreConfig())
    try:
        ids = []
        for i in range(tenants):
            t = await store.create_tenant(Tenant(id=uuid.uuid4(), name=f"mem{i}"))
            ids.append(t.id)
    finally:
        await store.close()
    now = datetime.now(UTC)
    conn = await asyncpg.connect(dsn)
    try:
        for day in range(2):
            await conn.execute(
                "SELECT tickwheel_ensure_partition($1::date)", (now + timedelta(days=day)).date()
            )
        chunk = 1_000_000
        for start in range(0, n, chunk):
            await conn.execute(
                """
                INSERT INTO tasks (id, tenant_id, type, scheduled_at, due_at, status,
                                   idempotency_key, payload, shard_id, pool)
                SELECT gen_random_uuid(), ($5::uuid[])[1 + g % $6], 'type' || (g % $7),
                       t, t, 'PRELOADED', g::text, '{}', g % 256,
                       (ARRAY['critical', 'standard', 'bulk'])[1 + g % 3]
                FROM (SELECT g, $1::timestamptz + interval '10 minutes'
                             + (g::float8 * 2700.0 / $2) * interval '1 second' AS t
                      FROM generate_series($3::int, $4::int) g) s
                """,
                now,
                n,
                start,
                min(n, start + chunk) - 1,
                ids,
                tenants,
                types,
            )
        await conn.execute("ANALYZE tasks")
    finally:
        await conn.close()


def probe(dsn: str, *extra: str) -> dict[str, Any]:
    """Run ``benchmarks/recovery_probe.py`` in a fresh process; its JSON figures."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.recovery_probe", dsn, *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_recover_1m_outstanding_timers(benchmark: Any, slice_dsn: str) -> None:
    n = 1_000_000
    t0 = time.perf_counter()
    asyncio.run(seed_preloaded(slice_dsn, n))
    seed_s = time.perf_counter() - t0
    figures = benchmark.pedantic(lambda: probe(slice_dsn), rounds=1, iterations=1)
    figures["seed_s"] = seed_s
    MEMORY["1M"] = figures
    benchmark.extra_info.update(figures)
    assert figures["n"] == n


@pytest.mark.parametrize("n", [1_000_000, 10_000_000], ids=["1M", "10M"])
def test_rss_of_outstanding_timers(benchmark: Any, n: int) -> None:
    """RSS per timer at 1M and 10M through the recovery path (packed pages into the
    timeline) without a database: seeding 10M rows takes PostgreSQL over half an hour
    on this shared machine, the memory figure does not depend on it. Then the same
    tasks due and waiting in the ready queues (all fired, none handed out)."""
    figures = benchmark.pedantic(lambda: probe(f"synthetic:{n}", "--due"), rounds=1, iterations=1)
    MEMORY[f"rss {n // 1_000_000}M"] = figures
    benchmark.extra_info.update(figures)
    assert figures["n"] == n
    assert figures["due_waiting"] == n
    assert figures["popped"] == n


def test_timeline_add_and_fire(benchmark: Any) -> None:
    """The dispatch path's share of the change: CPU µs per task to add 200,000 tasks to
    the timeline (as the pre-loader's claims do) and to fire them in rounds of 500 (as
    the dispatcher does: each comes out as a ``Preloaded``)."""
    import logging

    from scheduler._aio import Background
    from scheduler.engine import EngineConfig
    from scheduler.engine._index_mirror import IndexMirror
    from scheduler.engine._shard_state import ShardState
    from scheduler.engine._stats import EngineStats
    from scheduler.engine._timeline import Timeline, to_ms
    from scheduler.ids import uuid7
    from scheduler.types import Pool, Preloaded, TaskKey

    class Owned:
        node_id = "n"
        shard_count = 256

        def owned(self) -> frozenset[int]:
            return frozenset(range(256))

    n, round_size = 200_000, 500
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    tenants = [uuid.uuid4() for _ in range(8)]
    items = [
        Preloaded(
            TaskKey(uuid7(), t0 + timedelta(microseconds=i * 997)),
            t0 + timedelta(microseconds=i * 997),
            tenants[i % 8],
            i % 256,
            Pool.STANDARD,
            f"type{i % 4}",
        )
        for i in range(n)
    ]
    config = EngineConfig()
    stats = EngineStats()
    mirror = IndexMirror(None, config, stats, Background(logging.getLogger("bench")), lambda: None)
    shards = ShardState(Owned(), clustered=False)  # type: ignore[arg-type]

    def run() -> dict[str, float]:
        timeline = Timeline(config, shards, mirror, stats, lambda: None, to_ms(t0))
        c0 = time.process_time()
        for i in range(0, n, 5_000):
            timeline.add(items[i : i + 5_000])
        c1 = time.process_time()
        fired = 0
        step_ms = round_size * 997 // 1000
        until = to_ms(t0)
        while fired < n:
            until += step_ms
            fired += len(timeline.fire(until))
        c2 = time.process_time()
        return {"add_us_per_task": (c1 - c0) * 1e6 / n, "fire_us_per_task": (c2 - c1) * 1e6 / n}

    figures = benchmark.pedantic(run, rounds=3, iterations=1)
    MEMORY["timeline"] = figures
    benchmark.extra_info.update(figures)
