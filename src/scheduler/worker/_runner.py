"""The handler runner: one handler task per assignment, and what it came to.

Owns the life of each attempt: holding an assignment (from the stream or a Kafka
record), acking it first or starting it on delivery, calling its handler (through the
``_invoke`` module's :class:`~scheduler.worker._invoke.Invoker`, which owns the handlers
and their thread pool), the CONSUMER span, and committing the outcome with the
attempt's own fencing token (a task whose lease was lost commits nothing); a
completion is answered by a call (:meth:`HandlerRunner._answered`), not a coroutine
waiting a task. It is the stream's
:class:`~scheduler.worker._stream.StreamListener`: it reacts to pushes and cancels,
heartbeats the held tasks (at once on every reconnect, then every interval) and turns
a rejected heartbeat into ``cancel_reason == "lease_lost"``.

May call: the stream (send, requests, commits), ``_answers``, the invoker, the slots
(the held table, credit), the drain (``stopping``, tallies), ``_context`` and
``_tracing``. Called by: the stream (listener callbacks, and a completion's answer),
the Kafka feed (:meth:`HandlerRunner.on_records`), the handlers' contexts
(checkpoints) and the :class:`~scheduler.worker.Worker` facade.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from scheduler import jsonbytes
from scheduler._errors import StaleFencingToken, TickwheelError, Unavailable
from scheduler._kafka_wire import trace_headers
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.logs import bind_fields, task_extra, unbind
from scheduler.worker._answers import Answer, Answers
from scheduler.worker._context import (
    CANCELLED,
    DRAIN,
    JSON,
    LEASE_LOST,
    ApplicationError,
    Interrupted,
    TaskContext,
    cancel,
    error_of,
    traceback_of,
)
from scheduler.worker._drain import Drain
from scheduler.worker._invoke import Handler, Invoker
from scheduler.worker._outbox import Completed
from scheduler.worker._pushed import Pushed, pushed_of, ref_of
from scheduler.worker._slots import Held, Slots, held_of
from scheduler.worker._stats import WorkerStats
from scheduler.worker._stream import Stream
from scheduler.worker._tracing import start_attempt_span, tracing_off, worker_tracer

_log = logging.getLogger("tickwheel.worker")

_OUTCOME_OF_KIND = {
    "completion": "completed",
    "failure": "failed",
    "cancel_confirmed": "cancelled",
    "release": "released",
}


def _assignment_fields(a: pb.Assignment) -> dict[str, object]:
    return task_extra(
        task_id=a.task_id, tenant_id=a.tenant_id or None, fencing_token=a.fencing_token
    )


def _listed(exc: BaseException, types: Sequence[type[BaseException] | str]) -> bool:
    """Whether ``exc`` is one of ``types``: an instance of a class, or of a class (or
    subclass of a class) with a listed name."""
    if not types:
        return False
    names = {t for t in types if isinstance(t, str)}
    classes = tuple(t for t in types if not isinstance(t, str))
    if classes and isinstance(exc, classes):
        return True
    return any(c.__name__ in names for c in type(exc).__mro__)


class HandlerRunner:
    """Runs the handlers of the tasks held, and commits their outcomes."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        *,
        stream: Stream,
        slots: Slots,
        drain: Drain,
        kafka_mode: bool,
        start_on_delivery: bool,
        tracer_provider: TracerProvider | None,
        non_retryable: Mapping[str, Iterable[type[BaseException] | str]] | None = None,
        stats: WorkerStats | None = None,
    ) -> None:
        self._invoker = Invoker(handlers, slots.capacity)
        self._handlers = self._invoker.handlers
        self.stats = stats or WorkerStats()
        """Attempts by outcome and handler durations (the worker's ``/metrics``)."""
        self._non_retryable = {t: tuple(v) for t, v in (non_retryable or {}).items()}
        """Per task type, the exceptions (classes, or class names) that dead-letter."""
        self._stream = stream
        self._slots = slots
        self._held = slots.held  # the slots' table, read and written per task
        self._drain = drain
        self._kafka_mode = kafka_mode
        self._start_on_delivery = start_on_delivery
        self._tracer_provider = tracer_provider
        self._tracer = worker_tracer(tracer_provider)
        self._on_answer = self._answered  # one bound method, not one a completion
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle -------------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop the handlers' contexts live on (``checkpoint_sync`` posts to it)."""
        self._loop = loop

    async def stop_all(self) -> None:
        """Cancel every handler task still held and wait for them."""
        for held in list(self._held.values()):
            if held.task is not None:
                held.task.cancel()
        await asyncio.gather(
            *(h.task for h in list(self._held.values()) if h.task), return_exceptions=True
        )

    @property
    def threads_busy(self) -> int:
        """Sync handlers executing in threads right now."""
        return self._invoker.threads_busy

    def close_executor(self, *, cancel_futures: bool) -> None:
        """Shut the thread pool down without waiting (a busy thread runs on unseen)."""
        self._invoker.close(cancel_futures=cancel_futures)

    # -- the stream's listener -------------------------------------------------------

    def hello_slots(self) -> int:
        """The slots to announce: the free ones (none in Kafka mode); with slots shared
        by several streams, what the shared split grants this one (none when draining)."""
        credit = self._slots.credit
        if credit is not None:
            return 0 if self._drain.stopping else credit.hello()
        if self._kafka_mode:
            return 0
        self._slots.forget_credit()
        return self._slots.free()

    def on_welcome(self, announced: int) -> None:
        """A stream is up: say we drain, or top the credit up; keep held leases alive."""
        credit = self._slots.credit
        if self._drain.stopping:
            if credit is not None:
                credit.closed()
            self._stream.send(pb.WorkerMessage(drain=pb.Drain()))
        elif credit is not None:
            credit.welcome(announced, reports=self._stream.server_backlog)
        elif not self._kafka_mode:
            extra = self._slots.free() - announced
            if extra > 0:
                self._stream.send(pb.WorkerMessage(credit=pb.Credit(slots=extra)))
        # Tasks still held from a previous stream: keep their leases alive now.
        if self._held:
            # Outcomes in flight too: each is sent again on this stream, after this.
            heart_now = self._heartbeat_message(committing=True)
            if heart_now is not None:
                self._stream.send(heart_now)

    def on_backlog(self, waiting: int) -> None:
        """The node reports its waiting work: shared slots move toward it."""
        if self._slots.credit is not None and not self._drain.stopping:
            self._slots.credit.backlog(waiting)

    def on_closed(self) -> None:
        """A stream attempt ended: its unused shared credit goes back to the pool."""
        if self._slots.credit is not None:
            self._slots.credit.closed()

    def on_cancel(self, ref: pb.TaskRef) -> None:
        """A client cancelled a task: tell its handler, if it runs this attempt."""
        held = self._held.get(uuid.UUID(ref.task_id))
        if held is not None and held.ref.fencing_token == ref.fencing_token:
            _log.info(
                "task %s: cancel requested by a client",
                held.ctx.task_id,
                extra=held.log_fields(),
            )
            cancel(held.ctx, CANCELLED)

    async def heartbeat(self) -> None:
        """Renew the leases of the tasks held; a rejected one lost its lease.

        A task whose outcome is in flight is left out: the outcome is ahead of this
        heartbeat on the stream (the server applies a stream's messages in order), so
        naming it could only be refused once the outcome committed, at the price of a
        lookup on the server.
        """
        msg = self._heartbeat_message(committing=False)
        if msg is None:
            return
        try:
            results = await self._stream.request(msg)
        except TickwheelError as exc:
            _log.debug("heartbeat failed: %s", exc)
            return
        for res in results:
            if res.ok:
                continue
            held = self._held.get(uuid.UUID(res.task_id))
            # A task whose outcome is in flight was refused because that outcome
            # committed first (the server applies a stream's messages in order): not
            # a loss. A real one is reported by the outcome's answer (_attempt).
            if held is not None and not held.released and not held.committing:
                _log.warning(
                    "zombie: task %s lost its lease (%s); its result will be rejected",
                    res.task_id,
                    res.reason,
                    extra=held.log_fields(),
                )
                cancel(held.ctx, LEASE_LOST)

    def _heartbeat_message(self, *, committing: bool) -> pb.WorkerMessage | None:
        """A heartbeat of the running tasks held (``committing``: those whose outcome
        is in flight as well)."""
        refs = [
            h.ref
            for h in self._held.values()
            if h.acked and not h.released and (committing or not h.committing)
        ]
        if not refs:
            return None
        return pb.WorkerMessage(heartbeat=pb.Heartbeat(tasks=refs))

    # -- assignments -----------------------------------------------------------------

    def on_assignments(self, tasks: Iterable[pb.Assignment]) -> None:
        """Hold the pushed tasks (read by the generated class) and start their
        handlers, as :meth:`on_pushed`."""
        self.on_pushed(
            [
                pushed_of(a, uuid.UUID(a.task_id), conv.trace_from_proto(a.trace_context))
                for a in tasks
            ]
        )

    def on_pushed(self, tasks: Sequence[Pushed]) -> None:
        """Hold the pushed tasks and start their handlers; give back what we cannot
        run (draining, no handler, already held)."""
        received_at = datetime.now(UTC)
        loop = self._loop
        assert loop is not None
        arrived = time.monotonic()  # not loop.time(): uvloop's is the turn's start
        fresh: list[Held] = []
        give_back: list[pb.TaskRef] = []
        stopping = self._drain.stopping
        handlers, holding = self._handlers, self._held
        for p in tasks:
            task_id = p[0]
            if stopping or p[1] not in handlers or task_id in holding:
                give_back.append(p[12])
                continue
            held = held_of(p, received_at, arrived, loop, self._checkpoint)
            holding[task_id] = held
            fresh.append(held)
        for ref in give_back:
            self._stream.send(pb.WorkerMessage(release=pb.Release(task=ref)))
        credit = self._slots.credit
        if credit is not None:
            # Every push used a credit; those given back take no slot.
            credit.pushed(len(fresh) + len(give_back))
            if give_back:
                credit.finished(len(give_back))
        self._launch(fresh)

    async def on_records(self, records: Sequence[Any]) -> None:
        """Kafka mode: start the handlers of fetched records; returns once every one
        was acked (or rejected) or skipped, so the caller may commit their offsets."""
        received_at = datetime.now(UTC)
        fresh: list[Held] = []
        give_back: list[pb.TaskRef] = []
        for record in records:
            a = pb.Assignment()
            try:
                a.ParseFromString(record.value or b"")
                task_id = uuid.UUID(a.task_id)
            except (DecodeError, ValueError):
                _log.warning("kafka record %s/%s is not an Assignment; skipped", *_where(record))
                continue
            if self._drain.stopping:
                give_back.append(ref_of(a))
                continue
            if a.type not in self._handlers:
                _log.warning(
                    "task %s: no handler for type %r in this worker; skipped (its lease "
                    "lapses and it is produced again; give every group member the same types)",
                    task_id,
                    a.type,
                    extra=_assignment_fields(a),
                )
                continue
            current = self._held.get(task_id)
            if current is not None:
                if a.fencing_token <= current.ref.fencing_token:
                    _log.info(
                        "task %s: duplicate record (token %d) skipped",
                        task_id,
                        a.fencing_token,
                        extra=_assignment_fields(a),
                    )
                    continue
                # A later attempt of a task still running here: this attempt lost its
                # lease; its writes will be rejected. The new attempt takes over.
                _log.warning(
                    "zombie: task %s token %d superseded by token %d",
                    task_id,
                    current.ref.fencing_token,
                    a.fencing_token,
                    extra=current.log_fields(),
                )
                cancel(current.ctx, LEASE_LOST)
                del self._held[task_id]
            submit = trace_headers(record.headers or ()) or conv.trace_from_proto(a.trace_context)
            assert self._loop is not None
            held = held_of(
                pushed_of(a, task_id, submit),
                received_at,
                time.monotonic(),
                self._loop,
                self._checkpoint,
            )
            self._held[task_id] = held
            fresh.append(held)
        if give_back:
            await asyncio.gather(
                *(
                    self._stream.commit(
                        pb.WorkerMessage(release=pb.Release(task=r)), uuid.UUID(r.task_id)
                    )
                    for r in give_back
                )
            )
        ack = self._launch(fresh)
        if ack is not None:
            with contextlib.suppress(TickwheelError):  # it expires on its own (_launch)
                await ack.wait("")

    def _launch(self, fresh: list[Held]) -> Answers | None:
        """Ack the new tasks in one message and start their handlers (no ack when
        starting on delivery: the server committed them as RUNNING)."""
        if not fresh:
            return None
        ack: Answers | None = None
        if not self._start_on_delivery:
            ack = self._stream.ack([h.ref_bytes for h in fresh])
        # Whether an SDK records spans: asked once a batch (it reads the environment).
        traced = not tracing_off(self._tracer_provider)
        # The running loop's own method, asked for once a batch: asyncio.create_task asks
        # for the running loop each time (on Python 3.11 a getpid() system call a task).
        create_task = asyncio.get_running_loop().create_task
        for held in fresh:
            held.acked = ack is None  # starting on delivery: RUNNING from the dispatch
            held.task = create_task(
                self._run(held, ack, traced), name=f"tickwheel-task-{held.ref.task_id}"
            )
        return ack

    async def _checkpoint(self, ctx: TaskContext, data: JSON) -> None:
        held = self._held.get(ctx.task_id)
        if held is None or held.ctx is not ctx:  # superseded by a later attempt
            raise StaleFencingToken(str(ctx.task_id), ctx.fencing_token, "task no longer held")
        msg = pb.WorkerMessage(
            checkpoint=pb.Checkpoint(task=held.ref, data_json=jsonbytes.dumps(data))
        )
        results = await self._stream.request(msg)
        if results and not results[0].ok:
            raise StaleFencingToken(str(ctx.task_id), ctx.fencing_token, results[0].reason)

    # -- one attempt -----------------------------------------------------------------

    async def _run(self, held: Held, ack: Answers | None, traced: bool) -> None:
        ctx = held.ctx
        # Every line of this attempt (the handler's own included: a sync handler's
        # thread runs in a copy of this context) carries the task's fields. They are
        # unbound at the end: the asyncio task's context holds them, and ``held`` holds
        # the asyncio task, a cycle only the collector would free (its passes over
        # thousands of ended attempts paused the worker for 17-27 ms).
        fields = bind_fields(held)
        answered_later = False
        try:
            if ack is not None and not await self._acked(held, ack):
                return
            # Pushed ahead: held to its due instant (a timer may end a little early).
            while held.start_at and (wait := held.start_at - time.monotonic()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(wait)
            if not traced:
                held.span = trace.INVALID_SPAN  # every call on it is a no-op
                answered_later = await self._attempt(held, held.span)
                return
            held.span = span = start_attempt_span(self._tracer, ctx, held.dispatch_trace)
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                answered_later = await self._attempt(held, span)
        finally:
            unbind(fields)
            if not answered_later:
                self._ended(held)

    def _ended(self, held: Held) -> None:
        """The attempt is over (its outcome answered, or nothing to commit): its span
        ends and its row and slot go."""
        if held.span is not None:
            held.span.end()
        self._slots.drop(held)

    async def _acked(self, held: Held, ack: Answers) -> bool:
        """Wait for the ack of the task's batch; whether the task is ours to run."""
        ctx = held.ctx
        try:
            mine = await ack.wait(held.ref.task_id)  # expires with its batch (_launch)
        except TickwheelError as exc:
            # Not acked: the server put the task back (session closed) or its lease
            # lapses; either way another attempt will run it.
            _log.info("task %s: not acknowledged (%s); dropped", ctx.task_id, exc)
            return False
        if mine is None or not mine.ok:
            _log.info("task %s: ack rejected (%s)", ctx.task_id, mine.reason if mine else "missing")
            return False
        held.acked = True
        return True

    async def _attempt(self, held: Held, span: Span) -> bool:
        """Run the handler and commit what it came to, under the attempt's token;
        whether the outcome's answer comes later, to :meth:`_answered`."""
        ctx = held.ctx
        started = time.perf_counter()
        outcome = await self._invoker.invoke(ctx)
        self._slots.handler_ended(held)  # its slot is free; its row stays to the answer
        (stats := self.stats).handler_done(ctx.type, time.perf_counter() - started)
        if held.released:  # released at the drain deadline while it ran
            return False
        reason = ctx.cancel_reason
        msg: pb.WorkerMessage | Completed | None
        if reason == CANCELLED:
            msg = pb.WorkerMessage(cancel_confirmed=pb.CancelConfirmed(task=held.ref))
        elif isinstance(outcome, Interrupted) and reason == DRAIN:
            msg = held.release_message()
        elif isinstance(outcome, Interrupted) and reason == LEASE_LOST:
            msg = None  # any write would be rejected: another attempt owns the task
        elif isinstance(outcome, BaseException):
            retryable = not (
                isinstance(outcome, ApplicationError) and outcome.non_retryable
            ) and not _listed(outcome, self._non_retryable.get(ctx.type, ()))
            error_type, text = error_of(outcome)
            msg = pb.WorkerMessage(
                failure=pb.Failure(
                    task=held.ref,
                    error=text[:4000],
                    retryable=retryable,
                    error_type=error_type[:128],
                    traceback=traceback_of(outcome),
                )
            )
            span.record_exception(outcome)
            span.set_status(Status(StatusCode.ERROR, text[:200]))
        else:
            # Joins a Completions batch, written from the ref's bytes (_outbox).
            msg = Completed(held.ref.task_id, held.ref_bytes, outcome)
        if msg is None:
            span.set_attribute("tickwheel.outcome", "lease_lost")
            self._drain.count("rejected")
            stats.handled[(ctx.type, "rejected")] += 1
            return False
        kind = "completion" if isinstance(msg, Completed) else str(msg.WhichOneof("kind"))
        span.set_attribute("tickwheel.outcome", _OUTCOME_OF_KIND[kind])
        held.committing = True
        if isinstance(msg, Completed):
            held.outcome = msg
            # Answered by a call, not a coroutine waiting a task (_answered); this task
            # ends now and the row forgets it, so the thousands of rows awaiting their
            # answers in a busy worker hold no task, coroutine or context.
            if self._stream.complete(msg, self._on_answer, held):
                held.task = None
                return True
        self._tally(held, kind, await self._stream.commit(msg, ctx.task_id))
        return False

    def _answered(self, held: Held, answer: Answer) -> None:
        """The answer to a completion sent by :meth:`Stream.complete`: tallied, and
        the attempt ends; a failed batch's completion is committed again as
        :meth:`Stream.commit` does (across reconnects), by a task of its own."""
        if isinstance(answer, BaseException):
            if isinstance(answer, Unavailable) and not self._stream.closing.is_set():
                held.task = asyncio.create_task(
                    self._commit_again(held), name=f"tickwheel-task-{held.ref.task_id}"
                )
                return
            _log.warning(
                "task %s: could not commit its outcome (%s); its lease will expire",
                held.ctx.task_id,
                answer,
            )
            answer = None
        try:
            self._tally(held, "completion", answer)
        finally:
            self._ended(held)

    async def _commit_again(self, held: Held) -> None:
        assert held.outcome is not None
        try:
            res = await self._stream.commit(held.outcome, held.ctx.task_id)
            self._tally(held, "completion", res)
        finally:
            self._ended(held)

    def _tally(self, held: Held, kind: str, res: pb.TaskResult | None) -> None:
        """Count what the outcome of ``kind`` came to (the drain's report, the stats):
        None never got through, a refused one belongs to another attempt."""
        ctx, stats = held.ctx, self.stats
        if res is None:
            self._drain.count("uncommitted")
            stats.handled[(ctx.type, "uncommitted")] += 1
        elif not res.ok:
            self._drain.count("rejected")
            stats.handled[(ctx.type, "rejected")] += 1
            _log.warning(
                "zombie: %s of task %s with fencing token %d was rejected (%s); "
                "another attempt owns the task, this outcome is discarded",
                kind,
                ctx.task_id,
                ctx.fencing_token,
                res.reason,
            )
        else:
            self._drain.count(_OUTCOME_OF_KIND[kind])
            stats.handled[(ctx.type, _OUTCOME_OF_KIND[kind])] += 1
            if kind == "release":
                _log.info("task %s: released with checkpoint %s", ctx.task_id, ctx.checkpoint_data)


def _where(record: Any) -> tuple[str, str]:
    return f"{record.topic}[{record.partition}]", str(record.offset)
