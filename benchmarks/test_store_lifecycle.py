"""PostgreSQL's CPU and WAL a task on the task lifecycle, at the store (issue 41).

A burst task costs PostgreSQL its insert (PRELOADED at submit), its dispatch
(``mark_dispatched``, one audit row) and its completion with the ack folded in
(``complete`` with ``acked_at``: two audit rows and the ledger row). This measures
each of the three through the real :class:`~scheduler.store.postgres.PostgresStore`
(one pooled connection, the application role, so row-level security applies as in
production) in batches of ``--batches`` (1,000: a burst's rounds; 50: a flat 8,333-a-second
stream's), and reports per task and phase:

- ``cpu``: the backend's CPU (``/proc/PID/schedstat``, else psutil's user + system), µs;
- ``wal``: WAL written (``pg_current_wal_lsn()`` before and after, on a second
  connection), bytes; autovacuum is off on the benchmark's server, so the figure is the
  statements' own (their full-page images included: a checkpoint is forced before each
  pass, so every pass starts alike);
- ``ms``: wall time of the phase, a task.

Every pass inserts ``--tasks`` new tasks for one ``scheduled_at`` into a table that keeps
the earlier passes' completed rows (as a day's partition does). ``--tree DIR`` runs the same
passes with another checkout's store and migrations (its own database on the same server),
alternating the trees pass by pass, so both see the same machine::

    .venv/bin/python -m benchmarks.test_store_lifecycle --tasks 20000 --batches 1000,50
    .venv/bin/python -m benchmarks.test_store_lifecycle --tree /work/wt-base --passes 4

``test_store_lifecycle`` runs a small pass under pytest-benchmark (``make bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.servers import PostgresServer, start_server  # noqa: E402

PHASES = ("insert", "dispatch", "complete")


class _Meter:
    """The backend's CPU and the server's WAL position, read around one phase."""

    def __init__(self, backend: psutil.Process, raw: asyncpg.Connection) -> None:
        self.backend, self.raw = backend, raw

    def cpu(self) -> float:
        try:  # nanoseconds on the CPU (psutil's figure counts 10 ms ticks)
            with open(f"/proc/{self.backend.pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e9
        except OSError:
            t = self.backend.cpu_times()
            return t.user + t.system

    async def wal(self) -> int:
        return int(await self.raw.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))

    async def measure(self, phase: Callable[[], Any], n: int) -> dict[str, float]:
        w0, c0, t0 = await self.wal(), self.cpu(), time.perf_counter()
        await phase()
        t1, c1, w1 = time.perf_counter(), self.cpu(), await self.wal()
        return {"cpu": (c1 - c0) * 1e6 / n, "wal": (w1 - w0) / n, "ms": (t1 - t0) * 1e3 / n}


async def _pass(
    dsn: str, admin_dsn: str, n: int, batch: int, warm: bool
) -> dict[str, dict[str, float]]:
    """One pass: insert, dispatch and complete ``n`` tasks in batches of ``batch``
    through the store on ``dsn``; ``admin_dsn``: the same database as a superuser (the
    WAL position and the checkpoint)."""
    from scheduler.ids import uuid7
    from scheduler.states import TaskState
    from scheduler.store import StoreConfig
    from scheduler.store.postgres import PostgresStore
    from scheduler.types import NewTask, Tenant

    store = await PostgresStore.open(dsn, StoreConfig(pool_min_size=1, pool_max_size=1))
    raw = await asyncpg.connect(admin_dsn)
    try:
        async with store._db.pool.acquire() as conn:  # the pool's one connection
            meter = _Meter(psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")), raw)
        tenant = await store.create_tenant(Tenant(id=uuid.uuid4(), name=f"t{uuid.uuid4().hex}"))
        now = datetime.now(UTC).replace(microsecond=0)
        at = now + timedelta(seconds=5)
        lease = now + timedelta(minutes=5)
        tasks = [
            NewTask(
                id=(i := uuid7()),
                tenant_id=tenant.id,
                type="late",
                payload={"n": k},
                scheduled_at=at,
                due_at=at,
                idempotency_key=str(i),
                shard_id=k % 256,
                strict_timing=True,
                initial_state=TaskState.PRELOADED,
            )
            for k in range(n)
        ]
        chunks = [tasks[i : i + batch] for i in range(0, n, batch)]
        if warm:  # prepared statements and plans of this connection, not measured
            k = max(1, min(6, len(chunks) // 4))
            await _lifecycle(store, chunks[:k], now, lease)
            chunks = chunks[k:]
            n = sum(len(c) for c in chunks)
        await raw.execute("CHECKPOINT")
        return await _lifecycle(store, chunks, now, lease, meter, n)
    finally:
        await raw.close()
        await store.close()


async def _lifecycle(
    store: Any,
    chunks: list[list[Any]],
    now: datetime,
    lease: datetime,
    meter: _Meter | None = None,
    n: int = 0,
) -> dict[str, dict[str, float]]:
    from scheduler.types import Assignment, Completion, DispatchRequest

    done: list[list[Assignment]] = []

    async def insert() -> None:
        for c in chunks:
            await store.insert_tasks(c, now)

    async def dispatch() -> None:
        for c in chunks:
            reqs = [
                DispatchRequest(key=_key(t), worker_id="w-1", lease_expires_at=lease) for t in c
            ]
            got = await store.mark_dispatched(reqs, now)
            assert all(isinstance(a, Assignment) for a in got), "a task was not dispatched"
            done.append(got)

    async def complete() -> None:
        for got in done:
            outs = await store.complete(
                [Completion(key=a.key, token=a.fencing_token, acked_at=now) for a in got], now
            )
            assert all(o.outcome.name == "OK" for o in outs), "a completion was refused"

    out: dict[str, dict[str, float]] = {}
    for name, phase in zip(PHASES, (insert, dispatch, complete), strict=True):
        if meter is None:
            await phase()
        else:
            out[name] = await meter.measure(phase, n)
    return out


def _key(task: Any) -> Any:
    from scheduler.types import TaskKey

    return TaskKey(task.id, task.scheduled_at)


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{REPO}"}


def _child(tree: Path, *args: str) -> str:
    """Run this module in a child process on ``tree``'s sources; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.test_store_lifecycle", *args],
        cwd=REPO,
        env=_env(tree),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {' '.join(args[:1])} failed:\n{done.stderr}")
    return done.stdout


