"""The engine: pre-loader, timing-wheel dispatcher, lease reaper, worker sessions.

Data path (brief §2): submissions are written to the store; the pre-loader claims what
falls due within the look-ahead into PRELOADED and into the timing wheel (tasks
submitted inside the look-ahead go straight in). The dispatcher sleeps until the
wheel's next due time (or a nudge), takes what is due, matches it to worker sessions
with free credit, commits the dispatch for the whole batch in one store call a short
lead *before* the due instant, and hands each assignment to its session at the due
tick (commit ahead, deliver on time: brief §12). Every worker write goes through a
:class:`Batcher`, so a busy tick costs one statement per kind of write.

The store alone decides state: the wheel, the ready queues and the sessions are
in-memory indexes that a restart rebuilds from PRELOADED rows and lease expiry.
"""

from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import dataclasses
import hashlib
import heapq
import itertools
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler._aio import wait_event
from scheduler._errors import InvalidArgument, NotFound, StaleFencingToken, Unauthenticated
from scheduler.cluster import LocalMembership, ShardMembership
from scheduler.engine._batcher import Batcher
from scheduler.engine._canary import Canary
from scheduler.engine._config import EngineConfig
from scheduler.engine._ready import POOL_ORDER, ReadyQueues
from scheduler.engine._schedules import Schedules
from scheduler.engine._types import (
    AssignmentBatch,
    CancelNotice,
    FailureReport,
    Outlet,
    SessionEvent,
    SubmitSpec,
    WorkerHello,
)
from scheduler.engine._workflows import Workflows
from scheduler.ids import uuid7
from scheduler.index import IndexUnavailable, TimeIndex
from scheduler.jitter import JitterMode, jitter_offset_ms, shard_of, stable_hash
from scheduler.quota import LocalQuota, QuotaGate, TenantLimits
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    JSON,
    ApiKey,
    Assignment,
    Completion,
    DispatchRequest,
    Failure,
    FencedWrite,
    InsertResult,
    NewTask,
    Outcome,
    Page,
    Pool,
    Preloaded,
    Release,
    TaskFilter,
    TaskKey,
    TaskRecord,
    Tenant,
)
from scheduler.wheel import TimingWheel

log = logging.getLogger("tickwheel.engine")

OUTLET_WORKER_PREFIX = "outlet:"
"""The worker id of an outlet's session is this prefix and the outlet's name: its tasks
are written by the broker's consumers, shared (SYSTEM-tier) sessions."""

_LEASED = frozenset({TaskState.DISPATCHED, TaskState.RUNNING})
"""States in which a task is held by a worker under a lease."""

MAX_TYPE_LEN = 64
MAX_IDEMPOTENCY_KEY_LEN = 128
MAX_RETRIES_LIMIT = 100
#: Tasks a submit handles between two yields to the event loop.
SUBMIT_SLICE = 200


_check_json = json.JSONEncoder(allow_nan=False).encode
"""One encoder for every payload check (``json.dumps`` with an option builds a new
encoder per call)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _to_ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


def hash_secret(secret: str) -> bytes:
    """API keys are stored as SHA-256 digests; a leaked table leaks no key."""
    return hashlib.sha256(secret.encode()).digest()


@dataclasses.dataclass(slots=True)
class EngineStats:
    """Counters and a bounded sample of dispatch lateness, for metrics and the demo."""

    submitted: int = 0
    preloaded: int = 0
    dispatched: int = 0
    dispatch_rounds: int = 0
    """Dispatch commits (``dispatched / dispatch_rounds`` is the mean batch)."""
    delivered: int = 0
    completed: int = 0
    failed: int = 0
    stale_writes: int = 0
    spilled: int = 0
    """Tasks kept in the Redis index instead of the wheel (over its memory cap)."""
    reclaimed: int = 0
    schedule_fired: int = 0
    """Schedule occurrences turned into tasks."""
    canary_lag_ms: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=1000), repr=False
    )
    """Canary dispatch lag (dispatched - scheduled), most recent last."""
    lateness_ms: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=200_000), repr=False
    )
    pool_wait_ms: dict[Pool, collections.deque[float]] = dataclasses.field(
        default_factory=lambda: {p: collections.deque(maxlen=100_000) for p in POOL_ORDER},
        repr=False,
    )
    """Per pool: time from due to dispatch commit (waiting for a slot)."""

    def lateness_percentile(self, q: float) -> float | None:
        """The q-quantile (0..1) of recorded dispatch lateness in ms."""
        if not self.lateness_ms:
            return None
        ordered = sorted(self.lateness_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclasses.dataclass(frozen=True, slots=True)
class PoolMetrics:
    """A pool's state for metrics (brief §8)."""

    depth: int
    """Due tasks waiting for a slot."""
    wait_p50_ms: float | None
    wait_p99_ms: float | None
    slots_used: int
    """Tasks of this pool on workers now (this node)."""
    slots_reserved: int
    slots_max: int | None


