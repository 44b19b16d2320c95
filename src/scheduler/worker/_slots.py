"""Slots and credit: the table of tasks this worker holds, and the credit it grants.

Owns :class:`Held` (one row per task held: its fenced ref, its context, whether it
was acked or released, when it may start, its handler task and span; made from a push
by :func:`held_of`, which puts a task pushed ahead of its due time on the start grid,
:data:`START_GRID_S`) and :class:`Slots` (the table, the
slot count, and the credit owed back to the server). A slot is taken when an
assignment is held and given back when its handler returns (its row stays until the
outcome is answered: :meth:`Slots.handler_ended`); credit given back in
one loop turn rides in one ``Credit`` message. In Kafka mode a freed slot wakes the
consumer instead (it fetches as many records as there are free slots).

May call: the ``send`` and ``stopping`` callables it is given (the stream's send, the
drain's flag) and a task's context (:func:`held_of` makes it). Called by: the
handler runner (makes, adds and drops rows), the drain (reads
the rows it must finish or release), the stream listener (free slots in ``Hello``)
and the :class:`~scheduler.worker.Worker` facade (``running_tasks``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime

from opentelemetry.trace import Span

from scheduler import jsonbytes
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.logs import task_extra, trace_id_of
from scheduler.worker._context import JSON, TaskContext
from scheduler.worker._outbox import Completed
from scheduler.worker._pushed import Pushed
from scheduler.worker._shared_credit import StreamCredit


@dataclasses.dataclass(slots=True, eq=False)
class Held:
    """One task this worker holds (one attempt: its ``ref`` carries the token)."""

    ref: pb.TaskRef
    ctx: TaskContext
    ref_bytes: bytes
    """``ref`` serialised: the ack and the completion are written from it
    (``_outbox``)."""
    dispatch_trace: dict[str, str] | None = None
    acked: bool = False
    """RUNNING in the store (acked, or started on delivery): heartbeats renew it."""
    released: bool = False
    """Released at the drain deadline while its handler ran: nothing more to commit."""
    freed: bool = False
    """Its slot went back when its handler ended (:meth:`Slots.handler_ended`), before
    its outcome's answer: the row stays until then, the slot is another task's."""
    committing: bool = False
    """Its outcome was sent and its answer is awaited: a heartbeat refused for it now
    is answered after the outcome committed (the task is no longer RUNNING), not a
    lost lease; a real loss shows in the outcome's own answer."""
    task: asyncio.Task[None] | None = None
    span: Span | None = None
    tenant_id: str = ""
    """The task's tenant (from its assignment), for log lines."""
    start_at: float = 0.0
    """The ``time.monotonic()`` before which its handler must not start: a task pushed
    ahead of its due time (``Assignment.start_in_us``) is held until then. 0: at once."""
    outcome: Completed | None = None
    """Its completion, once sent without a waiting coroutine
    (``HandlerRunner._attempt``): sent again from here if its batch failed."""

    def log_fields(self) -> dict[str, object]:
        """The attempt's log fields (``scheduler.logs``): task, tenant, token, trace."""
        trace_context = self.ctx.trace_context
        return task_extra(
            task_id=self.ctx.task_id,
            tenant_id=self.tenant_id or None,
            fencing_token=self.ref.fencing_token,
            trace_id=trace_id_of(trace_context.get("traceparent") if trace_context else None),
        )

    def release_message(self) -> pb.WorkerMessage:
        """A ``Release`` of this attempt with its last checkpoint."""
        data = self.ctx.checkpoint_data
        return pb.WorkerMessage(
            release=pb.Release(
                task=self.ref, checkpoint_json=jsonbytes.dumps(data) if data is not None else b""
            )
        )


def held_of(
    p: Pushed,
    received_at: datetime,
    arrived: float,
    loop: asyncio.AbstractEventLoop,
    checkpointer: Callable[[TaskContext, JSON], Awaitable[None]],
) -> Held:
    """The held attempt of pushed task ``p`` (``scheduler.worker._pushed``), which
    arrived at ``received_at`` (``arrived`` by ``time.monotonic``)."""
    (
        task_id,
        type_,
        attempt,
        max_retries,
        payload,
        token,
        checkpoint,
        submit_trace,
        scheduled_at,
        due_at,
        timeout_s,
        tenant_id,
        ref,
        dispatch_trace,
        ref_bytes,
        start_in_us,
    ) = p
    ctx = TaskContext(
        task_id=task_id,
        type=type_,
        attempt=attempt,
        max_retries=max_retries,
        payload=payload,
        fencing_token=token,
        checkpoint_data=checkpoint,
        trace_context=submit_trace,
        scheduled_at=scheduled_at,
        due_at=due_at,
        timeout_s=timeout_s,
        received_at=received_at,
        loop=loop,
        checkpointer=checkpointer,
    )
    return Held(
        ref=ref,
        ctx=ctx,
        ref_bytes=ref_bytes,
        dispatch_trace=dispatch_trace,
        tenant_id=tenant_id,
        start_at=_on_grid(arrived + start_in_us / 1e6) if start_in_us else 0.0,
    )


