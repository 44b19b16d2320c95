"""In a cluster, work one node writes for another node's shards reaches that node's wheel
through a PostgreSQL notice, not at its next pre-load or reconcile.

Two engines share one database and split the shards (even / odd), as two etcd nodes
would. Their pre-load and reconcile intervals are an hour, so only a notice can bring
the other node's tasks in while the test runs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping

import pytest

from scheduler.cluster import ShardListener
from scheduler.engine import (
    AssignmentBatch,
    Engine,
    EngineConfig,
    FailureReport,
    SubmitSpec,
    WorkerHello,
    WorkerSession,
    WorkflowNode,
    WorkflowSpec,
)
from scheduler.store import open_store
from scheduler.store.postgres import WORK_CHANNEL, PostgresStore
from scheduler.types import Completion, FencedWrite, UpstreamPolicy
from tests.support.waiting import eventually

SHARDS = 256
QUIET = EngineConfig(
    preload_interval_s=3600, reconcile_interval_s=3600, full_reconcile_interval_s=3600
)


class FixedShards:
    """A membership that holds a fixed set of shards (what etcd would have handed out)."""

    def __init__(self, node_id: str, shards: frozenset[int]) -> None:
        self._node_id = node_id
        self._shards = shards
        self._owned: frozenset[int] = frozenset()
        self._listener: ShardListener | None = None

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def shard_count(self) -> int:
        return SHARDS

    def set_listener(self, listener: ShardListener | None) -> None:
        self._listener = listener

    async def start(self) -> None:
        if self._listener is not None:
            await self._listener.on_gain(dict.fromkeys(self._shards, 1))
        self._owned = self._shards

    async def stop(self) -> None:
        lost, self._owned = self._owned, frozenset()
        if lost and self._listener is not None:
            await self._listener.on_loss(lost)

    def owned(self) -> frozenset[int]:
        return self._owned

    def owns(self, shard: int) -> bool:
        return shard in self._owned

    def yield_shards(self, on: bool) -> None: ...


EVEN = frozenset(range(0, SHARDS, 2))
ODD = frozenset(range(1, SHARDS, 2))


@pytest.fixture
async def nodes(pg_dsn: str) -> AsyncIterator[tuple[Engine, Engine]]:
    stores = [await open_store(pg_dsn) for _ in range(2)]
    a = Engine(stores[0], QUIET, membership=FixedShards("a", EVEN))
    b = Engine(stores[1], QUIET, membership=FixedShards("b", ODD))
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.stop()
        await b.stop()
        for s in stores:
            await s.close()


async def _collect(session: WorkerSession, into: dict[uuid.UUID, int]) -> None:
    """Record (and ack) every assignment the session is given: task id -> shard."""
    while (event := await session.next_event()) is not None:
        if isinstance(event, AssignmentBatch):
            await session.ack(
                [FencedWrite(key=x.key, token=x.fencing_token) for x in event.assignments]
            )
            for x in event.assignments:
                into[x.key.id] = x.fencing_token


async def _sessions(
    a: Engine, b: Engine, tenant: uuid.UUID, types: frozenset[str]
) -> tuple[WorkerSession, WorkerSession]:
    return (
        await a.open_session(
            WorkerHello(worker_id="wa", tenant_id=tenant, task_types=types, slots=100)
        ),
        await b.open_session(
            WorkerHello(worker_id="wb", tenant_id=tenant, task_types=types, slots=100)
        ),
    )


async def _until(ids: set[uuid.UUID], what: str, *seen: Mapping[uuid.UUID, int]) -> None:
    """Wait until every one of ``ids`` was assigned on one of the ``seen`` nodes."""

    async def missing() -> set[uuid.UUID]:
        return ids.difference(*(s.keys() for s in seen))

    await eventually(missing, until=lambda m: not m, what=what)


async def test_a_task_submitted_through_another_node_reaches_its_owner(
    nodes: tuple[Engine, Engine],
) -> None:
    a, b = nodes
    tenant = (await a.tenancy.create_tenant(name="t")).id
    sa, sb = await _sessions(a, b, tenant, frozenset({"t"}))
    got_a: dict[uuid.UUID, int] = {}
    got_b: dict[uuid.UUID, int] = {}
    readers = [asyncio.create_task(_collect(sa, got_a)), asyncio.create_task(_collect(sb, got_b))]
    try:
        results = await a.submit(
            tenant, [SubmitSpec(type="t", strict_timing=True) for _ in range(20)]
        )
        on_b = {r.task.key.id for r in results if r.task.shard_id in ODD}
        on_a = {r.task.key.id for r in results if r.task.shard_id in EVEN}
        assert on_b, "expected some of 20 tasks on the other node's shards"
        # A's own shards go straight into A's wheel; B's wait SCHEDULED for B, whose
        # pre-loader sleeps for an hour unless A's insert notice wakes it.
        await _until(on_b, "B's tasks at B", got_b)
        await _until(on_a, "A's tasks at A", got_a)
        assert not on_b & got_a.keys()
        assert not on_a & got_b.keys()
    finally:
        await sa.close()
        await sb.close()
        await asyncio.gather(*readers)


@pytest.mark.parametrize("outcome", ["completed", "dead_letter_continue"])
async def test_a_workflow_child_freed_by_another_node_reaches_its_owner(
    nodes: tuple[Engine, Engine], outcome: str
) -> None:
    """A parent that completes releases its child to PRELOADED (the owner re-reads); a
    parent that dead-letters under the continue policy leaves its child SCHEDULED at
    count zero (the owner's pre-loader claims it). Either way the owner hears of it."""
    a, b = nodes
    tenant = (await a.tenancy.create_tenant(name="t")).id
    sa, sb = await _sessions(a, b, tenant, frozenset({"parent", "child"}))
    got_a: dict[uuid.UUID, int] = {}
    got_b: dict[uuid.UUID, int] = {}
    readers = [asyncio.create_task(_collect(sa, got_a)), asyncio.create_task(_collect(sb, got_b))]
    policy = UpstreamPolicy.CONTINUE if outcome == "dead_letter_continue" else UpstreamPolicy.CANCEL
    try:
        flows = [
            await a.workflows.submit(
                tenant,
                WorkflowSpec(
                    nodes=[
                        WorkflowNode(
                            node_id="p",
                            task=SubmitSpec(type="parent", strict_timing=True, max_retries=0),
                        ),
                        WorkflowNode(
                            node_id="c", task=SubmitSpec(type="child", strict_timing=True)
                        ),
                    ],
                    edges=[("p", "c")],
                    on_upstream_failure=policy,
                ),
            )
            for _ in range(20)
        ]
        parents = {f.tasks["p"].key.id: f.tasks["p"] for f in flows}
        children = {f.tasks["c"].key.id: f.tasks["c"] for f in flows}
        crossing = [
            f for f in flows if (f.tasks["p"].shard_id in ODD) != (f.tasks["c"].shard_id in ODD)
        ]
        assert crossing, "expected some of 20 workflows to span both nodes"
        await _until(set(parents), "every parent dispatched", got_a, got_b)
        # Each parent ends on the node that ran it; a child on the other node's shards
        # is freed there, and that node hears of it.
        for session, got in ((sa, got_a), (sb, got_b)):
            mine = [parents[i] for i in got if i in parents]
            if not mine:
                continue
            if outcome == "completed":
                out = await session.complete(
                    [Completion(key=p.key, token=got[p.key.id]) for p in mine]
                )
            else:
                out = await session.fail(
                    [
                        FailureReport(key=p.key, token=got[p.key.id], error="boom", retryable=False)
                        for p in mine
                    ]
                )
            assert out == ["ok"] * len(mine)
        await _until(set(children), "every child dispatched", got_a, got_b)
        for c in children.values():
            owner = got_b if c.shard_id in ODD else got_a
            assert c.key.id in owner
    finally:
        await sa.close()
        await sb.close()
        await asyncio.gather(*readers)


async def test_notices_are_sent_at_commit_and_name_the_shards(pg_dsn: str) -> None:
    """The store side alone: a rolled-back insert says nothing; a committed one names the
    shards of the rows it inserted SCHEDULED."""
    store = await PostgresStore.open(pg_dsn)
    heard: list[tuple[frozenset[int], bool]] = []
    notices = await store.listen_work(lambda shards, reconcile: heard.append((shards, reconcile)))
    assert notices is not None
    engine = Engine(store, QUIET, membership=FixedShards("a", EVEN))
    await engine.start()
    try:
        tenant = (await engine.tenancy.create_tenant(name="t")).id
        results = await engine.submit(
            tenant, [SubmitSpec(type="t", strict_timing=True) for _ in range(20)]
        )
        expected = frozenset(r.task.shard_id for r in results if r.task.shard_id in ODD)
        await eventually(lambda: asyncio.sleep(0, heard), what="a notice")
        assert heard == [(expected, False)]
        assert WORK_CHANNEL == "tickwheel_work"
    finally:
        await notices.close()
        await notices.wait_closed()
        await engine.stop()
        await store.close()
