"""Engine memory and recovery with many outstanding timers (issue 20).

For 1,000,000 and 10,000,000 PRELOADED tasks due in 10-55 minutes, a fresh process
(``benchmarks/recovery_probe.py``) starts an engine on the database and reports the
recovery time (``Engine.start`` loads every PRELOADED row into the wheel before it
returns), its CPU seconds, and the engine's RSS per outstanding timer (RSS after
recovery, a full collection and ``gc.freeze()``, less RSS before the engine). The 10M
case takes a few minutes (most of it seeding the rows in PostgreSQL) and stays under
about 2 GB of RSS.

Targets (issue 20): at most 200 bytes of engine RSS per outstanding timer (10M in at
most 2.5 GB) and 1M recovered in at most 3 s.
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


@pytest.mark.parametrize("n", [1_000_000, 10_000_000], ids=["1M", "10M"])
def test_recover_outstanding_timers(benchmark: Any, slice_dsn: str, n: int) -> None:
    t0 = time.perf_counter()
    asyncio.run(seed_preloaded(slice_dsn, n))
    seed_s = time.perf_counter() - t0
    figures = benchmark.pedantic(lambda: probe(slice_dsn), rounds=1, iterations=1)
    figures["seed_s"] = seed_s
    name = "1M" if n == 1_000_000 else "10M"
    MEMORY[name] = figures
    benchmark.extra_info.update(figures)
    assert figures["n"] == n
