"""``--log-format json`` through real processes: ``tickwheel dev`` (SQLite) and a
``tickwheel worker`` run one failing task; every stderr line of both parses as one
JSON object, and the lines about the task carry its id, tenant, fencing token and
worker id."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from scheduler.client import Client, TaskSpec, TaskState
from tests.support.processes import TICKWHEEL, _child_env
from tests.support.servers import free_port, port_open
from tests.support.waiting import eventually


def _spawn(
    args: list[str], stderr: Path, cwd: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    with stderr.open("wb") as err:
        return subprocess.Popen(
            [TICKWHEEL, *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines()
    assert lines, f"{path.name} is empty"
    out = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise AssertionError(f"{path.name}: not JSON: {line!r}") from exc
        assert isinstance(obj, dict), line
        assert {"time", "level", "logger", "message"} <= obj.keys(), line
        assert obj["time"].endswith("Z"), line
        out.append(obj)
    return out


async def test_dev_and_worker_log_json_lines_with_the_task_fields(tmp_path: Path) -> None:
    port = free_port()
    facts_path = tmp_path / "facts.json"
    env = _child_env({"TW_FAIL_FLAG": str(tmp_path / "fail")})
    (tmp_path / "fail").write_text("set: the handler fails")
    dev_err = tmp_path / "dev.stderr"
    worker_err = tmp_path / "worker.stderr"
    dev = _spawn(
        [
            "--log-format",
            "json",
            "dev",
            "--db",
            str(tmp_path / "dev.db"),
            "--listen",
            f"127.0.0.1:{port}",
            "--credentials-file",
            str(facts_path),
            "--log-level",  # after the subcommand: accepted there too
            "debug",
        ],
        dev_err,
        tmp_path,
        env,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:

        async def serving() -> bool:
            return facts_path.exists() and port_open("127.0.0.1", port)

        await eventually(serving, timeout_s=60, what="dev to serve")
        facts = json.loads(facts_path.read_text())
        worker = _spawn(
            [
                "worker",
                "--log-format",
                "json",
                "--type",
                "logs.flaky=tests.acceptance.handlers:flaky",
                "--worker-id",
                "logs-worker",
                "--target",
                facts["target"],
                "--api-key",
                facts["api_key"],
                "--grace-s",
                "1",
            ],
            worker_err,
            tmp_path,
            {**env, "TICKWHEEL_LOG_FORMAT": "text"},  # the flag wins over the variable
        )

        async def connected() -> bool:
            return "logs-worker connected" in worker_err.read_text()

        await eventually(connected, timeout_s=60, what="the worker to connect")
        client = await Client.connect(facts["target"], api_key=facts["api_key"])
        try:
            (task,) = await client.submit_many(
                [TaskSpec(type="logs.flaky", payload={}, max_retries=0)]
            )

            async def dead() -> bool:
                return (await client.get(task.id)).state is TaskState.DEAD_LETTER

            await eventually(dead, timeout_s=60, what="the task to fail")
        finally:
            await client.close()
    finally:
        if worker is not None:
            _stop(worker)
        _stop(dev)
        await asyncio.sleep(0)

    dev_lines = _json_lines(dev_err)
    pushed = [
        line
        for line in dev_lines
        if line.get("task_id") == str(task.id) and "pushed to worker" in line["message"]
    ]
    assert pushed, "no dev line about the task"
    token = pushed[0]["fencing_token"]
    assert isinstance(token, int)
    assert token > 0
    task_fields = {"task_id": str(task.id), "tenant_id": facts["tenant_id"], "fencing_token": token}
    assert {k: pushed[0].get(k) for k in task_fields} == task_fields
    assert pushed[0]["worker_id"] == "logs-worker"

    worker_lines = _json_lines(worker_err)
    failed = [line for line in worker_lines if "attempt failed" in line["message"]]
    assert failed, "no worker line about the failed attempt"
    assert {k: failed[0].get(k) for k in task_fields} == task_fields
    assert failed[0]["worker_id"] == "logs-worker"
    assert "ApplicationError" in failed[0]["exc_info"]
    assert any(line["message"].startswith("drained:") for line in worker_lines)
