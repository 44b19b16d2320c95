"""Moving a tenant's home, measured (issue 16; target: the move pauses the tenant's
writes <= 2 s).

Two regions on loopback (``us`` and ``eu``: a PostgreSQL server and one ``tickwheel
serve`` each), a tenant with a backlog of live tasks (``TW_BENCH_MOVE_BACKLOG``, due in
ten minutes: the rows the copy carries), two worker processes of it running tasks of
0.1 s, and a client that submits a task every 10 ms, due now or up to 3 s later. The
tenant is moved ``TW_BENCH_MOVES`` times, back and forth, with ``tickwheel tenants
move`` (a child process, as an operator runs it). Per move:

- ``paused_s``: the command's own figure, from the freeze's commit at the old home to
  the tenant opening at the new one (the copy and the flip inside it);
- ``client_pause_s``: the slowest submission during the move, as the client saw it
  (node polls at both ends, the SDK's retries of TENANT_MOVING and a forward included):
  the pause of the tenant's writes end to end;
- ``completion_gap_s``: the longest stretch without a completion in either region's
  ledger around the move (dispatch paused, workers moving over);
- ``flip_s``: the checked flip's transaction at the old home (other tenants' task writes
  there wait for its lock this long).

Exactly-once is asserted as in tests/acceptance/regions/test_move.py.

Run: ``.venv/bin/pytest benchmarks/test_move.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.acceptance.regions.test_move import Submitter, fetch, regions_file, run_move
from tests.support.processes import ADMIN_TOKEN, WorkerProcess
from tests.support.regions import Regions, start_regions

from scheduler.client import AdminClient, Client, TaskSpec

MOVES = int(os.environ.get("TW_BENCH_MOVES", "6"))
BACKLOG = int(os.environ.get("TW_BENCH_MOVE_BACKLOG", "5000"))
HANDLER = {"work": "tests.acceptance.handlers:work"}


async def _completions(regions: Regions, tenant_id: uuid.UUID) -> list[tuple[uuid.UUID, float]]:
    out: list[tuple[uuid.UUID, float]] = []
    for stack in regions.stacks.values():
        rows = await fetch(
            stack.admin_dsn,
            "SELECT task_id, extract(epoch FROM completed_at) AS at FROM task_completions"
            " WHERE tenant_id = $1",
            tenant_id,
        )
        out.extend((r["task_id"], float(r["at"])) for r in rows)
    return out


async def _missing(regions: Regions, tenant_id: uuid.UUID, acked: set[uuid.UUID]) -> list[Any]:
    """Where the acknowledged tasks that did not complete are (for a failure message)."""
    finished = {t for t, _ in await _completions(regions, tenant_id)}
    out: list[Any] = []
    for name, stack in regions.stacks.items():
        rows = await fetch(
            stack.admin_dsn,
            "SELECT id, status, fencing_token, worker_id, due_at, lease_expires_at, updated_at"
            " FROM tasks WHERE tenant_id = $1 AND id = ANY($2::uuid[])",
            tenant_id,
            list(acked - finished),
        )
        out.extend((name, dict(r)) for r in rows)
    return out


async def _scenario(regions: Regions, tmp_path: Path) -> dict[str, float]:
    us = regions["us"]
    async with await AdminClient.connect(us.target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant("bench-mover")
        key = (await admin.create_api_key(tenant.id, "k")).secret
    directory = regions_file(regions, tmp_path / "regions.json")
    workers = []
    for name in ("w1", "w2"):
        worker = WorkerProcess(
            tmp_path / name,
            us.target,
            key,
            HANDLER,
            name=f"bench-{name}",
            slots=50,
            env={"TW_HOLD_S": "0.1", "TW_RECORD_FILE": str(tmp_path / "records.jsonl")},
        )
        regions.group.procs.append(worker)
        worker.start()
        workers.append(worker)
    moves: list[dict[str, Any]] = []
    try:
        async with await Client.connect(us.target, api_key=key) as client:
            later = datetime.now(UTC) + timedelta(minutes=10)
            backlog = [
                TaskSpec(type="work", payload={"b": i}, scheduled_at=later) for i in range(BACKLOG)
            ]
            await client.submit_many(backlog)
            submitter = Submitter(client, every_s=0.01)
            submitting = asyncio.create_task(submitter.run(), name="bench-move-submitter")
            await asyncio.sleep(3)  # steady load first
            home = "us"
            for _ in range(MOVES):
                to = "eu" if home == "us" else "us"
                first = len(submitter.latencies_s)
                started = time.time()
                report = await run_move(tenant.id, to, directory)
                ended = time.time()
                await asyncio.sleep(2)  # the calls that were held finish, load resumes
                during = submitter.latencies_s[first:]
                report.update(window=(started, ended + 2), client_pause_s=max(during))
                moves.append(report)
                home = to
            submitter.stop()
            await submitting
            acked = set(submitter.acked)
            assert submitter.errors == []

            async def done() -> int:
                return len({t for t, _ in await _completions(regions, tenant.id)} & acked)

            deadline = time.monotonic() + 60
            while await done() < len(acked):
                if time.monotonic() > deadline:
                    missing = await _missing(regions, tenant.id, acked)
                    raise AssertionError(f"not every acknowledged task completed: {missing}")
                await asyncio.sleep(0.2)
    finally:
        for worker in workers:
            worker.stop()
    completions = await _completions(regions, tenant.id)
    ids = [t for t, _ in completions]
    assert len(ids) == len(set(ids)), "a task completed twice"
    times = sorted(at for _, at in completions)
    for report in moves:
        lo, hi = report["window"]
        inside = [t for t in times if lo - 1 <= t <= hi]
        report["completion_gap_s"] = max(
            (b - a for a, b in itertools.pairwise(inside)), default=0.0
        )
    figures: dict[str, float] = {"moves": float(len(moves)), "backlog_tasks": float(BACKLOG)}
    for name in ("paused_s", "client_pause_s", "completion_gap_s", "flip_s", "copy_s"):
        values = [float(r[name]) for r in moves]
        figures[f"{name}_median"] = statistics.median(values)
        figures[f"{name}_max"] = max(values)
    figures["tasks_moved_median"] = statistics.median(float(r["tasks_moved"]) for r in moves)
    figures["copies_max"] = max(float(r["copies"]) for r in moves)
    figures["acknowledged"] = float(len(acked))
    # Handlers that ran a task twice (the ledger still holds it once): a lease that lapsed
    # at the new home before the worker that ran it through the move got there.
    runs: dict[str, int] = {}
    for line in (tmp_path / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["event"] == "done":
            runs[record["task_id"]] = runs.get(record["task_id"], 0) + 1
    figures["handler_reruns"] = float(sum(n - 1 for n in runs.values()))
    return figures


def test_move_pause(benchmark: Any, tmp_path: Path) -> None:
    """A tenant moved back and forth under load: how long its writes pause."""

    def go() -> dict[str, float]:
        with start_regions(tmp_path / "regions", ("us", "eu")) as regions:
            return asyncio.run(_scenario(regions, tmp_path))

    figures: dict[str, float] = benchmark.pedantic(go, rounds=1, iterations=1)
    benchmark.extra_info.update(figures)
    print("\ntenant move under load:", json.dumps(figures, indent=1))
    assert figures["client_pause_s_max"] > 0
