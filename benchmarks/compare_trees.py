"""The durable lifecycle of this tree against another checkout's, alternating, same run.

A before/after figure for a change that touches the write path (a migration, a column,
a statement) must come from one machine in one sitting: this script starts one
PostgreSQL server, then for each run makes a fresh database, migrates it with the
tree under test, starts ``tickwheel serve`` and one ``tickwheel worker`` (ack-first,
2,000 slots, the ``fast`` handler) from that tree, submits N immediate tasks in batches
of 10,000 with that tree's own client (a child process: each tree's SDK encodes
payloads its own way; its CPU is reported as the driver's) and times from the driver's
ready line (its interpreter up and the SDK imported, as the raw baseline's clock starts
with its process up) to the last completion. Runs alternate (this, other, other, this,
...) so drift on a shared machine falls on both, after one uncounted warm-up run.

Reported per tree: tasks/s of each run, the mean, and the CPU seconds per task of
``serve`` and of PostgreSQL (every backend of the server) and of the worker, read from
/proc through psutil. The ratio this/other is the figure to quote.

Options: ``--modes ack,on_delivery`` runs each mode (``on_delivery``: the worker
starts on delivery); ``--raw`` also runs the raw SQL lifecycle baseline of
``benchmarks/test_store.py`` (COPY, then one ``UPDATE ... FROM unnest`` per step in
batches of 1,000, on one and on two connections) between the runs, and prints each
figure's ratio to it; ``--this-env K=V`` sets an environment variable for this tree's
``serve`` only; ``--profile DIR`` records this tree's ``serve`` and worker with py-spy
(``PY_SPY`` names the binary) in its first run of each mode. Also per task: the driver's
CPU, the write transactions (``txid`` delta), and the acks written by their completion's
statement (``folded``).

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
import asyncio, os, sys, time
from scheduler.client import Client, TaskSpec

async def main(target, key, n):
    # Ready: the interpreter is up and the SDK imported. The clock starts here (the raw
    # baseline's starts with its process up too), and the driver's CPU is counted from here.
    print(time.time(), sum(os.times()[:2]), flush=True)
    async with await Client.connect(target, api_key=key) as c:
        for start in range(0, n, 10_000):
            await c.submit_many(
                TaskSpec(type="bench", payload={"i": i, "user": "u-%d" % i, "tags": ["a", "b"]},
                         strict_timing=True)
                for i in range(start, start + 10_000)
            )
    print(sum(os.times()[:2]), flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""
"""The driver: the tree's own client (a tree's SDK encodes payloads its own way). It
prints when it is ready (the time and its CPU so far), then its CPU when done."""


async def _drive(target: str, key: str, dsn: str, n: int, tree: Path) -> tuple[float, float]:
    """Run the driver; tasks/s from its ready line to the last completion, and the
    driver's CPU seconds from ready to done (Python's start and imports excluded)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _SUBMIT,
        target,
        key,
        str(n),
        env={**os.environ, **_env(tree)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    ready, ready_cpu = (float(x) for x in (await proc.stdout.readline()).split())
    first = datetime.fromtimestamp(ready, UTC)
    done = await proc.stdout.readline()
    await proc.wait()
    assert proc.returncode == 0, "the driver failed"
    assert done, "the driver did not report its CPU"
    driver_cpu = float(done) - ready_cpu
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


def _spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy (on PATH or beside this Python) sampling ``pid`` at 250 Hz, idle excluded,
    into ``out`` as collapsed stacks (one line a stack, its count)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = os.environ.get("PY_SPY", str(Path(sys.executable).with_name("py-spy")))
    cmd = [spy, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "-o", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _txid(server: PostgresServer) -> int:
    return int(server.psql("SELECT txid_current()").strip())


FOLDED = """
SELECT count(*) FROM task_transitions a JOIN task_transitions c USING (task_id)
WHERE a.to_status = 'RUNNING' AND c.to_status = 'COMPLETED' AND a.xmin = c.xmin
  AND a.from_status = 'DISPATCHED'
"""


def one_run(
    server: PostgresServer,
    tree: Path,
    n: int,
    base: Path,
    mode: str = "ack",
    serve_env: dict[str, str] | None = None,
    profile: Path | None = None,
    slots: int = 2_000,
) -> dict[str, float]:
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
            dsn,
            lease_ttl_s=30.0,
            extra_args=("--canary-interval-s", "0"),
            env={**_env(tree), **(serve_env or {})},
        )
        key = asyncio.run(_tenant_key(serve.target))
        worker = group.worker(
            serve.target,
            key,
            {"bench": f"{HANDLERS}:fast"},
            name="cmp-w",
            slots=slots,
            env=_env(tree),
            extra_args=("--start-on-delivery",) if mode == "on_delivery" else (),
        )
        pg = _postgres_procs(server)
        sp, wp = psutil.Process(serve.pid), psutil.Process(worker.pid)
        xid = _txid(server)
        before = (_cpu([sp]), _cpu(pg), _cpu([wp]))
        spies = (
            [
                _spy(p.pid, profile / f"{mode}-{who}.txt")
                for p, who in ((sp, "serve"), (wp, "worker"))
            ]
            if profile
            else []
        )
        rate, driver = asyncio.run(_drive(serve.target, key, dsn, n, tree))
        for spy in spies:
            spy.send_signal(2)  # py-spy writes its profile on SIGINT
            spy.wait(timeout=60)
        after = (_cpu([sp]), _cpu(_postgres_procs(server)), _cpu([wp]))
        xacts = _txid(server) - xid - 1
        folded = int(server.psql(FOLDED, database=name).strip())
        assert worker.running(), group.explain()
        return {
            "tasks_per_s": rate,
            "serve_us_per_task": (after[0] - before[0]) / n * 1e6,
            "postgres_us_per_task": (after[1] - before[1]) / n * 1e6,
            "worker_us_per_task": (after[2] - before[2]) / n * 1e6,
            "driver_us_per_task": driver / n * 1e6,
            "write_xacts_per_task": xacts / n,
            "folded_acks_per_task": folded / n,
        }
    finally:
        group.stop_all()
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# -- the raw SQL lifecycle baseline (benchmarks/test_store.py's ``raw`` variant) ---------
async def _raw_lane(dsn: str, tenant: uuid.UUID, n: int) -> None:
    from benchmarks.test_store import COLS, RAW_CLAIM, RAW_DISPATCH, RAW_FENCED

    from scheduler.ids import uuid7

    conn = await asyncpg.connect(dsn)
    try:
        now = datetime.now(UTC).replace(microsecond=0)
        day = now.replace(hour=0, minute=0, second=0)
        lease = now.replace(year=now.year + 1)
        payload = json.dumps({"i": 1})
        for _ in range(0, n, 1000):
            records = [
                (i, tenant, "bench", now, now, "SCHEDULED", str(i), payload, 1, 1, now, now)
                for i in (uuid7() for _ in range(1000))
            ]
            await conn.copy_records_to_table("tasks", records=records, columns=COLS)
            rows = await conn.fetch(RAW_CLAIM, now, 1000, now, day, day.replace(year=day.year + 1))
            ids, times = [r[0] for r in rows], [r[1] for r in rows]
            lo, hi = min(times), max(times)
            await conn.fetch(RAW_DISPATCH, ids, times, lease, lo, hi)
            tokens = [2] * len(ids)
            await conn.fetch(RAW_FENCED, ids, times, tokens, lease, lo, "RUNNING", "DISPATCHED", hi)
            await conn.fetch(RAW_FENCED, ids, times, tokens, lease, lo, "COMPLETED", "RUNNING", hi)
    finally:
        await conn.close()


def raw_run(server: PostgresServer, n: int, conns: int) -> float:
    """tasks/s of the raw SQL lifecycle on ``conns`` connections (fresh database)."""
    from scheduler.store import StoreConfig
    from scheduler.store.postgres import PostgresStore
    from scheduler.types import Tenant

    name = f"raw_{uuid.uuid4().hex[:10]}"
    server.psql(f"CREATE DATABASE {name}")
    dsn = server.dsn(name)
    try:
        subprocess.run(
            [TICKWHEEL, "migrate", "--postgres-dsn", dsn],
            env={**os.environ, **_env(REPO)},
            check=True,
            capture_output=True,
        )

        async def go() -> float:
            store = await PostgresStore.open(dsn, StoreConfig(pool_min_size=1, pool_max_size=1))
            try:
                tenant = await store.create_tenant(Tenant(id=uuid.uuid4(), name="raw"))
            finally:
                await store.close()
            started = time.perf_counter()
            await asyncio.gather(*(_raw_lane(dsn, tenant.id, n // conns) for _ in range(conns)))
            return n / (time.perf_counter() - started)

        return asyncio.run(go())
    finally:
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--other", type=Path, required=True, help="the other checkout")
    parser.add_argument("--runs", type=int, default=3, help="runs of each tree")
    parser.add_argument("--tasks", type=int, default=40_000)
    parser.add_argument("--modes", default="ack", help="ack, on_delivery or both (a,b)")
    parser.add_argument("--raw", action="store_true", help="run the raw SQL baseline too")
    parser.add_argument("--this-env", action="append", default=[], help="K=V for this serve")
    parser.add_argument("--slots", type=int, default=2_000, help="the worker's slots")
    parser.add_argument(
        "--profile", type=Path, help="py-spy this tree's serve and worker in its first run per mode"
    )
    args = parser.parse_args()
    trees = {"this": REPO, "other": args.other.resolve()}
    this_env = dict(kv.split("=", 1) for kv in args.this_env)
    modes = args.modes.split(",")
    order = [
        (mode, t)
        for i in range(args.runs)
        for mode in modes
        for t in (("this", "other") if i % 2 == 0 else ("other", "this"))
    ]
    server = start_server(PostgresServer)
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    raw: dict[int, list[float]] = {1: [], 2: []}
    try:
        with tempfile.TemporaryDirectory(prefix="tickwheel-cmp-") as tmp:
            # One uncounted run first: a fresh server's first database is slow for both.
            one_run(server, trees["other"], min(args.tasks, 10_000), Path(tmp))
            for k, (mode, label) in enumerate(order):
                if args.raw and k % 2 == 0:
                    for conns in (1, 2):
                        raw[conns].append(raw_run(server, args.tasks, conns))
                        print(f"raw {conns} conn(s)", round(raw[conns][-1], 1), flush=True)
                env = this_env if label == "this" else None
                spy = args.profile if label == "this" and (mode, label) not in results else None
                r = one_run(server, trees[label], args.tasks, Path(tmp), mode, env, spy, args.slots)
                results.setdefault((mode, label), []).append(r)
                print(mode, label, json.dumps({k: round(v, 4) for k, v in r.items()}), flush=True)
    finally:
        server.cleanup()
    raw_mean = {c: statistics.fmean(v) for c, v in raw.items() if v}
    for c, m in raw_mean.items():
        print(f"mean raw SQL lifecycle, {c} connection(s): {m:.0f} tasks/s")
    for (mode, label), runs in results.items():
        m = {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}
        line = f"mean {mode} {label} ({trees[label]}): " + json.dumps(
            {k: round(v, 4) for k, v in m.items()}
        )
        if 2 in raw_mean:
            line += f" ratio to raw (2 conns): {m['tasks_per_s'] / raw_mean[2]:.3f}"
        print(line)
    for mode in modes:
        this = statistics.fmean(r["tasks_per_s"] for r in results[(mode, "this")])
        other = statistics.fmean(r["tasks_per_s"] for r in results[(mode, "other")])
        print(f"ratio this/other tasks/s, {mode}:", round(this / other, 3))


if __name__ == "__main__":
    main()
