"""Worker sessions: one per worker stream.

A session owns what its worker holds: the tasks it was given (or took over after a
reconnect) with their tokens, which of them it acked (and when the others were pushed),
their attempt numbers, its credit and whether it is draining or stalled. The registry
(``_registry.Sessions``) owns the set of open sessions and moves a task from one session
to another when its worker reconnects. Sessions call the completer for every fenced
write and the store only to check a task they were not given; they never see the
engine. Called by the transport (``scheduler.server``) through the facade's
``open_session``, by the dispatcher (credit, assignments), delivery (pushes), the reaper
(expired leases, overdue acks) and the engine's cancel.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from scheduler._errors import InvalidArgument, NotFound, TickwheelError
from scheduler.engine._completer import Completer
from scheduler.engine._config import EngineConfig
from scheduler.engine._pacing import Pacer
from scheduler.engine._types import (
    AssignmentBatch,
    BacklogNotice,
    CancelNotice,
    FailureReport,
    Outlet,
    SessionEvent,
    WorkerHello,
)
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    JSON,
    Assignment,
    Completion,
    FencedWrite,
    Outcome,
    RawJSON,
    Release,
    TaskKey,
)

Publish = Callable[[Outlet, Sequence[Assignment]], None]

W = TypeVar("W", FencedWrite, Completion, FailureReport, Release)  # a key and a token


class Registry(Protocol):
    """What a session needs of the registry (``_registry.Sessions``), which imports this
    module: the shared parts, and the hand-over of a task between sessions."""

    store: Store
    config: EngineConfig
    completer: Completer
    wake_dispatcher: Callable[[], None]
    publish: Publish

    def closed(self, session: WorkerSession) -> None: ...
    def hand_over(self, task_id: uuid.UUID, to: WorkerSession) -> None: ...
    def orphaned(self, held: Sequence[tuple[TaskKey, int]]) -> None: ...


OUTLET_WORKER_PREFIX = "outlet:"
"""The worker id of an outlet's session is this prefix and the outlet's name: its tasks
are written by the broker's consumers, shared (SYSTEM-tier) sessions."""

_LEASED = frozenset({TaskState.DISPATCHED, TaskState.RUNNING})
"""States in which a task is held by a worker under a lease."""


