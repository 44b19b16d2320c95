"""The completer: every fenced worker write, batched into one store call per kind.

Owns the five batchers (ack, heartbeat, complete, fail, release) and what follows an
accepted write: the worker slot comes back, DAG children released by a completion go
into the timeline, a failure gets its retry time, a released task is reloaded. Calls
the store, the slots ledger, the timeline and the pre-loader (its ``wake`` and
``reload``). Called by worker sessions (streams and the built-in canary), the unary
CompleteTask/FailTask path of the facade, and Kafka consumers' sessions alike.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from scheduler._errors import StoreError
from scheduler.engine._acks import AckQueue
from scheduler.engine._batcher import Batcher
from scheduler.engine._config import EngineConfig
from scheduler.engine._health import Beat
from scheduler.engine._slots import Slots
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import Timeline
from scheduler.engine._types import FailureReport
from scheduler.jitter import stable_hash
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    JSON,
    Completion,
    Failure,
    FencedWrite,
    Outcome,
    RawJSON,
    RefusedWrite,
    Release,
    TaskKey,
)

log = logging.getLogger("tickwheel.engine")

REFUSED = "stale_fencing_token"
"""The reason a refused write is recorded with: the one the worker is sent back."""


def spread(key: TaskKey, tenant_id: uuid.UUID, attempt: int) -> float:
    """The deterministic backoff spread of one attempt: a factor in [1, 1.25)."""
    return 1.0 + (stable_hash(tenant_id, key.id) ^ attempt) % 1000 / 4000.0


class Completer:
    """Group commit of worker writes (brief §2: one statement per kind per tick)."""

    def __init__(
        self,
        store: Store,
        config: EngineConfig,
        now: Callable[[], datetime],
        stats: EngineStats,
        slots: Slots,
        timeline: Timeline,
        wake_preloader: Callable[[], None],
        reload: Callable[[Sequence[Release]], Awaitable[None]],
        settled: Callable[[Iterable[uuid.UUID]], None] = lambda ids: None,
        store_beat: Beat | None = None,
    ) -> None:
        self._store = store
        self._recording: set[asyncio.Task[None]] = set()
        """Refusals of acks answered before their write, being recorded."""
        self._config = config
        self._now = now
        self._stats = stats
        self._slots = slots
        self._timeline = timeline
        self._wake_preloader = wake_preloader
        self._reload = reload
        self._settled = settled
        """Tells WaitTask callers about tasks that became COMPLETED/CANCELLED/DEAD_LETTER."""
        mb = config.max_batch
        # Each write kind tells the store's beat whether it found the store
        # (``_health.py``); one that did not is held and tried again (``_batcher.py``).
        beat = store_beat
        self.acks = AckQueue(
            self._flush_acks, max_batch=mb, linger_s=config.ack_linger_ms / 1000, beat=beat
        )
        self._heartbeats: Batcher[FencedWrite, Outcome] = Batcher(
            "heartbeat", self._flush_heartbeats, max_batch=mb, beat=beat
        )
        self._completions: Batcher[Completion, Outcome] = Batcher(
            "complete",
            self._flush_completions,
            max_batch=mb,
            beat=beat,
            linger_s=config.complete_linger_ms / 1000,
        )
        self._failures: Batcher[FailureReport, Outcome] = Batcher(
            "fail", self._flush_failures, max_batch=mb, beat=beat
        )
        self._releases: Batcher[Release, Outcome] = Batcher(
            "release", self._flush_releases, max_batch=mb, beat=beat
        )
        self._batchers: tuple[Batcher[Any, Any], ...] = (
            self._heartbeats,
            self._completions,
            self._failures,
            self._releases,
        )

    def holding(self) -> bool:
        """Whether writes that found no store wait to be tried again."""
        return self.acks.retry.held > 0 or any(b.retry.held > 0 for b in self._batchers)

    def start(self) -> None:
        """Start the ack queue and the batchers."""
        self.acks.start()
        for batcher in self._batchers:
            batcher.start()

    async def stop(self) -> None:
        """Flush and stop the ack queue and the batchers; safe twice or before start."""
        await self.acks.stop()
        for batcher in self._batchers:
            await batcher.stop()

    def now(self) -> datetime:
        """The engine's clock."""
        return self._now()

    # -- the writes ----------------------------------------------------------------------
    def ack_later(
        self, writes: Sequence[FencedWrite], actor: str | None = None
    ) -> asyncio.Future[list[Outcome]]:
        """Queue DISPATCHED -> RUNNING (fenced) for the next ack write, or for the
        task's completion if it comes first; the future has the outcomes once
        written. With ``actor`` (the worker, answered before the write) the refused
        ones are then counted and recorded in their tasks' history (the worker learns
        it when its next write of the task is refused), and a failed write is logged."""
        fut = self.acks.submit(writes, self._now())
        if actor is not None:
            fut.add_done_callback(lambda done: self._acks_written(writes, done, actor))
        return fut

    def _acks_written(
        self, writes: Sequence[FencedWrite], fut: asyncio.Future[list[Outcome]], actor: str
    ) -> None:
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            log.warning(
                "worker %s: %d acks not written (%s); their leases will lapse",
                actor,
                len(writes),
                exc,
            )
            return
        out = fut.result()
        if all(o is Outcome.OK for o in out):
            return
        self.count_stale(out)
        if Outcome.STALE in out:
            task = asyncio.get_running_loop().create_task(
                self.record_refused(writes, out, actor, "ack"), name="tickwheel-refused-acks"
            )
            self._recording.add(task)
            task.add_done_callback(self._recording.discard)

    async def ack(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """DISPATCHED -> RUNNING (fenced), written now."""
        fut = self.ack_later(writes)
        await self.acks.written([w.key.id for w in writes], hurry=True)
        return await fut

    async def heartbeat(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """Extend the leases (fenced)."""
        return await self._heartbeats.submit_many(writes)

    async def complete(self, items: Sequence[Completion]) -> list[Outcome]:
        """RUNNING -> COMPLETED (fenced). A task whose ack is still queued has it
        written by the same statement (DISPATCHED -> RUNNING -> COMPLETED)."""
        acks = self.acks
        await acks.written(c.key.id for c in items)  # an ack in flight lands first
        taken = [acks.take(c.key.id, c.token) for c in items]
        if not any(taken):
            return await self._completions.submit_many(items)
        # Built directly: dataclasses.replace reads the fields' list and each field by
        # name, a dozen Python-level steps a task on the ack-first hot path.
        folded = [
            c if p is None else Completion(key=c.key, token=c.token, result=c.result, acked_at=p.at)
            for c, p in zip(items, taken, strict=True)
        ]
        try:
            outcomes = await self._completions.submit_many(folded)
        except BaseException:
            acks.put_back(p for p in taken if p is not None)
            raise
        for p, outcome in zip(taken, outcomes, strict=True):
            if p is not None:
                acks.settle(p, outcome)
        return outcomes

    async def fail(self, items: Sequence[FailureReport]) -> list[Outcome]:
        """A failed attempt: RETRYING with backoff, or DEAD_LETTER (fenced)."""
        await self.acks.written((f.key.id for f in items), hurry=True)
        return await self._failures.submit_many(items)

    async def release(self, items: Sequence[Release]) -> list[Outcome]:
        """Give tasks back without using an attempt (fenced)."""
        await self.acks.written((r.key.id for r in items), hurry=True)
        return await self._releases.submit_many(items)

    async def checkpoint(self, key: TaskKey, token: int, data: JSON | RawJSON) -> Outcome:
        """Store progress for a resume (fenced)."""
        await self.acks.written([key.id], hurry=True)
        return await self._store.checkpoint(key, token, data, self._now())

    async def confirm_cancel(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        """The worker stopped cancelled tasks: RUNNING -> CANCELLED (fenced)."""
        await self.acks.written((w.key.id for w in writes), hurry=True)
        outcomes = await self._store.confirm_cancel(writes, self._now())
        self._count("cancelled", writes, outcomes)
        self._free_ok(writes, outcomes)
        self._settled(w.key.id for w, o in zip(writes, outcomes, strict=True) if o is Outcome.OK)
        if any(o is Outcome.OK for o in outcomes):
            # The store applied the upstream policy: wake the pre-loader for any
            # children now at zero (policy continue).
            self._wake_preloader()
        return outcomes

    async def release_unacked(
        self, held: Sequence[tuple[TaskKey, int]], *, dispatched_only: bool = True
    ) -> None:
        """A closed session's unacked tasks: DISPATCHED ones go back now. The write is
        DISPATCHED-only in the store, so a task another stream (on any node) acked
        meanwhile keeps its lease and its worker. A session that starts on delivery
        passes ``dispatched_only=False``: its unacked tasks were committed RUNNING and
        never pushed, so no worker can hold them."""
        try:
            await self._releases.submit_many(
                [Release(key=k, token=t, dispatched_only=dispatched_only) for k, t in held]
            )
            # A refused one is RUNNING under another stream (another node): no session
            # here holds it any more, so its slot on this node comes back as well.
            for key, _ in held:
                self._slots.free(key.id)
        except (RuntimeError, StoreError) as exc:
            # Engine already stopped, or it stopped while the store was away: their
            # leases lapse and the reaper requeues them.
            log.warning(
                "could not release %d unacked tasks (%s); leases will expire", len(held), exc
            )

    async def end_leases(self, writes: Sequence[FencedWrite]) -> None:
        """End these leases now (fenced: under these tokens, while DISPATCHED or
        RUNNING), so the reaper's next look takes the tasks back. For the RUNNING tasks
        of a worker stream that broke and was not taken up again. A store that is away
        leaves them to their lease."""
        now = self._now()
        try:
            out = await self._store.heartbeat(writes, now, now)
        except StoreError as exc:
            log.warning("could not end %d orphaned leases (%s); they lapse", len(writes), exc)
            return
        log.info(
            "%d running tasks of broken worker streams not taken up again within the grace;"
            " their leases end (%d already gone)",
            len(writes),
            sum(o is not Outcome.OK for o in out),
        )

    async def record_refused(
        self,
        writes: Sequence[FencedWrite | Completion | FailureReport | Release],
        outcomes: Sequence[Outcome],
        actor: str,
        write: str,
    ) -> None:
        """Record the STALE ones in the task's history (GetTaskHistory's refused
        writes). Only on a refusal, so accepted writes cost nothing; one statement per
        refused batch. A failure to record is logged, never the worker's problem."""
        now = self._now()
        refused = [
            RefusedWrite(key=w.key, token=w.token, actor=actor, write=write, reason=REFUSED, at=now)
            for w, o in zip(writes, outcomes, strict=True)
            if o is Outcome.STALE
        ]
        if not refused:
            return
        try:
            await self._store.record_refused(refused)
        except StoreError as exc:
            log.warning("could not record %d refused writes: %s", len(refused), exc)

    def count_stale(self, outcomes: Sequence[Outcome]) -> None:
        """Count the writes that were refused (zombies, strangers, unknown tasks)."""
        self._stats.stale_writes += sum(o is not Outcome.OK for o in outcomes)

    def retry_at(self, key: TaskKey, tenant_id: uuid.UUID, attempt: int) -> datetime:
        """Exponential backoff with deterministic jitter (up to +25%), capped: the
        server's default. A task with its own retry policy gets the same formula over
        its own base and cap, computed by the store from the row (``spread``)."""
        cfg = self._config
        base = min(cfg.retry_max_s, cfg.retry_base_s * (2 ** max(attempt - 1, 0)))
        return self._now() + timedelta(seconds=base * spread(key, tenant_id, attempt))

    # -- flushes -------------------------------------------------------------------------
    def _count(self, event: str, items: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        """Count the accepted writes of ``items`` under ``event`` (before their slot is
        freed: the slots ledger knows each task's pool and type)."""
        counter = self._stats.tasks[event]
        labels = self._slots.labels
        for item, outcome in zip(items, outcomes, strict=True):
            if outcome is Outcome.OK:
                counter[labels(item.key.id)] += 1

    def _free_ok(self, items: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        """Accepted completions, failures and releases free their worker slot.

        Only OK: a zombie's rejected write must not free the slot of the worker that
        holds the task now (the reaper freed the zombie's slot when its lease lapsed).
        """
        ok = Outcome.OK
        self._slots.free_many([i.key.id for i, o in zip(items, outcomes, strict=True) if o is ok])

    async def _flush_acks(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        lease = self._now() + timedelta(seconds=self._config.lease_ttl_s)
        started = time.perf_counter()
        out = await self._store.ack(writes, lease, self._now())
        self._stats.write("ack", len(writes), time.perf_counter() - started)
        return out

    async def _flush_heartbeats(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        lease = self._now() + timedelta(seconds=self._config.lease_ttl_s)
        started = time.perf_counter()
        out = await self._store.heartbeat(writes, lease, self._now())
        self._stats.write("heartbeat", len(writes), time.perf_counter() - started)
        return out

    async def _flush_completions(self, items: Sequence[Completion]) -> list[Outcome]:
        started = time.perf_counter()
        results = await self._store.complete(items, self._now())
        self._stats.write("complete", len(items), time.perf_counter() - started)
        # One pass a batch (issue 41): the count by labels, then the slots and the
        # waiters of the accepted ones, told once each.
        outcomes = [r.outcome for r in results]
        counter = self._stats.tasks["completed"]
        labels = self._slots.labels
        ok = Outcome.OK
        done = [c.key.id for c, o in zip(items, outcomes, strict=True) if o is ok]
        for task_id in done:
            counter[labels(task_id)] += 1
        self._slots.free_many(done)
        children = [c for r in results if r.ready_children for c in r.ready_children]
        if children:
            self._timeline.add(children)
        self._stats.completed += len(done)
        self._settled(done)
        return outcomes

    async def _flush_failures(self, items: Sequence[FailureReport]) -> list[Outcome]:
        failures = [
            Failure(
                key=f.key,
                token=f.token,
                error=f.error,
                retryable=f.retryable,
                retry_at=self.retry_at(f.key, f.tenant_id or uuid.UUID(int=0), f.attempt or 1),
                error_type=f.error_type,
                traceback=f.traceback,
                spread=spread(f.key, f.tenant_id or uuid.UUID(int=0), f.attempt or 1),
            )
            for f in items
        ]
        started = time.perf_counter()
        results = await self._store.fail(failures, self._now())
        self._stats.write("fail", len(items), time.perf_counter() - started)
        outcomes = [r.outcome for r in results]
        self._count("failed", items, outcomes)
        tasks = self._stats.tasks
        for f, r in zip(items, results, strict=True):
            if r.outcome is Outcome.OK:
                event = "dead_lettered" if r.new_state is TaskState.DEAD_LETTER else "retried"
                tasks[event][self._slots.labels(f.key.id)] += 1
        self._free_ok(items, outcomes)
        if any(r.new_state is TaskState.DEAD_LETTER for r in results):
            # Children released by the upstream policy. A retry waits out its backoff
            # as RETRYING: the pre-loader's regular pass takes it in shortly before
            # its retry time.
            self._wake_preloader()
        self._stats.failed += sum(r.outcome is Outcome.OK for r in results)
        self._settled(
            f.key.id
            for f, r in zip(items, results, strict=True)
            if r.outcome is Outcome.OK and r.new_state is TaskState.DEAD_LETTER
        )
        return [r.outcome for r in results]

    async def _flush_releases(self, items: Sequence[Release]) -> list[Outcome]:
        started = time.perf_counter()
        outcomes = await self._store.release(items, self._now())
        self._stats.write("release", len(items), time.perf_counter() - started)
        self._free_ok(items, outcomes)
        requeue = [r for r, o in zip(items, outcomes, strict=True) if o is Outcome.OK]
        if requeue:
            # Released tasks are PRELOADED again: reload them so they go out at once.
            self._wake_preloader()
            await self._reload(requeue)
        return outcomes