def _database(server: PostgresServer, tree: Path) -> tuple[str, str]:
    """A fresh database owned by the application role, migrated by ``tree``: its DSN as
    that role and as the superuser."""
    name = f"lc_{uuid.uuid4().hex[:10]}"
    server.ensure_app_role()
    server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
    dsn = server.app_dsn(name)
    _child(tree, "--migrate", dsn)
    return dsn, server.dsn(name)


def _report(label: str, runs: list[dict[str, dict[str, float]]]) -> dict[str, float]:
    """Print the medians of ``runs`` (each pass's figures); return them flat."""
    flat: dict[str, float] = {}
    cells = []
    for phase in (*PHASES, "all"):
        for fig in ("cpu", "wal", "ms"):
            if phase == "all":
                vals = [sum(r[p][fig] for p in PHASES) for r in runs]
            else:
                vals = [r[phase][fig] for r in runs]
            flat[f"{phase}_{fig}"] = statistics.median(vals)
        cells.append(
            f"{flat[f'{phase}_cpu']:7.1f} µs {flat[f'{phase}_wal']:7.0f} B"
            f" {flat[f'{phase}_ms'] * 1e3:6.0f} µs"
        )
    print(f"  {label:24s}" + " | ".join(cells), flush=True)
    return flat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks a pass")
    parser.add_argument("--batches", default="1000,50", help="batch sizes, comma-separated")
    parser.add_argument("--passes", type=int, default=3, help="passes a tree and batch")
    parser.add_argument("--tree", type=Path, action="append", default=[], help="other checkout")
    parser.add_argument("--migrate", help=argparse.SUPPRESS)  # child: migrate this DSN
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # child: a pass (2 DSNs)
    parser.add_argument("--batch", type=int, default=1000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.migrate:
        from scheduler.store.postgres import migrate

        asyncio.run(migrate(args.migrate))
        return
    if args.one:
        figures = asyncio.run(_pass(*args.one, args.tasks, args.batch, warm=True))
        print(json.dumps(figures))
        return
    server = start_server(PostgresServer)
    try:
        server.psql("ALTER SYSTEM SET autovacuum = off")
        server.psql("SELECT pg_reload_conf()")
        trees = [REPO, *(t.resolve() for t in args.tree)]
        dsns = {t: _database(server, t) for t in trees}
        print(
            f"{args.tasks:,} tasks a pass, {args.passes} passes, medians a task:"
            f" cpu (backend), WAL, wall; load {os.getloadavg()[0]:.1f}"
        )
        print(f"  {'':24s}" + " | ".join(f"{p:^27s}" for p in (*PHASES, "all")))
        for batch in (int(b) for b in args.batches.split(",")):
            runs: dict[Path, list[dict[str, dict[str, float]]]] = {t: [] for t in trees}
            for i in range(args.passes):
                order = trees if i % 2 == 0 else trees[::-1]
                for t in order:
                    one = _child(
                        t, "--one", *dsns[t], "--tasks", str(args.tasks), "--batch", str(batch)
                    )
                    runs[t].append(json.loads(one.strip().splitlines()[-1]))
            for t in trees:
                _report(f"{t.name} b={batch}", runs[t])
        print(f"load {os.getloadavg()[0]:.1f}")
    finally:
        server.cleanup()


def test_store_lifecycle(benchmark: Any) -> None:
    """One small pass (batches of 1,000 and 50) under pytest-benchmark (``make bench``)."""
    server = start_server(PostgresServer)
    try:
        dsns = _database(server, REPO)
        figures = {
            batch: asyncio.run(_pass(*dsns, 4_000, batch, warm=True)) for batch in (1000, 50)
        }
        benchmark.pedantic(lambda: asyncio.run(_pass(*dsns, 2_000, 1000, warm=True)), rounds=1)
        for batch, by_phase in figures.items():
            for phase, f in by_phase.items():
                for k, v in f.items():
                    benchmark.extra_info[f"b{batch}_{phase}_{k}"] = round(v, 1)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
