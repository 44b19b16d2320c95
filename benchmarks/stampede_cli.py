"""The stampede as issue 41 measured it from outside: the CLI on its defaults.

``test_stampede.py`` runs serve and the worker through the test harness (``-v``, a
30 s lease, no canary, its own tenant). This script runs them as an operator would:
``tickwheel migrate``, ``tickwheel serve --postgres-dsn … --listen … --admin-token …``
(every other option its default: the canary every 60 s, so the default critical
reserve holds 10% of the worker's slots), ``tickwheel tenants create`` and ``keys
create`` (``--tenant-args``: the tenant's quotas, by default raised to 1,000,000; the
defaults, 1,000 dispatches a second and 200 in flight, cap a burst at 1,000 starts a
second), ``tickwheel worker --type late=… --slots 2000`` (ack first, a ClusterWorker:
the defaults) with ``benchmarks/start_recorder.py``'s handler, and the N strict tasks
for one instant through ``Client.submit_many``, in batches of 10,000.

It prints one JSON line a run: starts a second (N over the last start after T), first
and last start after T, lateness p50/p99, CPU a task of serve, the worker and PostgreSQL
(every process, by pid) from T - 1 s to the last start (and serve's and the worker's
user and system parts), the submission's rate and CPU, and the load average::

    .venv/bin/python -m benchmarks.stampede_cli --tasks 100000 --trees /tmp/wt-before,.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.test_stampede import HANDLER, _CpuTracker, _dump, _started, submit_command  # noqa: E402
from tests.support.processes import TICKWHEEL  # noqa: E402
from tests.support.servers import PostgresServer, free_port, start_server  # noqa: E402

TOKEN = "stampede-cli-admin-token-0123456789"


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in reversed(procs):
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)


def _cli_json(args: list[str], env: dict[str, str], tries: int = 1) -> Any:
    for _ in range(tries):
        out = subprocess.run([TICKWHEEL, *args, "--json"], env=env, capture_output=True, text=True)
        if out.returncode == 0:
            return json.loads(out.stdout)
        time.sleep(0.2)
    raise RuntimeError(f"tickwheel {' '.join(args)}: {out.stderr}")


def one_run(server: PostgresServer, tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One burst on a fresh database, every process from ``tree``."""
    n = args.tasks
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}:{REPO}"}
    env.pop("PYTHONWARNINGS", None)
    name = f"cli_{uuid.uuid4().hex[:10]}"
    server.ensure_app_role()
    server.psql(f"CREATE DATABASE {name} OWNER {server.app_user}")
    dsn = server.app_dsn(name)
    work = Path(args.dir) / name
    work.mkdir(parents=True)
    records = work / "records.jsonl"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        subprocess.run(
            [TICKWHEEL, "migrate", "--postgres-dsn", dsn], env=env, check=True, capture_output=True
        )
        target = f"127.0.0.1:{free_port()}"
        admin_arg = ("--admin-token", TOKEN)
        with open(work / "serve.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [TICKWHEEL, "serve", "--postgres-dsn", dsn, "--listen", target, *admin_arg],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        admin = {**env, "TICKWHEEL_TARGET": target, "TICKWHEEL_ADMIN_TOKEN": TOKEN}
        tenant = _cli_json(["tenants", "create", "bench", *args.tenant_args.split()], admin, 300)
        key = _cli_json(["keys", "create", tenant["id"]], admin)["secret"]
        more = ("--target", target, "--api-key", key, *args.worker_args.split())
        with open(work / "worker.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [TICKWHEEL, "worker", "--type", f"late={HANDLER}", "--slots", "2000", *more],
                    env={**env, "TW_RECORD_FILE": str(records)},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        deadline = time.time() + 60
        while b"connected" not in (work / "worker.log").read_bytes():
            if time.time() > deadline:
                raise RuntimeError("the worker did not connect")
            time.sleep(0.1)
        serve, worker = (psutil.Process(p.pid) for p in procs)
        cpu = _CpuTracker(serve, worker, server)
        cpu.start()
        at = math.ceil(time.time() + n / args.submit_rate + 10)
        sub0, t0 = cpu.mark(), time.time()
        subprocess.run(
            submit_command(target, key, n, at, strict=True, spread=0.0, shuffle=False),
            env=env,
            check=True,
            capture_output=True,
        )
        t1, sub1 = time.time(), cpu.mark()
        time.sleep(max(0.0, at - 1 - time.time()))
        c0, times0 = cpu.mark(), [serve.cpu_times(), worker.cpu_times()]
        while time.time() < at + args.window_s and _started(records) < n:
            time.sleep(0.25)
        c1, times1 = cpu.mark(), [serve.cpu_times(), worker.cpu_times()]
        cpu.done.set()
        load = os.getloadavg()
        _dump(records)
        rows = [json.loads(line) for line in records.read_text().splitlines()]
        starts = sorted(r["at"] for r in rows)
        late = sorted(r["start_ms"] for r in rows)
        k = max(len(rows), 1)

        def us(a: float, b: float) -> float:
            return round((b - a) / k * 1e6, 1)

        return {
            "tree": str(tree),
            "started": len(rows),
            "started_twice": len(rows) - len({r["task_id"] for r in rows}),
            "starts_per_s": round(len(rows) / max(starts[-1] - at, 1e-3)) if rows else 0,
            "first_s": round(starts[0] - at, 2) if rows else None,
            "last_s": round(starts[-1] - at, 2) if rows else None,
            "late_p50_ms": round(late[len(late) // 2]) if rows else None,
            "late_p99_ms": round(late[int(len(late) * 0.99)]) if rows else None,
            "serve_worker_postgres_us": [us(c0[i], c1[i]) for i in range(3)],
            "total_us": us(sum(c0[:3]), sum(c1[:3])),
            "serve_user_sys_us": [
                us(times0[0].user, times1[0].user),
                us(times0[0].system, times1[0].system),
            ],
            "worker_user_sys_us": [
                us(times0[1].user, times1[1].user),
                us(times0[1].system, times1[1].system),
            ],
            "submit_per_s": round(n / (t1 - t0)),
            "submit_ended_before_T_s": round(at - t1, 1),
            "submit_serve_postgres_us": [round((sub1[i] - sub0[i]) / n * 1e6, 1) for i in (0, 2)],
            "load": [round(x, 2) for x in load],
        }
    finally:
        _stop(procs)
        server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--trees", default=".", help="checkouts to run, comma-separated, in turn")
    parser.add_argument(
        "--tenant-args", default="--rate-limit-rps 1000000 --max-concurrent-workers 1000000"
    )
    parser.add_argument("--worker-args", default="", help="more worker options (--one-node)")
    parser.add_argument("--submit-rate", type=float, default=8_000, help="expected, for T")
    parser.add_argument("--window-s", type=float, default=120.0)
    parser.add_argument("--dir", default="/tmp/tickwheel-stampede-cli")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = start_server(PostgresServer)
    try:
        for tree in args.trees.split(","):
            print(json.dumps(one_run(server, Path(tree).resolve(), args)), flush=True)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
