"""The TypeScript SDK (sdk/typescript, issue 39) in `make test`.

``npm ci`` installs the committed lockfile; ``npm test`` checks the generated code
for drift, type-checks, and runs the SDK's own tests (``node --test``) against real
``tickwheel dev`` processes that the tests start. A second test follows
docs/typescript.md: a task submitted from Python is completed by the TypeScript
worker example, and the same task by a Python worker beside it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scheduler.client import Client, TaskState
from tests.acceptance.conftest import Cluster
from tests.support import cluster
from tests.support.processes import CommandProcess, WorkerProcess, process_group
from tests.support.servers import EtcdServer, RedisServer, free_port
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"
TICKWHEEL = Path(sys.executable).with_name("tickwheel")


def _npm(*args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    assert npm is not None, "npm is missing: run scripts/install-deps (make deps)"
    env = {**os.environ, "TICKWHEEL_BIN": str(TICKWHEEL), "NO_COLOR": "1"}
    return subprocess.run(
        [npm, *args],
        cwd=SDK,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _ok(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        pytest.fail(
            f"{what} exited {result.returncode}:\n"
            f"{result.stdout[-12000:]}\n{result.stderr[-6000:]}",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def installed() -> None:
    """``npm ci`` from the committed lockfile and a build, once for this module."""
    _ok(_npm("ci", "--no-audit", "--no-fund", timeout_s=240), "npm ci")
    _ok(_npm("run", "build", timeout_s=120), "npm run build")


def test_typescript_sdk_tests_pass(installed: None) -> None:
    result = _npm("test", timeout_s=280)
    _ok(result, "npm test (sdk/typescript)")
    # node's test runner says how many ran (TAP "# pass N" off a terminal, "ℹ pass N"
    # on one): none failed, and some did.
    passed = re.findall(r"^(?:#|ℹ) pass (\d+)$", result.stdout, flags=re.M)
    failed = re.findall(r"^(?:#|ℹ) fail (\d+)$", result.stdout, flags=re.M)
    assert passed, result.stdout[-4000:]
    assert int(passed[-1]) > 0, result.stdout[-4000:]
    assert failed == ["0"], result.stdout[-4000:]


def _spawn_node(args: list[str], env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, cwd=SDK, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )


def _facts(proc: CommandProcess) -> dict[str, Any]:
    (line,) = [ln for ln in proc.log().splitlines() if ln.startswith("{")]
    facts = json.loads(line)
    assert isinstance(facts, dict)
    return facts


async def test_python_submits_and_a_typescript_worker_completes(
    installed: None, tmp_path: Path
) -> None:
    """docs/typescript.md, followed: `tickwheel dev`, the TypeScript worker example,
    a task submitted from Python; then a Python worker runs the same task type."""
    node = shutil.which("node")
    assert node is not None
    port = free_port()
    args = ["dev", "--db", str(tmp_path / "dev.db"), "--listen", f"127.0.0.1:{port}"]
    with process_group(tmp_path / "procs") as group:
        dev = CommandProcess(
            group.dir / "dev", "dev", [*args, "--no-ui", "--no-metrics", "--json"], ready_log="^{"
        )
        group.procs.append(dev)
        await asyncio.to_thread(dev.start)
        facts = _facts(dev)
        env = {
            **os.environ,
            "TICKWHEEL_TARGET": facts["target"],
            "TICKWHEEL_API_KEY": facts["api_key"],
        }
        log = (tmp_path / "ts-worker.log").open("w")
        ts_worker = _spawn_node([node, str(SDK / "examples" / "worker.mjs")], env, log)
        try:
            client = await Client.connect(facts["target"], api_key=facts["api_key"])
            try:
                task = await client.submit("greet", {"name": "Ada"})
                done = await client.wait(task.id, timeout_s=60)
                assert done.state is TaskState.COMPLETED
                assert done.result == {"greeting": "Hello, Ada!", "by": "typescript", "attempt": 1}
                # SIGTERM drains the TypeScript worker; it exits 0.
                ts_worker.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(ts_worker.wait, 30) == 0
                # The same task type, run by a Python worker (examples/greet.py).
                py_env = {"PYTHONPATH": str(SDK / "examples")}
                py_worker = WorkerProcess(
                    group.dir / "py-worker",
                    facts["target"],
                    facts["api_key"],
                    {"greet": "greet:greet"},
                    name="py-worker",
                    env=py_env,
                )
                group.procs.append(py_worker)
                await asyncio.to_thread(py_worker.start)
                task = await client.submit("greet", {"name": "Grace"})
                done = await client.wait(task.id, timeout_s=60)
                assert done.state is TaskState.COMPLETED
                assert done.result == {"greeting": "Hello, Grace!", "by": "python", "attempt": 1}
            finally:
                await client.close()
        finally:
            if ts_worker.poll() is None:
                ts_worker.kill()
                ts_worker.wait()
            log.close()


def _run_node(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=SDK, env=env, capture_output=True, text=True, timeout=90, check=False
    )


async def test_typescript_worker_and_producer_on_a_postgres_served_node(
    installed: None, cluster: Cluster, tmp_path: Path
) -> None:
    """The examples against `tickwheel serve` on PostgreSQL: the producer submits and
    waits, the worker completes, and SIGTERM drains it (exit 0)."""
    node = shutil.which("node")
    assert node is not None
    env = {
        **os.environ,
        "TICKWHEEL_TARGET": cluster.server.target,
        "TICKWHEEL_API_KEY": cluster.api_key,
    }
    log = (tmp_path / "ts-worker.log").open("w")
    worker = _spawn_node([node, str(SDK / "examples" / "worker.mjs")], env, log)
    try:
        produced = await asyncio.to_thread(
            _run_node, [node, str(SDK / "examples" / "producer.mjs")], env
        )
        assert produced.returncode == 0, produced.stderr
        result = json.loads(produced.stdout.strip().splitlines()[-1])
        assert result == {"greeting": "Hello, Ada!", "by": "typescript", "attempt": 1}
        done = [t async for t in cluster.client.list(type="greet")]
        assert [t.state for t in done] == [TaskState.COMPLETED]
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, 30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()


@pytest.mark.timeout(240)
async def test_typescript_worker_reaches_every_node_of_a_cluster(
    installed: None,
    pg_dsn: str,
    etcd_server: EtcdServer,
    redis_server: RedisServer,
    tmp_path: Path,
) -> None:
    """Two `serve --etcd` nodes; one TypeScript worker given n1's address only. Tasks
    fall due on both nodes' shards: each completes exactly once, n2's too, which only
    a stream to n2 can run (cluster reach, learned from WorkerService.Members)."""
    node = shutil.which("node")
    assert node is not None
    with process_group(tmp_path / "procs") as group:
        async with cluster.running(
            group, pg_dsn, etcd_server, redis_server, 2, etcd_ttl_s=2, workers=False
        ) as c:
            env = {
                **os.environ,
                "TICKWHEEL_TARGET": c.nodes[0].target,
                "TICKWHEEL_API_KEY": c.api_key,
                "TW_SLOTS": "20",
            }
            log = (tmp_path / "ts-worker.log").open("w")
            worker = _spawn_node([node, str(SDK / "dist" / "test" / "fixture-worker.js")], env, log)
            try:
                n = 60
                await cluster.submit_due(c, [datetime.now(UTC)] * n)
                await eventually(
                    lambda: cluster.completed(c),
                    until=lambda done: done == n,
                    timeout_s=60,
                    what=f"{n} tasks completed\n{group.explain()}",
                )
                owner = await cluster.owners(c.db)
                rows = await c.db.fetch(
                    "SELECT shard_id FROM tasks WHERE tenant_id = $1", c.tenant_id
                )
                assert any(owner[r[0]] == "n2" for r in rows), "no task fell on n2's shards"
                await cluster.check_exactly_once(c, n, timeout_s=30)
                text = (tmp_path / "ts-worker.log").read_text()
                assert "streaming to member" in text, text[-3000:]
                worker.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(worker.wait, 30) == 0
            finally:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
                log.close()
