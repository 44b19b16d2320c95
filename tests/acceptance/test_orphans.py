"""A worker frozen mid-task gives the task up within the server's keepalive and the
orphan grace, not at the end of its lease (issue 42).

Real ``tickwheel serve`` (on PostgreSQL, a 600 s task lease so that only the orphan
path can explain the outcome) and real ``tickwheel worker`` processes: "wa" starts a
long task and is frozen (SIGSTOP); the server's pings go unanswered, its stream
closes, and after the grace the task's lease ends; "wb" runs the task as attempt 2.
When "wa" thaws, its completion is refused: the task completed once, by "wb".
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from scheduler.client import AdminClient, Client
from scheduler.states import TaskState
from tests.support.processes import ADMIN_TOKEN, process_group
from tests.support.waiting import eventually

HANDLERS = "tests.acceptance.handlers"


def _records(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


async def _records_async(path: Path) -> list[dict[str, object]]:
    return _records(path)


@pytest.mark.timeout(240)
async def test_a_frozen_workers_running_task_runs_elsewhere_long_before_its_lease_ends(
    pg_dsn: str, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    with process_group(tmp_path / "procs") as group:
        serve = await asyncio.to_thread(
            group.serve, pg_dsn, lease_ttl_s=600.0, extra_args=("--canary-interval-s", "0")
        )
        async with await AdminClient.connect(serve.target, admin_token=ADMIN_TOKEN) as admin:
            tenant = await admin.create_tenant("orphans")
            api_key = (await admin.create_api_key(tenant.id, "orphans")).secret

        def worker(name: str, hold_s: float) -> object:
            return group.worker(
                serve.target,
                api_key,
                {"work": f"{HANDLERS}:work"},
                name=name,
                slots=1,
                env={"TW_RECORD_FILE": str(records), "TW_HOLD_S": str(hold_s)},
            )

        wa = await asyncio.to_thread(worker, "wa", 600.0)
        async with await Client.connect(serve.target, api_key=api_key) as client:
            task = await client.submit("work", {}, strict_timing=True, max_retries=3)
            await eventually(
                lambda: _records_async(records),
                until=lambda rs: any(r["event"] == "start" for r in rs),
                timeout_s=60,
                what=f"wa starts the task\n{group.explain()}",
            )
            wa.pause()  # type: ignore[attr-defined]
            try:
                await asyncio.to_thread(worker, "wb", 0.0)
                # The 600 s lease is not what lets it go: the keepalive (about 3 s),
                # the grace (2 s) and the first retry's backoff are.
                done = await eventually(
                    lambda: client.get(task.id),
                    until=lambda t: t.state is TaskState.COMPLETED,
                    timeout_s=120,
                    what=f"the task completes on wb\n{group.explain()}",
                )
            finally:
                wa.resume()  # type: ignore[attr-defined]
            assert done.retry_count == 1  # the frozen attempt counts
            assert done.worker_id == "wb"
            rs = _records(records)
            starts = [(r["worker"], r["attempt"]) for r in rs if r["event"] == "start"]
            assert starts == [("wa", 1), ("wb", 2)]
            assert [r["worker"] for r in rs if r["event"] == "done"] == ["wb"]
            assert "wb" in json.dumps(done.result)
