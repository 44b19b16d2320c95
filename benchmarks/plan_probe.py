"""The plan probe of ``benchmarks/test_stampede.py --plans`` (issue 41): at each size,
seed a stampede into a fresh database (tests/support/plans.py), then EXPLAIN (ANALYZE,
BUFFERS) every hot statement with a batch under the custom and the generic plan, with no
statistics, with statistics taken while the minute was still SCHEDULED (stale) and with
fresh ones, and print the task-partition tuples each touched per task of its batch.

The server is the harness's (test_stampede starts it with autovacuum off, so the
no-statistics phase has none). ``sql``: another revision's queries.sql to probe instead
of this tree's, on this tree's schema (a before/after of a statement change in one run).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
from tests.support.servers import PostgresServer


async def _plans(
    dsn: str, n: int, spread_s: int, k: int, sql: str | None = None
) -> dict[str, dict[str, float]]:
    from tests.support.plans import BY_KEY_PROBES, HOT, Probe, explain, seed_stampede

    from scheduler.store import _sql
    from scheduler.store.postgres import Q

    q = dict(Q)
    if sql is not None:  # --plans-sql: another revision's statements, this tree's schema
        q.update(_sql.parse_sections(sql))
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    conn = await asyncpg.connect(dsn)
    out: dict[str, dict[str, float]] = {}

    async def probe_all(probe: Probe, stats: str) -> None:
        for name in HOT:
            statement, args = probe.args(name)
            for generic in (False, True):
                cost = await explain(
                    conn, q[statement], args, generic=generic, by_key=name in BY_KEY_PROBES
                )
                plan = "generic" if generic else "custom"
                out.setdefault(name, {})[f"{stats}_{plan}"] = cost.tuples / k
                out[name][f"{stats}_{plan}_ms"] = cost.ms

    try:
        await conn.execute("SET tickwheel.tenant = '*'")
        tenant = uuid.uuid4()
        await conn.execute("INSERT INTO tenants (id, name) VALUES ($1, 'plans')", tenant)
        await seed_stampede(conn, tenant, now, n, spread_s=spread_s)
        probe = await Probe.prepare(conn, now, k)
        # No statistics yet (--plans runs the server with autovacuum off).
        await probe_all(probe, "none")
        # Statistics of a minute still SCHEDULED, then pre-loaded (the trigger):
        # the batches keep their states (the PRELOADED tasks are the odd keys).
        await conn.execute("UPDATE tasks SET status = 'SCHEDULED' WHERE status = 'PRELOADED'")
        await conn.execute("ANALYZE tasks")
        await conn.execute(
            "UPDATE tasks SET status = 'PRELOADED' WHERE status = 'SCHEDULED'"
            " AND right(idempotency_key, 1) IN ('1', '3', '5', '7', '9')"
        )
        await probe_all(probe, "stale")
        await conn.execute("ANALYZE tasks")
        await probe_all(probe, "fresh")
    finally:
        await conn.close()
    return out


def plans(
    server: PostgresServer,
    sizes: list[int],
    k: int,
    spreads: list[str],
    sql: Path | None = None,
) -> None:
    """Print the plan probe's tuples a task at each size, on one scheduled_at (``one``)
    and spread over a day (``day``): with no statistics, stale ones and fresh ones, each
    under the custom and the generic plan, and the statement's execution time (ms, the
    custom plan's)."""
    from tests.support.db import migrate_sync

    layouts = {"one": (0, "one scheduled_at"), "day": (86_399, "spread over a day")}
    cols = [f"{s}_{p}" for s in ("none", "stale", "fresh") for p in ("custom", "generic")]
    for n in sizes:
        for spread_s, label in (layouts[x] for x in spreads):
            name = f"pl_{uuid.uuid4().hex[:10]}"
            server.ensure_app_role()
            server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
            try:
                migrate_sync(server.app_dsn(name))
                t0 = time.monotonic()
                text = sql.read_text(encoding="utf-8") if sql is not None else None
                got = asyncio.run(_plans(server.app_dsn(name), n, spread_s, k, text))
                took = time.monotonic() - t0
            finally:
                server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            print(
                f"{n:,} tasks, {label}, batch {k} ({took:.0f} s): tuples a task,"
                " no stats / stale / fresh, custom and generic plan; ms (custom)"
            )
            print(f"  {'':22s} " + " ".join(f"{c:>13s}" for c in cols))
            for stmt, v in got.items():
                ms = " ".join(f"{v[f'{s}_custom_ms']:7.1f}" for s in ("none", "stale", "fresh"))
                print(
                    f"  {stmt:22s} " + " ".join(f"{v[c]:13.1f}" for c in cols) + f"   {ms}",
                    flush=True,
                )
            worst = max(v[c] for v in got.values() for c in cols)
            print(f"  max over statements and columns: {worst:.1f}", flush=True)
