"""Graceful drain: stop taking work, let handlers finish or checkpoint, release the rest.

Owns the drain's state: whether the worker stopped taking work (:attr:`Drain.stopping`),
the deadline (and its moves on a second ``shutdown``), the tally of outcomes that
becomes the :class:`DrainReport`, and the one shutdown task every ``shutdown`` call
awaits. Two phases (``docs/worker.md``):

1. *Ingress stop*: a ``Drain`` message tells the server to push nothing more; a Kafka
   consumer leaves its group now.
2. *Grace window*: every running handler sees ``ctx.cancelled`` with
   ``cancel_reason == "drain"``; heartbeats go on. At the deadline whatever still
   runs is released at once with its last checkpoint.

May call: the stream (send, request, finish), the held table (``_slots.py``), the
Kafka feed (stop) and the ``abandon`` callable it is given (the facade's clean-up when
``run`` never started). Called by: the :class:`~scheduler.worker.Worker` facade
(``shutdown``) and the handler runner (``stopping``, :meth:`Drain.count`).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from scheduler._aio import wait_event
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.logs import task_extra
from scheduler.worker._context import DRAIN, cancel
from scheduler.worker._kafka import KafkaFeed
from scheduler.worker._slots import Held, Slots
from scheduler.worker._stream import Stream

_log = logging.getLogger("tickwheel.worker")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DrainReport:
    """How the tasks held when :meth:`Worker.shutdown` began (or that finished during
    it) ended. ``clean`` means none was left to lease expiry."""

    completed: int = 0
    """Finished normally inside the grace period."""
    failed: int = 0
    """Failed attempts (committed: RETRYING or DEAD_LETTER)."""
    cancelled: int = 0
    """Cancel confirmed (a client cancelled them)."""
    released: int = 0
    """The handler checkpointed and raised :class:`Interrupted`; lease released."""
    released_at_deadline: int = 0
    """Still running at the deadline (or a second signal); released at once."""
    rejected: int = 0
    """Another attempt owned the task already (stale fencing token)."""
    uncommitted: int = 0
    """The outcome or release never reached the server: the lease will expire."""

    @property
    def clean(self) -> bool:
        """Every task was completed, failed, cancelled or handed back explicitly."""
        return self.uncommitted == 0


class Drain:
    """The two-phase drain of one worker."""

    def __init__(
        self,
        *,
        worker_id: str,
        stream: Stream,
        slots: Slots,
        kafka: KafkaFeed | None,
        started: Callable[[], bool],
        done: asyncio.Event,
        abandon: Callable[[], None],
    ) -> None:
        self._worker_id = worker_id
        self._stream = stream
        self._slots = slots
        self._kafka = kafka
        self._started = started
        self._done = done
        self._abandon = abandon
        self.stopping = False
        """No more work is taken (draining, or ``run`` ended)."""
        self._shutdown_task: asyncio.Task[DrainReport] | None = None
        self._deadline: float | None = None  # loop time when leftovers are released
        self._deadline_moved = asyncio.Event()
        self._tally: collections.Counter[str] | None = None

    def stop_taking(self) -> None:
        """Take no more work (``run`` ended without a drain)."""
        self.stopping = True

    def count(self, what: str) -> None:
        """Tally an outcome (a :class:`DrainReport` field) while draining."""
        if self._tally is not None:
            self._tally[what] += 1

    async def shutdown(self, grace_s: float) -> DrainReport:
        """See :meth:`Worker.shutdown`."""
        if grace_s < 0:
            raise ValueError("grace_s must be >= 0")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        if self._deadline is None or deadline < self._deadline:
            self._deadline = deadline
            self._deadline_moved.set()
            wall = datetime.now(UTC) + timedelta(seconds=grace_s)
            for held in self._slots.held.values():
                held.ctx.drain_deadline = wall
        if self._shutdown_task is None:
            self._shutdown_task = loop.create_task(
                self._shutdown(), name=f"tickwheel-worker-{self._worker_id}-shutdown"
            )
        return await asyncio.shield(self._shutdown_task)

    async def _shutdown(self) -> DrainReport:
        self.stopping = True
        if not self._started():
            self._stream.closing.set()
            self._abandon()
            return DrainReport()
        self._tally = collections.Counter()
        loop = asyncio.get_running_loop()
        assert self._deadline is not None
        held_table = self._slots.held
        # Phase 1: no more assignments on this stream (or on any reconnect); a Kafka
        # consumer stops fetching and leaves its group now, before the grace period.
        self._stream.send(pb.WorkerMessage(drain=pb.Drain()))
        if self._kafka is not None:
            await self._kafka.stop()
        # Phase 2: tell every handler; heartbeats keep their leases meanwhile.
        wall = datetime.now(UTC) + timedelta(seconds=max(0.0, self._deadline - loop.time()))
        for held in list(held_table.values()):
            held.ctx.drain_deadline = held.ctx.drain_deadline or wall
            cancel(held.ctx, DRAIN)
        _log.info(
            "worker %s draining: %d task(s) running, %.1f s grace",
            self._worker_id,
            len(held_table),
            max(0.0, self._deadline - loop.time()),
            extra=task_extra(worker_id=self._worker_id),
        )
        while True:
            running = [h.task for h in held_table.values() if h.task and not h.task.done()]
            remaining = self._deadline - loop.time()
            if not running or remaining <= 0:
                break
            self._deadline_moved.clear()
            moved = loop.create_task(
                self._deadline_moved.wait(), name=f"tickwheel-worker-{self._worker_id}-deadline"
            )
            try:
                await asyncio.wait(
                    [*running, moved], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                moved.cancel()
        leftovers = [h for h in held_table.values() if h.task is not None and not h.task.done()]
        if leftovers:
            _log.warning(
                "worker %s: grace over, releasing %d task(s) still running",
                self._worker_id,
                len(leftovers),
                extra=task_extra(worker_id=self._worker_id),
            )
            await self._release(leftovers)
        # Outcome commits that are still in flight get their (short) chance: a row
        # stays held until its outcome is answered.
        await self._slots.wait_empty(self._stream.request_timeout_s)
        self._stream.finish()
        if not await wait_event(self._done, 10.0):
            _log.warning(
                "worker %s: stream did not close in time",
                self._worker_id,
                extra=task_extra(worker_id=self._worker_id),
            )
        tally = self._tally
        report = DrainReport(**{k: tally[k] for k in DrainReport.__dataclass_fields__})
        _log.info(
            "worker %s drained: %s",
            self._worker_id,
            ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in dataclasses.asdict(report).items()),
            extra=task_extra(worker_id=self._worker_id),
        )
        return report

    async def _release(self, leftovers: list[Held]) -> None:
        """Release tasks whose handlers are still running, at once, with their last
        checkpoint; then stop the handlers (a sync handler's thread runs on unseen)."""
        for held in leftovers:
            held.released = True
            cancel(held.ctx, DRAIN)
            if held.span is not None:
                held.span.set_attribute("tickwheel.outcome", "released_at_deadline")
        msgs = [h.release_message() for h in leftovers]
        results = await asyncio.gather(
            *(self._stream.request(m, timeout_s=5.0) for m in msgs), return_exceptions=True
        )
        for held, res in zip(leftovers, results, strict=True):
            if isinstance(res, BaseException):
                _log.warning(
                    "task %s: release failed: %s",
                    held.ctx.task_id,
                    res,
                    extra={**held.log_fields(), **task_extra(worker_id=self._worker_id)},
                )
                self.count("uncommitted")
            elif res and not res[0].ok:
                self.count("rejected")
            else:
                self.count("released_at_deadline")
        for held in leftovers:
            if held.task is not None:
                held.task.cancel()
        await asyncio.gather(*(h.task for h in leftovers if h.task), return_exceptions=True)