class WorkerSession:
    """One worker stream's view of the engine.

    The transport reads :meth:`events` and forwards the worker's writes. Assignments
    are pushed only against credit the worker granted (flow control).
    """

    def __init__(self, engine: Engine, hello: WorkerHello, *, shared: bool = False) -> None:
        self._engine = engine
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
        self.lease_ttl_s = engine.config.lease_ttl_s
        self.heartbeat_interval_s = engine.config.heartbeat_interval_s
        self.credits = hello.slots
        self.start_on_delivery = hello.start_on_delivery
        """Dispatches commit RUNNING and count as acked once pushed (see WorkerHello)."""
        self.draining = False
        self.stalled = False
        """Tasks pushed to this session expired without an ack: push nothing more until
        it shows life (an ack or a heartbeat), so a frozen worker cannot soak up work."""
        self.closed = False
        self.held: dict[uuid.UUID, tuple[TaskKey, int]] = {}
        self.attempts: dict[uuid.UUID, int] = {}
        self.acked: set[uuid.UUID] = set()
        """Held tasks the worker acknowledged (or, starting on delivery, was pushed)."""
        self._queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()

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
        if self.outlet is None:
            self._queue.put_nowait(event)
        elif isinstance(event, AssignmentBatch):
            self._engine._publish(self.outlet, event.assignments)
        # A broker worker learns of a cancel when it next writes (see _own).

    # -- flow control ------------------------------------------------------------------
    def grant(self, slots: int) -> None:
        """The worker has ``slots`` more free slots."""
        if slots < 0:
            raise InvalidArgument("credit.slots", "must not be negative")
        self.credits += slots
        if slots:
            self._engine._wake_dispatcher()

    def drain(self) -> None:
        """Stop pushing new work to this session (graceful drain, phase one)."""
        self.draining = True

    # -- the worker's writes -----------------------------------------------------------
    async def _own(self, writes: Sequence[FencedWrite]) -> list[Outcome | None]:
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
        owned: list[Outcome | None] = []
        for w in writes:
            if w.key.id in self.held:
                owned.append(None)
                continue
            try:
                task = await self._engine.store.get_task(self.scope, w.key.id)
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
            self._engine._hand_over(w.key.id, self)
            self.held[w.key.id] = (task.key, w.token)
            if task.status is TaskState.RUNNING:
                self.acked.add(w.key.id)
            owned.append(None)
            if task.cancel_requested:
                # Cancelled while the worker was between streams: tell it now.
                self._push(CancelNotice(key=task.key, token=w.token))
        return owned

    async def _fenced(
        self,
        writes: Sequence[FencedWrite],
        run: Callable[[list[FencedWrite]], Any],
    ) -> list[Outcome]:
        refused = await self._own(writes)
        mine = [w for w, no in zip(writes, refused, strict=True) if no is None]
        results: list[Outcome] = await run(mine) if mine else []
        it = iter(results)
        out = [next(it) if no is None else no for no in refused]
        self._engine._count_stale(out)
        return out

    async def ack(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """DISPATCHED -> RUNNING for each task (fenced)."""
        self._revive()
        out = await self._fenced(writes, self._engine._acks.submit_many)
        for w, outcome in zip(writes, out, strict=True):
            if outcome is Outcome.OK:
                self.acked.add(w.key.id)
        return out

    def _revive(self) -> None:
        if self.stalled:
            self.stalled = False
            self._engine._wake_dispatcher()

    async def heartbeat(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """Extend the leases (fenced)."""
        self._revive()
        return await self._fenced(writes, self._engine._heartbeats.submit_many)

    async def checkpoint(self, key: TaskKey, token: int, data: JSON) -> Outcome:
        """Store progress for a resume (fenced)."""
        if not isinstance(data, dict):
            raise InvalidArgument("checkpoint.data", "must be a JSON object")

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return [await self._engine.store.checkpoint(key, token, data, self._engine.now())]

        return (await self._fenced([FencedWrite(key=key, token=token)], run))[0]

    async def complete(self, items: Sequence[Completion]) -> list[Outcome]:
        """RUNNING -> COMPLETED (fenced)."""
        self._revive()
        by_id = {c.key.id: c for c in items}

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return await self._engine._complete_many([by_id[w.key.id] for w in mine])

        out = await self._fenced([FencedWrite(key=c.key, token=c.token) for c in items], run)
        self._forget(items, out)
        return out

    async def fail(self, items: Sequence[FailureReport]) -> list[Outcome]:
        """A failed attempt: RETRYING with backoff, or DEAD_LETTER (fenced)."""
        self._revive()
        by_id = {
            f.key.id: dataclasses.replace(
                f,
                attempt=f.attempt or self.attempts.get(f.key.id, 1),
                tenant_id=self.tenant_id,
            )
            for f in items
        }

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return await self._engine._fail_many([by_id[w.key.id] for w in mine])

        out = await self._fenced([FencedWrite(key=f.key, token=f.token) for f in items], run)
        self._forget(items, out)
        return out

    async def release(self, items: Sequence[Release]) -> list[Outcome]:
        """Give tasks back without using an attempt (fenced)."""
        by_id = {r.key.id: r for r in items}

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            return await self._engine._release_many([by_id[w.key.id] for w in mine])

        out = await self._fenced([FencedWrite(key=r.key, token=r.token) for r in items], run)
        self._forget(items, out)
        return out

    async def confirm_cancel(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """The worker stopped cancelled tasks: RUNNING -> CANCELLED (fenced)."""

        async def run(mine: list[FencedWrite]) -> list[Outcome]:
            outcomes = await self._engine.store.confirm_cancel(mine, self._engine.now())
            self._engine._free_ok(mine, outcomes)
            if any(o is Outcome.OK for o in outcomes):
                # The store applied the upstream policy: wake the pre-loader for any
                # children now at zero (policy continue).
                self._engine._preload_wake.set()
            return outcomes

        out = await self._fenced(writes, run)
        self._forget(writes, out)
        return out

    def _may_hold(self, holder: str | None) -> bool:
        """Whether a task dispatched to worker ``holder`` may be adopted: its own, and
        for a shared (SYSTEM-tier) broker consumer, any task an outlet published."""
        return holder == self.worker_id or (
            self.scope is None and holder is not None and holder.startswith(OUTLET_WORKER_PREFIX)
        )

    def _forget(self, items: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        for item, outcome in zip(items, outcomes, strict=True):
            if outcome is not Outcome.NOT_FOUND:
                self.held.pop(item.key.id, None)
                self.attempts.pop(item.key.id, None)
                self.acked.discard(item.key.id)

    async def close(self) -> None:
        """End the session; tasks dispatched to it but not acked go back to PRELOADED.

        Safe to call twice. RUNNING tasks keep their lease: the worker may reconnect
        and carry on; if it does not, lease expiry reclaims them. For a worker that
        starts on delivery every pushed task is RUNNING already; only those still held
        for their due tick, never pushed, go back.
        """
        if self.closed:
            return
        self.closed = True
        self._engine._sessions.pop(self.session_id, None)
        self._queue.put_nowait(None)
        unacked = [v for k, v in self.held.items() if k not in self.acked]
        self.held.clear()
        if unacked and self.outlet is None:  # broker tasks belong to their consumers
            await self._engine._release_unacked(unacked)


class Engine:
    """The scheduler core for one node.

    ``clock`` returns the current time (timezone-aware); tests pass a fake clock to
    move time without sleeping and call :meth:`wake` after moving it.
    """

    def __init__(
        self,
        store: Store,
        config: EngineConfig | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
        node_id: str = "local",
        quota: QuotaGate | None = None,
        outlets: Sequence[Outlet] = (),
        membership: ShardMembership | None = None,
        index: TimeIndex | None = None,
    ) -> None:
        self.store = store
        self.quota: QuotaGate = quota or LocalQuota()
        self._outlets = tuple(outlets)
        self._outlet_pools = frozenset(o.pool for o in self._outlets)
        if len(self._outlet_pools) != len(self._outlets):
            raise ValueError("at most one outlet per pool")
        self._outlet_sessions: list[WorkerSession] = []
        self._publishing: set[asyncio.Task[None]] = set()
        self.config = config or EngineConfig()
        # Shards (brief §7): which this node serves, and its epoch for each. Without a
        # cluster membership the node owns every shard (single node, embedded).
        self.membership: ShardMembership = membership or LocalMembership(
            self.config.shard_count, node_id=node_id
        )
        self._clustered = membership is not None
        self._reconcile_at = 0.0
        self._reconciled_from: datetime | None = None  # start of the last reconcile
        self._full_reconcile_at = 0.0
        self._gaining: frozenset[int] = frozenset()
        self._spilled: set[int] = set()
        # Index removals waiting for the next pipelined flush (``_index_remove``).
        self._index_removals: collections.defaultdict[int, set[uuid.UUID]] = (
            collections.defaultdict(set)
        )
        self._index_flushing = False
        self._rebuilding: set[int] = set()
        self._epochs: dict[int, int] = {}
        self.index = index
        self._background: set[asyncio.Task[None]] = set()
        self.now = clock or _utcnow
        self.node_id = node_id
        self.stats = EngineStats()
        self._wheel = TimingWheel(tick_ms=self.config.tick_ms, start_ms=self._now_ms())
        self._ids = itertools.count(1)
        self._entries: dict[int, Preloaded] = {}
        self._wheel_key: dict[uuid.UUID, int] = {}
        # Due tasks waiting for a session with credit, per (tenant, type).
        self._weights: dict[uuid.UUID, int] = {}
        self._limits: dict[uuid.UUID, TenantLimits] = {}
        self._finished: collections.Counter[uuid.UUID] = collections.Counter()
        self._throttled_until = 0.0
        self._tenants_fresh_until = 0.0
        self._auth_cache: dict[bytes, tuple[uuid.UUID, float]] = {}
        self._rr = 0
        self._ready = ReadyQueues(self._weight)
        # Tasks handed to workers and not yet back, and how many per pool (brief §8).
        self._inflight: dict[uuid.UUID, tuple[Pool, uuid.UUID]] = {}
        self._inflight_by_pool: dict[Pool, int] = dict.fromkeys(POOL_ORDER, 0)
        # Committed dispatches waiting for their due tick: (due_ms, seq, session, assignment)
        self._held: list[tuple[int, int, WorkerSession, Assignment]] = []
        self._cancel_on_delivery: set[uuid.UUID] = set()
        self._held_seq = itertools.count()
        self._sessions: dict[str, WorkerSession] = {}
        self._dispatch_wake = asyncio.Event()
        self._deliver_wake = asyncio.Event()
        self._commit_ms: collections.deque[float] = collections.deque(maxlen=32)
        self._preload_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopping = False
        mb = self.config.max_batch
        self._acks: Batcher[FencedWrite, Outcome] = Batcher("ack", self._flush_acks, max_batch=mb)
        self._heartbeats: Batcher[FencedWrite, Outcome] = Batcher(
            "heartbeat", self._flush_heartbeats, max_batch=mb
        )
        self._completions: Batcher[Completion, Outcome] = Batcher(
            "complete", self._flush_completions, max_batch=mb
        )
        self._failures: Batcher[FailureReport, Outcome] = Batcher(
            "fail", self._flush_failures, max_batch=mb
        )
        self._releases: Batcher[Release, Outcome] = Batcher(
            "release", self._flush_releases, max_batch=mb
        )
        self._batchers: list[Batcher[Any, Any]] = [
            self._acks,
            self._heartbeats,
            self._completions,
            self._failures,
            self._releases,
        ]
        self.workflows = Workflows(self)
        self.schedules = Schedules(self)
        self.canary = Canary(self)

    # ------------------------------------------------------------------ lifecycle
    def _now_ms(self) -> int:
        return _to_ms(self.now())

    async def start(self) -> None:
        """Recover PRELOADED tasks into the wheel, then start the background loops."""
        if self._started:
            return
        self._started = True
        self._wheel.clear()
        self._wheel = TimingWheel(tick_ms=self.config.tick_ms, start_ms=self._now_ms())
        for batcher in self._batchers:
            batcher.start()
        # Gains load each shard's PRELOADED tasks into the wheel (on_gain); without a
        # cluster that is every shard, at once.
        self.membership.set_listener(self)
        await self.membership.start()
        for outlet in self._outlets:
            session = WorkerSession(
                self,
                WorkerHello(
                    worker_id=f"{OUTLET_WORKER_PREFIX}{outlet.name}",
                    tenant_id=uuid.UUID(int=0),
                    task_types=frozenset(),
                    pools=frozenset({outlet.pool}),
                    slots=outlet.capacity,
                ),
                shared=True,
            )
            session.task_types = None
            session.outlet = outlet
            self._sessions[session.session_id] = session
            self._outlet_sessions.append(session)
        self._tasks = [
            asyncio.create_task(self._dispatch_loop(), name="tickwheel-dispatcher"),
            asyncio.create_task(self._deliver_loop(), name="tickwheel-deliverer"),
            asyncio.create_task(self._preload_loop(), name="tickwheel-preloader"),
            asyncio.create_task(self.schedules.run(), name="tickwheel-schedules"),
        ]
        if self._clustered:
            self._tasks.append(asyncio.create_task(self._notice_loop(), name="tickwheel-notices"))
        if self.config.canary_interval_s > 0:
            await self.canary.start()

    async def stop(self) -> None:
        """Stop the loops and close every session; safe twice or before start."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        await self.canary.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._publishing:
            await asyncio.gather(*self._publishing, return_exceptions=True)
        for session in list(self._sessions.values()):
            await session.close()
        self._outlet_sessions.clear()
        for batcher in self._batchers:
            await batcher.stop()
        # Gives the shards up (an etcd node revokes its lease: others take over at once).
        await self.membership.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._started = False
        self._stopping = False

    def wake(self) -> None:
        """Re-examine the wheel and the store now (after a fake clock moved)."""
        self._wake_dispatcher()
        self._preload_wake.set()

    def _wake_dispatcher(self) -> None:
        self._dispatch_wake.set()

    # ------------------------------------------------------------------ probes
    # What the node holds in memory, for metrics, the CLI and tests (read-only).
    @property
    def timers(self) -> int:
        """Tasks waiting in this node's timing wheel for their due tick."""
        return len(self._wheel)

    def in_wheel(self, task_id: uuid.UUID) -> bool:
        """Whether ``task_id`` waits in this node's timing wheel."""
        return task_id in self._wheel_key

    @property
    def shards_rebuilding(self) -> int:
        """Shards whose Redis index is being rebuilt from the store right now."""
        return len(self._rebuilding)

    def sessions(self) -> tuple[WorkerSession, ...]:
        """The open worker streams (outlets' built-in sessions excluded)."""
        return tuple(s for s in self._sessions.values() if s.outlet is None)

    async def reconcile(self, *, full: bool = False) -> None:
        """Run a reconcile pass now (``full``: every PRELOADED row of the owned shards,
        not only those changed since the last pass)."""
        if full:
            self._full_reconcile_at = 0.0
        await self._reconcile()

    # ------------------------------------------------------------------ shards
    def _shard_filter(self) -> list[int] | None:
        """The shards to pre-load and reap: None for all (no cluster)."""
        return None if not self._clustered else sorted(self.membership.owned())

    async def on_gain(self, shards: Mapping[int, int]) -> None:
        """This node now serves ``shards``: raise their epochs, then load them.

        Called by the membership before the shards count as owned. The epoch rises in
        PostgreSQL with every change of owner; this node's dispatches carry it, so a
        node that lost a shard can no longer dispatch from it (brief §7).
        """
        started = time.monotonic()
        epochs = await self.store.claim_shards(list(shards), self.node_id, self.now())
        self._epochs.update(epochs)
        # Not yet in membership.owned(): let the load through for these shards.
        self._gaining = frozenset(shards)
        try:
            await self._load_shards(sorted(shards))
        finally:
            self._gaining = frozenset()
        self._preload_wake.set()
        log.info(
            "gained %d shards in %.0f ms (%d due tasks in the wheel)",
            len(shards),
            (time.monotonic() - started) * 1000,
            len(self._wheel),
        )

    async def on_loss(self, shards: frozenset[int]) -> None:
        """This node no longer serves ``shards``: forget their due tasks.

        What it already committed keeps its lease; the new owner loads the rest.
        """
        for shard in shards:
            self._epochs.pop(shard, None)
        dropped = [k for k, p in self._entries.items() if p.shard_id in shards]
        for k in dropped:
            p = self._entries.pop(k)
            self._wheel_key.pop(p.key.id, None)
            self._wheel.cancel(k)
        self._ready.remove_where(lambda p: p.shard_id in shards)
        log.info("lost %d shards; dropped %d due tasks", len(shards), len(dropped))

    async def _load_shards(self, shards: Sequence[int]) -> None:
        """Load the PRELOADED tasks of ``shards`` into the wheel (after a gain).

        From the Redis index when there is one (fast), then always reconciled from the
        store in the background: an old owner may have died between its commit and its
        index write. Without an index, or when it fails, from the store at once.
        """
        horizon = self.now() + timedelta(seconds=self.config.lookahead_s)
        if self.index is not None:
            index = self.index
            try:
                # Concurrently (a takeover after a node's death must be quick), but a
                # few at a time: a Redis connection pool is small.
                gate = asyncio.Semaphore(8)

                async def load(shard: int) -> list[Preloaded]:
                    async with gate:
                        return await index.load(shard)

                loaded = await asyncio.gather(*(load(shard) for shard in shards))
                for items in loaded:
                    self._add_to_wheel([p for p in items if p.due_at <= horizon])
            except IndexUnavailable as exc:
                log.warning("index unavailable (%s); loading shards from the store", exc)
            else:
                self._spawn(self._load_from_store(shards, rebuild_index=False), "reconcile")
                return
        await self._load_from_store(shards, rebuild_index=self.index is not None)

    async def _load_from_store(
        self,
        shards: Sequence[int],
        *,
        rebuild_index: bool,
        spill: bool = True,
        changed_since: datetime | None = None,
    ) -> None:
        """Load ``shards``' PRELOADED rows into the wheel; the index is rebuilt from
        them in the background (never on the gain path)."""
        horizon = self.now() + timedelta(seconds=self.config.lookahead_s)
        scope = None if not self._clustered else list(shards)
        per_shard: dict[int, list[Preloaded]] = {s: [] for s in shards}
        after: TaskKey | None = None
        while True:
            batch = await self.store.load_preloaded(
                scope, horizon, self.config.preload_batch, after, changed_since
            )
            self._add_to_wheel(batch, index=False, spill=spill)
            if rebuild_index:
                for p in batch:
                    per_shard.setdefault(p.shard_id, []).append(p)
            if len(batch) < self.config.preload_batch:
                break
            after = batch[-1].key
        if rebuild_index and self.index is not None:
            index = self.index
            self._rebuilding.update(per_shard)

            async def rebuild() -> None:
                try:
                    for shard, items in per_shard.items():
                        await index.replace(shard, items)
                        self._rebuilding.discard(shard)
                except IndexUnavailable as exc:
                    log.info("index rebuild skipped: %s", exc)
                finally:
                    self._rebuilding.difference_update(per_shard)

            self._spawn(rebuild(), "index-rebuild")

    def _spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("background %s failed", what)

        task = asyncio.create_task(run(), name=f"tickwheel-{what}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _index_add(self, items: Sequence[Preloaded]) -> None:
        """Mirror PRELOADED tasks into the Redis index (best effort, off the hot path)."""
        if self.index is None or not items:
            return
        index = self.index
        per_shard: dict[int, list[Preloaded]] = collections.defaultdict(list)
        for p in items:
            per_shard[p.shard_id].append(p)
            # Back in the index (a release): a removal still waiting must not undo it.
            if waiting := self._index_removals.get(p.shard_id):
                waiting.discard(p.key.id)

        async def run() -> None:
            for shard, batch in per_shard.items():
                try:
                    await index.add(shard, batch)
                except IndexUnavailable:
                    return  # the next owner reconciles from the store

        self._spawn(run(), "index-add")

    def _spill(self, items: Sequence[Preloaded]) -> None:
        """Put tasks in the index instead of the wheel; back into the wheel (over its
        cap) if the index cannot take them: memory is cheaper than a lost task."""
        assert self.index is not None
        index = self.index
        per_shard: dict[int, list[Preloaded]] = collections.defaultdict(list)
        for p in items:
            per_shard[p.shard_id].append(p)

        async def run() -> None:
            for shard, batch in per_shard.items():
                try:
                    await index.add(shard, batch)
                except IndexUnavailable:
                    self._add_to_wheel(batch, index=False, spill=False)
                else:
                    self._spilled.add(shard)
                    self.stats.spilled += len(batch)
            self._wake_dispatcher()

        self._spawn(run(), "index-spill")

    def _index_remove(self, keys: Sequence[TaskKey], shards: Sequence[int]) -> None:
        """Drop dispatched tasks from the index mirror (best effort, off the hot path).

        Removals are gathered for ``index_flush_ms`` and sent in one pipelined call for
        all shards: one Lua call per shard per dispatch round cost 7-11% of a node's CPU.
        """
        if self.index is None or not keys:
            return
        for key, shard in zip(keys, shards, strict=True):
            self._index_removals[shard].add(key.id)
        if not self._index_flushing:
            self._index_flushing = True
            self._spawn(self._flush_index_removals(self.index), "index-remove")

    async def _flush_index_removals(self, index: TimeIndex) -> None:
        try:
            await asyncio.sleep(self.config.index_flush_ms / 1000.0)
        finally:
            self._index_flushing = False
            pending, self._index_removals = self._index_removals, collections.defaultdict(set)
        with contextlib.suppress(IndexUnavailable):  # the next owner reconciles
            await index.remove_many({s: list(ids) for s, ids in pending.items()})

    # ------------------------------------------------------------------ submission
    def _validate(self, spec: SubmitSpec, prefix: str) -> None:
        if not isinstance(spec.type, str) or not spec.type:
            raise InvalidArgument(f"{prefix}.type", "is required")
        if len(spec.type) > MAX_TYPE_LEN:
            raise InvalidArgument(f"{prefix}.type", f"longer than {MAX_TYPE_LEN} characters")
        if not isinstance(spec.payload, dict):
            raise InvalidArgument(f"{prefix}.payload", "must be a JSON object")
        try:
            _check_json(spec.payload)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"{prefix}.payload", f"not JSON-serialisable: {exc}") from exc
        if spec.scheduled_at is not None and spec.scheduled_at.tzinfo is None:
            raise InvalidArgument(f"{prefix}.scheduled_at", "must carry a time zone")
        if spec.idempotency_key is not None and len(spec.idempotency_key) > (
            MAX_IDEMPOTENCY_KEY_LEN
        ):
            raise InvalidArgument(
                f"{prefix}.idempotency_key", f"longer than {MAX_IDEMPOTENCY_KEY_LEN} characters"
            )
        if not 0 <= spec.max_retries <= MAX_RETRIES_LIMIT:
            raise InvalidArgument(f"{prefix}.max_retries", f"must be 0..{MAX_RETRIES_LIMIT}")
        if spec.timeout_s < 0:
            raise InvalidArgument(f"{prefix}.timeout_s", "must not be negative")

    def _new_task(
        self,
        tenant_id: uuid.UUID,
        spec: SubmitSpec,
        now: datetime,
        horizon: datetime | None = None,
    ) -> NewTask:
        """``horizon``: the end of the look-ahead from ``now`` (computed when None)."""
        if horizon is None:
            horizon = now + timedelta(seconds=self.config.lookahead_s)
        task_id = uuid7()
        shard = shard_of(tenant_id, task_id, self.config.shard_count)
        scheduled_at = spec.scheduled_at or now
        mode = JitterMode.NONE if spec.strict_timing else spec.jitter_mode
        offset = jitter_offset_ms(tenant_id, task_id, mode, window_s=self.config.jitter_window_s)
        due_at = scheduled_at + timedelta(milliseconds=offset) if offset else scheduled_at
        return NewTask(
            id=task_id,
            tenant_id=tenant_id,
            type=spec.type,
            payload=spec.payload,
            scheduled_at=scheduled_at,
            due_at=due_at,
            idempotency_key=spec.idempotency_key or str(task_id),
            shard_id=shard,
            pool=spec.pool,
            strict_timing=spec.strict_timing,
            jitter_mode=mode,
            max_retries=spec.max_retries,
            timeout_s=spec.timeout_s,
            trace_context=spec.trace_context,
            # Straight into this node's wheel when due soon and its shard is ours; in a
            # cluster, another node's shard waits SCHEDULED for its owner's pre-loader.
            initial_state=TaskState.PRELOADED
            if due_at <= horizon and (not self._clustered or self.membership.owns(shard))
            else TaskState.SCHEDULED,
        )

    async def submit(self, tenant_id: uuid.UUID, specs: Sequence[SubmitSpec]) -> list[InsertResult]:
        """Validate and store tasks; those due inside the look-ahead go into the wheel.

        An idempotent resubmit returns the existing task with ``created=False``.
        """
        if not specs:
            raise InvalidArgument("tasks", "at least one task is required")
        if len(specs) > self.config.max_submit_batch:
            raise InvalidArgument("tasks", f"at most {self.config.max_submit_batch} tasks per call")
        single = len(specs) == 1
        now = self.now()
        horizon = now + timedelta(seconds=self.config.lookahead_s)
        new: list[NewTask] = []
        # In slices, yielding between them: a call of thousands of tasks must not hold
        # the event loop (and the deliveries due meanwhile) for tens of milliseconds.
        chunk = SUBMIT_SLICE
        for start in range(0, len(specs), chunk):
            if start:
                await asyncio.sleep(0)
            for i in range(start, min(len(specs), start + chunk)):
                self._validate(specs[i], "task" if single else f"tasks[{i}]")
                new.append(self._new_task(tenant_id, specs[i], now, horizon))
        results = await self.store.insert_tasks(new, now)
        for start in range(0, len(results), chunk):
            if start:
                await asyncio.sleep(0)
            self._admit(results[start : start + chunk])
        return results

    def _admit(self, results: Sequence[InsertResult]) -> None:
        """Put freshly inserted PRELOADED tasks into this node's wheel."""
        fresh = [
            Preloaded(
                key=r.task.key,
                due_at=r.task.due_at,
                tenant_id=r.task.tenant_id,
                shard_id=r.task.shard_id,
                pool=r.task.pool,
                type=r.task.type,
            )
            for r in results
            if r.created and r.task.status is TaskState.PRELOADED
        ]
        self.stats.submitted += sum(r.created for r in results)
        self._add_to_wheel(fresh)

    # ------------------------------------------------------------------ reads and operator actions
    async def get_task(self, tenant_id: uuid.UUID, task_id: uuid.UUID) -> TaskRecord:
        """One task of ``tenant_id`` (NotFound for any other tenant's)."""
        return await self.store.get_task(tenant_id, task_id)

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """A page of ``tenant_id``'s tasks."""
        if not 1 <= page_size <= 1000:
            raise InvalidArgument("page_size", "must be 1..1000")
        return await self.store.list_tasks(tenant_id, flt, page_size, page_token)

    async def cancel(self, tenant_id: uuid.UUID, task_id: uuid.UUID) -> TaskRecord:
        """Cancel in any non-terminal state; a running task's worker is told."""
        result = await self.store.cancel(tenant_id, task_id, self.now())
        task = result.task
        if task.status is TaskState.CANCELLED:
            self._drop_from_memory(task.id)
            self._ready.remove(task.id)
            self._preload_wake.set()  # children released by the upstream policy
        if result.notify_worker is not None:
            if any(entry[3].key.id == task.id for entry in self._held):
                # Committed but held for its due tick: a notice now would reach the
                # worker before the task; it follows the task instead.
                self._cancel_on_delivery.add(task.id)
                return task
            for session in list(self._sessions.values()):
                if task.id in session.held:
                    key, token = session.held[task.id]
                    session._push(CancelNotice(key=key, token=token))
        return task

    async def redrive(
        self, tenant_id: uuid.UUID, task_id: uuid.UUID, scheduled_at: datetime | None = None
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED (operator action); the pre-loader picks it up."""
        if scheduled_at is not None and scheduled_at.tzinfo is None:
            raise InvalidArgument("scheduled_at", "must carry a time zone")
        task = await self.store.redrive(tenant_id, task_id, self.now(), scheduled_at or self.now())
        self._preload_wake.set()
        return task

    async def complete(
        self,
        tenant_id: uuid.UUID,
        task_id: uuid.UUID,
        token: int,
        result: JSON | None,
        scheduled_at: datetime | None = None,
    ) -> TaskRecord:
        """Fenced completion from outside a stream; StaleFencingToken for a zombie."""
        task = await self.store.get_task(tenant_id, task_id)
        outcome = await self._completions.submit(
            Completion(key=task.key, token=token, result=result)
        )
        self._count_stale([outcome])
        if outcome is not Outcome.OK:
            raise StaleFencingToken(str(task_id), token, f"task is {task.status.value}")
        return await self.store.get_task(tenant_id, task_id)

    async def fail(
        self,
        tenant_id: uuid.UUID,
        task_id: uuid.UUID,
        token: int,
        error: str,
        retryable: bool = True,
        scheduled_at: datetime | None = None,
    ) -> TaskRecord:
        """Fenced failure from outside a stream; StaleFencingToken for a zombie."""
        task = await self.store.get_task(tenant_id, task_id)
        report = FailureReport(
            key=task.key,
            token=token,
            error=error,
            retryable=retryable,
            attempt=task.retry_count + 1,
            tenant_id=tenant_id,
        )
        outcome = await self._failures.submit(report)
        self._count_stale([outcome])
        if outcome is not Outcome.OK:
            raise StaleFencingToken(str(task_id), token, f"task is {task.status.value}")
        return await self.store.get_task(tenant_id, task_id)

    # ------------------------------------------------------------------ tenants and keys
    async def create_tenant(
        self,
        *,
        name: str,
        tier: str = "STANDARD",
        rate_limit_rps: int = 0,
        max_concurrent_workers: int = 0,
        home_region: str = "",
    ) -> Tenant:
        """Create a tenant; zero quotas mean the defaults."""
        if not name or len(name) > 128:
            raise InvalidArgument("tenant.name", "must be 1..128 characters")
        if tier not in ("STANDARD", "ENTERPRISE", "SYSTEM"):
            raise InvalidArgument("tenant.tier", "must be STANDARD, ENTERPRISE or SYSTEM")
        if rate_limit_rps < 0 or max_concurrent_workers < 0:
            raise InvalidArgument("tenant", "quotas must not be negative")
        defaults = Tenant(id=uuid.uuid4(), name=name)
        tenant = Tenant(
            id=defaults.id,
            name=name,
            tier=tier,
            rate_limit_rps=rate_limit_rps or defaults.rate_limit_rps,
            max_concurrent_workers=max_concurrent_workers or defaults.max_concurrent_workers,
            home_region=home_region or defaults.home_region,
        )
        return await self.store.create_tenant(tenant)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """One tenant."""
        return await self.store.get_tenant(tenant_id)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change a tenant's tier or quotas."""
        return await self.store.update_tenant(tenant_id, changes)

    async def create_api_key(self, tenant_id: uuid.UUID, name: str) -> tuple[ApiKey, str]:
        """A new key; the secret is returned once and stored only as a hash."""
        secret = "tw_" + secrets.token_urlsafe(32)
        key = await self.store.create_api_key(tenant_id, name, hash_secret(secret))
        return key, secret

    async def authenticate(self, secret: str) -> uuid.UUID:
        """The tenant of an API key secret; Unauthenticated when unknown."""
        if not secret:
            raise Unauthenticated("missing API key (x-api-key metadata)")
        digest = hash_secret(secret)
        cached = self._auth_cache.get(digest)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        tenant_id = await self.store.tenant_for_key_hash(digest)
        if tenant_id is None:
            raise Unauthenticated("unknown or revoked API key")
        if len(self._auth_cache) > 10_000:
            self._auth_cache.clear()
        # A revoked key keeps working for at most auth_cache_s on this node.
        self._auth_cache[digest] = (tenant_id, now + self.config.auth_cache_s)
        return tenant_id

    # ------------------------------------------------------------------ sessions
    def _hand_over(self, task_id: uuid.UUID, to: WorkerSession) -> None:
        """``to`` adopted ``task_id`` (its worker reconnected): no other session of this
        node holds it any more, so none gives it back when it closes."""
        for session in self._sessions.values():
            # An outlet's session keeps its entry: it counts the broker's capacity.
            if session is to or session.outlet is not None:
                continue
            if session.held.pop(task_id, None) is not None:
                session.acked.discard(task_id)
                session.attempts.pop(task_id, None)

    async def open_session(self, hello: WorkerHello) -> WorkerSession:
        """Register a worker stream; assignments flow once it has credit."""
        if not hello.worker_id or len(hello.worker_id) > 256:
            raise InvalidArgument("hello.worker_id", "must be 1..256 characters")
        if not hello.task_types:
            raise InvalidArgument("hello.task_types", "at least one task type is required")
        if hello.slots < 0:
            raise InvalidArgument("hello.slots", "must not be negative")
        tenant = await self.store.get_tenant(hello.tenant_id)
        session = WorkerSession(self, hello, shared=tenant.tier == "SYSTEM")
        self._sessions[session.session_id] = session
        self._wake_dispatcher()
        return session

    # ------------------------------------------------------------------ the wheel
    def _add_to_wheel(
        self, items: Sequence[Preloaded], *, index: bool = True, spill: bool = True
    ) -> None:
        """Index PRELOADED tasks in the wheel by due time (one ``add_many`` per batch)."""
        if self._clustered:
            # Only our shards: the rest belong to other nodes, whose reconcile finds them.
            owned = self.membership.owned() | self._gaining
            items = [p for p in items if p.shard_id in owned]
        cap = self.config.wheel_max_timers
        if cap and spill and self.index is not None:
            fresh = [p for p in items if p.key.id not in self._wheel_key]
            room = max(0, cap - len(self._wheel))
            if len(fresh) > room:
                # Over the wheel's memory cap: the nearest stay in the wheel, the rest
                # wait in the Redis index and the dispatcher pops them when due. Not
                # while a shard's index is being rebuilt (the rebuild would erase them).
                fresh.sort(key=lambda p: p.due_at)
                keep = fresh[:room]
                out: list[Preloaded] = []
                for p in fresh[room:]:
                    (keep if p.shard_id in self._rebuilding else out).append(p)
                items = keep
                if out:
                    self._spill(out)
        keys = array.array("q")
        dues = array.array("q")
        for p in items:
            if p.key.id in self._wheel_key:
                continue  # already indexed (a reload after a release, say)
            k = next(self._ids)
            self._entries[k] = p
            self._wheel_key[p.key.id] = k
            keys.append(k)
            dues.append(max(_to_ms(p.due_at), 0))
        if keys:
            if index:
                self._index_add([self._entries[k] for k in keys])
            self._wheel.add_many(keys, dues)
            self.stats.preloaded += len(keys)
            self._wake_dispatcher()

    def _drop_from_memory(self, task_id: uuid.UUID) -> None:
        k = self._wheel_key.pop(task_id, None)
        if k is not None:
            self._wheel.cancel(k)
            self._entries.pop(k, None)

    # ------------------------------------------------------------------ dispatcher
    def _lead_ms(self) -> int:
        """How far ahead of the due tick to commit: covers the recent commit times.

        A durable commit usually takes well under a millisecond but sometimes stalls
        for hundreds (brief §12); the lead follows 1.5x the slowest of the last
        commits, between ``dispatch_lead_ms`` and ``dispatch_lead_max_ms``.
        """
        recent = max(self._commit_ms, default=0.0)
        lead = int(recent * 1.5) + 1
        return max(self.config.dispatch_lead_ms, min(self.config.dispatch_lead_max_ms, lead))

    async def _dispatch_loop(self) -> None:
        """Wheel -> ready queues -> one batched dispatch commit per round."""
        while True:
            # Cleared before the work, so a nudge that arrives during it is not lost.
            self._dispatch_wake.clear()
            lead = self._lead_ms()
            now_ms = self._now_ms()
            # A round fires the wheel only once its earliest task is within the lead,
            # and then takes a window more: wake-ups in between (completions, credit)
            # must not commit the trickle that just came into range one task at a time.
            harvest = lead + self.config.dispatch_window_ms
            nxt = self._wheel.next_due_ms()
            fired = (
                self._wheel.advance(now_ms + harvest)
                if nxt is not None and nxt <= now_ms + lead
                else ()
            )
            for k in fired:
                p = self._entries.pop(int(k), None)
                if p is None:
                    continue
                self._wheel_key.pop(p.key.id, None)
                self._ready.push(p)
            if self._spilled:
                await self._pop_spilled(harvest)
            await self._report_finished()
            while len(self._ready) and await self._match_and_commit():
                pass
            await self._sleep_until_next(lead)

    async def _pop_spilled(self, ahead_ms: int) -> None:
        """Due tasks that wait in the Redis index (the wheel was over its cap)."""
        assert self.index is not None
        due_ms = self._now_ms() + ahead_ms
        for shard in sorted(self._spilled):
            try:
                items = await self.index.pop_due(shard, due_ms, self.config.max_batch)
                if not items and await self.index.next_due_ms(shard) is None:
                    self._spilled.discard(shard)
            except IndexUnavailable as exc:
                # They are still PRELOADED in the store: reload the shard into the wheel,
                # over its cap if need be. Latency, never a lost task.
                log.warning("index unavailable for shard %d (%s); reloading it", shard, exc)
                self._spilled.discard(shard)
                self._spawn(
                    self._load_from_store([shard], rebuild_index=False, spill=False),
                    "index-fallback",
                )
                continue
            for p in items:
                if p.key.id not in self._wheel_key:  # wheel tasks fire from the wheel
                    self._ready.push(p)

    async def _sleep_until_next(self, lead: int) -> None:
        nxt = self._wheel.next_due_ms()
        timeout = self.config.index_poll_ms / 1000.0 if self._spilled else None
        if nxt is not None:
            until = max(0.0, (nxt - lead - self._now_ms()) / 1000.0)
            timeout = until if timeout is None else min(timeout, until)
            if timeout == 0.0:
                await asyncio.sleep(0)
                return
        throttled = self._throttled_until - time.monotonic()
        if len(self._ready) and throttled > 0:
            timeout = throttled if timeout is None else min(timeout, throttled)
        await wait_event(self._dispatch_wake, timeout)

    async def _deliver_loop(self) -> None:
        """Hand committed assignments to their sessions at the due tick.

        Separate from the dispatch loop so a slow commit never delays a delivery that
        was already committed.
        """
        while True:
            self._deliver_wake.clear()
            self._deliver_held(self._now_ms())
            timeout = None
            if self._held:
                timeout = max(0.0, (self._held[0][0] - self._now_ms()) / 1000.0)
                if timeout == 0.0:
                    await asyncio.sleep(0)
                    continue
            await wait_event(self._deliver_wake, timeout)

    def _pool_open(self, pool: Pool, capacity: int) -> bool:
        """Whether a free slot may take work from ``pool`` now (brief §8).

        Bulk never holds more than ``bulk_max_slots``. While a critical task waits,
        standard and bulk may not grow into the ``critical_reserved_slots`` part of the
        capacity; while none waits, they may (work stealing). Running tasks are never
        taken back: critical simply gets every slot that frees up first.
        """
        if pool is Pool.CRITICAL:
            return True
        if pool is Pool.BULK and self._inflight_by_pool[Pool.BULK] >= self.config.bulk_max_slots:
            return False
        if self._ready.depth(Pool.CRITICAL) == 0:
            return True
        noncritical = self._inflight_by_pool[Pool.STANDARD] + self._inflight_by_pool[Pool.BULK]
        return noncritical < capacity - self.config.critical_reserved_slots

    async def _match_and_commit(self) -> int:
        """Pair ready tasks with sessions that have credit; one store call per batch.

        Sessions are served round robin, one slot at a time; each free slot takes the
        first pool that is open and has work the session can run (critical, standard,
        bulk), and inside a pool the tenant whose turn it is by weight. Returns how
        many tasks it committed (0: nothing could be matched).
        """
        now = self.now()
        ttl = timedelta(seconds=self.config.lease_ttl_s)
        sessions = [
            s for s in self._sessions.values() if s.credits > 0 and not s.draining and not s.stalled
        ]
        if not sessions:
            return 0
        # Start each round at a different session, so a lone task does not always go
        # to the same worker.
        self._rr = (self._rr + 1) % len(sessions)
        sessions = sessions[self._rr :] + sessions[: self._rr]
        await self._learn_tenants()
        credits = sum(s.credits for s in sessions)
        capacity = credits + len(self._inflight)
        # Quotas (rate and in-flight cap per tenant, shared by every node): one reserve
        # call per round for every tenant with waiting work; unused grants go back.
        wanted = {
            t: min(n, credits, self.config.dispatch_batch)
            for t, n in self._ready.tenant_counts().items()
        }
        grants = await self.quota.reserve(
            wanted, {t: self._limits[t] for t in wanted}, now.timestamp()
        )

        def allow(tenant_id: uuid.UUID) -> bool:
            return grants.get(tenant_id, 0) > 0

        picks: list[tuple[WorkerSession, Preloaded]] = []
        active = collections.deque(sessions)
        while active and len(picks) < self.config.dispatch_batch and len(self._ready):
            s = active.popleft()
            task = None
            for pool in POOL_ORDER:
                if (
                    pool in s.pools
                    and (s.outlet is not None or pool not in self._outlet_pools)
                    and self._pool_open(pool, capacity)
                ):
                    task = self._ready.pop(pool, s.task_types, s.scope, allow)
                    if task is not None:
                        break
            if task is None:
                continue  # nothing this session can run right now
            grants[task.tenant_id] -= 1
            s.credits -= 1
            self._take_slot(task)
            picks.append((s, task))
            if s.credits > 0:
                active.append(s)
        unused = {t: n for t, n in grants.items() if n > 0}
        if len(self._ready) and any(grants.get(t, 0) < n for t, n in wanted.items()):
            # Throttled work stays PRELOADED in the ready queue; look again shortly.
            self._throttled_until = time.monotonic() + self.config.throttle_retry_s
        if not picks:
            if unused:
                await self.quota.refund(unused, now.timestamp())
            return 0
        if self._clustered:
            # Stop dispatching from a shard as soon as its lease is no longer trusted
            # (a margin before the TTL); the store refuses stale epochs anyway. Shards
            # being gained are claimed in etcd and their epoch is ours already.
            owned = self.membership.owned() | self._gaining
            lost = [(s, p) for s, p in picks if p.shard_id not in owned]
            if lost:
                for s, p in lost:
                    s.credits += 1
                    self._inflight.pop(p.key.id, None)
                    self._inflight_by_pool[p.pool] -= 1
                    unused[p.tenant_id] = unused.get(p.tenant_id, 0) + 1
                picks = [(s, p) for s, p in picks if p.shard_id in owned]
                if not picks:
                    await self.quota.refund(unused, now.timestamp())
                    return 0
        epochs = self._epochs
        requests = [
            DispatchRequest(
                key=p.key,
                worker_id=s.worker_id,
                # From the due time, not the commit: a task committed ahead (the lead
                # and the window) still gets its whole lease once it is delivered.
                lease_expires_at=max(now, p.due_at) + ttl,
                epoch=epochs.get(p.shard_id),
                running=s.start_on_delivery,
            )
            for s, p in picks
        ]
        started = time.monotonic()
        try:
            assignments = await self.store.mark_dispatched(requests, now)
        except Exception:
            log.exception("dispatch commit failed; tasks stay PRELOADED and are retried")
            back: collections.Counter[uuid.UUID] = collections.Counter(unused)
            for s, p in reversed(picks):
                s.credits += 1
                self._inflight.pop(p.key.id, None)
                self._inflight_by_pool[p.pool] -= 1
                back[p.tenant_id] += 1
                self._ready.push(p, front=True)
            await self.quota.refund(back, now.timestamp())
            await asyncio.sleep(0.1)
            return 0
        self._commit_ms.append((time.monotonic() - started) * 1000.0)
        self.stats.dispatch_rounds += 1
        now_ms = _to_ms(now)
        refund: collections.Counter[uuid.UUID] = collections.Counter(unused)
        for (s, p), a in zip(picks, assignments, strict=True):
            if a is None:  # cancelled between pre-load and dispatch
                s.credits += 1
                self._inflight.pop(p.key.id, None)
                self._inflight_by_pool[p.pool] -= 1
                refund[p.tenant_id] += 1
                continue
            self.stats.pool_wait_ms[p.pool].append(float(max(0, now_ms - _to_ms(p.due_at))))
            s.held[a.key.id] = (a.key, a.fencing_token)
            s.attempts[a.key.id] = a.attempt
            heapq.heappush(self._held, (_to_ms(a.due_at), next(self._held_seq), s, a))
        if refund:
            await self.quota.refund(refund, now.timestamp())
        self._index_remove([p.key for _, p in picks], [p.shard_id for _, p in picks])
        self.stats.dispatched += sum(a is not None for a in assignments)
        self._deliver_wake.set()
        return len(picks)

    def _publish(self, outlet: Outlet, assignments: Sequence[Assignment]) -> None:
        async def run() -> None:
            try:
                await outlet.publish(assignments)
            except Exception:
                # Committed but not delivered: the leases lapse and the reaper puts the
                # tasks back (token + 1 at the next dispatch). Nothing is lost.
                log.exception(
                    "outlet %s: publish of %d assignments failed", outlet.name, len(assignments)
                )

        task = asyncio.create_task(run(), name=f"tickwheel-publish-{outlet.name}")
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    def _take_slot(self, task: Preloaded) -> None:
        self._inflight[task.key.id] = (task.pool, task.tenant_id)
        self._inflight_by_pool[task.pool] += 1

    def _free_slot(self, task_id: uuid.UUID) -> None:
        """The task left its worker: its pool slot and its tenant's in-flight quota
        unit come back (the quota is told in one batch per round). Idempotent."""
        held = self._inflight.pop(task_id, None)
        if held is not None:
            pool, tenant_id = held
            self._inflight_by_pool[pool] -= 1
            self._finished[tenant_id] += 1
            for outlet_session in self._outlet_sessions:
                if outlet_session.held.pop(task_id, None) is not None:
                    outlet_session.credits += 1
            self._wake_dispatcher()

    def _weight(self, tenant_id: uuid.UUID) -> int:
        return self._weights.get(tenant_id, 1)

    async def _learn_tenants(self) -> None:
        """Weights (from the tier) and quotas of tenants with waiting work.

        Looked up once per tenant and refreshed every ``tenant_refresh_s`` so quota
        changes made through the admin API reach every node.
        """
        if time.monotonic() > self._tenants_fresh_until:
            self._weights.clear()
            self._limits.clear()
            self._tenants_fresh_until = time.monotonic() + self.config.tenant_refresh_s
        for tenant_id in self._ready.tenants() - self._limits.keys():
            try:
                tenant = await self.store.get_tenant(tenant_id)
            except NotFound:
                tenant = Tenant(id=tenant_id, name="?")
            self._weights[tenant_id] = self.config.tier_weight(tenant.tier)
            self._limits[tenant_id] = TenantLimits(
                rate_limit_rps=tenant.rate_limit_rps,
                max_concurrent=tenant.max_concurrent_workers,
            )

    async def _report_finished(self) -> None:
        if self._finished:
            done, self._finished = self._finished, collections.Counter()
            await self.quota.finished(done)

    def pool_metrics(self) -> dict[Pool, PoolMetrics]:
        """Depth, wait time, slots used and reserved, per pool."""
        out = {}
        for pool in POOL_ORDER:
            waits = sorted(self.stats.pool_wait_ms[pool])
            out[pool] = PoolMetrics(
                depth=self._ready.depth(pool),
                wait_p50_ms=waits[len(waits) // 2] if waits else None,
                wait_p99_ms=waits[min(len(waits) - 1, int(0.99 * len(waits)))] if waits else None,
                slots_used=self._inflight_by_pool[pool],
                slots_reserved=self.config.critical_reserved_slots if pool is Pool.CRITICAL else 0,
                slots_max=self.config.bulk_max_slots if pool is Pool.BULK else None,
            )
        return out

    def _deliver_held(self, now_ms: int) -> None:
        """Push committed assignments whose due tick has come, grouped per session."""
        if not self._held or self._held[0][0] > now_ms:
            return
        per_session: dict[str, tuple[WorkerSession, list[Assignment]]] = {}
        while self._held and self._held[0][0] <= now_ms:
            due_ms, _, session, a = heapq.heappop(self._held)
            self.stats.lateness_ms.append(float(now_ms - due_ms))
            per_session.setdefault(session.session_id, (session, []))[1].append(a)
        for session, batch in per_session.values():
            self.stats.delivered += len(batch)
            session._push(AssignmentBatch(tuple(batch)))
            if session.start_on_delivery:
                session.acked.update(a.key.id for a in batch)
            if self._cancel_on_delivery:
                # Cancelled while held for its due tick: the notice follows the task.
                for a in batch:
                    if a.key.id in self._cancel_on_delivery:
                        self._cancel_on_delivery.discard(a.key.id)
                        session._push(CancelNotice(key=a.key, token=a.fencing_token))

    # ------------------------------------------------------------------ pre-loader and reaper
    async def _notice_loop(self) -> None:
        """In a cluster: hear other nodes' writes that make work for our shards (a task
        submitted through them, a workflow child they released), so it reaches our wheel
        in milliseconds instead of at the next pre-load or reconcile. Those passes stay
        the safety net: a lost notice, or a lost connection, costs latency only."""
        while True:
            try:
                notices = await self.store.listen_work(self._on_work_notice)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("work notices unavailable (%s); retrying in 5 s", exc)
                await asyncio.sleep(5.0)
                continue
            if notices is None:
                return  # the store has no channel: nothing to hear
            try:
                await notices.wait_closed()
            finally:
                await notices.close()
            log.warning("work notice connection lost; reconnecting")
            # Whatever was said meanwhile was not heard: look now.
            self._reconcile_at = 0.0
            self._preload_wake.set()
            await asyncio.sleep(1.0)

    def _on_work_notice(self, shards: frozenset[int], reconcile: bool) -> None:
        if self._stopping or not self.membership.owned() & shards:
            return
        if reconcile:
            self._reconcile_at = 0.0
        self._preload_wake.set()

    async def _preload_loop(self) -> None:
        while True:
            # Cleared before the pass, so a wake-up that arrives during it (a work
            # notice for rows the pass's claim did not see yet) runs another pass.
            self._preload_wake.clear()
            try:
                await self._preload_once()
                await self._reclaim_once()
                if self._clustered and time.monotonic() >= self._reconcile_at:
                    await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pre-load cycle failed; retrying next interval")
            await wait_event(self._preload_wake, self.config.preload_interval_s)

    async def _reconcile(self) -> None:
        """PRELOADED rows written by other nodes for our shards (a release, a DAG child,
        a row an old owner wrote) reach our wheel here.

        Only rows changed since the previous reconcile began (less the clock skew
        allowance) are read; every ``full_reconcile_interval_s`` all of them are.
        """
        mono = time.monotonic()
        self._reconcile_at = mono + self.config.reconcile_interval_s
        started = self.now()
        since = self._reconciled_from
        if since is not None and mono < self._full_reconcile_at:
            since -= timedelta(seconds=self.config.reconcile_skew_s)
        else:
            since = None
            self._full_reconcile_at = mono + self.config.full_reconcile_interval_s
        shards = sorted(self.membership.owned())
        if shards:
            await self._load_from_store(shards, rebuild_index=False, changed_since=since)
        self._reconciled_from = started

    async def _preload_once(self) -> None:
        horizon = self.now() + timedelta(seconds=self.config.lookahead_s)
        shards = self._shard_filter()
        if shards == []:
            return  # owns nothing (yet)
        while True:
            batch = await self.store.claim_preload(
                shards, horizon, self.config.preload_batch, self.now()
            )
            self._add_to_wheel(batch)
            if len(batch) < self.config.preload_batch:
                return

    async def _reclaim_once(self) -> None:
        shards = self._shard_filter()
        if shards == []:
            return
        while True:
            result = await self.store.reclaim_expired(shards, self.now(), self.config.preload_batch)
            gone = [*result.retrying, *result.dead_lettered, *result.cancelled]
            requeued = {p.key.id for p in result.requeued}
            for key in (*gone, *(p.key for p in result.requeued)):
                self._free_slot(key.id)
                for session in self._sessions.values():
                    if session.held.pop(key.id, None) is not None and (
                        key.id in requeued or session.start_on_delivery
                    ):
                        # Dispatched to it and never acked (or, starting on delivery,
                        # neither heartbeated nor finished) within a whole lease.
                        session.stalled = session.outlet is None
            self._add_to_wheel(result.requeued)
            if result.dead_lettered or result.cancelled:
                self._preload_wake.set()  # children released by the upstream policy
            n = len(result.requeued) + len(gone)
            self.stats.reclaimed += n
            if result.retrying:
                self._preload_wake.set()
            if n < self.config.preload_batch:
                return

    async def _release_unacked(self, held: Sequence[tuple[TaskKey, int]]) -> None:
        """A closed session's tasks: DISPATCHED ones go back now; RUNNING keep leases."""
        try:
            await self._releases.submit_many([Release(key=k, token=t) for k, t in held])
        except RuntimeError:
            # Engine already stopped: their leases lapse and the reaper requeues them.
            log.warning("could not release %d unacked tasks; leases will expire", len(held))

    # ------------------------------------------------------------------ batched writes
    def _free_ok(self, items: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        """Accepted completions, failures and releases free their worker slot.

        Only OK: a zombie's rejected write must not free the slot of the worker that
        holds the task now (the reaper freed the zombie's slot when its lease lapsed).
        """
        for item, outcome in zip(items, outcomes, strict=True):
            if outcome is Outcome.OK:
                self._free_slot(item.key.id)

    def _count_stale(self, outcomes: Sequence[Outcome]) -> None:
        self.stats.stale_writes += sum(o is not Outcome.OK for o in outcomes)

    async def _flush_acks(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        lease = self.now() + timedelta(seconds=self.config.lease_ttl_s)
        return await self.store.ack(writes, lease, self.now())

    async def _flush_heartbeats(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        lease = self.now() + timedelta(seconds=self.config.lease_ttl_s)
        return await self.store.heartbeat(writes, lease, self.now())

    async def _complete_many(self, items: Sequence[Completion]) -> list[Outcome]:
        return await self._completions.submit_many(items)

    async def _flush_completions(self, items: Sequence[Completion]) -> list[Outcome]:
        results = await self.store.complete(items, self.now())
        self._free_ok(items, [r.outcome for r in results])
        children = [c for r in results for c in r.ready_children]
        self._add_to_wheel(children)
        self.stats.completed += sum(r.outcome is Outcome.OK for r in results)
        return [r.outcome for r in results]

    async def _fail_many(self, items: Sequence[FailureReport]) -> list[Outcome]:
        return await self._failures.submit_many(items)

    def retry_at(self, key: TaskKey, tenant_id: uuid.UUID, attempt: int) -> datetime:
        """Exponential backoff with deterministic jitter (up to +25%), capped."""
        base = min(self.config.retry_max_s, self.config.retry_base_s * (2 ** max(attempt - 1, 0)))
        spread = (stable_hash(tenant_id, key.id) ^ attempt) % 1000 / 4000.0
        return self.now() + timedelta(seconds=base * (1.0 + spread))

    async def _flush_failures(self, items: Sequence[FailureReport]) -> list[Outcome]:
        failures = []
        for f in items:
            failures.append(
                Failure(
                    key=f.key,
                    token=f.token,
                    error=f.error,
                    retryable=f.retryable,
                    retry_at=self.retry_at(f.key, f.tenant_id or uuid.UUID(int=0), f.attempt or 1),
                )
            )
        results = await self.store.fail(failures, self.now())
        self._free_ok(items, [r.outcome for r in results])
        if any(r.new_state is TaskState.RETRYING for r in results):
            self._preload_wake.set()
        dead = [
            f.key
            for f, r in zip(items, results, strict=True)
            if r.new_state is TaskState.DEAD_LETTER
        ]
        if dead:
            self._preload_wake.set()  # children released by the upstream policy
        self.stats.failed += sum(r.outcome is Outcome.OK for r in results)
        return [r.outcome for r in results]

    async def _release_many(self, items: Sequence[Release]) -> list[Outcome]:
        return await self._releases.submit_many(items)

    async def _flush_releases(self, items: Sequence[Release]) -> list[Outcome]:
        outcomes = await self.store.release(items, self.now())
        self._free_ok(items, outcomes)
        requeue = [r for r, o in zip(items, outcomes, strict=True) if o is Outcome.OK]
        if requeue:
            # Released tasks are PRELOADED again: reload them so they go out at once.
            self._preload_wake.set()
            await self._reload(requeue)
        return outcomes

    async def _reload(self, items: Sequence[Release]) -> None:
        now = self.now()
        reloaded = []
        for r in items:
            try:
                task = await self.store.get_task(None, r.key.id)
            except NotFound:
                continue
            if task.status is TaskState.PRELOADED:
                reloaded.append(
                    Preloaded(
                        key=task.key,
                        due_at=min(task.due_at, now),
                        tenant_id=task.tenant_id,
                        shard_id=task.shard_id,
                        pool=task.pool,
                        type=task.type,
                    )
                )
        self._add_to_wheel(reloaded)
