"""The completer, built alone: a fake store, the real slots ledger and timeline.

Every fenced worker write is group-committed (one store call per kind per flush), and
what follows an accepted write happens here: the slot comes back, released DAG children
enter the timeline, a failure gets its retry time, a release is reloaded. No server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler._aio import Background
from scheduler.engine import EngineConfig
from scheduler.engine._completer import Completer, spread
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._shard_state import ShardState
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline, to_ms
from scheduler.engine._types import FailureReport
from scheduler.states import TaskState
from scheduler.types import (
    JSON,
    CompleteResult,
    Completion,
    FailResult,
    Failure,
    FencedWrite,
    Outcome,
    Pool,
    Preloaded,
    RefusedWrite,
    Release,
    TaskKey,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=7)


# -- fakes and the real neighbours --------------------------------------------------------
class FakeStore:
    """Answers each write with ``outcomes[task_id]`` (default OK) and records the calls.

    ``children`` and ``new_state`` program what a completion releases and where a
    failure goes; ``gate``, when set, holds every call until it is opened.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any], tuple[datetime, ...]]] = []
        self.outcomes: dict[uuid.UUID, Outcome] = {}
        self.children: dict[uuid.UUID, tuple[Preloaded, ...]] = {}
        self.new_state: dict[uuid.UUID, TaskState] = {}
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def _record(self, kind: str, items: Sequence[Any], *times: datetime) -> list[Outcome]:
        self.calls.append((kind, list(items), times))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        return [self.outcomes.get(i.key.id, Outcome.OK) for i in items]

    def sizes(self, kind: str) -> list[int]:
        return [len(items) for k, items, _ in self.calls if k == kind]

    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        return await self._record("ack", writes, lease_expires_at, now)

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        return await self._record("heartbeat", writes, lease_expires_at, now)

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        outcomes = await self._record("complete", items, now)
        return [
            CompleteResult(o, self.children.get(c.key.id, ()) if o is Outcome.OK else ())
            for c, o in zip(items, outcomes, strict=True)
        ]

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        outcomes = await self._record("fail", items, now)
        return [
            FailResult(o, self.new_state.get(f.key.id, TaskState.RETRYING))
            if o is Outcome.OK
            else FailResult(o)
            for f, o in zip(items, outcomes, strict=True)
        ]

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        return await self._record("release", items, now)

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        return await self._record("confirm_cancel", writes, now)

    async def checkpoint(self, key: TaskKey, token: int, data: JSON, now: datetime) -> Outcome:
        (outcome,) = await self._record("checkpoint", [FencedWrite(key=key, token=token)], now)
        return outcome

    async def record_refused(self, refused: Sequence[RefusedWrite]) -> None:
        self.calls.append(("record_refused", list(refused), ()))


class FakeMembership:
    """A single node that owns every shard."""

    node_id = "n"
    shard_count = 256

    def set_listener(self, listener: object) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def owned(self) -> frozenset[int]:
        return frozenset(range(self.shard_count))

    def owns(self, shard: int) -> bool:
        return True


@dataclasses.dataclass
class World:
    """A completer with its store, its real slots and timeline, and what its callables
    saw."""

    completer: Completer
    store: FakeStore
    slots: Slots
    timeline: Timeline
    stats: EngineStats
    freed: list[uuid.UUID]
    wakes: list[int]
    reloads: list[list[Release]]


def build(config: EngineConfig | None = None) -> World:
    config = config or EngineConfig()
    store, stats = FakeStore(), EngineStats()
    freed: list[uuid.UUID] = []
    wakes: list[int] = []
    reloads: list[list[Release]] = []
    slots = Slots(freed.append)
    mirror = IndexMirror(None, config, stats, Background(logging.getLogger("test")), lambda: None)
    shards = ShardState(FakeMembership(), clustered=False)  # type: ignore[arg-type]
    timeline = Timeline(config, shards, mirror, stats, lambda: None, to_ms(T0))

    async def reload(released: Sequence[Release]) -> None:
        reloads.append(list(released))

    completer = Completer(
        store,  # type: ignore[arg-type]
        config,
        lambda: T0,
        stats,
        slots,
        timeline,
        lambda: wakes.append(1),
        reload,
    )
    return World(completer, store, slots, timeline, stats, freed, wakes, reloads)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = build()
    w.completer.start()
    try:
        yield w
    finally:
        await w.completer.stop()


