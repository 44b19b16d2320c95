"""A node's side of a tenant's home move, each part alone over fakes: the tenancy's
view of ``tenant_moves`` (who is frozen, gone, arrived; which answer a call gets), the
MoveWatch poll (streams of a stopped tenant ended, a departed tenant's waiting tasks
dropped, dispatch paused), a session ended by the engine, and the client's test of a
TENANT_MOVING answer."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from scheduler._errors import StoreError, TenantMoving
from scheduler.client._channel import _tenant_moving
from scheduler.engine import EngineConfig, WorkerHello
from scheduler.engine._moves import MoveWatch
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.engine._tenancy import Tenancy, hash_secret
from scheduler.server._status import status_of
from scheduler.store.protocol.tenants import MoveState
from scheduler.types import Pool, Preloaded, TaskKey, Tenant
from tests.support.waiting import eventually
from tests.unit.engine.test_sessions import FakeCompleter
from tests.unit.engine.test_tenancy import FakeStore

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()


class MovesStore(FakeStore):
    """The tenancy's fake store, with a ``tenant_moves`` table."""

    def __init__(self) -> None:
        super().__init__()
        self.moves: dict[uuid.UUID, MoveState] = {}

    async def tenant_moves(self) -> dict[uuid.UUID, MoveState]:
        return dict(self.moves)


def tenancy(store: MovesStore) -> Tenancy:
    return Tenancy(store, EngineConfig(region="us"))  # type: ignore[arg-type]


async def test_read_moves_reports_what_stopped_and_what_is_served_again() -> None:
    store = MovesStore()
    t = tenancy(store)
    store.moves = {A: "frozen", B: "arrived"}
    assert await t.read_moves() == ({A}, set())
    assert t.moves == {A: "frozen"}
    assert t.arrived == frozenset({B})
    store.moves = {A: "gone", B: "arrived"}
    assert await t.read_moves() == ({A}, set())  # frozen -> gone is a change too
    store.moves = {A: "arrived"}  # moved back here
    assert await t.read_moves() == (set(), {A})
    assert t.moves == {}


async def test_only_a_frozen_tenant_is_refused_and_the_answer_is_retryable() -> None:
    store = MovesStore()
    t = tenancy(store)
    store.moves = {A: "frozen", B: "gone"}
    await t.read_moves()
    with pytest.raises(TenantMoving) as info:
        t.check_served(A)
    assert info.value.retryable
    assert status_of(info.value).code is grpc.StatusCode.UNAVAILABLE
    t.check_served(B)  # gone: the router forwards it to its new home
    t.check_served(C)  # no move


async def test_a_key_of_another_region_follows_its_tenant_s_move() -> None:
    store = MovesStore()
    t = tenancy(store)
    secrets = {tid: f"tw_eu.{tid.hex}" for tid in (A, B, C)}
    for tid, secret in secrets.items():
        store.keys[hash_secret(secret)] = tid
    store.tenants[B] = Tenant(id=B, name="b", home_region="ap")
    # No move touched this region: nothing is looked up, the key's region decides.
    assert await t.moved_key_home(secrets[A]) is None
    assert store.key_reads == 0
    store.moves = {A: "arrived", B: "gone"}
    await t.read_moves()
    assert await t.moved_key_home(secrets[A]) == "us"  # moved here: served here
    assert await t.moved_key_home(secrets[B]) == "ap"  # moved on: its new home
    assert await t.moved_key_home(secrets[C]) is None  # not moved: the key's region
    store.moves = {A: "frozen", B: "gone"}
    await t.read_moves()
    assert await t.moved_key_home(secrets[A]) == "us"  # arriving: answered here
    # An unknown key is looked up once per auth cache window, not per call.
    reads = store.key_reads
    assert await t.moved_key_home("tw_eu.nope") is None
    assert await t.moved_key_home("tw_eu.nope") is None
    assert store.key_reads == reads + 1


def _preloaded(tenant: uuid.UUID) -> Preloaded:
    return Preloaded(
        key=TaskKey(uuid.uuid4(), T0),
        tenant_id=tenant,
        type="t",
        due_at=T0,
        shard_id=1,
        pool=Pool.STANDARD,
    )


