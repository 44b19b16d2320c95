"""The ack queue: acks waiting for their group commit, folded into completions.

An ack (DISPATCHED -> RUNNING) that a session accepted waits here for its write. A
flusher writes the acks that have waited ``ack_linger_ms`` in one store call (oldest
first, at most ``max_batch``); at once when a caller needs an ack written first, when
more than 20 batches are queued, or on stop. A completion of a task whose ack is still
queued takes the ack out (:meth:`AckQueue.take`): the store then writes DISPATCHED ->
RUNNING -> COMPLETED in the completion's one statement, with both audit rows, so a
short task's ack costs no write of its own. An ack already being written is waited for
(:meth:`AckQueue.written`) before any other write of its task, so no write of a task
overtakes its ack.

Owns the queue and the flusher; calls the flush function it is given (the completer's
store call). Called by the completer only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime

from scheduler.engine._batcher import OutageRetry
from scheduler.engine._health import Beat
from scheduler.store import StoreUnavailable
from scheduler.types import FencedWrite, Outcome

log = logging.getLogger("tickwheel.engine")


class _Group:
    """The acks of one ``submit`` call and the future its caller awaits."""

    __slots__ = ("fut", "left", "outcomes")

    def __init__(self, n: int, fut: asyncio.Future[list[Outcome]]) -> None:
        self.fut = fut
        self.left = n
        self.outcomes: list[Outcome] = [Outcome.OK] * n


class Pending:
    """One queued ack."""

    __slots__ = ("at", "dropped", "group", "index", "taken", "write")

    def __init__(self, write: FencedWrite, at: datetime, group: _Group, index: int) -> None:
        self.write = write
        self.at = at
        """When the ack arrived: the time of its audit row if a completion takes it."""
        self.group = group
        self.index = index
        self.taken = False
        self.dropped = False
        """Taken, and since passed over by the flusher (no longer in its queue)."""


class AckQueue:
    """Acks batched into one store call per flush, or taken by their completion."""

    def __init__(
        self,
        flush: Callable[[Sequence[FencedWrite]], Awaitable[Sequence[Outcome]]],
        *,
        max_batch: int,
        linger_s: float,
        beat: Beat | None = None,
    ) -> None:
        self._flush = flush
        self.retry = OutageRetry("ack", beat)
        """Waits between the tries of an ack write that found no store."""
        self._max_batch = max_batch
        self._linger_s = linger_s
        self._cap = max_batch * 20
        """More queued than this and the oldest are written without waiting longer."""
        self._queue: collections.deque[tuple[float, int, Pending]] = collections.deque()
        """(arrival, sequence number, ack) in arrival order."""
        self._seq = 0
        self._hurry_to = 0
        """Acks up to this sequence number are written without waiting for their age."""
        self._queued: dict[uuid.UUID, Pending] = {}
        """Queued acks by task (the first, if a task was acked twice)."""
        self._writing: dict[uuid.UUID, asyncio.Future[None]] = {}
        """Tasks whose ack is in the store call in flight, and that call's end."""
        self._wakeup = asyncio.Event()
        self._hurry = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.folded = 0
        """Acks written by their task's completion (no write of their own)."""

    def start(self) -> None:
        """Start the flusher; idempotent."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="tickwheel-acks")

    async def stop(self) -> None:
        """Write what is queued, then stop; safe twice or before start."""
        self._closed = True
        self.retry.stop()
        task, self._task = self._task, None
        if task is None:
            return
        self._wakeup.set()
        self._hurry.set()
        await task

    def submit(self, writes: Sequence[FencedWrite], now: datetime) -> asyncio.Future[list[Outcome]]:
        """Queue acks; the future's result is their outcomes, in order, once each was
        written (alone or with its completion)."""
        if self._closed or self._task is None:
            raise RuntimeError("the ack queue is not running")
        fut: asyncio.Future[list[Outcome]] = asyncio.get_running_loop().create_future()
        if not writes:
            fut.set_result([])
            return fut
        group = _Group(len(writes), fut)
        mono = time.monotonic()
        queue, queued = self._queue, self._queued
        seq = self._seq
        for i, w in enumerate(writes):
            p = Pending(w, now, group, i)
            seq += 1
            queue.append((mono, seq, p))
            queued.setdefault(w.key.id, p)
        self._seq = seq
        if self._linger_s <= 0 or len(queue) > self._cap:
            self._hurry_to = seq
            self._hurry.set()
        self._wakeup.set()
        return fut

    def take(self, task_id: uuid.UUID, token: int) -> Pending | None:
        """Take the queued (not yet written) ack of ``task_id`` under ``token`` for its
        completion to write; :meth:`settle` it with the completion's outcome."""
        p = self._queued.get(task_id)
        if p is None or p.write.token != token:
            return None
        del self._queued[task_id]
        p.taken = True
        return p

    def settle(self, p: Pending, outcome: Outcome) -> None:
        """The outcome of an ack that was written with its completion."""
        self.folded += outcome is Outcome.OK
        self._done(p, outcome)

    def put_back(self, taken: Iterable[Pending]) -> None:
        """The completion that took these acks was not written: write them alone."""
        for p in taken:
            p.taken = False
            self._queued.setdefault(p.write.key.id, p)
            if p.dropped:
                p.dropped = False
                self._seq += 1
                self._queue.append((0.0, self._seq, p))
        self._hurry_to = self._seq
        self._hurry.set()
        self._wakeup.set()

    async def written(self, task_ids: Iterable[uuid.UUID], *, hurry: bool = False) -> None:
        """Return once no ack of these tasks is being written; with ``hurry``, write the
        queued ones now and wait for them too (a failure, release or cancel of a task
        must not overtake its ack). Returns without a suspension when nothing is to wait
        for, so a caller's :meth:`take` right after sees the same queue."""
        ids = list(task_ids)
        writing = self._writing
        if hurry:
            queued = [
                p.group.fut
                for t in ids
                if t not in writing and (p := self._queued.get(t)) is not None
            ]
            if queued:
                self._hurry_to = self._seq
                self._hurry.set()
                self._wakeup.set()
                for fut in queued:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(fut)
        # Checked again after every wait: the flusher may meanwhile have begun writing
        # another of these acks (queued when this was called). Returning with it in
        # flight let a completion that found no ack to take reach the store before the
        # ack did, and be refused.
        while in_flight := [writing[t] for t in ids if t in writing]:
            for end in in_flight:
                with contextlib.suppress(Exception):
                    await asyncio.shield(end)

    def _done(self, p: Pending, outcome: Outcome) -> None:
        g = p.group
        g.outcomes[p.index] = outcome
        g.left -= 1
        if g.left == 0 and not g.fut.done():
            g.fut.set_result(g.outcomes)

    def _fail(self, p: Pending, exc: BaseException) -> None:
        if not p.group.fut.done():
            p.group.fut.set_exception(exc)

    def _due(self) -> list[Pending]:
        """The next batch to write: from the oldest, those that waited ``linger_s``
        (every one up to ``_hurry_to``, all of them on stop), at most ``max_batch``."""
        queue, batch = self._queue, list[Pending]()
        cutoff = time.monotonic() - self._linger_s
        while queue and len(batch) < self._max_batch:
            mono, seq, p = queue[0]
            if p.taken:
                p.dropped = True
            else:
                if mono > cutoff and seq > self._hurry_to and not self._closed:
                    break
                if self._queued.get(p.write.key.id) is p:
                    del self._queued[p.write.key.id]
                batch.append(p)
            queue.popleft()
        return batch

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                self._hurry.clear()
                batch = self._due()
                if not batch:
                    if self._queue:  # the oldest still lingers: until its time, or a hurry
                        left = self._queue[0][0] + self._linger_s - time.monotonic()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._hurry.wait(), max(left, 0.0))
                    continue
                await self._write(batch)
            if self._closed:
                return

    async def _write(self, batch: list[Pending]) -> None:
        end: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        writing = self._writing
        for p in batch:
            writing[p.write.key.id] = end
        try:
            # A write that found no store stays in flight (a completion of one of its
            # tasks waits for it) and is tried again until the store is back.
            while True:
                try:
                    outcomes = await self._flush([p.write for p in batch])
                except StoreUnavailable as exc:
                    if await self.retry.failed(exc, len(batch)):
                        continue
                    raise
                self.retry.ok()
                break
        except asyncio.CancelledError:
            for p in batch:
                p.group.fut.cancel()
            raise
        except Exception as exc:
            for p in batch:
                self._fail(p, exc)
        else:
            for p, outcome in zip(batch, outcomes, strict=True):
                self._done(p, outcome)
        finally:
            for p in batch:
                if writing.get(p.write.key.id) is end:
                    del writing[p.write.key.id]
            end.set_result(None)