def on_a_worker(w: World, n: int = 1) -> list[Preloaded]:
    """``n`` tasks that hold a worker slot."""
    tasks = [preloaded() for _ in range(n)]
    for t in tasks:
        w.slots.take(t)
    return tasks


def preloaded(at_ms: int = 0) -> Preloaded:
    due = T0 + timedelta(milliseconds=at_ms)
    return Preloaded(
        key=TaskKey(uuid.uuid4(), due),
        due_at=due,
        tenant_id=TENANT,
        shard_id=0,
        pool=Pool.STANDARD,
        type="t",
    )


def write(t: Preloaded, token: int = 1) -> FencedWrite:
    return FencedWrite(key=t.key, token=token)


# -- batching ------------------------------------------------------------------------------
async def test_concurrent_completions_share_store_calls_and_each_caller_gets_its_outcome(
    world: World,
) -> None:
    tasks = on_a_worker(world, 50)
    for t in tasks[::2]:
        world.store.outcomes[t.key.id] = Outcome.STALE
    world.store.gate = asyncio.Event()
    first = asyncio.create_task(world.completer.complete([Completion(key=tasks[0].key, token=1)]))
    await world.store.entered.wait()  # the first flush is in the store
    rest = [
        asyncio.create_task(world.completer.complete([Completion(key=t.key, token=1)]))
        for t in tasks[1:]
    ]
    await asyncio.sleep(0)  # every other caller queues behind the flush in flight
    world.store.gate.set()
    results = await asyncio.gather(first, *rest)
    # Everything that piled up while the first flush ran went in the next one.
    assert world.store.sizes("complete") == [1, 49]
    assert results == [[Outcome.STALE if i % 2 == 0 else Outcome.OK] for i in range(len(tasks))]


async def test_a_flush_takes_at_most_max_batch_writes() -> None:
    w = build(EngineConfig(max_batch=10))
    w.completer.start()
    try:
        w.store.gate = asyncio.Event()
        first = asyncio.create_task(w.completer.heartbeat([write(preloaded())]))
        await w.store.entered.wait()
        rest = [asyncio.create_task(w.completer.heartbeat([write(preloaded())])) for _ in range(25)]
        await asyncio.sleep(0)
        w.store.gate.set()
        outcomes = await asyncio.gather(first, *rest)
    finally:
        await w.completer.stop()
    assert w.store.sizes("heartbeat") == [1, 10, 10, 5]
    assert outcomes == [[Outcome.OK]] * 26


async def test_ack_and_heartbeat_set_the_lease_a_ttl_from_now(world: World) -> None:
    t = preloaded()
    assert await world.completer.ack([write(t)]) == [Outcome.OK]
    assert await world.completer.heartbeat([write(t)]) == [Outcome.OK]
    lease = T0 + timedelta(seconds=EngineConfig().lease_ttl_s)
    assert [(kind, times) for kind, _, times in world.store.calls] == [
        ("ack", (lease, T0)),
        ("heartbeat", (lease, T0)),
    ]
    assert len(world.slots) == 0  # an ack or a heartbeat frees nothing
    assert world.freed == []


async def test_an_ack_answered_before_its_write_and_refused_is_counted_and_recorded(
    world: World,
) -> None:
    ok, stale = preloaded(), preloaded()
    world.store.outcomes[stale.key.id] = Outcome.STALE
    fut = world.completer.ack_later([write(ok), write(stale, token=3)], "worker-1")
    assert await fut == [Outcome.OK, Outcome.STALE]
    for _ in range(3):  # the done callback, then the recording task
        await asyncio.sleep(0)
    assert world.stats.stale_writes == 1
    (recorded,) = [items for kind, items, _ in world.store.calls if kind == "record_refused"]
    assert [(r.key, r.token, r.actor, r.write) for r in recorded] == [
        (stale.key, 3, "worker-1", "ack")
    ]


async def test_an_ack_without_an_actor_leaves_its_refusal_to_the_caller(world: World) -> None:
    t = preloaded()
    world.store.outcomes[t.key.id] = Outcome.STALE
    assert await world.completer.ack([write(t)]) == [Outcome.STALE]
    await asyncio.sleep(0)
    assert world.stats.stale_writes == 0
    assert [kind for kind, _, _ in world.store.calls] == ["ack"]


async def test_a_checkpoint_goes_straight_to_the_store(world: World) -> None:
    t = preloaded()
    world.store.outcomes[t.key.id] = Outcome.STALE
    assert await world.completer.checkpoint(t.key, 3, {"step": 2}) == Outcome.STALE
    assert world.store.calls == [("checkpoint", [FencedWrite(key=t.key, token=3)], (T0,))]