START_GRID_S = 0.002
"""A held task starts at the first multiple of this (``time.monotonic``) at or after
its due instant: the handlers due within one grid step start in one turn of the loop, so their
freed slots and outcomes go in one ``Credit`` and one ``Completions`` message, as a
push's handlers did when they all started at its ack (a timer a task sent a message a
task: measured +16 % CPU a task at 5,000 a second). The server's pushes come at most
this often too (``_pacing.PUSH_INTERVAL_S``)."""


def _on_grid(at: float) -> float:
    return max(at, math.ceil(at / START_GRID_S) * START_GRID_S)


CREDIT_LINGER_S = 0.02
"""Longest freed slots wait to be granted while the server still holds more than half
this worker's slots in credit: a busy flat stream's handlers end every start-grid step
(:data:`START_GRID_S`), and a ``Credit`` each time cost a message a step on both sides.
With the server's credit at half or less they go at the end of the loop turn, as
before, so a burst (all slots taken) or a worker of one slot waits for nothing."""


class Slots:
    """The held-task table, the slot count and the credit owed to the server."""

    def __init__(
        self,
        capacity: int,
        *,
        send: Callable[[pb.WorkerMessage], None],
        stopping: Callable[[], bool],
        wakeup: asyncio.Event | None = None,
    ) -> None:
        self.capacity = capacity
        self.held: dict[uuid.UUID, Held] = {}
        """The tasks held, by id; the handler runner adds and drops the rows."""
        self._send = send
        self._stopping = stopping
        self._wakeup = wakeup
        self._credit_due = 0
        self._flush: asyncio.Handle | None = None
        """The pending flush of the credit owed: at the end of the turn, or a linger's
        timer (:data:`CREDIT_LINGER_S`)."""
        self._freed = 0
        """Rows whose slot went back early (``Held.freed``): at most ``capacity``, so a
        server slow to answer outcomes holds at most twice the slots in rows."""
        self.credit: StreamCredit | None = None
        """Set when this worker's slots are shared with other streams (a cluster
        worker's member): credit is then granted by the shared split, not per slot."""
        self._emptied: asyncio.Future[None] | None = None
        """Set once no task is held, for :meth:`wait_empty`."""

    def free(self) -> int:
        """Slots not taken by a held task whose handler runs (or has yet to)."""
        return max(0, self.capacity - len(self.held) + self._freed)

    def handler_ended(self, held: Held) -> None:
        """``held``'s handler returned (or raised): its slot goes back now, while its
        outcome is still being committed, unless ``capacity`` rows are in that state
        already (then at :meth:`drop`). A slot bounds the handlers that run at once, not
        the outcomes on their way to the server: a short task's slot is free one round
        trip (the completion's durable write) sooner."""
        if held.freed or self._freed >= self.capacity:
            return
        if self._gives_back():
            held.freed = True
            self._freed += 1
            self.give_back(1)

    def drop(self, held: Held) -> None:
        """``held``'s attempt ended (its outcome answered, or nothing to commit): forget
        it (unless a later attempt of the task replaced it) and, unless the worker is
        draining, give its slot back."""
        task_id = held.ctx.task_id
        if self.held.get(task_id) is held:
            del self.held[task_id]
            if not self.held and self._emptied is not None:
                self._emptied.set_result(None)
                self._emptied = None
        if held.freed:
            self._freed -= 1  # its slot went back when its handler ended
        elif self._gives_back():
            self.give_back(1)

    async def wait_empty(self, timeout_s: float) -> bool:
        """Wait until no task is held, at most ``timeout_s``; whether none is."""
        if self.held:
            if self._emptied is None:
                self._emptied = asyncio.get_running_loop().create_future()
            await asyncio.wait([self._emptied], timeout=timeout_s)
        return not self.held

    def _gives_back(self) -> bool:
        """Whether a freed slot goes back: not while this stream drains, unless it is
        shared (a shared slot is the whole worker's: it goes where work waits)."""
        return self.credit is not None or not self._stopping()

    def give_back(self, slots: int) -> None:
        """Return slots; all returned in one loop turn ride in one ``Credit`` message,
        or one call of the shared split (a cluster worker's member: one grant for the
        turn, not one message a task) (Kafka mode: wake the consumer, which fetches
        again)."""
        if self._wakeup is not None:
            self._wakeup.set()
            return
        self._credit_due += slots
        low = self._server_credit() <= self.capacity // 2
        pending = self._flush
        if low and isinstance(pending, asyncio.TimerHandle):
            pending.cancel()  # the server may run short: send it now
            pending = None
        if pending is None:
            loop = asyncio.get_running_loop()
            self._flush = (
                loop.call_soon(self._send_credit)
                if low
                else loop.call_later(CREDIT_LINGER_S, self._send_credit)
            )

    def _server_credit(self) -> int:
        """The credit the server holds, as this worker sees it: its free slots less
        those owed (shared: what the split granted every stream)."""
        if self.credit is not None:
            return self.credit.outstanding()
        return self.free() - self._credit_due

    def forget_credit(self) -> None:
        """A new stream's ``Hello`` announces every free slot: what was owed to the
        last stream is in it (sent on the new one too, it would count twice)."""
        self._credit_due = 0

    def _send_credit(self) -> None:
        self._flush = None
        slots, self._credit_due = self._credit_due, 0
        if not slots:
            return
        if self.credit is not None:
            self.credit.finished(slots)
        elif not self._stopping():
            self._send(pb.WorkerMessage(credit=pb.Credit(slots=slots)))
