"""A server killed and restarted under load loses no task and completes none twice."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.client import TaskSpec
from tests.acceptance.conftest import HANDLERS, Cluster
from tests.support.waiting import eventually

N = 10_000
SPREAD_S = 4.0


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sigterm", "kill9"])
async def test_restart_with_10k_pending_tasks_completes_each_exactly_once(
    cluster: Cluster, how: str
) -> None:
    fast = {"fast": f"{HANDLERS}:fast"}
    workers = [await cluster.worker(n, fast, slots=200) for n in ("worker-1", "worker-2")]
    start = datetime.now(UTC) + timedelta(seconds=1)
    specs = [
        TaskSpec(
            type="fast",
            payload={"i": i},
            scheduled_at=start + timedelta(seconds=SPREAD_S * i / N),
            strict_timing=True,
            max_retries=10,
        )
        for i in range(N)
    ]
    submitted = await cluster.client.submit_many(specs)
    ids = {t.id for t in submitted}
    assert len(ids) == N

    async def completed() -> int:
        sql = "SELECT count(*) FROM tasks WHERE type = 'fast' AND status = 'COMPLETED'"
        return int(await cluster.db.fetchval(sql))

    # Stop the server mid-stream: some tasks done, some running, most still pending.
    await eventually(completed, until=lambda n: n >= N // 5, what="a fifth completed")
    t0 = time.monotonic()
    if how == "kill9":
        cluster.server.kill9()
    else:
        await asyncio.to_thread(cluster.server.stop)
    at_stop = await completed()
    assert at_stop < N, "the stop came too late to test anything"
    t_stop = time.monotonic() - t0
    await asyncio.to_thread(cluster.server.start_again)
    t_up = time.monotonic() - t0

    await eventually(
        completed,
        until=lambda n: n == N,
        timeout_s=90,
        interval_s=0.2,
        what=f"all {N} tasks COMPLETED",
    )
    db = cluster.db
    ledger = await db.fetch("SELECT task_id, count(*) AS n FROM task_completions GROUP BY task_id")
    ledger_ids = {r["task_id"] for r in ledger}
    if ledger_ids != ids:
        odd = sorted(ledger_ids ^ ids)[:6]
        rows = await db.fetch(
            "SELECT id, status, fencing_token, result_payload, payload FROM tasks"
            " WHERE id = ANY($1::uuid[])",
            odd,
        )
        raise AssertionError(
            f"ledger has {len(ledger_ids - ids)} unknown ids, misses {len(ids - ledger_ids)};"
            f" rows: {[dict(r) for r in rows]}"
        )
    assert max(r["n"] for r in ledger) == 1
    to_completed = await db.fetchval(
        "SELECT count(*) FROM task_transitions WHERE to_status = 'COMPLETED'"
        " AND task_id = ANY($1::uuid[])",
        list(ids),
    )
    assert to_completed == N
    # Every committed result is the one of an execution that ran with the winning token,
    # and no attempt (task, token) was ever delivered and run twice.
    # (The server's own canary tasks are left out: they are not of type "fast".)
    rows = await db.fetch(
        "SELECT id, status, fencing_token, result_payload FROM tasks"
        " WHERE tenant_id = $1 AND type = 'fast'",
        cluster.tenant_id,
    )
    no_result = [dict(r) for r in rows if r["result_payload"] is None]
    assert not no_result, f"{len(no_result)} tasks without a result, e.g. {no_result[:3]}"
    results = {
        str(r["id"]): (r["fencing_token"], json.loads(r["result_payload"])["w"]) for r in rows
    }
    runs = collections.Counter(
        (r["task_id"], r["token"], r["worker"]) for r in cluster.records("done")
    )
    assert max(runs.values()) == 1, [k for k, v in runs.items() if v > 1][:5]
    assert len({(tid, tok) for tid, tok, _w in runs}) == len(runs)
    missing = [tid for tid, (tok, w) in results.items() if (tid, tok, w) not in runs]
    assert not missing, f"{len(missing)} results match no execution, e.g. {missing[:3]}"
    # The workers rode out the restart (they reconnect; they must not crash).
    crashed = [w.name for w in workers if not w.running()]
    assert not crashed, f"worker processes died during the server restart: {crashed}"
    extra = len(runs) - N  # attempts fenced out after the restart (at-least-once)
    print(
        f"{how}: stop took {t_stop:.1f} s, serving again after {t_up:.1f} s, all done after "
        f"{time.monotonic() - t0:.1f} s; {at_stop} completed at the stop; {extra} attempts "
        "re-ran after it"
    )