async def test_move_watch_ends_streams_pauses_dispatch_and_drops_a_departed_tenant() -> None:
    store = MovesStore()
    t = tenancy(store)
    config = EngineConfig()
    sessions = Sessions(
        store,  # type: ignore[arg-type]
        config,
        FakeCompleter(),  # type: ignore[arg-type]
        lambda: None,
        lambda outlet, batch: None,
    )

    def hello(tenant: uuid.UUID, worker: str) -> WorkerHello:
        return WorkerHello(worker_id=worker, tenant_id=tenant, task_types=frozenset({"t"}), slots=1)

    a1, a2 = (
        sessions.open(hello(A, "a1"), shared=False),
        sessions.open(hello(A, "a2"), shared=False),
    )
    b1 = sessions.open(hello(B, "b1"), shared=False)
    shared = sessions.open(hello(C, "sys"), shared=True)
    ready = ReadyQueues(lambda _t: 1)
    ready.extend([_preloaded(A), _preloaded(A), _preloaded(B)])
    wakes: list[int] = []
    refreshed: list[frozenset[uuid.UUID]] = []

    async def refresh_rules() -> None:  # what the ready queues hold back while it runs
        refreshed.append(ready.paused)

    watch = MoveWatch(config, t, sessions, ready, lambda: wakes.append(1), refresh_rules)

    store.moves = {A: "frozen"}
    await watch.poll()
    assert ready.paused == frozenset({A})  # the dispatcher grants A nothing
    assert isinstance(a1.ended, TenantMoving)
    assert isinstance(a2.ended, TenantMoving)
    assert b1.ended is None
    assert shared.ended is None  # a shared worker runs every tenant's tasks
    assert await a1.next_event() is None  # the transport ends the stream
    assert len(ready) == 3  # frozen: its tasks wait (the move may be undone)

    store.moves = {A: "gone"}
    await watch.poll()
    assert ready.tenant_counts() == {B: 1}  # its rows live elsewhere now
    assert wakes == []

    assert refreshed == []
    store.moves = {}
    await watch.poll()
    assert ready.paused == frozenset()
    assert wakes == [1]
    # Issue 43: its flow rules (pauses, rate limits) came with it and are read while
    # its tasks are still held.
    assert refreshed == [frozenset({A})]


def _rpc_error(code: grpc.StatusCode, exc: Any) -> grpc.aio.AioRpcError:
    status = status_of(exc)
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*status.trailing_metadata), status.details
    )


def test_the_client_retries_tenant_moving_and_nothing_else() -> None:
    moving = _rpc_error(grpc.StatusCode.UNAVAILABLE, TenantMoving(str(A)))
    assert _tenant_moving(moving)
    other = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "node down"
    )
    assert not _tenant_moving(other)


class BrokenMovesStore(MovesStore):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message
        self.reads = 0

    async def tenant_moves(self) -> dict[uuid.UUID, MoveState]:
        self.reads += 1
        raise StoreError(self.message)


@pytest.mark.parametrize(
    ("message", "dispatches"),
    [
        # No migration 0012: no move can exist, dispatch goes on.
        ('PostgreSQL: UndefinedTableError: relation "tenant_moves" does not exist', True),
        # The store did not answer: a freeze may be missed, so dispatch waits for a read.
        ("PostgreSQL: ConnectionDoesNotExistError: connection was closed", False),
    ],
)
async def test_dispatch_waits_for_the_first_read_of_the_moves(
    message: str, dispatches: bool
) -> None:
    store = BrokenMovesStore(message)
    ready = ReadyQueues(lambda _t: 1)
    config = EngineConfig(move_poll_interval_s=0.01)
    sessions = Sessions(
        store,  # type: ignore[arg-type]
        config,
        FakeCompleter(),  # type: ignore[arg-type]
        lambda: None,
        lambda outlet, batch: None,
    )
    watch = MoveWatch(config, tenancy(store), sessions, ready, lambda: None)
    assert not ready.paused_known.is_set()
    task = asyncio.create_task(watch.run(), name="test-move-watch")
    try:
        await eventually(lambda: asyncio.sleep(0, store.reads), until=lambda n: n >= 3)
        assert ready.paused_known.is_set() is dispatches
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
