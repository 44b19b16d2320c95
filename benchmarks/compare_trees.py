"""The durable lifecycle of this tree against another checkout's, alternating, same run.

A before/after figure for a change that touches the write path (a migration, a column,
a statement) must come from one machine in one sitting: this script starts one
PostgreSQL server, then for each run makes a fresh database, migrates it with the
tree under test, starts ``tickwheel serve`` and one ``tickwheel worker`` (ack-first,
2,000 slots, the ``fast`` handler) from that tree, submits N immediate tasks in batches
of 10,000 with that tree's own client (a child process: each tree's SDK encodes
payloads its own way; its CPU is reported as the driver's) and times submission-start
to the last completion. Runs alternate (this, other, other, this, ...) so drift on a
shared machine falls on both, after one uncounted warm-up run.

Reported per tree: tasks/s of each run, the mean, and the CPU seconds per task of
``serve`` and of PostgreSQL (every backend of the server) and of the worker, read from
/proc through psutil. The ratio this/other is the figure to quote.

Usage (the other tree needs its extension built: ``python setup.py build_ext
--inplace`` in it)::

    git worktree add --detach ../wt-old 80ea7d0
    (cd ../wt-old && ../main/.venv/bin/python setup.py -q build_ext --inplace)
    .venv/bin/python benchmarks/compare_trees.py --other ../wt-old --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.processes import ADMIN_TOKEN, TICKWHEEL, ProcessGroup  # noqa: E402
from tests.support.servers import PostgresServer, start_server  # noqa: E402

HANDLERS = "tests.acceptance.handlers"


def _env(tree: Path) -> dict[str, str]:
    # The tree's sources first; the handlers come from this repository's tests/.
    return {"PYTHONPATH": f"{tree / 'src'}:{REPO}"}


def _cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _postgres_procs(server: PostgresServer) -> list[psutil.Process]:
    assert server.proc is not None
    root = psutil.Process(server.proc.pid)
    return [root, *root.children(recursive=True)]


async def _tenant_key(target: str) -> str:
    from scheduler.client import AdminClient

    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant(
            "bench", rate_limit_rps=1_000_000, max_concurrent_workers=1_000_000
        )
        key = await admin.create_api_key(tenant.id, "bench")
    return key.secret


_SUBMIT = """
import asyncio, sys
from scheduler.client import Client, TaskSpec

async def main(target, key, n):
    async with await Client.connect(target, api_key=key) as c:
        for start in range(0, n, 10_000):
            await c.submit_many(
                TaskSpec(type="bench", payload={"i": i, "user": "u-%d" % i, "tags": ["a", "b"]},
                         strict_timing=True)
                for i in range(start, start + 10_000)
            )

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""
"""The driver: the tree's own client (a tree's SDK encodes payloads its own way)."""


async def _drive(target: str, key: str, dsn: str, n: int, tree: Path) -> tuple[float, float]:
    first = datetime.now(UTC)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SUBMIT, target, key, str(n), env={**os.environ, **_env(tree)}
    )
    await proc.wait()
    assert proc.returncode == 0, "the driver failed"
    # A waited-for child's CPU shows in os.times().children_*.
    driver_cpu = os.times().children_user + os.times().children_system
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            row = await conn.fetchrow(
                "SELECT count(*) AS n, max(updated_at) AS last FROM tasks"
                " WHERE status = 'COMPLETED'"
            )
            if row["n"] >= n:
                return n / (row["last"] - first).total_seconds(), driver_cpu
            await asyncio.sleep(0.2)
    finally:
        await conn.close()
    raise TimeoutError(f"{n} tasks did not complete")


def one_run(server: PostgresServer, tree: Path, n: int, base: Path) -> dict[str, float]:
    name = f"cmp_{uuid.uuid4().hex[:10]}"
    server.ensure_app_role()
    server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
    dsn = server.app_dsn(name)
    group = ProcessGroup(base / name)
    try:
        subprocess.run(
            [TICKWHEEL, "migrate", "--postgres-dsn", dsn],
            env={**os.environ, **_env(tree)},
            check=True,
            capture_output=True,
        )
        serve = group.serve(
            dsn, lease_ttl_s=30.0, extra_args=("--canary-interval-s", "0"), env=_env(tree)
        )
        key = asyncio.run(_tenant_key(serve.target))
        worker = group.worker(
            serve.target,
            key,
            {"bench": f"{HANDLERS}:fast"},
            name="cmp-w",
            slots=2_000,
            env=_env(tree),
        )
        pg = _postgres_procs(server)
        sp, wp = psutil.Process(serve.pid), psutil.Process(worker.pid)
        before = (_cpu([sp]), _cpu(pg), _cpu([wp]))
        waited = os.times().children_user + os.times().children_system
        rate, driver = asyncio.run(_drive(serve.target, key, dsn, n, tree))
        after = (_cpu([sp]), _cpu(_postgres_procs(server)), _cpu([wp]))
        assert worker.running(), group.explain()
        return {
            "tasks_per_s": rate,
            "serve_us_per_task": (after[0] - before[0]) / n * 1e6,
            "postgres_us_per_task": (after[1] - before[1]) / n * 1e6,
            "worker_us_per_task": (after[2] - before[2]) / n * 1e6,
            "driver_us_per_task": (driver - waited) / n * 1e6,
        }
    finally:
        group.stop_all()
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--other", type=Path, required=True, help="the other checkout")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tree")
    parser.add_argument("--tasks", type=int, default=40_000)
    args = parser.parse_args()
    trees = {"this": REPO, "other": args.other.resolve()}
    order = [
        t
        for i in range(args.runs)
        for t in (("this", "other") if i % 2 == 0 else ("other", "this"))
    ]
    server = start_server(PostgresServer)
    results: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
    try:
        with tempfile.TemporaryDirectory(prefix="tickwheel-cmp-") as tmp:
            # One uncounted run first: a fresh server's first database is slow for both.
            one_run(server, trees["other"], min(args.tasks, 10_000), Path(tmp))
            for label in order:
                r = one_run(server, trees[label], args.tasks, Path(tmp))
                results[label].append(r)
                print(label, json.dumps({k: round(v, 1) for k, v in r.items()}), flush=True)
    finally:
        server.cleanup()
    means = {
        label: {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}
        for label, runs in results.items()
    }
    for label, m in means.items():
        print(f"mean {label} ({trees[label]}):", json.dumps({k: round(v, 1) for k, v in m.items()}))
    print(
        "ratio this/other tasks/s:",
        round(means["this"]["tasks_per_s"] / means["other"]["tasks_per_s"], 3),
    )


if __name__ == "__main__":
    main()
