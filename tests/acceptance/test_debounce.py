"""Debounce and throttle by key and idempotency windows (issue 43) through real
``tickwheel serve`` and worker processes.

A burst of debounced submissions makes one task, which runs once with the burst's last
payload, not before the last submission + the period; the CLI takes the same options;
concurrent submissions to two nodes sharing PostgreSQL (and etcd) still make one run.
How close to the due time the run starts is measured in ``benchmarks/test_debounce.py``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from scheduler.client import (
    Client,
    Debounce,
    DebouncePayload,
    IdempotencyScope,
    Task,
    TaskState,
    Throttle,
)
from tests.acceptance.conftest import Cluster
from tests.support import cluster as multi
from tests.support.processes import process_group, run_cli
from tests.support.servers import EtcdServer, RedisServer
from tests.support.waiting import eventually

PERIOD_S = 0.4


async def _done(client: Client, task_id: uuid.UUID) -> Task:
    return await eventually(
        lambda: client.get(task_id),
        until=lambda t: t.state is TaskState.COMPLETED,
        timeout_s=30,
        what=f"debounced task {task_id} to complete",
    )


async def test_a_burst_runs_once_with_the_last_payload_after_the_last_submit(
    cluster: Cluster,
) -> None:
    await cluster.worker("worker-1")
    d = Debounce(key="search-index", period_s=PERIOD_S)
    answers = []
    for n in range(30):
        answers.append(await cluster.client.submit("work", {"n": n}, debounce=d))
        await asyncio.sleep(0.01)  # a burst over ~0.3 s: inside the period throughout
    first = answers[0]
    assert first.created
    assert not first.debounced
    assert all(a.id == first.id and a.debounced and not a.created for a in answers[1:])
    due = answers[-1].due_at
    task = await _done(cluster.client, first.id)
    assert task.payload == {"n": 29}
    starts = [r for r in cluster.records("start") if r["task_id"] == str(first.id)]
    assert len(starts) == 1, starts
    # Never before the last submission's due time (the worker's clock is this machine's).
    assert starts[0]["at"] >= due.timestamp() - 0.002
    assert await cluster.ledger_count(first.id) == 1
    assert await cluster.status_counts() == {"COMPLETED": 1}


async def test_the_first_payload_and_a_new_burst_after_the_run(cluster: Cluster) -> None:
    await cluster.worker("worker-1")
    d = Debounce(key="k", period_s=PERIOD_S, payload=DebouncePayload.FIRST)
    a = await cluster.client.submit("work", {"n": 0}, debounce=d)
    b = await cluster.client.submit("work", {"n": 1}, debounce=d)
    assert b.id == a.id
    assert b.debounced
    assert (await _done(cluster.client, a.id)).payload == {"n": 0}
    c = await cluster.client.submit("work", {"n": 2}, debounce=d)
    assert c.created
    assert c.id != a.id
    assert (await _done(cluster.client, c.id)).payload == {"n": 2}


async def test_the_cli_submits_debounced(cluster: Cluster) -> None:
    args = ["submit", "work", "--target", cluster.server.target, "--api-key", cluster.api_key]
    opts = ["--debounce-key", "cli", "--debounce-s", "30", "--json"]
    one = json.loads(run_cli([*args, "--payload", '{"n": 1}', *opts]))
    two = json.loads(run_cli([*args, "--payload", '{"n": 2}', *opts]))
    assert one["created"]
    assert not one["debounced"]
    assert two["id"] == one["id"]
    assert two["debounced"]
    assert not two["created"]
    assert (await cluster.client.get(one["id"])).payload == {"n": 2}


@pytest.mark.timeout(240)
async def test_concurrent_submissions_to_two_nodes_run_once(
    pg_dsn: str, etcd_server: EtcdServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    records = tmp_path / "records.jsonl"
    db = await asyncpg.connect(pg_dsn)
    try:
        with process_group(tmp_path / "procs") as group:
            nodes = await multi.start_cluster(
                group,
                db,
                pg_dsn,
                etcd_server,
                redis_server,
                ["n1", "n2"],
                etcd_ttl_s=5.0,
                worker_slots=10,
                worker_env={"TW_RECORD_FILE": str(records)},
            )
            clients = [await Client.connect(n.target, api_key=nodes.api_key) for n in nodes.nodes]
            try:
                d = Debounce(key="two-nodes", period_s=1.0)

                async def burst(client: Client, base: int) -> list[Task]:
                    out = []
                    for n in range(40):
                        out.append(await client.submit("work", {"n": base + n}, debounce=d))
                    return out

                results = await asyncio.gather(burst(clients[0], 0), burst(clients[1], 1000))
                answers = [t for part in results for t in part]
                ids = {t.id for t in answers}
                assert len(ids) == 1, ids
                assert sum(t.created for t in answers) == 1
                (task_id,) = ids
                task = await _done(clients[0], task_id)
                # The last submission to commit (one of the two bursts' last) wins; each
                # answer is read after its commit, so the latest due time seen is the final.
                assert task.payload in ({"n": 39}, {"n": 1039})
                assert task.due_at == max(t.due_at for t in answers)
            finally:
                for c in clients:
                    await c.close()
        lines = [json.loads(x) for x in records.read_text().splitlines() if x]
        starts = [r for r in lines if r["event"] == "start" and r["task_id"] == str(task_id)]
        assert len(starts) == 1, starts
        done = await db.fetchval(
            "SELECT count(*) FROM task_completions WHERE task_id = $1", task_id
        )
        assert done == 1
    finally:
        await db.close()


async def test_throttle_runs_one_per_period_and_says_so(cluster: Cluster) -> None:
    await cluster.worker("worker-1")
    t = Throttle(key="report", period_s=3600)
    first = await cluster.client.submit("work", {"n": 0}, throttle=t, strict_timing=True)
    again = [
        await cluster.client.submit("work", {"n": n}, throttle=t, strict_timing=True)
        for n in range(1, 5)
    ]
    assert first.created
    assert not first.throttled
    assert all(a.throttled and not a.created and a.id == first.id for a in again)
    await _done(cluster.client, first.id)
    # Still inside the hour after it ran: answered with it, nothing new.
    late = await cluster.client.submit("work", {"n": 9}, throttle=t, strict_timing=True)
    assert late.throttled
    assert late.id == first.id
    assert len(cluster.records("start")) == 1
    assert await cluster.status_counts() == {"COMPLETED": 1}


async def test_an_idempotency_key_until_finished_and_with_a_ttl(cluster: Cluster) -> None:
    await cluster.worker("worker-1")
    until = IdempotencyScope.UNTIL_FINISHED
    a = await cluster.client.submit("work", {}, idempotency_key="nightly", idempotency_scope=until)
    await _done(cluster.client, a.id)
    b = await cluster.client.submit("work", {}, idempotency_key="nightly", idempotency_scope=until)
    assert b.created
    assert b.id != a.id
    c = await cluster.client.submit(
        "work", {}, idempotency_key="short", idempotency_ttl_s=0.5, scheduled_at=_later()
    )
    d = await cluster.client.submit("work", {}, idempotency_key="short", scheduled_at=_later())
    assert not d.created
    assert d.id == c.id
    await eventually(
        lambda: cluster.client.submit("work", {}, idempotency_key="short", scheduled_at=_later()),
        until=lambda t: t.created,
        timeout_s=10,
        what="the key's window of 0.5 s to end",
    )
    n = await cluster.db.fetchval("SELECT count(*) FROM tasks WHERE idempotency_key = 'short'")
    assert n == 2  # the old task and the one made once the window ended


def _later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)
