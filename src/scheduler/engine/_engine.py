"""The engine facade: builds one node's parts, starts and stops them, keeps the API.

Data path (brief §2), with the module of each step:

1. ``submit`` -> admission (``_admission.py``) checks each task and builds its row;
   the store inserts them; those due inside the look-ahead on this node's shards go
   into the timeline (``_timeline.py``: the Cython wheel), mirrored into the Redis
   index (``_index_mirror.py``).
2. The pre-loader (``_preloader.py``) claims what falls due later, reaps expired
   leases (``_leases.py``) and, in a cluster, reconciles other nodes' writes.
3. The dispatcher (``_dispatcher.py``) takes what is due into the ready queues
   (``_ready.py``, fair by tenant weight from ``_fair_share.py``), matches it to
   sessions with credit (``_sessions.py``), takes a slot (``_slots.py``) and commits
   the whole batch a short lead *before* the due instant.
4. Delivery (``_delivery.py``) pushes each assignment to its session at the due tick.
5. The worker's writes go through its session to the completer (``_completer.py``):
   one fenced statement per kind of write per tick.

Shard gains and losses go to ``_shards.py``; outlets (Kafka) are ``_outlets.py``;
tenants and keys ``_tenancy.py`` (public as ``engine.tenancy``, like ``workflows`` and
``schedules``: the admin API calls it directly). The store alone decides state: everything in memory
is an index that a restart rebuilds from PRELOADED rows and lease expiry.
"""

from __future__ import annotations

import asyncio
import logging
import math
import operator
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from scheduler._aio import Background, cancel_and_wait, slices, supervised, wait_event
from scheduler._errors import InvalidArgument, StaleFencingToken
from scheduler.cluster import LocalMembership, ShardMembership
from scheduler.engine._admission import Admission
from scheduler.engine._backlog import BacklogReporter
from scheduler.engine._canary import Canary
from scheduler.engine._completer import Completer
from scheduler.engine._config import EngineConfig
from scheduler.engine._debounce import DebounceCombiner
from scheduler.engine._delivery import Delivery
from scheduler.engine._dispatcher import Dispatcher
from scheduler.engine._fair_share import FairShare
from scheduler.engine._flow import FlowRules
from scheduler.engine._health import Health
from scheduler.engine._history import History
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._leases import Reaper
from scheduler.engine._moves import MoveWatch
from scheduler.engine._outlets import Outlets
from scheduler.engine._preloader import Preloader
from scheduler.engine._ready import ReadyQueues
from scheduler.engine._registry import Sessions
from scheduler.engine._schedules import Schedules
from scheduler.engine._sessions import WorkerSession
from scheduler.engine._shard_state import ShardState
from scheduler.engine._shards import ShardHandler
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats, PoolMetrics
from scheduler.engine._tenancy import Tenancy
from scheduler.engine._timeline import Timeline, preloaded, to_ms, to_us
from scheduler.engine._types import FailureReport, Outlet, SubmitSpec, WorkerHello
from scheduler.engine._waiters import MAX_WAIT_S, SETTLED, Waiters
from scheduler.engine._watch import Watch
from scheduler.engine._workflows import Workflows
from scheduler.index import TimeIndex
from scheduler.limits import MAX_PAGE_SIZE, MAX_WORKER_ID_CHARS
from scheduler.quota import LocalQuota, QuotaGate
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    JSON,
    Completion,
    FencedWrite,
    InsertResult,
    NewTask,
    Outcome,
    Page,
    Pool,
    RawJSON,
    TaskFilter,
    TaskRecord,
)

log = logging.getLogger("tickwheel.engine")

_FLOW = operator.attrgetter("flow")
"""A new task's flow options (None without): read in C over a batch."""

