"""The plan probe of ``benchmarks/test_stampede.py --plans`` (issue 41): at each size,
seed a stampede into a fresh database (tests/support/plans.py), then EXPLAIN (ANALYZE,
BUFFERS) every hot statement with a batch under the custom and the generic plan, with no
statistics, with statistics taken while the minute was still SCHEDULED (stale) and with
fresh ones, and print the task-partition tuples each touched per task of its batch.

The server is the harness's (test_stampede starts it with autovacuum off, so the
no-statistics phase has none). ``sql``: another revision's queries.sql to probe beside
this tree's, on the same seed and this tree's schema (a before/after of a statement
change in one run).
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
    dsn: str, n: int, spread_s: int, k: int, sqls: dict[str, str | None], phases: list[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """{statements' label: {statement: {column: tuples a task or ms}}} on one seed."""
    from tests.support.plans import BY_KEY_PROBES, HOT, Probe, explain, seed_stampede

    from scheduler.store import _sql
    from scheduler.store.postgres import Q

    sets = {}
    for label, sql in sqls.items():
        sets[label] = dict(Q)
        if sql is not None:  # another revision's statements, this tree's schema
            sets[label].update(_sql.parse_sections(sql))
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    conn = await asyncpg.connect(dsn)
    out: dict[str, dict[str, dict[str, float]]] = {label: {} for label in sets}

    async def probe_all(probe: Probe, stats: str) -> None:
        for label, q in sets.items():
            for name in HOT:
                statement, args = probe.args(name)
                for generic in (False, True):
                    cost = await explain(
                        conn, q[statement], args, generic=generic, by_key=name in BY_KEY_PROBES
                    )
                    plan = "generic" if generic else "custom"
                    row = out[label].setdefault(name, {})
                    row[f"{stats}_{plan}"] = cost.tuples / k
                    row[f"{stats}_{plan}_ms"] = cost.ms

    try:
        await conn.execute("SET tickwheel.tenant = '*'")
        tenant = uuid.uuid4()
        await conn.execute("INSERT INTO tenants (id, name) VALUES ($1, 'plans')", tenant)
        await seed_stampede(conn, tenant, now, n, spread_s=spread_s)
        probe = await Probe.prepare(conn, now, k)
        if "none" in phases:  # no statistics yet (--plans runs autovacuum off)
            await probe_all(probe, "none")
        if "stale" in phases:
            # Statistics of a minute still SCHEDULED, then pre-loaded (the issue's
            # trigger): the batches keep their states (the PRELOADED tasks: odd keys).
            # Two updates of half the tasks: 17 of the 10,000,000-task run's 30 minutes.
            await conn.execute("UPDATE tasks SET status = 'SCHEDULED' WHERE status = 'PRELOADED'")
            await conn.execute("ANALYZE tasks")
            await conn.execute(
                "UPDATE tasks SET status = 'PRELOADED' WHERE status = 'SCHEDULED'"
                " AND right(idempotency_key, 1) IN ('1', '3', '5', '7', '9')"
            )
            await probe_all(probe, "stale")
        if "fresh" in phases:
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
    phases: tuple[str, ...] = ("none", "stale", "fresh"),
) -> None:
    """Print the plan probe's tuples a task at each size, on one scheduled_at (``one``)
    and spread over a day (``day``): with no statistics, stale ones and fresh ones, each
    under the custom and the generic plan, and the statement's execution time (ms, the
    custom plan's). With ``sql`` (another revision's queries.sql), its statements are
    probed too, on the same seed: a before/after in one run. ``phases``: which of the
    statistics phases to run (in that order)."""
    from tests.support.db import migrate_sync

    layouts = {"one": (0, "one scheduled_at"), "day": (86_399, "spread over a day")}
    cols = [f"{s}_{p}" for s in phases for p in ("custom", "generic")]
    sqls: dict[str, str | None] = {"this tree": None}
    if sql is not None:
        sqls = {sql.name: sql.read_text(encoding="utf-8"), **sqls}
    for n in sizes:
        for spread_s, layout in (layouts[x] for x in spreads):
            name = f"pl_{uuid.uuid4().hex[:10]}"
            server.ensure_app_role()
            server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
            try:
                migrate_sync(server.app_dsn(name))
                t0 = time.monotonic()
                got = asyncio.run(_plans(server.app_dsn(name), n, spread_s, k, sqls, list(phases)))
                took = time.monotonic() - t0
            finally:
                server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            for label, rows in got.items():
                print(
                    f"{n:,} tasks, {layout}, batch {k}, statements of {label} ({took:.0f} s):"
                    f" tuples a task, {' / '.join(phases)}, custom and generic plan;"
                    " ms (custom)"
                )
                print(f"  {'':22s} " + " ".join(f"{c:>13s}" for c in cols))
                for stmt, v in rows.items():
                    ms = " ".join(f"{v[f'{s}_custom_ms']:7.1f}" for s in phases)
                    print(
                        f"  {stmt:22s} " + " ".join(f"{v[c]:13.1f}" for c in cols) + f"   {ms}",
                        flush=True,
                    )
                worst = max(v[c] for v in rows.values() for c in cols)
                print(f"  max over statements and columns: {worst:.1f}", flush=True)
