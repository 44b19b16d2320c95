"""Three scheduler nodes sharing shards through etcd, with Redis and PostgreSQL.

Real processes throughout: ``tickwheel serve`` x3 (etcd membership, Redis quotas and
index), one ``tickwheel worker`` per node, real etcd, Redis and PostgreSQL. Mid-run one
node is killed with SIGKILL, another frozen (SIGSTOP) past its etcd lease, and Redis is
flushed. Every task must end COMPLETED exactly once, shards must be re-owned, no task may
fire later than the lease TTL + 2 s, and every accepted dispatch must come from the one
owner of its shard's epoch (the history check).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from scheduler.client import AdminClient, Client, TaskSpec
from tests.support.processes import ADMIN_TOKEN, ServeProcess, process_group
from tests.support.servers import EtcdServer, RedisServer
from tests.support.waiting import eventually

ETCD_TTL_S = 5.0
TASK_LEASE_S = 3.0
TASKS = int(os.environ.get("TW_SCALE_TASKS", "12000"))
SPREAD_S = float(os.environ.get("TW_SCALE_SPREAD_S", "30"))
HANDLERS = "tests.acceptance.handlers"


async def _owners(db: asyncpg.Connection) -> dict[int, str]:
    rows = await db.fetch("SELECT shard_id, owner FROM shard_epochs")
    return {r[0]: r[1] for r in rows}


@pytest.mark.slow
@pytest.mark.timeout(420)
async def test_three_nodes_survive_kill_freeze_and_flush(
    pg_dsn: str, etcd_server: EtcdServer, redis_server: RedisServer, tmp_path: Path
) -> None:
    db = await asyncpg.connect(pg_dsn)
    with process_group(tmp_path / "procs") as group:
        nodes: list[ServeProcess] = []
        for name in ("n1", "n2", "n3"):
            proc = ServeProcess(
                group.dir / name,
                pg_dsn,
                name=name,
                lease_ttl_s=TASK_LEASE_S,
                extra_args=(
                    "--etcd",
                    etcd_server.endpoint,
                    "--node-id",
                    name,
                    "--redis-url",
                    redis_server.url,
                    "--node-share",
                    "0.34",
                    "--etcd-lease-ttl-s",
                    str(ETCD_TTL_S),
                    "--preload-interval-s",
                    "0.2",
                    "--canary-interval-s",
                    "0",
                ),
            )
            group.procs.append(proc)
            await asyncio.to_thread(proc.start)
            nodes.append(proc)
        try:
            # Every shard owned, by all three nodes.
            await eventually(
                lambda: _owners(db),
                until=lambda o: len(o) == 256 and set(o.values()) == {"n1", "n2", "n3"},
                timeout_s=60,
                what="256 shards spread over 3 nodes",
            )
            async with await AdminClient.connect(nodes[0].target, admin_token=ADMIN_TOKEN) as admin:
                tenant = await admin.create_tenant(
                    "scale", rate_limit_rps=100_000, max_concurrent_workers=100_000
                )
                key = (await admin.create_api_key(tenant.id, "scale")).secret
            records = tmp_path / "records.jsonl"
            for i, node in enumerate(nodes):
                await asyncio.to_thread(
                    group.worker,
                    node.target,
                    key,
                    {"work": f"{HANDLERS}:work"},
                    name=f"w{i + 1}",
                    slots=500,
                    env={"TW_RECORD_FILE": str(records)},
                )
            client = await Client.connect(nodes[0].target, api_key=key)
            start = datetime.now(UTC) + timedelta(seconds=3)
            specs = [
                TaskSpec(
                    type="work",
                    scheduled_at=start + timedelta(seconds=SPREAD_S * i / TASKS),
                    strict_timing=True,
                )
                for i in range(TASKS)
            ]
            submitted = await client.submit_many(specs)
            assert len({t.id for t in submitted}) == TASKS

            # Mid-run: kill n3; freeze n2 past its etcd lease; flush Redis.
            await asyncio.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
            await asyncio.sleep(SPREAD_S / 4)
            killed_at = time.monotonic()
            nodes[2].kill9()
            await eventually(
                lambda: _owners(db),
                until=lambda o: "n3" not in o.values(),
                timeout_s=ETCD_TTL_S + 10,
                what="n3's shards re-owned",
            )
            reowned_s = time.monotonic() - killed_at
            flusher = aioredis.from_url(redis_server.url)
            try:
                await flusher.flushall()
            finally:
                await flusher.aclose()
            await asyncio.sleep(SPREAD_S / 8)
            os.killpg(nodes[1].pid, signal.SIGSTOP)
            frozen_at = time.monotonic()
            try:
                await eventually(
                    lambda: _owners(db),
                    until=lambda o: set(o.values()) == {"n1"},
                    timeout_s=ETCD_TTL_S + 10,
                    what="n2's shards re-owned by n1",
                )
                frozen_reowned_s = time.monotonic() - frozen_at
                await asyncio.sleep(1.0)
            finally:
                os.killpg(nodes[1].pid, signal.SIGCONT)

            # Everything completes, exactly once.
            async def completed() -> int:
                return int(
                    await db.fetchval(
                        "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND status = 'COMPLETED'",
                        tenant.id,
                    )
                )

            await eventually(completed, until=lambda n: n == TASKS, timeout_s=240, what="all done")
            ledger = await db.fetchrow(
                "SELECT count(*), count(DISTINCT task_id) FROM task_completions"
                " WHERE tenant_id = $1",
                tenant.id,
            )
            assert (ledger[0], ledger[1]) == (TASKS, TASKS)

            # Shards came back within the etcd TTL + 1 s (+ the poll of this test).
            assert reowned_s <= ETCD_TTL_S + 1 + 0.5, reowned_s
            assert frozen_reowned_s <= ETCD_TTL_S + 1 + 0.5, frozen_reowned_s

            # No task fired later than the etcd TTL + 2 s after its due time.
            late = await db.fetchval(
                """
                SELECT max(extract(epoch FROM first.at - t.due_at))
                FROM tasks t
                JOIN LATERAL (
                    SELECT min(at) AS at FROM task_transitions x
                    WHERE x.task_id = t.id AND x.to_status = 'DISPATCHED'
                ) first ON true
                WHERE t.tenant_id = $1
                """,
                tenant.id,
            )
            print(
                f"\nscale-out: {TASKS} tasks over {SPREAD_S:.0f}s; killed node re-owned in "
                f"{reowned_s:.2f}s, frozen node in {frozen_reowned_s:.2f}s; latest first "
                f"dispatch {float(late):.2f}s after due"
            )
            if float(late) > ETCD_TTL_S + 2:
                worst = await db.fetch(
                    """
                    SELECT t.shard_id, t.due_at, x.at, x.actor, x.epoch,
                           extract(epoch FROM x.at - t.due_at) AS late
                    FROM tasks t JOIN task_transitions x ON x.task_id = t.id
                    WHERE t.tenant_id = $1 AND x.to_status = 'DISPATCHED'
                    ORDER BY late DESC LIMIT 5
                    """,
                    tenant.id,
                )
                claims = await db.fetch(
                    "SELECT * FROM shard_claims WHERE shard_id = $1", worst[0]["shard_id"]
                )
                raise AssertionError(
                    f"latest first dispatch {late:.2f}s late; killed at {killed_at}, "
                    f"frozen at {frozen_at}; worst: {[dict(w) for w in worst]}; "
                    f"claims: {[dict(c) for c in claims]}"
                )

            # History: every accepted dispatch came from the one owner of its epoch.
            rows = await db.fetch(
                """
                SELECT t.shard_id, x.epoch, array_agg(DISTINCT x.actor) AS actors,
                       c.owner
                FROM task_transitions x
                JOIN tasks t ON t.id = x.task_id AND t.scheduled_at = x.scheduled_at
                LEFT JOIN shard_claims c ON c.shard_id = t.shard_id AND c.epoch = x.epoch
                WHERE x.to_status = 'DISPATCHED' AND t.tenant_id = $1
                GROUP BY t.shard_id, x.epoch, c.owner
                """,
                tenant.id,
            )
            assert rows
            for r in rows:
                assert r["epoch"] is not None, "a clustered dispatch without an epoch"
                assert list(r["actors"]) == [r["owner"]], dict(r)
            await client.close()
        finally:
            await db.close()