# -- completions -----------------------------------------------------------------------------
async def test_an_accepted_completion_frees_the_slot_and_a_stale_one_does_not(
    world: World,
) -> None:
    accepted, stale = on_a_worker(world, 2)
    world.store.outcomes[stale.key.id] = Outcome.STALE
    outcomes = await world.completer.complete(
        [Completion(key=accepted.key, token=1), Completion(key=stale.key, token=1)]
    )
    assert outcomes == [Outcome.OK, Outcome.STALE]
    assert world.freed == [accepted.key.id]
    assert len(world.slots) == 1  # the zombie's write leaves the current holder's slot
    assert world.stats.completed == 1


async def test_ready_children_of_a_completion_go_into_the_timeline(world: World) -> None:
    (parent,) = on_a_worker(world)
    children = (preloaded(100), preloaded(200))
    world.store.children[parent.key.id] = children
    assert await world.completer.complete([Completion(key=parent.key, token=1)]) == [Outcome.OK]
    assert all(c.key.id in world.timeline for c in children)
    assert len(world.timeline) == 2
    assert world.timeline.next_due_ms() == to_ms(children[0].due_at)


# -- failures --------------------------------------------------------------------------------
def test_retry_at_backs_off_exponentially_with_at_most_a_quarter_more() -> None:
    config = EngineConfig(retry_base_s=1.0, retry_max_s=300.0)
    completer = build(config).completer
    key = TaskKey(uuid.UUID(int=42), T0)
    for attempt in range(1, 9):
        delay = (completer.retry_at(key, TENANT, attempt) - T0).total_seconds()
        base = 2.0 ** (attempt - 1)
        assert base <= delay <= base * 1.25, (attempt, delay)


def test_retry_at_is_capped_at_retry_max_s() -> None:
    config = EngineConfig(retry_base_s=1.0, retry_max_s=10.0)
    completer = build(config).completer
    for attempt in (5, 6, 20, 100):
        key = TaskKey(uuid.uuid4(), T0)
        delay = (completer.retry_at(key, TENANT, attempt) - T0).total_seconds()
        assert 10.0 <= delay <= 12.5, (attempt, delay)


def test_retry_at_is_deterministic_per_task_and_attempt() -> None:
    one, other = build().completer, build().completer
    keys = [TaskKey(uuid.UUID(int=i), T0) for i in range(1, 21)]
    for key in keys:
        for attempt in (1, 2, 3):
            assert one.retry_at(key, TENANT, attempt) == other.retry_at(key, TENANT, attempt)
    # The jitter spreads tasks out: not every task retries at the same instant.
    assert len({one.retry_at(k, TENANT, 1) for k in keys}) > 1


async def test_a_failure_is_written_with_its_retry_time(world: World) -> None:
    known, unknown = on_a_worker(world, 2)
    await world.completer.fail(
        [
            FailureReport(key=known.key, token=1, error="boom", attempt=3, tenant_id=TENANT),
            FailureReport(key=unknown.key, token=1, error="bad", retryable=False),
        ]
    )
    [(kind, failures, _)] = world.store.calls
    assert kind == "fail"
    assert failures == [
        Failure(
            key=known.key,
            token=1,
            error="boom",
            retryable=True,
            retry_at=world.completer.retry_at(known.key, TENANT, 3),
            spread=spread(known.key, TENANT, 3),
        ),
        # Attempt and tenant unknown: the first attempt of the nil tenant seeds it.
        Failure(
            key=unknown.key,
            token=1,
            error="bad",
            retryable=False,
            retry_at=world.completer.retry_at(unknown.key, uuid.UUID(int=0), 1),
            spread=spread(unknown.key, uuid.UUID(int=0), 1),
        ),
    ]


@pytest.mark.parametrize(
    ("new_state", "wakes"), [(TaskState.RETRYING, []), (TaskState.DEAD_LETTER, [1])]
)
async def test_a_dead_letter_wakes_the_preloader_a_retry_waits_its_backoff(
    world: World, new_state: TaskState, wakes: list[int]
) -> None:
    """A dead letter may release workflow children: the pre-loader runs at once. A retry
    waits out its backoff as RETRYING (issue #15 case 4): no early pass is forced."""
    (t,) = on_a_worker(world)
    world.store.new_state[t.key.id] = new_state
    outcome = await world.completer.fail([FailureReport(key=t.key, token=1, error="x")])
    assert outcome == [Outcome.OK]
    assert world.wakes == wakes
    assert world.freed == [t.key.id]
    assert world.stats.failed == 1


