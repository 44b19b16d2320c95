"""The TypeScript worker against the Python worker on the same server (issue 39).

One ``tickwheel dev`` (SQLite). Four turns in the same run, Python, TypeScript,
TypeScript, Python (the node slows as its database grows, so each worker gets an early
and a late turn): ``n / 2`` no-op tasks (type ``noop``) are submitted from Python in
batches of 5,000 while no worker is connected; then the turn's worker process starts
(200 slots, ack first: the Python one is ``tickwheel worker``, the TypeScript one
``benchmarks/ts_noop_worker.mjs`` over the SDK in sdk/typescript) and drains them. A
worker's ``tasks_per_s`` is its ``n`` tasks over the sum of its turns, each from the
worker's "connected" log line to the moment CountTasks (an exact count: the node runs
with ``--count-cache-s 0``) says every task of the turn COMPLETED; the poll every
0.25 s adds at most that to each turn.

Target: TypeScript at least 0.8x the Python worker's tasks/s. ``TW_BENCH_TS_TASKS``
sets ``n`` (default 20,000). Needs the SDK built (``npm ci && npm run build`` in
sdk/typescript; ``make test`` does it through tests/acceptance/test_typescript_sdk.py).

Run: ``.venv/bin/pytest benchmarks/test_typescript_worker.py --benchmark-only -p
no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.processes import CommandProcess, WorkerProcess, process_group
from tests.support.servers import free_port
from tests.support.waiting import eventually

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import Client, TaskSpec

N = int(os.environ.get("TW_BENCH_TS_TASKS", "20000"))
SLOTS = 200
ROOT = Path(__file__).resolve().parent.parent
TS_WORKER = ROOT / "benchmarks" / "ts_noop_worker.mjs"


async def _submit(client: Client, n: int) -> None:
    for start in range(0, n, 5000):
        await client.submit_many(
            [TaskSpec(type="noop", payload={"i": i}) for i in range(start, min(n, start + 5000))]
        )


async def _all_completed(client: Client, n: int) -> float:
    # CountTasks through the client's stub (the Python client wraps no count call).
    request = pb.CountTasksRequest(
        filter=pb.TaskFilter(type="noop", states=[pb.TASK_STATE_COMPLETED])
    )
    while True:
        answer = await client._sched.CountTasks(request, metadata=client._metadata)
        if answer.total >= n:
            return time.perf_counter()
        await asyncio.sleep(0.25)


def _logged(path: Path, pattern: str) -> bool:
    return path.exists() and re.search(pattern, path.read_text(errors="replace")) is not None


async def _wait_log(path: Path, pattern: str) -> float:
    await eventually(
        lambda: asyncio.to_thread(_logged, path, pattern),
        timeout_s=60,
        interval_s=0.01,
        what=f"{pattern!r} in {path}",
    )
    return time.perf_counter()


def _spawn(args: list[str], env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )


async def _python_run(
    group: Any, facts: dict[str, str], client: Client, done_before: int, n: int
) -> float:
    await _submit(client, n)
    worker = WorkerProcess(
        group.dir / f"py-bench-{done_before}",
        facts["target"],
        facts["api_key"],
        {"noop": "benchmarks.noop_handler:noop"},
        name="py-bench",
        slots=SLOTS,
    )
    group.procs.append(worker)
    await asyncio.to_thread(worker.start)
    started = time.perf_counter()
    finished = await _all_completed(client, done_before + n)
    worker.stop()
    return finished - started


async def _typescript_run(
    tmp: Path, facts: dict[str, str], client: Client, done_before: int, n: int
) -> float:
    await _submit(client, n)
    node = shutil.which("node")
    assert node is not None, "node is missing: run scripts/install-deps"
    log_path = tmp / f"ts-bench-{done_before}.log"
    env = {
        **os.environ,
        "TICKWHEEL_TARGET": facts["target"],
        "TICKWHEEL_API_KEY": facts["api_key"],
        "TW_BENCH_SLOTS": str(SLOTS),
        "TICKWHEEL_LOG_LEVEL": "info",
    }
    with log_path.open("w") as log:
        proc = _spawn([node, str(TS_WORKER)], env, log)
        try:
            started = await _wait_log(log_path, r"ts-bench connected")
            finished = await _all_completed(client, done_before + n)
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return finished - started


def test_typescript_worker_against_python_worker(benchmark: Any, tmp_path: Path) -> None:
    assert (ROOT / "sdk" / "typescript" / "dist" / "src" / "index.js").exists(), (
        "build the SDK first: cd sdk/typescript && npm ci && npm run build"
    )

    async def both() -> dict[str, float]:
        port = free_port()
        args = ["dev", "--db", str(tmp_path / "dev.db"), "--listen", f"127.0.0.1:{port}"]
        args += ["--no-ui", "--no-metrics", "--json", "--count-cache-s", "0"]
        with process_group(tmp_path / "procs") as group:
            dev = CommandProcess(group.dir / "dev", "dev", args, ready_log="^{")
            group.procs.append(dev)
            await asyncio.to_thread(dev.start)
            (line,) = [ln for ln in dev.log().splitlines() if ln.startswith("{")]
            facts = json.loads(line)
            client = await Client.connect(facts["target"], api_key=facts["api_key"])
            try:
                # A B B A: the node slows as its database grows, so each worker takes
                # an early and a late turn with half of its tasks.
                half = N // 2
                seconds = {"python": 0.0, "typescript": 0.0}
                for turn, who in enumerate(["python", "typescript", "typescript", "python"]):
                    if who == "python":
                        took = await _python_run(group, facts, client, turn * half, half)
                    else:
                        took = await _typescript_run(tmp_path, facts, client, turn * half, half)
                    seconds[who] += took
                    print(f"\nturn {turn + 1}: {who} drained {half} tasks in {took:.1f} s")
            finally:
                await client.close()
        python = 2 * half / seconds["python"]
        typescript = 2 * half / seconds["typescript"]
        return {
            "python_tasks_per_s": python,
            "typescript_tasks_per_s": typescript,
            "ratio": typescript / python,
        }

    figures = benchmark.pedantic(lambda: asyncio.run(both()), rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print(
        f"\n{N} no-op tasks, {SLOTS} slots, ack first, one tickwheel dev: "
        f"python {figures['python_tasks_per_s']:.0f} tasks/s, "
        f"typescript {figures['typescript_tasks_per_s']:.0f} tasks/s, "
        f"ratio {figures['ratio']:.2f} (target >= 0.8)"
    )
    assert figures["ratio"] >= 0.8, figures