class WorkerSession:
    """One worker stream's view of the engine.

    The transport reads :meth:`events` and forwards the worker's writes. Assignments
    are pushed only against credit the worker granted (flow control).
    """

    def __init__(self, registry: Registry, hello: WorkerHello, *, shared: bool = False) -> None:
        self._registry = registry
        self._completer = registry.completer
        self.scope: uuid.UUID | None = None if shared else hello.tenant_id
        """The tenant whose tasks this session runs; None for a shared (SYSTEM-tier)
        worker that runs every tenant's tasks, shared fairly by weight."""
        self.session_id = uuid.uuid4().hex
        self.worker_id = hello.worker_id
        self.tenant_id = hello.tenant_id
        self.task_types: frozenset[str] | None = hello.task_types
        """Types this session runs (None: any, for a broker outlet)."""
        self.pools = hello.pools
        self.outlet: Outlet | None = None
        self.lease_ttl_s = registry.config.lease_ttl_s
        self.heartbeat_interval_s = registry.config.heartbeat_interval_s
        self._credits = self.slots = hello.slots
        """The slots the worker announced in its hello (its concurrency)."""
        self.connected_at = datetime.now(UTC)
        self._connected_mono = self._seen_mono = time.monotonic()
        self.wants_backlog = hello.backlog
        """The worker asked for :class:`BacklogNotice` events (``_backlog.py``)."""
        self.backlog_reported = 0
        """The last waiting figure reported to it, and when (``time.monotonic()``)."""
        self.backlog_reported_at = -math.inf
        self.start_on_delivery = hello.start_on_delivery
        """Dispatches commit RUNNING and count as acked once pushed (see WorkerHello)."""
        self.early_us = min(hello.early_ms, registry.config.push_ahead_ms) * 1000
        """Tasks are pushed this long before due at most, two thirds of it at least
        (``Delivery.hold``); the worker holds them (Hello.early_ms)."""
        self.draining = False
        self._stalled = False
        self.closed = False
        self.ended: TickwheelError | None = None
        """Why the engine asked the transport to end this stream (:meth:`end`)."""
        self._held: dict[uuid.UUID, tuple[TaskKey, int]] = {}
        self._attempts: dict[uuid.UUID, int] = {}
        self._acked: set[uuid.UUID] = set()
        """Held tasks the worker acknowledged (or, starting on delivery, was pushed)."""
        self._queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        self._early_acks = registry.config.ack_linger_ms > 0
        """Acks of held tasks are answered before their write (see :meth:`ack`)."""
        self._answer_by: dict[uuid.UUID, datetime] = {}
        """Until when an ack of a task given here may be answered before its write: its
        dispatch lease (``EngineConfig.dispatch_lease_s``) less the ack linger and a
        second, so the write lands before the lease can lapse and the reaper take the
        task back. Later acks are answered once written."""
        self._ack_margin = timedelta(seconds=1.0 + registry.config.ack_linger_ms / 1000)
        self._pacer = Pacer(lambda batch: self._push(AssignmentBatch(batch)), self.early_us)
        """Pushes to an ack-first worker, paced (``_pacing.Pacer``): fewer when ahead."""
        self._unwritten: set[uuid.UUID] = set()
        """Adopted DISPATCHED tasks (see :meth:`_own`) whose completion carries the ack."""
        self._pushed_at: dict[uuid.UUID, float] = {}
        """Tasks pushed to an ack-first worker and not acked: when (``time.monotonic``),
        oldest first, for :meth:`overdue`. Acked ones leave at once, so no task's objects
        outlive it here (5 s of tasks were 170,000 objects for the collector, issue 41)."""

    # -- what the transport reads -------------------------------------------------
    async def events(self) -> AsyncIterator[SessionEvent]:
        """Assignment batches and cancel notices; ends when the session closes."""
        while True:
            event = await self.next_event()
            if event is None:
                return
            yield event

    async def next_event(self) -> SessionEvent | None:
        """The next event, or None once the session is closed. Cancel-safe."""
        if self.closed and self._queue.empty():
            return None
        event = await self._queue.get()
        if event is None:
            self._queue.put_nowait(None)  # every later call sees the end too
        return event

    def _push(self, event: SessionEvent) -> None:
        if self.closed:
            return
        if self._pacer and type(event) is not AssignmentBatch:
            self._pacer.flush()  # a cancel notice follows the push of its task
        if self.outlet is None:
            self._queue.put_nowait(event)
            if type(event) is AssignmentBatch and not self.start_on_delivery:
                ids = [a.key.id for a in event.assignments]  # their ack deadline
                self._pushed_at.update(dict.fromkeys(ids, time.monotonic()))
        elif isinstance(event, AssignmentBatch):
            self._registry.publish(self.outlet, event.assignments)
        # A broker worker learns of a cancel when it next writes (see _own).

    # -- what the dispatcher, delivery and the reaper see ------------------------------
    @property
    def credits(self) -> int:
        """Tasks the worker may still be pushed before it grants more."""
        return self._credits

    @property
    def held(self) -> int:
        """Tasks this session holds now (dispatched or running)."""
        return len(self._held)

    def seen(self) -> None:
        """A message arrived from the worker (one monotonic read: cheap per message)."""
        self._seen_mono = time.monotonic()

    @property
    def last_seen(self) -> datetime:
        """When the last message arrived (the hello, before any other)."""
        return self.connected_at + timedelta(seconds=self._seen_mono - self._connected_mono)

    @property
    def stalled(self) -> bool:
        """Tasks pushed to this session expired without an ack: nothing more is pushed
        until it shows life (an ack or a heartbeat), so a frozen worker cannot soak up
        work."""
        return self._stalled

    @property
    def acks_first(self) -> bool:
        """A worker stream that runs a task only once its ack is answered: a dispatch
        to it commits the short lease (``EngineConfig.dispatch_lease_s``)."""
        return not self.start_on_delivery and self.outlet is None

    @property
    def can_take(self) -> bool:
        """Whether the dispatcher may give this session a task now."""
        return self._credits > 0 and not self.draining and not self._stalled

    def take_credit(self) -> None:
        """The dispatcher matched a task to this session."""
        self._credits -= 1

    def return_credit(self, n: int = 1) -> None:
        """A match was undone (or an outlet's task came back)."""
        self._credits += n

    def assigned(self, a: Assignment) -> bool:
        """The dispatch of ``a`` to this session committed; False if the session closed
        while it committed (the caller gives it back with :meth:`give_back`)."""
        if self.closed:
            return False
        self._held[a.key.id] = (a.key, a.fencing_token)
        self._attempts[a.key.id] = a.attempt
        if self._early_acks:
            self._answer_by[a.key.id] = a.lease_expires_at - self._ack_margin
        return True

    async def give_back(self, late: Sequence[Assignment]) -> None:
        """Dispatches that committed after this session closed: nobody will push them,
        so they go back now (as the close gave back what it held) rather than wait out
        a lease no worker knows of."""
        await self._completer.release_unacked(
            [(a.key, a.fencing_token) for a in late], dispatched_only=not self.start_on_delivery
        )

    def deliver(self, batch: tuple[Assignment, ...]) -> None:
        """Push assignments whose due tick has come (to an ack-first worker at the
        pace of :class:`~scheduler.engine._pacing.Pacer`)."""
        if self.start_on_delivery:
            self._push(AssignmentBatch(batch))
            self._acked.update(a.key.id for a in batch)
            return
        if self.outlet is not None:  # a broker's consumers take them, not a stream
            self._push(AssignmentBatch(batch))
            return
        self._pacer.offer(batch)

    def report_backlog(self, waiting: int, at: float) -> None:
        """Tell the worker how much work waits here for it (advisory)."""
        self.backlog_reported = waiting
        self.backlog_reported_at = at
        self._push(BacklogNotice(waiting))

    def notify_cancel(self, key: TaskKey, token: int) -> None:
        """Tell the worker to stop a task it runs."""
        self._push(CancelNotice(key=key, token=token))

    def holding(self, task_id: uuid.UUID) -> tuple[TaskKey, int] | None:
        """The key and token of ``task_id`` if this session holds it."""
        return self._held.get(task_id)

    def overdue(self, cutoff: float) -> list[tuple[TaskKey, int]]:
        """The held tasks pushed at or before ``cutoff`` (``time.monotonic()``) and not
        acked since, with their tokens; let go (the caller gives them back)."""
        pushed, held, acked = self._pushed_at, self._held, self._acked
        old = list(itertools.takewhile(lambda item: item[1] <= cutoff, pushed.items()))
        late = [h for t, _ in old if (h := held.get(t)) is not None and t not in acked]
        for task_id, _ in old:
            pushed.pop(task_id, None)
        for key, _ in late:
            self.let_go(key.id)
        return late

    def let_go(self, task_id: uuid.UUID) -> bool:
        """Forget ``task_id`` (its lease lapsed, or another session took it over);
        whether this session held it."""
        if self._held.pop(task_id, None) is None:
            return False
        self._acked.discard(task_id)
        self._answer_by.pop(task_id, None)
        self._pushed_at.pop(task_id, None)
        self._unwritten.discard(task_id)
        self._attempts.pop(task_id, None)
        return True

    def stall(self) -> None:
        """A task pushed to this worker expired unanswered (streams only)."""
        self._stalled = self.outlet is None

    # -- flow control ------------------------------------------------------------------
    def grant(self, slots: int) -> None:
        """The worker has ``slots`` more free slots."""
        if slots < 0:
            raise InvalidArgument("credit.slots", "must not be negative")
        self._credits += slots
        if slots:
            self._registry.wake_dispatcher()

    def drain(self) -> None:
        """Stop pushing new work to this session (graceful drain, phase one)."""
        self.draining = True

    def end(self, error: TickwheelError) -> None:
        """Ask the transport to end the stream with ``error`` (its tenant is moving):
        nothing more is pushed, the event stream ends, and the transport closes the
        session as for any stream that ends (unacked tasks go back; RUNNING ones keep
        their lease for the worker's reconnect). Writes already read from the stream
        are still answered until then."""
        if self.closed or self.ended is not None:
            return
        self.ended = error
        self.draining = True
        self._queue.put_nowait(None)

    # -- the worker's writes -----------------------------------------------------------
    async def _own(self, writes: Sequence[W]) -> list[Outcome | None]:
        """Which writes this session may make: None for a task it holds, else the
        outcome that refuses the write without touching the store.

        Tasks this session was given are known. Any other task is read from the store
        (scoped to the tenant, so a key of one tenant never touches another's task) and
        adopted only when it was dispatched to this worker id with this token and is
        still leased: the same worker reconnected mid-task on a new stream. A RUNNING
        task is adopted as RUNNING (acked), so this stream's close never gives it back;
        the session that held it before lets it go. Anything else is refused: NOT_FOUND
        for another tenant's or a missing task, STALE for a task of another worker, an
        old token or a task no longer leased.
        """
        held = self._held
        if all(map(held.__contains__, [w.key.id for w in writes])):
            return [None] * len(writes)  # every one given here: the common case, a C loop
        owned: list[Outcome | None] = []
        for w in writes:
            if w.key.id in self._held:
                owned.append(None)
                continue
            # An ack of it answered on another stream of this node is written first, so
            # the read below sees the task as the worker does (RUNNING).
            if self._early_acks:
                await self._completer.acks.written([w.key.id], hurry=True)
            try:
                task = await self._registry.store.get_task(self.scope, w.key.id)
            except NotFound:
                owned.append(Outcome.NOT_FOUND)
                continue
            if (
                not self._may_hold(task.worker_id)
                or task.fencing_token != w.token
                or task.status not in _LEASED
            ):
                owned.append(Outcome.STALE)
                continue
            self._registry.hand_over(w.key.id, self)
            self._held[w.key.id] = (task.key, w.token)
            if task.status is TaskState.RUNNING:
                self._acked.add(w.key.id)
            elif self._early_acks:
                # Its worker may have been answered an ack that was never written (the
                # node that queued it went down): its completion writes the ack too.
                self._unwritten.add(w.key.id)
            owned.append(None)
            if task.cancel_requested:
                # Cancelled while the worker was between streams: tell it now.
                self._push(CancelNotice(key=task.key, token=w.token))
        return owned

    def _may_hold(self, holder: str | None) -> bool:
        """Whether a task dispatched to worker ``holder`` may be adopted: its own, and
        for a shared (SYSTEM-tier) broker consumer, any task an outlet published."""
        return holder == self.worker_id or (
            self.scope is None and holder is not None and holder.startswith(OUTLET_WORKER_PREFIX)
        )

    async def _fenced(
        self,
        writes: Sequence[W],
        run: Callable[[list[W]], Any],
        kind: str,
    ) -> list[Outcome]:
        """``run`` the items (each a ``key`` and a ``token``) this session may write."""
        refused = await self._own(writes)
        if refused.count(None) == len(refused):  # all owned: no merge a task
            out: list[Outcome] = await run(list(writes)) if writes else []
        else:
            mine = [w for w, no in zip(writes, refused, strict=True) if no is None]
            results: list[Outcome] = await run(mine) if mine else []
            it = iter(results)
            out = [next(it) if no is None else no for no in refused]
        self._completer.count_stale(out)
        if Outcome.STALE in out:
            # Refused here (another session's task) or by the store (an old token):
            # either way the task's history shows it.
            await self._completer.record_refused(writes, out, self.worker_id, kind)
        return out

    async def ack(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """DISPATCHED -> RUNNING for each task (fenced).

        An ack of a task this session was given, under the token it was given, is
        answered OK at once and queued for the next ack write (or written by the task's
        completion if that comes first: ``EngineConfig.ack_linger_ms``); the store's
        token and status guard still decides, and a refusal then is counted and
        recorded like any other. Any other ack (a task adopted after a reconnect, an
        unexpected token, one that came close to the end of its dispatch lease) is
        answered once written."""
        if self.ack_at_once(writes):
            return [Outcome.OK] * len(writes)
        self._revive()
        if not self._early_acks:
            return await self._ack_now(writes)
        in_time = self._in_time(self._completer.now())
        early = [w for w in writes if in_time(w)]
        if early:
            known = {w.key.id for w in early}
            rest = [w for w in writes if w.key.id not in known]
            self._ack_later(early)
            by_id = dict(zip((w.key.id for w in rest), await self._ack_now(rest), strict=True))
            return [by_id.get(w.key.id, Outcome.OK) for w in writes]
        return await self._ack_now(writes)

    def ack_at_once(self, writes: Sequence[FencedWrite]) -> bool:
        """Acknowledge ``writes`` from memory if every one names a task this session
        was given, under the token it was given (what :meth:`ack` answers OK at once):
        queue them for the next ack write and return True. Otherwise change nothing
        and return False (the caller takes :meth:`ack`). Synchronous, so the stream's
        reader answers such an ack the moment it arrives."""
        if not self._early_acks or not writes:
            return False
        if not all(map(self._in_time(self._completer.now()), writes)):
            return False
        self._revive()
        self._ack_later(list(writes))
        return True

    def _in_time(self, now: datetime) -> Callable[[FencedWrite], bool]:
        """Whether an ack names a task this session was given, under the token given,
        that may still be answered before its write (``_answer_by``)."""
        held, by = self._held, self._answer_by

        def check(w: FencedWrite) -> bool:
            h = held.get(w.key.id)
            if h is None or h[1] != w.token:
                return False
            until = by.get(w.key.id)
            return until is not None and now < until

        return check

    async def _ack_now(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        out = await self._fenced(writes, self._completer.ack, "ack")
        for w, outcome in zip(writes, out, strict=True):
            if outcome is Outcome.OK:
                self._acked.add(w.key.id)
                self._pushed_at.pop(w.key.id, None)
        return out

    def _ack_later(self, writes: list[FencedWrite]) -> None:
        self._acked.update(w.key.id for w in writes)
        by, pushed = self._answer_by, self._pushed_at
        for w in writes:
            by.pop(w.key.id, None)
            pushed.pop(w.key.id, None)
        written = self._completer.ack_later(writes, self.worker_id)
        written.add_done_callback(lambda fut: self._acks_refused(writes, fut))

    def _acks_refused(self, writes: list[FencedWrite], fut: asyncio.Future[list[Outcome]]) -> None:
        """Acks answered before their write that the store refused are no acks (the
        completer counts and records them)."""
        if not fut.cancelled() and fut.exception() is None:
            for w, o in zip(writes, fut.result(), strict=True):
                if o is not Outcome.OK:
                    self._acked.discard(w.key.id)

    def _revive(self) -> None:
        if self._stalled:
            self._stalled = False
            self._registry.wake_dispatcher()

    async def heartbeat(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """Extend the leases (fenced)."""
        self._revive()
        return await self._fenced(writes, self._completer.heartbeat, "heartbeat")

    async def checkpoint(self, key: TaskKey, token: int, data: JSON | RawJSON) -> Outcome:
        """Store progress for a resume (fenced)."""
        if not isinstance(data, dict | RawJSON):
            raise InvalidArgument("checkpoint.data", "must be a JSON object")

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return [await self._completer.checkpoint(key, token, data)]

        return (await self._fenced([FencedWrite(key=key, token=token)], run, "checkpoint"))[0]

    async def complete(self, items: Sequence[Completion]) -> list[Outcome]:
        """RUNNING -> COMPLETED (fenced)."""
        self._revive()

        async def run(mine: list[Completion]) -> list[Outcome]:
            unwritten = self._unwritten
            if unwritten:  # adopted by _own just now, or before
                now = self._completer.now()
                mine = [
                    dataclasses.replace(c, acked_at=now) if c.key.id in unwritten else c
                    for c in mine
                ]
            return await self._completer.complete(mine)

        out = await self._fenced(items, run, "complete")
        self._forget(items, out)
        return out

    async def fail(self, items: Sequence[FailureReport]) -> list[Outcome]:
        """A failed attempt: RETRYING with backoff, or DEAD_LETTER (fenced)."""
        self._revive()
        by_id = {
            f.key.id: dataclasses.replace(
                f,
                attempt=f.attempt or self._attempts.get(f.key.id, 1),
                tenant_id=self.tenant_id,
            )
            for f in items
        }

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return await self._completer.fail([by_id[w.key.id] for w in mine])

        out = await self._fenced(
            [FencedWrite(key=f.key, token=f.token) for f in items], run, "fail"
        )
        self._forget(items, out)
        return out

    async def release(self, items: Sequence[Release]) -> list[Outcome]:
        """Give tasks back without using an attempt (fenced)."""
        by_id = {r.key.id: r for r in items}

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return await self._completer.release([by_id[w.key.id] for w in mine])

        out = await self._fenced(
            [FencedWrite(key=r.key, token=r.token) for r in items], run, "release"
        )
        self._forget(items, out)
        return out

    async def confirm_cancel(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """The worker stopped cancelled tasks: RUNNING -> CANCELLED (fenced)."""
        out = await self._fenced(writes, self._completer.confirm_cancel, "cancel")
        self._forget(writes, out)
        return out

    def _forget(self, items: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        let_go, gone = self.let_go, Outcome.NOT_FOUND
        for item, outcome in zip(items, outcomes, strict=True):
            if outcome is not gone:
                let_go(item.key.id)

    async def close(self, *, orphaned: bool = False) -> None:
        """End the session; tasks dispatched to it but not acked go back to PRELOADED.

        Safe to call twice. RUNNING tasks keep their lease: the worker may reconnect
        and carry on. If the stream broke on the worker's side (``orphaned``: it
        vanished, froze past the keepalive, or its network went) and the worker does
        not reconnect to take them up within ``EngineConfig.orphan_grace_s``, their
        leases end then (``Sessions.orphaned``); else lease expiry reclaims them. For a
        worker that starts on delivery every pushed task is RUNNING already; only those
        still held for their due tick, never pushed, go back.
        """
        if self.closed:
            return
        self.closed = True
        self._pacer.drop()  # held, never pushed: given back below with the unacked
        self._registry.closed(self)
        self._queue.put_nowait(None)
        unacked = [v for k, v in self._held.items() if k not in self._acked]
        if orphaned and self.outlet is None:
            self._registry.orphaned([v for k, v in self._held.items() if k in self._acked])
        self._held.clear()
        self._answer_by.clear()
        self._pushed_at.clear()
        if unacked and self.outlet is None:  # broker tasks belong to their consumers
            # DISPATCHED-only in the store: a task acked meanwhile on another node's
            # stream of this worker stays RUNNING. Starting on delivery, the unacked
            # tasks were committed RUNNING here and never pushed: those go back too.
            await self._completer.release_unacked(
                unacked, dispatched_only=not self.start_on_delivery
            )