async def test_a_stale_failure_neither_frees_nor_wakes(world: World) -> None:
    (t,) = on_a_worker(world)
    world.store.outcomes[t.key.id] = Outcome.STALE
    outcome = await world.completer.fail([FailureReport(key=t.key, token=1, error="x")])
    assert outcome == [Outcome.STALE]
    assert world.wakes == []
    assert world.freed == []
    assert world.stats.failed == 0


# -- releases ----------------------------------------------------------------------------------
async def test_an_accepted_release_frees_the_slot_and_is_reloaded(world: World) -> None:
    accepted, stale = on_a_worker(world, 2)
    world.store.outcomes[stale.key.id] = Outcome.STALE
    items = [
        Release(key=accepted.key, token=1, checkpoint={"at": 1}),
        Release(key=stale.key, token=1),
    ]
    assert await world.completer.release(items) == [Outcome.OK, Outcome.STALE]
    assert world.freed == [accepted.key.id]
    assert world.reloads == [[items[0]]]
    assert world.wakes == [1]


async def test_a_release_that_is_all_stale_reloads_nothing(world: World) -> None:
    (t,) = on_a_worker(world)
    world.store.outcomes[t.key.id] = Outcome.STALE
    assert await world.completer.release([Release(key=t.key, token=1)]) == [Outcome.STALE]
    assert world.reloads == []
    assert world.wakes == []
    assert world.freed == []


async def test_release_unacked_releases_what_a_closed_session_held(world: World) -> None:
    a, b = on_a_worker(world, 2)
    await world.completer.release_unacked([(a.key, 4), (b.key, 5)])
    gave = [
        Release(key=a.key, token=4, dispatched_only=True),
        Release(key=b.key, token=5, dispatched_only=True),
    ]
    assert world.store.calls[0][:2] == ("release", gave)
    assert sorted(world.freed) == sorted([a.key.id, b.key.id])
    assert world.reloads == [gave]


async def test_release_unacked_after_stop_logs_instead_of_raising(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = build()
    w.completer.start()
    await w.completer.stop()
    (t,) = on_a_worker(w)
    with caplog.at_level(logging.WARNING, logger="tickwheel.engine"):
        await w.completer.release_unacked([(t.key, 1)])
    assert w.store.calls == []
    assert "leases will expire" in caplog.text


# -- cancels ------------------------------------------------------------------------------------
async def test_a_confirmed_cancel_frees_the_slot_and_wakes_the_preloader(world: World) -> None:
    accepted, stale = on_a_worker(world, 2)
    world.store.outcomes[stale.key.id] = Outcome.STALE
    outcomes = await world.completer.confirm_cancel([write(accepted), write(stale)])
    assert outcomes == [Outcome.OK, Outcome.STALE]
    assert world.freed == [accepted.key.id]
    assert world.wakes == [1]
    world.store.outcomes[accepted.key.id] = Outcome.STALE
    await world.completer.confirm_cancel([write(accepted)])
    assert world.wakes == [1]


# -- stale counting and the start/stop contract ---------------------------------------------------
def test_count_stale_counts_every_outcome_that_is_not_ok() -> None:
    w = build()
    w.completer.count_stale([Outcome.OK, Outcome.STALE, Outcome.NOT_FOUND])
    w.completer.count_stale([Outcome.OK])
    w.completer.count_stale([Outcome.STALE])
    assert w.stats.stale_writes == 3


async def test_stop_before_start_and_twice_is_safe() -> None:
    never_started = build().completer
    await never_started.stop()
    await never_started.stop()
    started = build().completer
    started.start()
    await started.stop()
    await started.stop()
    with pytest.raises(RuntimeError):
        await started.ack([write(preloaded())])


async def test_stop_answers_the_writes_already_queued() -> None:
    w = build()
    w.completer.start()
    w.store.gate = asyncio.Event()
    first = asyncio.create_task(w.completer.complete([Completion(key=preloaded().key, token=1)]))
    await w.store.entered.wait()
    queued = asyncio.create_task(w.completer.complete([Completion(key=preloaded().key, token=1)]))
    await asyncio.sleep(0)
    stopping = asyncio.create_task(w.completer.stop())
    await asyncio.sleep(0)
    w.store.gate.set()
    await stopping
    assert await first == [Outcome.OK]
    assert await queued == [Outcome.OK]
    assert w.store.sizes("complete") == [1, 1]