UNARY_ACTOR = "CompleteTask/FailTask"
"""The actor of a refused write made by the unary RPCs (they carry no worker id)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Engine:
    """The scheduler core for one node. ``clock`` returns the current time (timezone-
    aware); tests pass a fake clock and call :meth:`wake` after moving it."""

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
        self.config = config or EngineConfig()
        self.now = clock or _utcnow
        self.node_id = node_id
        self.index = index
        self.stats = EngineStats()
        # Shards (brief §7): which this node serves, and its epoch for each. Without a
        # cluster membership the node owns every shard (single node, embedded).
        self.membership: ShardMembership = membership or LocalMembership(
            self.config.shard_count, node_id=node_id
        )
        cfg = self.config
        self._outlets = Outlets(outlets)
        self._background = Background(log)
        self._shards = ShardState(self.membership, clustered=membership is not None)
        self._admission = Admission(cfg, self._shards)
        self.tenancy = Tenancy(store, cfg)
        self._fair_share = FairShare(store, cfg)
        self._mirror = IndexMirror(index, cfg, self.stats, self._background, self._wake_dispatcher)
        self._timeline = Timeline(
            cfg, self._shards, self._mirror, self.stats, self._wake_dispatcher, self._now_ms()
        )
        # A fired timer's row stays in the timeline's table and waits ready by handle.
        self._ready = ReadyQueues(self._fair_share.weight, self._timeline.rows)
        self.health = Health(cfg, self.membership.yield_shards)
        """Whether the dispatch, pre-load and store-write loops make progress."""
        parts = (self._shards, self._timeline, self._mirror, self._background)
        self._preloader = Preloader(store, cfg, self.now, *parts, self.health.preloader)
        self._preloader.on_move = self._moved
        self._debounce = DebounceCombiner(self.store.insert_tasks, self._background)
        self.preloader = self._preloader  # the door to a reconcile pass run now
        self._slots = Slots(self._slot_freed, self._slots_freed)
        self._waiters = Waiters()
        self._completer = Completer(
            store,
            cfg,
            self.now,
            self.stats,
            self._slots,
            self._timeline,
            self._preloader.wake,
            self._preloader.reload,
            self._waiters.settled,
            self.health.store,
        )
        self.health.pending_writes = self._completer.holding
        self._sessions = Sessions(
            store,
            cfg,
            self._completer,
            self._room_freed,
            self._outlets.publish,
            self._preloader.wake,
        )
        self.watch = Watch(store, self._sessions, cfg, self.now)
        """Task counts, the forecast and the worker streams (the dashboard's reads)."""
        self._preloader.use_reaper(
            Reaper(
                store,
                cfg,
                self.now,
                self._shards,
                self._slots,
                self._sessions,
                self._timeline,
                self.stats,
                self._preloader.wake,
                self.health.reaping_allowed,
            )
        )
        self._delivery = Delivery(self._now_us, self.stats)
        self.flow = FlowRules(
            store,
            cfg.flow_refresh_s,
            lambda: self.now().timestamp(),
            keys=getattr(self.quota, "keys", None),
            on_change=self._wake_dispatcher,
        )
        """Rate limit keys and dispatch pauses (issue 43): the rules, their doors."""
        self._dispatcher = Dispatcher(
            store=store,
            config=cfg,
            now=self.now,
            quota=self.quota,
            shards=self._shards,
            timeline=self._timeline,
            mirror=self._mirror,
            ready=self._ready,
            fair_share=self._fair_share,
            sessions=self._sessions,
            slots=self._slots,
            delivery=self._delivery,
            stats=self.stats,
            outlet_pools=self._outlets.pools,
            reload_shard=self._preloader.reload_shard,
            flow=self.flow,
            beat=self.health.dispatcher,
        )
        self._shard_handler = ShardHandler(
            store, node_id, self.now, self._shards, self._preloader, self._timeline, self._ready
        )
        self._moves = MoveWatch(
            cfg, self.tenancy, self._sessions, self._ready, self.wake, self.flow.refresh
        )
        self.backlog = BacklogReporter(cfg, self._sessions, self._ready, self.flow)
        self._tasks: list[asyncio.Task[None]] = []
        self._lifecycle = asyncio.Lock()
        self._started = False
        self.workflows = Workflows(
            store, cfg, self.now, self._admission, self._timeline, self.cancel
        )
        self.schedules = Schedules(
            store, cfg, self.now, self._admission, self._timeline, self.stats
        )
        self.history = History(store, self.now)
        self.canary = Canary(
            store,
            cfg,
            self.now,
            node_id,
            self._admission,
            self._timeline,
            self.stats,
            self.open_session,
        )

    # ------------------------------------------------------------------ lifecycle
    def _now_ms(self) -> int:
        return to_ms(self.now())

    def _now_us(self) -> int:
        return to_us(self.now())

    async def start(self) -> None:
        """Recover PRELOADED tasks into the wheel, then start the background loops.
        Idempotent; concurrent calls of ``start`` and ``stop`` run one after another."""
        async with self._lifecycle:
            await self._start()

    async def _start(self) -> None:
        if self._started:
            return
        self._started = True
        self._timeline.reset(self._now_ms())
        self._completer.start()
        # Gains load each shard's PRELOADED tasks into the wheel (on_gain); without a
        # cluster that is every shard, at once.
        self.membership.set_listener(self)
        await self.membership.start()
        for outlet in self._outlets.outlets:
            self._sessions.open_outlet(outlet)
        try:  # the rules before the first round: a paused type never goes out at start
            await self.flow.refresh()
        except Exception as exc:
            log.warning("flow rules: first read failed (%s); read again in the loop", exc)
        # Every loop is supervised: one that dies is logged and started again, never
        # left dead while the node keeps its shards (issue 42).
        loops: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            "dispatcher": self._dispatcher.run,
            "deliverer": self._delivery.run,
            "preloader": self._preloader.run,
            "schedules": self.schedules.run,
            "moves": self._moves.run,
            "backlog": self.backlog.run,
            "health": self.health.run,
            "flow": self.flow.run,
        }
        if self._shards.shared:
            loops["notices"] = self._preloader.hear_notices
        restarts = self.stats.loop_restarts
        restarts.update(dict.fromkeys(loops, 0))  # every loop's series exists from the start
        self._tasks = [
            asyncio.create_task(supervised(n, run, log, restarts.update), name=f"tickwheel-{n}")
            for n, run in loops.items()
        ]
        if self.config.canary_interval_s > 0:
            await self.canary.start()

    async def stop(self) -> None:
        """Stop the loops and close every session; safe twice or before start."""
        async with self._lifecycle:
            await self._stop()

    async def _stop(self) -> None:
        if not self._started:
            return
        self._preloader.stopping = True
        await self.canary.stop()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        await self._outlets.drain()
        await self._sessions.close_all()
        await self._completer.stop()
        # Gives the shards up (an etcd node revokes its lease: others take over at once).
        await self.membership.stop()
        await self._background.cancel_all()
        self._started = False
        self._preloader.stopping = False

    def wake(self) -> None:
        """Re-examine the wheel and the store now (after a fake clock moved)."""
        self._wake_dispatcher()
        self._preloader.wake()

    def _wake_dispatcher(self) -> None:
        self._dispatcher.wake()

    def _room_freed(self) -> None:
        self._dispatcher.room_freed()

    def _slot_freed(self, task_id: uuid.UUID) -> None:
        self._sessions.freed(task_id)
        self._dispatcher.freed(task_id)
        self._dispatcher.room_freed()

    def _slots_freed(self, task_ids: list[uuid.UUID]) -> None:
        """:meth:`_slot_freed` for a batch (a completion flush), one wake for all (only
        while tasks wait, as for one)."""
        self._sessions.freed_many(task_ids)
        self._dispatcher.freed_many(task_ids)
        self._dispatcher.room_freed()

    # ------------------------------------------------------------------ shards
    async def on_gain(self, shards: Mapping[int, int]) -> None:
        """This node now serves ``shards`` (called by the membership)."""
        await self._shard_handler.on_gain(shards)
        self.stats.epoch_changes += len(shards)

    async def on_loss(self, shards: frozenset[int]) -> None:
        """This node no longer serves ``shards`` (called by the membership)."""
        await self._shard_handler.on_loss(shards)
        self.stats.shards_lost += len(shards)

    # ------------------------------------------------------------------ probes
    # What the node holds in memory, for metrics, the CLI and tests (read-only).
    @property
    def timers(self) -> int:
        """Tasks waiting in this node's timing wheel for their due tick."""
        return len(self._timeline)

    def in_wheel(self, task_id: uuid.UUID) -> bool:
        """Whether ``task_id`` waits in this node's timing wheel."""
        return task_id in self._timeline

    @property
    def shards_rebuilding(self) -> int:
        """Shards whose Redis index is being rebuilt from the store right now."""
        return len(self._mirror.rebuilding)

    @property
    def shards_owned(self) -> int:
        """Shards this node serves now."""
        return len(self._shards.owned())

    def free_slots(self) -> dict[Pool, int]:
        """Per pool, the free slots of the sessions serving it (each of its pools)."""
        return self._sessions.free_slots()

    def pool_metrics(self) -> dict[Pool, PoolMetrics]:
        """Depth, wait time, slots used and reserved, per pool."""
        return self._dispatcher.pool_metrics()

    # ------------------------------------------------------------------ submission
    async def submit(self, tenant_id: uuid.UUID, specs: Sequence[SubmitSpec]) -> list[InsertResult]:
        """Validate and store tasks; those due inside the look-ahead go into the wheel.

        An idempotent resubmit returns the existing task with ``created=False``."""
        admission = self._admission
        admission.check_batch(specs)
        await self.tenancy.check_home(tenant_id)
        single = len(specs) == 1
        now = self.now()
        horizon = admission.horizon(now)
        new: list[NewTask] = []
        async for part in slices(len(specs)):
            for i in part:
                admission.validate(specs[i], "task" if single else f"tasks[{i}]")
                new.append(admission.new_task(tenant_id, specs[i], now, horizon))
        started = time.perf_counter()
        # Flow options are rare: one C pass over the batch, a look at each only then.
        if any(map(_FLOW, new)) and any(
            t.flow is not None and t.flow.debounce is not None for t in new
        ):
            results = await self._insert_debounced(new, now)
        else:
            results = await self.store.insert_tasks(new, now)
        self.stats.write("insert", len(new), time.perf_counter() - started)
        async for part in slices(len(results)):
            self._timeline.admit(results[part.start : part.stop])
        for r in results:
            if r.debounced and r.task.status is TaskState.PRELOADED:
                self._moved(r.task.shard_id, r.task.id, to_us(r.task.due_at), r.task)
        return results

    async def _insert_debounced(self, new: list[NewTask], now: datetime) -> list[InsertResult]:
        """The debounced tasks through the combiner (one store call per key at a time),
        the rest in one write; results in order."""
        out: list[InsertResult | None] = [None] * len(new)
        plain = [i for i, t in enumerate(new) if t.flow is None or t.flow.debounce is None]
        calls = [
            self._debounce.submit(t, now)
            for t in new
            if t.flow is not None and t.flow.debounce is not None
        ]
        done = await asyncio.gather(*calls)
        debounced = iter(done)
        if plain:
            stored = await self.store.insert_tasks([new[i] for i in plain], now)
            for i, r in zip(plain, stored, strict=True):
                out[i] = r
        return [r if r is not None else next(debounced) for r in out]

    def _moved(
        self, shard: int, task_id: uuid.UUID, due_us: int, task: TaskRecord | None = None
    ) -> None:
        """A debounced submission pushed a PRELOADED task's due time (here, or another
        node's, heard as a move notice): its timer follows, if the task is ours. One that
        fired already and waits for a slot, or was spilled to the index over the wheel's
        cap, goes back at its new time. (One in a dispatch round's commit is added too:
        if that commit wins, this timer's dispatch finds it DISPATCHED and is dropped.)"""
        if not self._shards.serves(shard) or self._timeline.postpone(task_id, due_us):
            return
        self._ready.remove(task_id)
        if task is not None:
            self._timeline.add([preloaded(task)])
        else:
            self._preloader.reconcile_soon()

    # ------------------------------------------------------------------ reads and operator actions
    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """A page of ``tenant_id``'s tasks."""
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidArgument("page_size", f"must be 1..{MAX_PAGE_SIZE}")
        return await self.store.list_tasks(tenant_id, flt, page_size, page_token)

    async def cancel(self, tenant_id: uuid.UUID, task_id: uuid.UUID) -> TaskRecord:
        """Cancel in any non-terminal state; a running task's worker is told."""
        result = await self.store.cancel(tenant_id, task_id, self.now())
        task = result.task
        if task.status is TaskState.CANCELLED:
            self.stats.count("cancelled", task.pool, task.type)
            self._waiters.settled((task.id,))
            self._timeline.drop(task.id)
            self._ready.remove(task.id)
            self._preloader.wake()  # children released by the upstream policy
        if result.notify_worker is not None:
            if self._delivery.cancel_on_delivery(task.id):
                # Committed but held for its due tick: a notice now would reach the
                # worker before the task; it follows the task instead.
                return task
            for session in self._sessions.holders(task.id):
                held = session.holding(task.id)
                if held is not None:
                    session.notify_cancel(*held)
        return task

    async def redrive(
        self, tenant_id: uuid.UUID, task_id: uuid.UUID, scheduled_at: datetime | None = None
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED (operator action); the pre-loader picks it up."""
        if scheduled_at is not None and scheduled_at.tzinfo is None:
            raise InvalidArgument("scheduled_at", "must carry a time zone")
        task = await self.store.redrive(tenant_id, task_id, self.now(), scheduled_at or self.now())
        self._preloader.wake()
        return task

    async def wait_task(
        self, tenant_id: uuid.UUID, task_id: uuid.UUID, timeout_s: float
    ) -> TaskRecord:
        """The task once COMPLETED, CANCELLED or DEAD_LETTER, or as it is when
        ``timeout_s`` (at most 60 s) passes: WaitTask's long poll. Parks on the
        completer's settle events and re-reads the store every ``wait_recheck_s`` for
        tasks settled elsewhere (another node, the reaper, an upstream policy)."""
        if not math.isfinite(timeout_s) or timeout_s < 0:
            raise InvalidArgument("timeout_s", "must be a finite number >= 0")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout_s, MAX_WAIT_S)
        while True:
            with self._waiters.watch(task_id) as settled:
                # Watch first, then read: a settle between the two still wakes us.
                task = await self.store.get_task(tenant_id, task_id)
                left = deadline - loop.time()
                if task.status in SETTLED or left <= 0:
                    return task
                await wait_event(settled, min(left, self.config.wait_recheck_s))

    async def complete(
        self,
        tenant_id: uuid.UUID,
        task_id: uuid.UUID,
        token: int,
        result: JSON | RawJSON | None,
        scheduled_at: datetime | None = None,
    ) -> TaskRecord:
        """Fenced completion from outside a stream; StaleFencingToken for a zombie."""
        task = await self.store.get_task(tenant_id, task_id)
        (outcome,) = await self._completer.complete(
            [Completion(key=task.key, token=token, result=result)]
        )
        self._completer.count_stale([outcome])
        if outcome is not Outcome.OK:
            await self._completer.record_refused(
                [FencedWrite(key=task.key, token=token)], [outcome], UNARY_ACTOR, "complete"
            )
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
        error_type: str = "",
        traceback: str = "",
    ) -> TaskRecord:
        """Fenced failure from outside a stream; StaleFencingToken for a zombie."""
        task = await self.store.get_task(tenant_id, task_id)
        report = FailureReport(
            key=task.key,
            token=token,
            error=error,
            retryable=retryable,
            error_type=error_type,
            traceback=traceback,
            attempt=task.retry_count + 1,
            tenant_id=tenant_id,
        )
        (outcome,) = await self._completer.fail([report])
        self._completer.count_stale([outcome])
        if outcome is not Outcome.OK:
            await self._completer.record_refused(
                [FencedWrite(key=task.key, token=token)], [outcome], UNARY_ACTOR, "fail"
            )
            raise StaleFencingToken(str(task_id), token, f"task is {task.status.value}")
        return await self.store.get_task(tenant_id, task_id)

    async def open_session(self, hello: WorkerHello) -> WorkerSession:
        """Register a worker stream; assignments flow once it has credit."""
        if not hello.worker_id or len(hello.worker_id) > MAX_WORKER_ID_CHARS:
            raise InvalidArgument("hello.worker_id", f"must be 1..{MAX_WORKER_ID_CHARS} characters")
        if not hello.task_types:
            raise InvalidArgument("hello.task_types", "at least one task type is required")
        if hello.slots < 0:
            raise InvalidArgument("hello.slots", "must not be negative")
        tenant = await self.store.get_tenant(hello.tenant_id)
        await self.tenancy.check_home(hello.tenant_id)
        return self._sessions.open(hello, shared=tenant.tier == "SYSTEM")
