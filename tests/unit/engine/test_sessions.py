"""Worker sessions and their registry, built alone with a fake completer and store.

A session keeps what its worker holds (tasks, tokens, acks, attempts, credit); every
fenced write goes to the completer, and the store is read only to decide whether a task
the session was not given may be adopted after a reconnect. No server, no engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler import InvalidArgument, NotFound
from scheduler.engine import EngineConfig
from scheduler.engine._registry import Sessions
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._types import (
    AssignmentBatch,
    CancelNotice,
    FailureReport,
    Outlet,
    WorkerHello,
)
from scheduler.jitter import JitterMode
from scheduler.states import TaskState
from scheduler.types import (
    JSON,
    Assignment,
    Completion,
    FencedWrite,
    Outcome,
    Pool,
    Release,
    TaskKey,
    TaskRecord,
)
from tests.support.records import task_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=7)
OTHER_TENANT = uuid.UUID(int=8)


# -- fakes of the neighbours ------------------------------------------------------------
class FakeCompleter:
    """Records every call by kind; answers ``outcomes[task_id]`` (default OK)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []
        self.outcomes: dict[uuid.UUID, Outcome] = {}
        self.released_unacked: list[list[tuple[TaskKey, int]]] = []
        self.dispatched_only: list[bool] = []
        self.counted: list[list[Outcome]] = []
        self.refused: list[tuple[str, str, int, Outcome]] = []
        self.clock = T0

    def now(self) -> datetime:
        return self.clock

    def _answer(self, kind: str, items: Sequence[Any]) -> list[Outcome]:
        self.calls.append((kind, list(items)))
        return [self.outcomes.get(i.key.id, Outcome.OK) for i in items]

    async def ack(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        return self._answer("ack", writes)

    def ack_later(
        self, writes: Sequence[FencedWrite], actor: str | None = None
    ) -> asyncio.Future[list[Outcome]]:
        fut: asyncio.Future[list[Outcome]] = asyncio.get_running_loop().create_future()
        fut.set_result(self._answer("ack", writes))
        return fut

    async def heartbeat(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        return self._answer("heartbeat", writes)

    async def end_leases(self, writes: Sequence[FencedWrite]) -> None:
        self._answer("end_leases", writes)

    async def complete(self, items: Sequence[Completion]) -> list[Outcome]:
        return self._answer("complete", items)

    async def fail(self, items: Sequence[FailureReport]) -> list[Outcome]:
        return self._answer("fail", items)

    async def release(self, items: Sequence[Release]) -> list[Outcome]:
        return self._answer("release", items)

    async def confirm_cancel(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        return self._answer("confirm_cancel", writes)

    async def checkpoint(self, key: TaskKey, token: int, data: JSON) -> Outcome:
        self.calls.append(("checkpoint", [(key, token, data)]))
        return self.outcomes.get(key.id, Outcome.OK)

    async def release_unacked(
        self, held: Sequence[tuple[TaskKey, int]], *, dispatched_only: bool = True
    ) -> None:
        self.released_unacked.append(list(held))
        self.dispatched_only.append(dispatched_only)

    def count_stale(self, outcomes: Sequence[Outcome]) -> None:
        self.counted.append(list(outcomes))

    async def record_refused(
        self, writes: Sequence[FencedWrite], outcomes: Sequence[Outcome], actor: str, write: str
    ) -> None:
        self.refused += [(write, actor, w.token, o) for w, o in zip(writes, outcomes, strict=True)]

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]

    def stale(self) -> int:
        return sum(o is not Outcome.OK for batch in self.counted for o in batch)


class FakeStore:
    """``get_task`` over the records it is given, scoped to a tenant like the real one."""

    def __init__(self) -> None:
        self.tasks: dict[uuid.UUID, TaskRecord] = {}
        self.reads: list[tuple[uuid.UUID | None, uuid.UUID]] = []

    def put(self, record: TaskRecord) -> TaskRecord:
        self.tasks[record.id] = record
        return record

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        self.reads.append((tenant_id, task_id))
        record = self.tasks.get(task_id)
        if record is None or (tenant_id is not None and record.tenant_id != tenant_id):
            raise NotFound("task", str(task_id))
        return record


class FakeOutlet:
    def __init__(self, name: str = "bulk-topic", pool: Pool = Pool.BULK, capacity: int = 3):
        self.name = name
        self.pool = pool
        self.capacity = capacity

    async def publish(self, assignments: Sequence[Assignment]) -> None:  # pragma: no cover
        raise AssertionError("the registry's publish callable is called, not the outlet")


@dataclasses.dataclass
class World:
    """A registry with its fakes and what its callables saw."""

    sessions: Sessions
    completer: FakeCompleter
    store: FakeStore
    wakes: list[int]
    published: list[tuple[Outlet, tuple[Assignment, ...]]]

    def open(
        self,
        worker_id: str = "w",
        *,
        tenant: uuid.UUID = TENANT,
        slots: int = 1,
        shared: bool = False,
        start_on_delivery: bool = False,
    ) -> WorkerSession:
        hello = WorkerHello(
            worker_id=worker_id,
            tenant_id=tenant,
            task_types=frozenset({"t"}),
            slots=slots,
            start_on_delivery=start_on_delivery,
        )
        return self.sessions.open(hello, shared=shared)


@pytest.fixture
def world() -> World:
    completer, store = FakeCompleter(), FakeStore()
    wakes: list[int] = []
    published: list[tuple[Outlet, tuple[Assignment, ...]]] = []
    sessions = Sessions(
        store,  # type: ignore[arg-type]
        EngineConfig(),
        completer,  # type: ignore[arg-type]
        lambda: wakes.append(1),
        lambda outlet, batch: published.append((outlet, tuple(batch))),
    )
    return World(sessions, completer, store, wakes, published)


def assignment(token: int = 1, attempt: int = 1, worker_id: str = "w") -> Assignment:
    return Assignment(
        key=TaskKey(uuid.uuid4(), T0),
        tenant_id=TENANT,
        type="t",
        payload={},
        fencing_token=token,
        attempt=attempt,
        max_retries=3,
        due_at=T0,
        lease_expires_at=T0 + timedelta(seconds=30),
        checkpoint=None,
        trace_context=None,
        pool=Pool.STANDARD,
        worker_id=worker_id,
        timeout_s=0.0,
    )


def record(
    *,
    worker_id: str | None = "w",
    token: int = 5,
    status: TaskState = TaskState.RUNNING,
    tenant: uuid.UUID = TENANT,
    cancel_requested: bool = False,
) -> TaskRecord:
    return task_record(
        tenant_id=tenant,
        type="t",
        payload={},
        scheduled_at=T0,
        due_at=T0,
        idempotency_key="k",
        status=status,
        fencing_token=token,
        shard_id=0,
        strict_timing=True,
        jitter_mode=JitterMode.NONE,
        last_error=None,
        worker_id=worker_id,
        lease_expires_at=T0 + timedelta(seconds=30),
        cancel_requested=cancel_requested,
        created_at=T0,
        updated_at=T0,
    )


def write(a: Assignment | TaskRecord, token: int | None = None) -> FencedWrite:
    """A fenced write on ``a`` with its own token, or ``token``."""
    return FencedWrite(key=a.key, token=a.fencing_token if token is None else token)


# -- credit ------------------------------------------------------------------------------
def test_credit_is_granted_taken_and_gates_can_take(world: World) -> None:
    s = world.open(slots=0)
    assert world.wakes == [1]  # a new session may take work: the dispatcher looks
    assert (s.credits, s.can_take) == (0, False)
    s.grant(2)
    assert (s.credits, s.can_take) == (2, True)
    assert len(world.wakes) == 2
    assert world.sessions.takers() == [s]
    s.grant(0)  # nothing new to offer: no wake
    assert len(world.wakes) == 2
    s.take_credit()
    s.take_credit()
    assert (s.credits, s.can_take) == (0, False)
    assert world.sessions.takers() == []
    s.return_credit()
    assert (s.credits, s.can_take) == (1, True)
    s.drain()  # draining: credit left, but nothing more is pushed
    assert (s.credits, s.can_take) == (1, False)


def test_a_negative_grant_names_the_field_and_changes_nothing(world: World) -> None:
    s = world.open(slots=3)
    wakes = len(world.wakes)
    with pytest.raises(InvalidArgument) as info:
        s.grant(-1)
    assert info.value.field == "credit.slots"
    assert s.credits == 3
    assert len(world.wakes) == wakes


# -- assignments and delivery ------------------------------------------------------------
async def test_assigned_tasks_come_out_of_next_event_when_delivered(world: World) -> None:
    s = world.open(slots=2)
    a, b = assignment(token=3), assignment(token=4)
    s.assigned(a)
    s.assigned(b)
    assert s.holding(a.key.id) == (a.key, 3)
    assert s.holding(b.key.id) == (b.key, 4)
    assert world.sessions.holders(a.key.id) == [s]
    s.deliver((a, b))
    s.notify_cancel(a.key, 3)
    assert await s.next_event() == AssignmentBatch((a, b))
    assert await s.next_event() == CancelNotice(key=a.key, token=3)
    assert world.published == []


async def test_overdue_gives_the_pushed_tasks_not_acked_by_the_cutoff_once(
    early: World,
) -> None:
    s = early.open(slots=3)
    a, b, c = assignment(token=3), assignment(token=4), assignment(token=5)
    for x in (a, b, c):
        s.assigned(x)
    s.deliver((a, b, c))
    assert s.ack_at_once([write(b)])  # acked: never overdue
    s.let_go(c.key.id)  # taken back by other means: not this session's any more
    assert s.overdue(time.monotonic() - 60) == []  # pushed after that cutoff
    assert s.overdue(time.monotonic()) == [(a.key, 3)]
    assert s.holding(a.key.id) is None  # let go: the caller gives it back
    assert s.holding(b.key.id) == (b.key, 4)
    assert s.overdue(time.monotonic()) == []


def _events(s: WorkerSession) -> list[Any]:
    """The session's events waiting now (pushes as their tasks)."""
    out: list[Any] = []
    while not s._queue.empty():
        event = s._queue.get_nowait()
        out.append(event.assignments if isinstance(event, AssignmentBatch) else event)
    return out


def _second_held_back(world: World) -> tuple[WorkerSession, Assignment, Assignment]:
    """An ack-first session pushed ``a``; ``b`` came due within the push interval."""
    s = world.open(slots=2)
    a, b = assignment(), assignment()
    s.assigned(a)
    s.assigned(b)
    s.deliver((a,))
    s.deliver((b,))
    return s, a, b


@pytest.fixture
def long_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """A push interval no test outlasts: what is held back stays held until pushed."""
    monkeypatch.setattr("scheduler.engine._pacing.PUSH_INTERVAL_S", 3600.0)


@pytest.mark.usefixtures("long_interval")
async def test_what_comes_due_within_the_push_interval_joins_the_next_push(
    early: World,
) -> None:
    """One push per interval to an ack-first worker: the first goes at once, what
    comes due within the interval waits for it, and an answer does not cut it short
    (a push's answer is a round trip through both busy loops: docs/benchmarks.md)."""
    s = early.open(slots=5)
    a, b, c = assignment(), assignment(), assignment()
    for x in (a, b, c):
        s.assigned(x)
    s.deliver((a,))
    s.deliver((b,))
    s.deliver((c,))
    assert _events(s) == [(a,)]
    assert s.ack_at_once([write(a)])  # the stream's reader answers it as it comes
    assert _events(s) == []


async def test_a_held_back_push_goes_when_its_interval_is_over(
    early: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scheduler.engine._pacing.PUSH_INTERVAL_S", 0.01)
    s = early.open(slots=5)
    a, b, c, d = (assignment() for _ in range(4))
    for x in (a, b, c, d):
        s.assigned(x)
    s.deliver((a,))
    s.deliver((b,))
    s.deliver((c,))
    assert _events(s) == [(a,)]
    await asyncio.sleep(0.05)  # no answer came: the interval alone lets them go
    assert _events(s) == [(b, c)]
    await asyncio.sleep(0.05)  # a quiet spell: the next due task goes at once
    s.deliver((d,))
    assert _events(s) == [(d,)]


async def test_a_worker_that_holds_early_pushes_is_pushed_a_third_of_the_lead_apart(
    early: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pushed ahead of due (``Hello.early_ms``), a push may wait a third of the lead for
    the next and its tasks still arrive ahead: fewer pushes, acks and Results a second
    (``_pacing.EARLY_SHARE``). Without the lead the interval stays the short one."""
    monkeypatch.setattr("scheduler.engine._pacing.PUSH_INTERVAL_S", 0.01)
    early.sessions.config = dataclasses.replace(early.sessions.config, push_ahead_ms=900)
    hello = WorkerHello(
        worker_id="w", tenant_id=TENANT, task_types=frozenset({"t"}), slots=5, early_ms=900
    )
    ahead, plain = early.sessions.open(hello, shared=False), early.open("p", slots=5)
    for s in (ahead, plain):
        a, b = assignment(), assignment()
        s.assigned(a)
        s.assigned(b)
        s.deliver((a,))
        s.deliver((b,))
        assert _events(s) == [(a,)]
    await asyncio.sleep(0.1)  # ten short intervals; a third of 900 ms is 300
    assert len(_events(plain)) == 1
    assert _events(ahead) == []


@pytest.mark.usefixtures("long_interval")
async def test_a_burst_held_back_goes_in_full_pushes_without_waiting(
    early: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scheduler.engine._pacing.PUSH_HOLD_MAX", 3)
    s = early.open(slots=10)
    tasks = [assignment() for _ in range(8)]
    for x in tasks:
        s.assigned(x)
    for x in tasks:
        s.deliver((x,))
    # The first goes; every three held back make a full push at once; the eighth waits
    # for the interval.
    assert _events(s) == [tuple(tasks[:1]), tuple(tasks[1:4]), tuple(tasks[4:7])]
    assert s.ack_at_once([write(tasks[0])])
    assert _events(s) == []


async def test_start_on_delivery_pushes_every_delivery_at_once(world: World) -> None:
    """No interval for a worker that starts on delivery: a push costs it no ack."""
    s = world.open("e", start_on_delivery=True, slots=3)
    a, b = assignment(), assignment()
    s.assigned(a)
    s.assigned(b)
    s.deliver((a,))
    s.deliver((b,))
    assert _events(s) == [(a,), (b,)]


@pytest.mark.usefixtures("long_interval")
async def test_a_cancel_notice_never_overtakes_the_push_of_its_task(early: World) -> None:
    s, a, b = _second_held_back(early)
    s.notify_cancel(b.key, b.fencing_token)
    assert _events(s) == [(a,), (b,), CancelNotice(key=b.key, token=b.fencing_token)]


@pytest.mark.usefixtures("long_interval")
async def test_a_held_back_task_goes_back_on_close_as_unacked(early: World) -> None:
    s, a, b = _second_held_back(early)
    await s.close()
    assert early.completer.released_unacked == [
        [(a.key, a.fencing_token), (b.key, b.fencing_token)]
    ]


async def test_start_on_delivery_counts_pushed_tasks_as_acked(world: World) -> None:
    eager = world.open("e", start_on_delivery=True)
    plain = world.open("p")
    pushed, waiting, other = assignment(), assignment(), assignment()
    eager.assigned(pushed)
    eager.assigned(waiting)  # committed, still held for its due tick
    plain.assigned(other)
    eager.deliver((pushed,))
    plain.deliver((other,))
    await eager.close()
    await plain.close()
    # The eager worker started what it was pushed: only the never-pushed task goes back.
    # The plain worker never acked: what it was pushed goes back.
    assert world.completer.released_unacked == [
        [(waiting.key, waiting.fencing_token)],
        [(other.key, other.fencing_token)],
    ]
    # The eager worker's never-pushed task was committed RUNNING: it may go back from
    # RUNNING; the plain worker's give-back is DISPATCHED-only in the store.
    assert world.completer.dispatched_only == [False, True]


# -- writes for held tasks ----------------------------------------------------------------
async def test_writes_for_held_tasks_go_to_the_completer_without_a_store_read(
    world: World,
) -> None:
    s = world.open(slots=5)
    a, b, c, d = (assignment(token=2) for _ in range(4))
    for x in (a, b, c, d):
        s.assigned(x)
    assert await s.ack([write(a)]) == [Outcome.OK]
    assert await s.heartbeat([write(a)]) == [Outcome.OK]
    assert await s.checkpoint(a.key, 2, {"step": 1}) == Outcome.OK
    done = Completion(key=a.key, token=2, result={"r": 1})
    assert await s.complete([done]) == [Outcome.OK]
    assert await s.release([Release(key=b.key, token=2)]) == [Outcome.OK]
    assert await s.confirm_cancel([write(c)]) == [Outcome.OK]
    assert await s.fail([FailureReport(key=d.key, token=2, error="boom")]) == [Outcome.OK]
    assert world.completer.kinds() == [
        "ack",
        "heartbeat",
        "checkpoint",
        "complete",
        "release",
        "confirm_cancel",
        "fail",
    ]
    assert world.completer.calls[2] == ("checkpoint", [(a.key, 2, {"step": 1})])
    assert world.completer.calls[3] == ("complete", [done])
    assert world.store.reads == []
    # A finished task is no longer this session's: its close gives nothing back.
    assert [s.holding(x.key.id) for x in (a, b, c, d)] == [None] * 4
    await s.close()
    assert world.completer.released_unacked == []


async def test_a_failure_carries_the_attempt_held_and_the_sessions_tenant(world: World) -> None:
    s = world.open()
    a = assignment(attempt=3)
    s.assigned(a)
    await s.fail([FailureReport(key=a.key, token=a.fencing_token, error="boom")])
    [(kind, [report])] = world.completer.calls
    assert kind == "fail"
    assert (report.attempt, report.tenant_id, report.error) == (3, TENANT, "boom")
    # An attempt the worker names wins over the one the session remembers.
    b = assignment(attempt=3)
    s.assigned(b)
    await s.fail([FailureReport(key=b.key, token=b.fencing_token, error="x", attempt=2)])
    assert world.completer.calls[-1][1][0].attempt == 2


async def test_a_checkpoint_must_be_a_json_object(world: World) -> None:
    s = world.open()
    a = assignment()
    s.assigned(a)
    with pytest.raises(InvalidArgument) as info:
        await s.checkpoint(a.key, a.fencing_token, [1, 2])
    assert info.value.field == "checkpoint.data"
    assert world.completer.calls == []


async def test_an_acked_task_is_kept_on_close_and_an_unacked_one_goes_back(
    world: World,
) -> None:
    s = world.open(slots=2)
    acked, unacked = assignment(), assignment()
    s.assigned(acked)
    s.assigned(unacked)
    s.deliver((acked, unacked))
    assert await s.ack([write(acked)]) == [Outcome.OK]
    await s.close()
    assert world.completer.released_unacked == [[(unacked.key, unacked.fencing_token)]]


async def test_a_refused_ack_does_not_count_as_acked(world: World) -> None:
    s = world.open()
    a = assignment()
    s.assigned(a)
    world.completer.outcomes[a.key.id] = Outcome.STALE
    assert await s.ack([write(a)]) == [Outcome.STALE]
    await s.close()
    assert world.completer.released_unacked == [[(a.key, a.fencing_token)]]


@pytest.fixture
def early(world: World) -> World:
    """The world with ``ack_linger_ms`` on: held tasks' acks answered before written."""
    world.sessions.config = EngineConfig(ack_linger_ms=10)
    return world


async def test_an_early_ack_refused_by_its_write_does_not_count_as_acked(early: World) -> None:
    s = early.open()
    a = assignment()
    s.assigned(a)
    early.completer.outcomes[a.key.id] = Outcome.STALE
    # A held task's ack is answered before its write; the store's refusal comes after
    # (the completer counts and records it: test_completer.py).
    assert await s.ack([write(a)]) == [Outcome.OK]
    await asyncio.sleep(0)  # the write's outcome arrives
    await s.close()
    assert early.completer.released_unacked == [[(a.key, a.fencing_token)]]


async def test_an_ack_with_a_token_the_session_did_not_give_waits_for_its_write(
    early: World,
) -> None:
    world = early
    s = world.open()
    a = assignment(token=3)
    s.assigned(a)
    world.completer.outcomes[a.key.id] = Outcome.STALE
    old = FencedWrite(key=a.key, token=2)
    assert await s.ack([old]) == [Outcome.STALE]
    assert world.completer.calls == [("ack", [old])]


# -- ownership: adopting a task this session was not given -----------------------------
async def test_a_reconnected_worker_adopts_its_running_task_as_acked(world: World) -> None:
    task = world.store.put(record(worker_id="w", token=5, status=TaskState.RUNNING))
    s = world.open("w")
    assert await s.heartbeat([write(task)]) == [Outcome.OK]
    assert world.store.reads == [(TENANT, task.id)]
    assert world.completer.calls == [("heartbeat", [write(task)])]
    assert s.holding(task.id) == (task.key, 5)
    # Held now: the next write needs no store read.
    assert await s.complete([Completion(key=task.key, token=5)]) == [Outcome.OK]
    assert world.store.reads == [(TENANT, task.id)]


async def test_an_adopted_running_task_is_not_released_on_close(world: World) -> None:
    task = world.store.put(record(worker_id="w", token=5, status=TaskState.RUNNING))
    s = world.open("w")
    assert await s.heartbeat([write(task)]) == [Outcome.OK]
    await s.close()
    assert world.completer.released_unacked == []


async def test_an_adopted_dispatched_task_is_released_on_close(world: World) -> None:
    task = world.store.put(record(worker_id="w", token=5, status=TaskState.DISPATCHED))
    s = world.open("w")
    assert await s.heartbeat([write(task)]) == [Outcome.OK]
    await s.close()
    assert world.completer.released_unacked == [[(task.key, 5)]]


@pytest.mark.parametrize(
    ("holder", "token", "status"),
    [
        ("other-worker", 5, TaskState.RUNNING),
        (None, 5, TaskState.RUNNING),
        ("w", 4, TaskState.RUNNING),  # an old token: a zombie of an earlier attempt
        ("w", 6, TaskState.RUNNING),
        ("w", 5, TaskState.PRELOADED),  # no longer leased
        ("w", 5, TaskState.RETRYING),
        ("w", 5, TaskState.COMPLETED),
        ("outlet:bulk-topic", 5, TaskState.RUNNING),  # an outlet's, and not shared
    ],
)
async def test_a_task_not_dispatched_to_this_worker_with_this_token_is_stale(
    world: World, holder: str | None, token: int, status: TaskState
) -> None:
    task = world.store.put(record(worker_id=holder, token=5, status=status))
    s = world.open("w")
    assert await s.heartbeat([write(task, token=token)]) == [Outcome.STALE]
    assert await s.ack([write(task, token=token)]) == [Outcome.STALE]
    assert await s.complete([Completion(key=task.key, token=token)]) == [Outcome.STALE]
    assert world.completer.calls == []  # never reaches the completer
    assert world.completer.stale() == 3
    # Each refusal goes to the task's history (the completer keeps only the STALE ones).
    stale = Outcome.STALE
    assert world.completer.refused == [
        ("heartbeat", "w", token, stale),
        ("ack", "w", token, stale),
        ("complete", "w", token, stale),
    ]
    assert s.holding(task.id) is None
    await s.close()
    assert world.completer.released_unacked == []


async def test_another_tenants_task_is_not_found_and_never_reaches_the_completer(
    world: World,
) -> None:
    theirs = world.store.put(record(worker_id="w", tenant=OTHER_TENANT))
    missing = FencedWrite(key=TaskKey(uuid.uuid4(), T0), token=1)
    s = world.open("w")
    assert await s.heartbeat([write(theirs), missing]) == [Outcome.NOT_FOUND] * 2
    assert await s.complete([Completion(key=theirs.key, token=5)]) == [Outcome.NOT_FOUND]
    # The read is scoped to the session's tenant, so another tenant's key finds nothing.
    assert {scope for scope, _ in world.store.reads} == {TENANT}
    assert world.completer.calls == []
    assert world.completer.stale() == 3
    assert s.holding(theirs.id) is None


async def test_a_mixed_batch_keeps_its_order_and_only_held_tasks_reach_the_completer(
    world: World,
) -> None:
    s = world.open("w", slots=2)
    mine = assignment()
    s.assigned(mine)
    stranger = world.store.put(record(worker_id="someone-else"))
    theirs = world.store.put(record(tenant=OTHER_TENANT))
    writes = [write(stranger), write(mine), write(theirs)]
    assert await s.heartbeat(writes) == [Outcome.STALE, Outcome.OK, Outcome.NOT_FOUND]
    assert world.completer.calls == [("heartbeat", [write(mine)])]
    assert world.completer.counted == [[Outcome.STALE, Outcome.OK, Outcome.NOT_FOUND]]


async def test_an_adopted_task_with_a_cancel_pending_is_cancelled_at_once(
    world: World,
) -> None:
    task = world.store.put(record(worker_id="w", token=5, cancel_requested=True))
    s = world.open("w")
    assert await s.heartbeat([write(task)]) == [Outcome.OK]
    assert await s.next_event() == CancelNotice(key=task.key, token=5)


async def test_adoption_hands_the_task_over_so_the_old_session_releases_nothing(
    world: World,
) -> None:
    old = world.open("w")
    a = assignment(token=5)
    old.assigned(a)
    old.deliver((a,))
    # The stream broke before the ack; the worker reconnects on a new stream.
    world.store.put(dataclasses.replace(record(status=TaskState.DISPATCHED), id=a.key.id))
    new = world.open("w")
    assert await new.ack([write(a)]) == [Outcome.OK]
    assert old.holding(a.key.id) is None
    assert world.sessions.holders(a.key.id) == [new]
    await old.close()
    assert world.completer.released_unacked == []
    # Acked on the new stream: its close keeps the lease too.
    await new.close()
    assert world.completer.released_unacked == []


# -- outlets' sessions ---------------------------------------------------------------------
async def test_an_outlet_session_publishes_pushes_instead_of_queueing(world: World) -> None:
    outlet = FakeOutlet()
    s = world.sessions.open_outlet(outlet)
    assert s.worker_id == "outlet:bulk-topic"
    assert (s.credits, s.pools, s.task_types, s.scope) == (3, frozenset({Pool.BULK}), None, None)
    assert world.sessions.streams() == ()
    assert list(world.sessions) == [s]
    a, b = assignment(), assignment()
    s.assigned(a)
    s.assigned(b)
    s.deliver((a, b))
    s.notify_cancel(a.key, a.fencing_token)  # a broker worker learns of it when it writes
    assert world.published == [(outlet, (a, b))]
    await s.close()
    # Nothing was queued, and the broker's tasks belong to their consumers: none released.
    assert await s.next_event() is None
    assert world.completer.released_unacked == []


async def test_an_outlet_session_never_stalls(world: World) -> None:
    s = world.sessions.open_outlet(FakeOutlet())
    a = assignment()
    s.assigned(a)
    world.sessions.expired(a.key.id, requeued=True)
    assert not s.stalled
    assert s.holding(a.key.id) is None


async def test_a_shared_session_adopts_an_outlets_task_and_the_outlet_keeps_its_entry(
    world: World,
) -> None:
    outlet_session = world.sessions.open_outlet(FakeOutlet())
    a = assignment(token=5, worker_id="outlet:bulk-topic")
    outlet_session.assigned(a)
    outlet_session.take_credit()
    outlet_session.deliver((a,))
    world.store.put(dataclasses.replace(record(worker_id="outlet:bulk-topic"), id=a.key.id))
    consumer = world.open("k", shared=True, slots=0)
    assert consumer.scope is None
    assert await consumer.ack([write(a)]) == [Outcome.OK]
    assert world.store.reads == [(None, a.key.id)]  # a shared session reads any tenant
    # The outlet's entry counts the broker's capacity until the task leaves its worker.
    assert outlet_session.holding(a.key.id) == (a.key, 5)
    assert consumer.holding(a.key.id) == (a.key, 5)
    assert outlet_session.credits == 2


async def test_a_tenant_session_may_not_adopt_an_outlets_task(world: World) -> None:
    task = world.store.put(record(worker_id="outlet:bulk-topic"))
    s = world.open("k", shared=False)
    assert await s.ack([write(task)]) == [Outcome.STALE]
    assert world.completer.calls == []


async def test_freed_gives_an_outlet_its_credit_back_once(world: World) -> None:
    outlet_session = world.sessions.open_outlet(FakeOutlet(capacity=2))
    stream = world.open("w")
    a, b = assignment(), assignment()
    outlet_session.assigned(a)
    outlet_session.take_credit()
    stream.assigned(b)
    stream.take_credit()
    assert outlet_session.credits == 1
    world.sessions.freed(a.key.id)
    assert outlet_session.credits == 2
    assert outlet_session.holding(a.key.id) is None
    world.sessions.freed(a.key.id)  # already let go: no second credit
    world.sessions.freed(b.key.id)  # a stream's task: outlets only
    assert outlet_session.credits == 2
    assert (stream.credits, stream.holding(b.key.id)) == (0, (b.key, b.fencing_token))


# -- the reaper's view --------------------------------------------------------------------
async def test_expired_stalls_a_session_whose_task_was_requeued(world: World) -> None:
    s = world.open("w", slots=2)
    a, b = assignment(), assignment()
    s.assigned(a)
    s.assigned(b)
    world.sessions.expired(a.key.id, requeued=True)
    assert s.stalled
    assert not s.can_take
    assert s.holding(a.key.id) is None
    assert world.sessions.takers() == []
    await s.close()  # let go: the expired task is not given back twice
    assert world.completer.released_unacked == [[(b.key, b.fencing_token)]]


@pytest.mark.parametrize("revive", ["heartbeat", "ack"])
async def test_a_heartbeat_or_an_ack_revives_a_stalled_session_and_wakes_the_dispatcher(
    world: World, revive: str
) -> None:
    s = world.open("w", slots=2)
    a, b = assignment(), assignment()
    s.assigned(a)
    s.assigned(b)
    world.sessions.expired(a.key.id, requeued=True)
    assert s.stalled
    wakes = len(world.wakes)
    outcome = await (s.heartbeat if revive == "heartbeat" else s.ack)([write(b)])
    assert outcome == [Outcome.OK]
    assert not s.stalled
    assert s.can_take
    assert len(world.wakes) == wakes + 1
    # Alive already: another write wakes nobody.
    await s.heartbeat([write(b)])
    assert len(world.wakes) == wakes + 1


async def test_an_acked_task_that_expires_lets_go_without_stalling(world: World) -> None:
    s = world.open("w")
    a = assignment()
    s.assigned(a)
    world.sessions.expired(a.key.id, requeued=False)  # RUNNING lapsed: retried, not requeued
    assert s.holding(a.key.id) is None
    assert not s.stalled


async def test_a_start_on_delivery_session_stalls_on_any_expiry(world: World) -> None:
    s = world.open("w", start_on_delivery=True)
    a = assignment()
    s.assigned(a)
    s.deliver((a,))
    world.sessions.expired(a.key.id, requeued=False)
    assert s.stalled


async def test_expired_leaves_a_session_that_does_not_hold_the_task_alone(world: World) -> None:
    s = world.open("w")
    s.assigned(assignment())
    world.sessions.expired(uuid.uuid4(), requeued=True)
    assert not s.stalled


# -- close ---------------------------------------------------------------------------------
async def test_close_twice_is_safe_and_ends_events(world: World) -> None:
    s = world.open("w")
    a = assignment()
    s.assigned(a)
    s.deliver((a,))
    await s.close()
    await s.close()
    assert world.completer.released_unacked == [[(a.key, a.fencing_token)]]
    assert s.closed
    assert list(world.sessions) == []
    # What was queued before the close still comes out, then the stream ends.
    assert [e async for e in s.events()] == [AssignmentBatch((a,))]
    assert await s.next_event() is None
    assert await s.next_event() is None
    # Pushes after the close go nowhere.
    s.deliver((assignment(),))
    assert await s.next_event() is None


async def test_close_wakes_a_reader_waiting_on_events(world: World) -> None:
    s = world.open("w")
    seen: list[object] = []

    async def read() -> None:
        async for event in s.events():
            seen.append(event)

    reader = asyncio.create_task(read(), name="test-reader")
    await asyncio.sleep(0)  # the reader is waiting on an empty queue
    assert not reader.done()
    await s.close()
    await asyncio.wait_for(reader, 5)
    assert seen == []


async def test_close_all_closes_every_session(world: World) -> None:
    stream = world.open("w")
    outlet_session = world.sessions.open_outlet(FakeOutlet())
    await world.sessions.close_all()
    assert stream.closed
    assert outlet_session.closed
    assert list(world.sessions) == []


# -- the dispatch lease and orphans (issue 42) -----------------------------------------
async def test_an_ack_near_the_end_of_its_dispatch_lease_is_answered_once_written(
    early: World,
) -> None:
    """An ack answered before its write must be written before the dispatch lease can
    lapse (the reaper would take the task back under a worker that runs it): past the
    lease less the linger and a second, the answer waits for the write."""
    s = early.open(slots=2)
    a, b = assignment(), assignment()
    a = dataclasses.replace(a, lease_expires_at=T0 + timedelta(seconds=5))
    b = dataclasses.replace(b, lease_expires_at=T0 + timedelta(seconds=5))
    s.assigned(a)
    s.assigned(b)
    early.completer.clock = T0 + timedelta(seconds=3.9)  # 1.01 s before: still early
    assert s.ack_at_once([write(a)])
    early.completer.clock = T0 + timedelta(seconds=4.0)
    assert not s.ack_at_once([write(b)])
    early.completer.outcomes[b.key.id] = Outcome.STALE  # the reaper took it meanwhile
    assert await s.ack([write(b)]) == [Outcome.STALE]


async def test_a_broken_streams_running_tasks_lose_their_lease_after_the_grace(
    world: World,
) -> None:
    world.sessions.config = EngineConfig(orphan_grace_s=0)
    s = world.open(slots=3)
    a, b, c = assignment(), assignment(), assignment()
    for x in (a, b, c):
        s.assigned(x)
    assert await s.ack([write(a), write(b)]) == [Outcome.OK, Outcome.OK]
    await s.close(orphaned=True)
    # The unacked one goes back at once; the running ones wait for the grace.
    assert world.completer.released_unacked == [[(c.key, c.fencing_token)]]
    assert await world.sessions.end_orphans() == 2
    assert sorted(world.completer.calls[-1][1], key=str) == sorted([write(a), write(b)], key=str)
    assert await world.sessions.end_orphans() == 0  # once


async def test_a_worker_that_takes_its_task_up_again_keeps_it(world: World) -> None:
    world.sessions.config = EngineConfig(orphan_grace_s=0)
    s = world.open("w")
    task = world.store.put(record(worker_id="w", token=5))
    a = dataclasses.replace(assignment(token=5), key=task.key)
    s.assigned(a)
    assert await s.ack([write(a)]) == [Outcome.OK]
    await s.close(orphaned=True)
    # The same worker on a new stream heartbeats it (adoption) before the grace ends.
    again = world.open("w")
    assert await again.heartbeat([write(a)]) == [Outcome.OK]
    assert await world.sessions.end_orphans() == 0
    assert all(kind != "end_leases" for kind, _ in world.completer.calls)


async def test_a_stream_the_server_ended_leaves_its_running_tasks_their_lease(
    world: World,
) -> None:
    world.sessions.config = EngineConfig(orphan_grace_s=0)
    s = world.open()
    a = assignment()
    s.assigned(a)
    assert await s.ack([write(a)]) == [Outcome.OK]
    await s.close()  # the server stopping, a tenant move: the worker reconnects
    assert await world.sessions.end_orphans() == 0
