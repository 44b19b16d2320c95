"""One Patroni failover under load, for the acceptance test and the drill (issue 42).

A migrated database on a Patroni pair, one ``tickwheel serve`` (etcd membership,
Redis) and one worker recording its handler starts; tasks due evenly over ``span_s``.
Six seconds in, the fault (a PostgreSQL crash under a live Patroni, or the loss of the
whole member) hits the primary. The round waits until every task completed exactly
once, then checks the fence and offers every pre-failover token to the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from scheduler.store import StoreConfig, open_store
from scheduler.store.postgres.dr import TOKEN_SHIFT
from scheduler.types import Completion, Outcome, TaskKey
from tests.support import cluster
from tests.support.outage import answering, connected, node_with_tasks, starts
from tests.support.patroni import PatroniMember, PatroniPair, app_database
from tests.support.processes import process_group
from tests.support.servers import EtcdServer, RedisServer


def postgres_crash(member: PatroniMember) -> None:
    """kill -9 the primary's PostgreSQL; its Patroni lives (fails over at once)."""
    member.kill9_postgres()


def member_lost(member: PatroniMember) -> None:
    """kill -9 the primary's Patroni and PostgreSQL, as a lost machine."""
    member.kill9()


FAULTS: dict[str, Callable[[PatroniMember], None]] = {
    "postgres": postgres_crash,
    "member": member_lost,
}


@dataclasses.dataclass(frozen=True)
class FailoverFigures:
    """What one failover round measured."""

    fault: str
    tasks: int
    promoted_s: float
    """From the fault until another member answered as primary."""
    resumed_s: float
    """From the fault until the first dispatch committed on the new primary."""
    latest_dispatch_s: float
    """The largest delay from a task's due time to its first dispatch."""
    ran: int
    ran_twice: int
    held: int
    """Tasks in flight (DISPATCHED or RUNNING) just before the fault."""
    refused: int
    """Of their pre-failover tokens, how many the store refused afterwards."""
    generation: int
    raised_by: str

    def line(self) -> str:
        return (
            f"{self.fault}: promoted {self.promoted_s:.1f} s, dispatching "
            f"{self.resumed_s:.1f} s after the fault; {self.tasks} tasks, ran {self.ran}, "
            f"twice {self.ran_twice}; pre-failover tokens refused {self.refused}/{self.held}; "
            f"latest first dispatch {self.latest_dispatch_s:.1f} s after due"
        )


async def failover_round(
    fault: str,
    pair: PatroniPair,
    etcd: EtcdServer,
    redis: RedisServer,
    workdir: Path,
    *,
    tasks: int,
    span_s: float,
) -> FailoverFigures:
    """Run one round (asserting exactly-once completion) and return its figures."""
    dsn = await asyncio.to_thread(app_database, pair)
    records = workdir / "records.jsonl"
    with process_group(workdir / "procs") as group:
        running = await node_with_tasks(
            group, dsn, etcd, redis, records, tasks=tasks, span_s=span_s
        )
        await asyncio.sleep(6)
        old = pair.primary()
        async with connected(dsn) as db:
            held = await db.fetch(
                "SELECT id, scheduled_at, fencing_token FROM tasks"
                " WHERE status IN ('DISPATCHED', 'RUNNING')"
            )
        killed, killed_at = time.monotonic(), datetime.now(UTC)
        await asyncio.to_thread(FAULTS[fault], old)
        await asyncio.to_thread(pair.new_primary, old, 90.0)
        promoted_s = time.monotonic() - killed
        await answering(dsn)
        async with connected(dsn) as db:
            after = cluster.Cluster(
                nodes=running.nodes, tenant_id=running.tenant_id, api_key=running.api_key, db=db
            )
            await cluster.check_exactly_once(after, tasks, timeout_s=120)
            late = await cluster.latest_first_dispatch_s(after)
            fence = await db.fetchrow("SELECT generation, raised_by FROM fencing_generation")
            # The first dispatch on the new primary: the first with a token above the
            # fence's base (a commit the old primary made as it died may come after
            # the fault's instant).
            resumed = await db.fetchval(
                "SELECT min(at) FROM task_transitions"
                " WHERE to_status IN ('DISPATCHED', 'RUNNING') AND from_status = 'PRELOADED'"
                " AND fencing_token > $1",
                int(fence["generation"]) << TOKEN_SHIFT,
            )
        ran = starts(records)
    store = await open_store(dsn, config=StoreConfig(preload_sweep_interval_s=0))
    try:
        results = await store.complete(
            [
                Completion(key=TaskKey(r["id"], r["scheduled_at"]), token=r["fencing_token"])
                for r in held
            ],
            datetime.now(UTC),
        )
    finally:
        await store.close()
    base = int(fence["generation"]) << TOKEN_SHIFT
    assert all(r["fencing_token"] < base for r in held), "a pre-failover token above the base"
    return FailoverFigures(
        fault=fault,
        tasks=tasks,
        promoted_s=promoted_s,
        resumed_s=(resumed - killed_at).total_seconds(),
        latest_dispatch_s=late,
        ran=len(ran),
        ran_twice=sum(1 for n in ran.values() if n > 1),
        held=len(held),
        refused=sum(r.outcome is Outcome.STALE for r in results),
        generation=int(fence["generation"]),
        raised_by=str(fence["raised_by"]),
    )
