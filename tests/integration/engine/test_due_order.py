"""Due order whatever path a task took to the ready queue (issue 17).

The chaos run found tasks a takeover discovered late (in its PostgreSQL check, missing
from the Redis index) sent out after tasks due 27 s after them: the ready queue was
first in, first out. Here one engine (PostgreSQL, a real Redis index, a membership that
hands it a second shard on demand) gets tasks through every path while no worker has a
free slot, each path bringing tasks OLDER than those already waiting:

1. the wheel (tasks due soon, fired within the commit lead);
2. a retry (its backoff ends just before them, so it reaches the wheel after they left);
3. a reconcile (rows another node wrote for this node's shard, overdue);
4. a release (a worker closes its stream with a task it never acked);
5. a takeover: the old owner's Redis index (loaded at the gain) and then
6. the store check after it (rows the old owner committed but never indexed).

Then one worker with room for everything connects, and the tasks must reach it in due
order. The clock is fake: paths happen in this order because the test moves time.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest
import redis.asyncio as aioredis

from scheduler.cluster import ShardListener
from scheduler.engine import AssignmentBatch, Engine, EngineConfig, WorkerHello, WorkerSession
from scheduler.engine._types import FailureReport
from scheduler.ids import uuid7
from scheduler.index import RedisTimeIndex
from scheduler.jitter import shard_of
from scheduler.states import TaskState
from scheduler.store import Store, open_store
from scheduler.types import FencedWrite, NewTask, Pool, Preloaded, RetryPolicy
from tests.support.clock import FakeClock
from tests.support.servers import RedisServer
from tests.support.waiting import eventually

SHARDS = 2
MINE, TAKEN_OVER = 0, 1
CONFIG = EngineConfig(
    shard_count=SHARDS,
    lease_ttl_s=600,
    ack_timeout_s=300,  # the holder never acks: its dispatch outlives the clock's jumps
    preload_interval_s=0.05,
    reconcile_interval_s=3600,
    full_reconcile_interval_s=3600,
    dispatch_lead_ms=1000,
    dispatch_lead_max_ms=1000,
    dispatch_window_ms=0,
)
BACKOFF_S = 20.0


class Handover:
    """A membership that owns shard 0 from the start and is handed shard 1 by the test
    (what etcd does when the old owner of shard 1 dies)."""

    def __init__(self) -> None:
        self._owned: frozenset[int] = frozenset()
        self._listener: ShardListener | None = None

    @property
    def node_id(self) -> str:
        return "n1"

    @property
    def shard_count(self) -> int:
        return SHARDS

    @property
    def exclusive(self) -> bool:
        return False

    def set_listener(self, listener: ShardListener | None) -> None:
        self._listener = listener

    async def gain(self, shards: frozenset[int]) -> None:
        assert self._listener is not None
        await self._listener.on_gain(dict.fromkeys(shards, 1))
        self._owned |= shards

    async def start(self) -> None:
        await self.gain(frozenset({MINE}))

    async def stop(self) -> None:
        lost, self._owned = self._owned, frozenset()
        if lost and self._listener is not None:
            await self._listener.on_loss(lost)

    def owned(self) -> frozenset[int]:
        return self._owned

    def owns(self, shard: int) -> bool:
        return shard in self._owned

    def yield_shards(self, on: bool) -> None: ...


@pytest.fixture
async def pg_store(pg_dsn: str) -> AsyncIterator[Store]:
    s = await open_store(pg_dsn)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def index(redis_server: RedisServer, redis_prefix: str) -> AsyncIterator[RedisTimeIndex]:
    idx = RedisTimeIndex(
        aioredis.from_url(redis_server.url), key_prefix=redis_prefix, owns_client=True
    )
    try:
        yield idx
    finally:
        await idx.close()


def _row(tenant: uuid.UUID, shard: int, due: datetime, **kw: object) -> NewTask:
    """A PRELOADED row of ``shard`` due at ``due`` (written by some node)."""
    while True:
        task_id = uuid7()
        if shard_of(tenant, task_id, SHARDS) == shard:
            break
    return NewTask(
        id=task_id,
        tenant_id=tenant,
        type="t",
        payload={},
        scheduled_at=due,
        due_at=due,
        idempotency_key=str(task_id),
        shard_id=shard,
        strict_timing=True,
        initial_state=TaskState.PRELOADED,
        **kw,  # type: ignore[arg-type]
    )


async def _one(session: WorkerSession) -> FencedWrite:
    event = await asyncio.wait_for(session.next_event(), 10)
    assert isinstance(event, AssignmentBatch), event
    (a,) = event.assignments
    return FencedWrite(key=a.key, token=a.fencing_token)


async def test_every_path_to_the_ready_queue_keeps_due_order(
    pg_store: Store, index: RedisTimeIndex
) -> None:
    clock = FakeClock()
    t0 = clock()
    membership = Handover()
    engine = Engine(pg_store, CONFIG, clock=clock, membership=membership, index=index)
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="acme")).id
        due: dict[uuid.UUID, tuple[datetime, str]] = {}

        def hello(worker: str, slots: int) -> WorkerHello:
            return WorkerHello(
                worker_id=worker, tenant_id=tenant, task_types=frozenset({"t"}), slots=slots
            )

        async def depth() -> int:
            return engine.pool_metrics()[Pool.STANDARD].depth

        async def waiting(n: int, what: str) -> None:
            engine.wake()
            await eventually(depth, until=lambda d: d == n, what=f"{n} ready after {what}")

        async def insert(rows: list[NewTask], path: str) -> None:
            await pg_store.insert_tasks(rows, clock())
            for r in rows:
                due[r.id] = (r.due_at, path)

        # A worker takes a task (overdue by 100 s) and holds it without acking.
        released = _row(tenant, MINE, t0 - timedelta(seconds=100))
        await insert([released], "release")
        holder = await engine.open_session(hello("holder", 1))
        await engine.preloader.reconcile(full=True)
        held = await _one(holder)
        assert held.key.id == released.id

        # Another runs one and fails it: it is RETRYING for BACKOFF_S.
        retried = _row(
            tenant,
            MINE,
            t0,
            retry_policy=RetryPolicy(initial_backoff_s=BACKOFF_S, max_backoff_s=BACKOFF_S),
        )
        await insert([retried], "retry")
        failer = await engine.open_session(hello("failer", 1))
        await engine.preloader.reconcile(full=True)
        attempt = await _one(failer)
        assert await failer.ack([attempt]) == ["ok"]
        (outcome,) = await failer.fail(
            [FailureReport(key=attempt.key, token=attempt.token, error="boom")]
        )
        assert outcome == "ok"
        await failer.close()
        retry_due = (await engine.store.get_task(tenant, retried.id)).due_at
        due[retried.id] = (retry_due, "retry")
        assert retry_due >= t0 + timedelta(seconds=BACKOFF_S)

        # 1. The wheel: five tasks due just after the retry; fired within the lead.
        wheel = [
            _row(tenant, MINE, retry_due + timedelta(milliseconds=100 + 20 * i)) for i in range(5)
        ]
        await insert(wheel, "wheel")
        await engine.preloader.reconcile(full=True)
        assert all(engine.in_wheel(r.id) for r in wheel)
        clock.current = retry_due - timedelta(seconds=0.8)
        await waiting(5, "the wheel")

        # 2. The retry: its backoff ends before them, but it is claimed after.
        clock.current = retry_due - timedelta(seconds=0.5)
        await waiting(6, "the retry")

        # 3. A reconcile: rows another node wrote for our shard, a minute overdue.
        reconciled = [_row(tenant, MINE, t0 - timedelta(seconds=60 - i)) for i in range(5)]
        await insert(reconciled, "reconcile")
        await engine.preloader.reconcile(full=True)
        await waiting(11, "the reconcile")

        # 4. A release: the holder closes its stream with the task unacked.
        await holder.close()
        await waiting(12, "the release")

        # 5 and 6. A takeover of shard 1: its old owner indexed three tasks in Redis
        # and committed three older ones it never indexed.
        indexed = [_row(tenant, TAKEN_OVER, t0 - timedelta(seconds=90 - i)) for i in range(3)]
        unindexed = [_row(tenant, TAKEN_OVER, t0 - timedelta(seconds=120 - i)) for i in range(3)]
        await insert(indexed, "takeover index")
        await insert(unindexed, "takeover store check")
        records = [await engine.store.get_task(tenant, r.id) for r in indexed]
        await index.replace(
            TAKEN_OVER,
            [
                Preloaded(
                    key=rec.key,
                    due_at=rec.due_at,
                    tenant_id=rec.tenant_id,
                    shard_id=rec.shard_id,
                    pool=rec.pool,
                    type=rec.type,
                )
                for rec in records
            ],
        )
        await membership.gain(frozenset({TAKEN_OVER}))
        await waiting(18, "the takeover")

        # A worker with room for everything: due order, oldest first.
        clock.current = max(d for d, _ in due.values()) + timedelta(seconds=1)
        drain = await engine.open_session(hello("drain", 50))
        engine.wake()
        got: list[uuid.UUID] = []
        while len(got) < len(due):
            event = await asyncio.wait_for(drain.next_event(), 10)
            assert isinstance(event, AssignmentBatch), event
            got.extend(a.key.id for a in event.assignments)
        order = [due[i] for i in got]
        assert sorted(got) == sorted(due), "every task exactly once"
        assert order == sorted(order), "\n".join(f"{d.isoformat()} {p}" for d, p in order)
        await drain.close()
    finally:
        await engine.stop()
