"""GetActivity's audit query on a large ``task_transitions`` (issue 18), beside a
sequential scan of the same query in the same run.

The table gets ``ROWS`` audit rows spread evenly over the last ``DAYS`` days, written in
time order as the store appends them. The store's ``activity`` statement (every
tenant: no task join) reads a 15-minute window in 60 s buckets through the BRIN index
on ``at``; the baseline runs the same statement with bitmap and index scans disabled,
so it reads the whole table. ``extra_info`` carries milliseconds per query and the
index's size; docs/observability.md has the figures.

Run: ``PYTHONPATH=src:. .venv/bin/pytest benchmarks/test_activity.py --benchmark-only
-p no:cacheprovider``
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from scheduler.store.postgres import Q

ROWS = 2_000_000
DAYS = 2
WINDOW = timedelta(minutes=15)
BUCKET_S = 60.0


@pytest.fixture(scope="module")
def activity_dsn() -> Iterator[str]:
    """A migrated database with ``ROWS`` audit rows over ``DAYS`` days."""
    from tests.support.db import migrate_sync
    from tests.support.servers import PostgresServer, start_server

    server = start_server(PostgresServer)
    try:
        server.psql("CREATE DATABASE tickwheel_activity")
        dsn = server.dsn("tickwheel_activity")
        migrate_sync(dsn)

        async def fill() -> None:
            conn = await asyncpg.connect(dsn, server_settings={"tickwheel.tenant": "*"})
            try:
                # Five rows per task, as a lifecycle writes them; in time order.
                await conn.execute(
                    """
                    INSERT INTO task_transitions (task_id, scheduled_at, from_status,
                        to_status, fencing_token, actor, at, reason, due_at)
                    SELECT gen_random_uuid(), t, f, s, 1, 'node', t, 'x',
                        CASE WHEN f = 'PRELOADED' THEN t - interval '3 ms' END
                    FROM (
                        SELECT $1::timestamptz + (i * $2::float8) * interval '1 second' AS t,
                            (ARRAY['SCHEDULED','PRELOADED','DISPATCHED','RUNNING','RUNNING'])
                                [1 + i % 5] AS f,
                            (ARRAY['PRELOADED','DISPATCHED','RUNNING','COMPLETED','RETRYING'])
                                [1 + i % 5] AS s
                        FROM generate_series(0, $3 - 1) AS i
                    ) g
                    """,
                    datetime.now(UTC) - timedelta(days=DAYS),
                    DAYS * 86_400 / ROWS,
                    ROWS,
                )
                await conn.execute("VACUUM ANALYZE task_transitions")
            finally:
                await conn.close()

        asyncio.run(fill())
        yield dsn
    finally:
        server.cleanup()


def _timed(dsn: str, seq_scan: bool) -> tuple[float, list[Any], int]:
    async def run() -> tuple[float, list[Any], int]:
        conn = await asyncpg.connect(dsn, server_settings={"tickwheel.tenant": "*"})
        try:
            if seq_scan:
                await conn.execute("SET enable_bitmapscan = off; SET enable_indexscan = off")
            end = datetime.now(UTC)
            start = end - WINDOW
            last = int(WINDOW.total_seconds() // BUCKET_S) - 1
            args = (start, end, BUCKET_S, None, last)
            await conn.fetch(Q["activity"], *args)  # warm
            t0 = time.perf_counter()
            rows = await conn.fetch(Q["activity"], *args)
            elapsed = time.perf_counter() - t0
            size = await conn.fetchval("SELECT pg_relation_size('idx_task_transitions_at')")
            return elapsed, rows, int(size)
        finally:
            await conn.close()

    return asyncio.run(run())


@pytest.mark.parametrize("scan", ["brin", "seqscan"])
def test_activity_window_reads_only_its_rows(benchmark: Any, activity_dsn: str, scan: str) -> None:
    elapsed, rows, size = benchmark.pedantic(
        _timed, args=(activity_dsn, scan == "seqscan"), rounds=3, iterations=1
    )
    # 15 minutes of 2 days at a constant rate: 1/192 of the rows, a fifth of them
    # dispatches (PRELOADED -> DISPATCHED).
    dispatched = sum(r["dispatched"] for r in rows)
    expected = ROWS / (DAYS * 96) / 5
    assert 0.8 * expected < dispatched < 1.2 * expected
    benchmark.extra_info.update({"ms": round(elapsed * 1000, 2), "rows": ROWS, "brin_bytes": size})
