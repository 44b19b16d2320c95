"""Issue 19, items 4-6 as a user meets them, with real ``tickwheel`` processes:
``dev`` keeps its tenant and key across restarts and prints its connect facts as JSON;
a worker says when it connects, reconnects and drains, and a failed attempt with its
traceback; ``serve`` before ``migrate`` says to migrate."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scheduler.client import Client, TaskState
from tests.acceptance.conftest import HANDLERS, Cluster
from tests.support.processes import CommandProcess, process_group, run_cli_result
from tests.support.servers import free_port
from tests.support.waiting import eventually


def _http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return int(resp.status)


def _facts(proc: CommandProcess) -> dict[str, Any]:
    (line,) = [ln for ln in proc.log().splitlines() if ln.startswith("{")]
    facts = json.loads(line)
    assert isinstance(facts, dict)
    return facts


async def test_dev_keeps_its_tenant_and_key_across_restarts(tmp_path: Path) -> None:
    db = tmp_path / "data" / "dev.db"
    creds = tmp_path / "creds.json"
    port, ui_port = free_port(), free_port()
    args = [
        "dev",
        "--db",
        str(db),
        "--listen",
        f"127.0.0.1:{port}",
        "--ui-port",
        str(ui_port),
        "--json",
    ]
    with process_group(tmp_path / "procs") as group:
        dev = CommandProcess(
            group.dir / "dev", "dev", [*args, "--credentials-file", str(creds)], ready_log="^{"
        )
        group.procs.append(dev)
        await asyncio.to_thread(dev.start)
        first = _facts(dev)
        assert set(first) == {
            "target",
            "api_key",
            "admin_token",
            "tenant_id",
            "database",
            "metrics_url",
            "ui_url",
            "ui_login_url",
        }
        assert first["metrics_url"].startswith("http://127.0.0.1:")
        assert first["target"] == f"127.0.0.1:{port}"
        assert first["ui_url"] == f"http://127.0.0.1:{ui_port}/"
        assert first["ui_login_url"].startswith(f"http://127.0.0.1:{ui_port}/login#token=")
        assert _http_status(first["ui_url"] + "tasks") == 200
        assert first["database"] == str(db)
        assert json.loads(creds.read_text()) == first
        assert stat.S_IMODE(os.stat(creds).st_mode) == 0o600
        saved = db.with_name("dev.db.credentials.json")
        assert stat.S_IMODE(os.stat(saved).st_mode) == 0o600
        async with await Client.connect(first["target"], api_key=first["api_key"]) as c:
            task = await c.submit("later", {}, scheduled_at=datetime.now(UTC) + timedelta(days=1))

        await asyncio.to_thread(dev.stop)
        dev.log_path.unlink()
        await asyncio.to_thread(dev.start_again)
        second = _facts(dev)
        # The same tenant, key and admin token, printed again (metrics: a new free port;
        # the dashboard's login link: a new token each start).
        fresh = {"metrics_url", "ui_login_url"}
        assert {k: v for k, v in second.items() if k not in fresh} == {
            k: v for k, v in first.items() if k not in fresh
        }
        assert second["ui_login_url"] != first["ui_login_url"]
        async with await Client.connect(second["target"], api_key=second["api_key"]) as c:
            assert (await c.get(task.id)).state is TaskState.SCHEDULED
            assert [t.id async for t in c.list()] == [task.id]


async def test_a_worker_logs_connect_failure_reconnect_and_drain(
    cluster: Cluster, tmp_path: Path
) -> None:
    flag = tmp_path / "fail"
    flag.touch()
    worker = CommandProcess(
        cluster.group.dir / "w",
        "w",
        # No -v: a worker's own lines show without it.
        [
            "worker",
            "--type",
            f"flaky={HANDLERS}:flaky",
            "--worker-id",
            "w1",
            "--target",
            cluster.server.target,
            "--api-key",
            cluster.api_key,
            "--grace-s",
            "2",
        ],
        ready_log=r"INFO tickwheel.worker: worker w1 connected \(session ",
    )
    worker.env["TW_FAIL_FLAG"] = str(flag)
    cluster.group.procs.append(worker)
    await asyncio.to_thread(worker.start)
    task = await cluster.client.submit("flaky", {}, strict_timing=True, max_retries=0)
    dead = await eventually(
        lambda: cluster.client.get(task.id), until=lambda t: t.state is TaskState.DEAD_LETTER
    )
    await eventually(lambda: asyncio.to_thread(worker.log_has, "attempt failed"), timeout_s=10)
    log = worker.log()
    (line,) = [ln for ln in log.splitlines() if "attempt failed" in ln]
    assert " WARNING tickwheel.worker: " in line
    token = dead.fencing_token
    assert f"task {task.id} (type flaky, attempt 1, fencing token {token}): " in line
    assert "Traceback (most recent call last)" in log
    assert "ApplicationError: flag" in log

    await asyncio.to_thread(cluster.server.stop)
    await asyncio.to_thread(cluster.server.start_again)
    await eventually(
        lambda: asyncio.to_thread(worker.log_has, r"INFO .*worker w1 reconnected \(session "),
        timeout_s=60,
    )
    assert worker.log_has(r"INFO tickwheel.worker: worker w1: reconnecting to ")
    await asyncio.to_thread(worker.stop)
    assert worker.log_has(r"INFO tickwheel.worker: worker w1 draining")
    # In words, as the summary on stdout (was the DrainReport(...) repr; issue 40's walk).
    assert worker.log_has(r"INFO tickwheel.worker: worker w1 drained: 0 completed, 0 failed, ")
    assert not worker.log_has(r"DrainReport\(")


async def test_serve_before_migrate_says_run_migrate(pg_empty_dsn: str) -> None:
    result = await asyncio.to_thread(
        run_cli_result,
        ["serve", "--postgres-dsn", pg_empty_dsn, "--listen", f"127.0.0.1:{free_port()}"],
        timeout_s=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.stderr
    assert "run `tickwheel migrate --postgres-dsn DSN` first" in lines[0]


async def test_the_dev_banners_commands_run_as_pasted(tmp_path: Path) -> None:
    """Issue 40, item 3: the banner's commands are printed outside the box, one a line
    (an 80-column box wrapped the export over two lines, with its border inside),
    name the handler module to write, and put ``tickwheel`` on PATH. Pasted as a whole
    into a shell in the same directory, they run a worker and a task to COMPLETED."""
    port = free_port()
    work = tmp_path / "here"
    work.mkdir()
    args = ["dev", "--db", str(tmp_path / "dev.db"), "--listen", f"127.0.0.1:{port}", "--no-ui"]
    with process_group(tmp_path / "procs") as group:
        dev = CommandProcess(group.dir / "dev", "dev", args, ready_log="^tickwheel list$")
        dev.env = {**(dev.env or {}), "COLUMNS": "80"}
        group.procs.append(dev)
        await asyncio.to_thread(dev.start)
        lines = dev.log().splitlines()
        block = lines[lines.index("try it, in another terminal in this directory:") + 1 :]
        block = block[: block.index("tickwheel list") + 1]
        assert block[0].startswith("export ")
        assert "TICKWHEEL_API_KEY=tw_" in block[0]
        assert not any("│" in line for line in block)
        # A bounded poll in the shell itself, then the worker goes with the script.
        script = "\n".join(
            [
                *block,
                "W=$!",
                "trap 'kill $W' EXIT",
                "for _ in $(seq 300); do",
                "  tickwheel list | grep -q COMPLETED && exit 0",
                "  sleep 0.1",
                "done",
                "exit 1",
            ]
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        env["PATH"] = "/usr/bin:/bin"  # the banner must put tickwheel on PATH itself
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            script,
            cwd=work,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, out.decode(errors="replace")
        assert (work / "hello.py").exists()
