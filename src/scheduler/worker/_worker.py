"""The worker SDK: one bidirectional stream, credit-based pushes, fenced commits.

Layout of a running worker:

- ``run()`` owns the channel and reconnects with exponential backoff (full jitter)
  whenever the stream breaks; tasks already running keep going across reconnects
  (their leases and tokens do not belong to the stream).
- per stream: a writer task (the only caller of ``call.write``), a heartbeat task, and
  the reader loop inside ``_stream``;
- per assignment: one task that waits for its ack, runs the handler inside a CONSUMER
  span and commits the outcome with the assignment's fencing token. With
  ``start_on_delivery=True`` there is no ack: the server committed the dispatch as
  RUNNING, and the handler starts as soon as the assignment arrives.

Graceful drain (``shutdown``; ``tickwheel worker`` calls it on SIGTERM), two phases:

1. *Ingress stop*: a ``Drain`` message tells the server to push nothing more; an
   assignment already in flight is given back at once (released, no attempt used).
2. *Grace window*: every running handler sees ``ctx.cancelled`` with
   ``cancel_reason == "drain"`` and ``ctx.drain_deadline``. Heartbeats go on, so a
   handler that finishes in time completes normally on its first attempt; a long one
   checkpoints and raises :class:`Interrupted`, and the SDK releases its lease with the
   checkpoint (RUNNING -> PRELOADED, no attempt used; the next worker resumes). At the
   deadline, or when ``shutdown`` is called again with a shorter grace (a second
   SIGTERM), whatever is still running is released at once with its last checkpoint.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import itertools
import logging
import os
import random
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from google.protobuf import struct_pb2
from google.protobuf.message import DecodeError
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from scheduler._aio import wait_event
from scheduler._errors import (
    InvalidArgument,
    PermissionDenied,
    StaleFencingToken,
    TickwheelError,
    Unauthenticated,
    Unavailable,
)
from scheduler._kafka_wire import trace_headers
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler._wellknown import dict_to_struct, struct_to_dict
from scheduler.client import _convert as conv
from scheduler.client._channel import open_channel
from scheduler.client._errors import from_rpc_error
from scheduler.client._tls import TLSConfig
from scheduler.types import Pool
from scheduler.worker._context import (
    CANCELLED,
    DRAIN,
    JSON,
    LEASE_LOST,
    ApplicationError,
    Interrupted,
    TaskContext,
    cancel,
)
from scheduler.worker._kafka import KafkaFeed, KafkaSource
from scheduler.worker._slots import Held, Slots
from scheduler.worker._tracing import start_attempt_span, tracing_off, worker_tracer

_log = logging.getLogger("tickwheel.worker")

Handler = Callable[[TaskContext], Any]
"""``fn(ctx)``, sync or async, returning a JSON object (or None, or a value stored
under ``{"result": value}``)."""

_FATAL = (Unauthenticated, PermissionDenied, InvalidArgument)
_EOF: Any = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from grpc-stubs


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectConfig:
    """Exponential backoff between stream attempts."""

    initial_backoff_s: float = 0.1
    max_backoff_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.initial_backoff_s <= self.max_backoff_s:
            raise ValueError("ReconnectConfig needs 0 < initial_backoff_s <= max_backoff_s")


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


_OUTCOME_OF_KIND = {
    "completion": "completed",
    "failure": "failed",
    "cancel_confirmed": "cancelled",
    "release": "released",
}


class _Conn:
    """One stream attempt: its outbound queue and the requests awaiting a Result."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[pb.WorkerMessage | None] = asyncio.Queue()
        self.pending: dict[int, asyncio.Future[list[pb.TaskResult]]] = {}

    def fail_pending(self) -> None:
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(Unavailable("worker stream closed"))
        self.pending.clear()


def _indexed(
    fut: asyncio.Future[list[pb.TaskResult]],
) -> asyncio.Future[dict[str, pb.TaskResult]]:
    """The per-task results of a batched request, indexed once by task id."""
    out: asyncio.Future[dict[str, pb.TaskResult]] = fut.get_loop().create_future()

    def done(f: asyncio.Future[list[pb.TaskResult]]) -> None:
        if out.done():  # expired first (see _expire)
            return
        if f.cancelled():
            out.cancel()
        elif (exc := f.exception()) is not None:
            out.set_exception(exc)
        else:
            out.set_result({r.task_id: r for r in f.result()})

    fut.add_done_callback(done)
    return out


def _expire(fut: asyncio.Future[Any], timeout_s: float) -> None:
    """Fail ``fut`` with Unavailable if it is still pending after ``timeout_s``.

    One timer for a whole batch (an ack or a completion message), instead of an
    ``asyncio.timeout`` per task awaiting it: per task, that timer was a tenth of the
    worker's CPU in a burst.
    """

    def expire() -> None:
        if not fut.done():
            fut.set_exception(Unavailable("no answer from the server in time"))

    handle = fut.get_loop().call_later(timeout_s, expire)
    fut.add_done_callback(lambda _: handle.cancel())


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs task handlers for one tenant.

    >>> worker = Worker("localhost:50051", api_key=key, handlers={"email": send_email})
    >>> await worker.run()          # until shutdown() is called

    Each attempt runs in a CONSUMER span of ``tracer_provider`` (default: the global
    OpenTelemetry provider; a no-op without the SDK), linked to the submission.

    ``start_on_delivery=True`` starts each handler the moment its assignment arrives
    and sends no ack: the server commits the dispatch as RUNNING, which saves a store
    write and two stream messages per task (the fast choice for short tasks). The
    price: a push counts as an attempt even if it never arrived (the stream broke with
    it in flight), and such a task is retried only when its lease expires. With the
    default, each task is acknowledged before its handler runs, and a push the worker
    never acknowledged goes back at once without using an attempt.

    With ``kafka=KafkaSource(...)`` the worker takes its tasks from the pools' Kafka
    topics through a consumer group instead of the stream (``docs/kafka.md``); it
    must then use a SYSTEM-tier tenant's API key.
    """

    def __init__(
        self,
        target: str,
        *,
        api_key: str,
        handlers: Mapping[str, Handler],
        slots: int = 10,
        worker_id: str | None = None,
        tls: TLSConfig | None = None,
        pools: Iterable[Pool] = (),
        heartbeat_interval_s: float | None = None,
        request_timeout_s: float = 30.0,
        reconnect: ReconnectConfig | None = None,
        tracer_provider: TracerProvider | None = None,
        kafka: KafkaSource | None = None,
        start_on_delivery: bool = False,
    ) -> None:
        if not handlers:
            raise ValueError("Worker needs at least one handler")
        if start_on_delivery and kafka is not None:
            raise ValueError("start_on_delivery applies to the stream, not to Kafka mode")
        if slots < 1:
            raise ValueError("Worker slots must be >= 1")
        if heartbeat_interval_s is not None and heartbeat_interval_s <= 0:
            raise ValueError("heartbeat_interval_s must be positive")
        self._target = target
        self._metadata = (("x-api-key", api_key),)
        self._handlers = dict(handlers)
        self._async_types = {t for t, h in self._handlers.items() if inspect.iscoroutinefunction(h)}
        self._start_on_delivery = start_on_delivery
        self.worker_id = worker_id or _default_worker_id()
        self._tls = tls
        self._pools = tuple(pools)
        self._heartbeat_override = heartbeat_interval_s
        self._heartbeat_s = heartbeat_interval_s or 10.0
        self._request_timeout_s = request_timeout_s
        self._reconnect = reconnect or ReconnectConfig()
        self._conn: _Conn | None = None
        self._connected = asyncio.Event()
        self._ids = itertools.count(1)
        self._completion_batch: (
            tuple[pb.WorkerMessage, asyncio.Future[dict[str, pb.TaskResult]]] | None
        ) = None
        self._stopping = False
        self._started = False
        self._stop_stream = asyncio.Event()
        self._done = asyncio.Event()
        self._shutdown_task: asyncio.Task[DrainReport] | None = None
        self._deadline: float | None = None  # loop time when leftovers are released
        self._deadline_moved = asyncio.Event()
        self._tally: collections.Counter[str] | None = None
        self._tracer_provider = tracer_provider
        self._tracer = worker_tracer(tracer_provider)
        self._threads_busy = 0
        self._threads_lock = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=slots, thread_name_prefix="tickwheel-handler"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kafka: KafkaFeed | None = None
        if kafka is not None:
            # Kafka mode: records come from the consumer group; the stream (slots=0)
            # carries only the fenced writes. The API key must be a SYSTEM tenant's.
            self._pools = self._pools or tuple(sorted(kafka.pools, key=lambda p: p.value))
            self._kafka = KafkaFeed(
                kafka,
                worker_id=self.worker_id,
                free_slots=self._free_slots,
                ready=self._connected.wait,
                deliver=self._on_records,
            )
        self._slots = Slots(
            slots,
            send=self._send,
            stopping=self._is_stopping,
            wakeup=self._kafka.slot_freed if self._kafka is not None else None,
        )
        self._held = self._slots.held  # read and written per task

    # -- lifecycle -------------------------------------------------------------------

    @property
    def kafka_joined(self) -> asyncio.Event | None:
        """Kafka mode: set once the consumer holds partitions; None otherwise."""
        return self._kafka.joined if self._kafka is not None else None

    @property
    def running_tasks(self) -> int:
        """Tasks held right now."""
        return len(self._held)

    async def run(self) -> None:
        """Connect and run handlers until :meth:`shutdown`; raises on fatal errors
        (bad API key, rejected hello). Transient failures reconnect with backoff."""
        if self._started:
            raise RuntimeError("Worker.run() may be called only once")
        self._started = True
        if self._stopping:
            self._done.set()
            return
        self._loop = asyncio.get_running_loop()
        channel = open_channel(self._target, self._tls)
        stub = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        backoff = self._reconnect.initial_backoff_s
        if self._kafka is not None:
            self._kafka.start()
        try:
            while not self._stop_stream.is_set():
                welcomed = False
                try:
                    welcomed = await self._stream(stub)
                except _FATAL:
                    raise
                except (TickwheelError, grpc.aio.AioRpcError, OSError) as exc:
                    _log.warning("worker %s: stream broke: %s", self.worker_id, exc)
                if self._stop_stream.is_set():
                    break
                if welcomed:
                    backoff = self._reconnect.initial_backoff_s
                delay = random.uniform(0, backoff)
                backoff = min(backoff * 2, self._reconnect.max_backoff_s)
                await wait_event(self._stop_stream, delay)
        finally:
            self._stopping = True
            if self._kafka is not None:
                await self._kafka.stop()
            for held in list(self._held.values()):
                if held.task is not None:
                    held.task.cancel()
            await asyncio.gather(
                *(h.task for h in list(self._held.values()) if h.task), return_exceptions=True
            )
            await channel.close(None)
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._done.set()

    @property
    def busy_handler_threads(self) -> int:
        """Sync handlers still executing in threads (after a forced release they run
        on unseen until they return; a process may exit without waiting for them)."""
        return self._threads_busy

    @property
    def draining(self) -> bool:
        """Whether :meth:`shutdown` has begun."""
        return self._stopping

    async def shutdown(self, grace_s: float = 30.0) -> DrainReport:
        """Drain: stop taking work at once, give running handlers ``grace_s`` to finish
        or to checkpoint and raise :class:`Interrupted`, then release whatever is left
        (with its last checkpoint) and close the stream.

        Safe to call twice and before :meth:`run`; a later call with a shorter grace
        moves the deadline forward (``tickwheel worker`` does this on a second SIGTERM).
        Every call returns the same :class:`DrainReport`.
        """
        if grace_s < 0:
            raise ValueError("grace_s must be >= 0")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        if self._deadline is None or deadline < self._deadline:
            self._deadline = deadline
            self._deadline_moved.set()
            wall = datetime.now(UTC) + timedelta(seconds=grace_s)
            for held in self._held.values():
                held.ctx.drain_deadline = wall
        if self._shutdown_task is None:
            self._shutdown_task = loop.create_task(
                self._shutdown(), name=f"tickwheel-worker-{self.worker_id}-shutdown"
            )
        return await asyncio.shield(self._shutdown_task)

    async def _shutdown(self) -> DrainReport:
        self._stopping = True
        if not self._started:
            self._stop_stream.set()
            self._executor.shutdown(wait=False)
            return DrainReport()
        self._tally = collections.Counter()
        loop = asyncio.get_running_loop()
        assert self._deadline is not None
        # Phase 1: no more assignments on this stream (or on any reconnect); a Kafka
        # consumer stops fetching and leaves its group now, before the grace period.
        self._send(pb.WorkerMessage(drain=pb.Drain()))
        if self._kafka is not None:
            await self._kafka.stop()
        # Phase 2: tell every handler; heartbeats keep their leases meanwhile.
        wall = datetime.now(UTC) + timedelta(seconds=max(0.0, self._deadline - loop.time()))
        for held in list(self._held.values()):
            held.ctx.drain_deadline = held.ctx.drain_deadline or wall
            cancel(held.ctx, DRAIN)
        _log.info(
            "worker %s draining: %d task(s) running, %.1f s grace",
            self.worker_id,
            len(self._held),
            max(0.0, self._deadline - loop.time()),
        )
        while True:
            running = [h.task for h in self._held.values() if h.task and not h.task.done()]
            remaining = self._deadline - loop.time()
            if not running or remaining <= 0:
                break
            self._deadline_moved.clear()
            moved = loop.create_task(
                self._deadline_moved.wait(), name=f"tickwheel-worker-{self.worker_id}-deadline"
            )
            try:
                await asyncio.wait(
                    [*running, moved], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                moved.cancel()
        leftovers = [h for h in self._held.values() if h.task is not None and not h.task.done()]
        if leftovers:
            _log.warning(
                "worker %s: grace over, releasing %d task(s) still running",
                self.worker_id,
                len(leftovers),
            )
            await self._release(leftovers)
        # Outcome commits that are still in flight get their (short) chance.
        pending = [h.task for h in self._held.values() if h.task is not None]
        if pending:
            await asyncio.wait(pending, timeout=self._request_timeout_s)
        self._stop_stream.set()
        conn = self._conn
        if conn is not None:
            conn.queue.put_nowait(None)  # half-close: the server ends the stream
        if not await wait_event(self._done, 10.0):
            _log.warning("worker %s: stream did not close in time", self.worker_id)
        tally = self._tally
        report = DrainReport(**{k: tally[k] for k in DrainReport.__dataclass_fields__})
        _log.info("worker %s drained: %s", self.worker_id, report)
        return report

    def _count(self, what: str) -> None:
        if self._tally is not None:
            self._tally[what] += 1

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
            *(self._request(m, timeout_s=5.0) for m in msgs), return_exceptions=True
        )
        for held, res in zip(leftovers, results, strict=True):
            if isinstance(res, BaseException):
                _log.warning("task %s: release failed: %s", held.ctx.task_id, res)
                self._count("uncommitted")
            elif res and not res[0].ok:
                self._count("rejected")
            else:
                self._count("released_at_deadline")
        for held in leftovers:
            if held.task is not None:
                held.task.cancel()
        await asyncio.gather(*(h.task for h in leftovers if h.task), return_exceptions=True)

    # -- the stream ------------------------------------------------------------------

    async def _stream(self, stub: Any) -> bool:
        """One stream attempt; returns whether the server welcomed it."""
        call = stub.Connect(metadata=self._metadata)
        conn = _Conn()
        announced = 0 if self._kafka is not None else self._free_slots()
        hello = pb.Hello(
            worker_id=self.worker_id,
            task_types=sorted(self._handlers),
            pools=[conv.pool_to_proto(p) for p in self._pools],
            slots=announced,
            start_on_delivery=self._start_on_delivery,
        )
        writer: asyncio.Task[None] | None = None
        heart: asyncio.Task[None] | None = None
        try:
            try:
                await asyncio.wait_for(
                    call.write(pb.WorkerMessage(hello=hello)), self._request_timeout_s
                )
                first = await asyncio.wait_for(call.read(), self._request_timeout_s)
            except grpc.aio.AioRpcError as exc:
                raise from_rpc_error(exc) from None
            if first is _EOF or first.WhichOneof("kind") != "welcome":
                raise Unavailable("server did not welcome the worker")
            welcome = first.welcome
            if self._heartbeat_override is None and welcome.heartbeat_interval_s > 0:
                self._heartbeat_s = welcome.heartbeat_interval_s
            _log.info(
                "worker %s connected (session %s, %d slots)",
                self.worker_id,
                welcome.session_id,
                announced,
            )
            name = f"tickwheel-worker-{self.worker_id}"
            writer = asyncio.create_task(self._write_loop(call, conn), name=f"{name}-write")
            heart = asyncio.create_task(self._heartbeat_loop(), name=f"{name}-heartbeat")
            self._conn = conn
            self._connected.set()
            if self._stopping:
                self._send(pb.WorkerMessage(drain=pb.Drain()))
            elif self._kafka is None:
                extra = self._free_slots() - announced
                if extra > 0:
                    self._send(pb.WorkerMessage(credit=pb.Credit(slots=extra)))
            # Tasks still held from a previous stream: keep their leases alive now.
            if self._held:
                heart_now = self._heartbeat_message()
                if heart_now is not None:
                    self._send(heart_now)
            while True:
                try:
                    msg = await call.read()
                except grpc.aio.AioRpcError as exc:
                    if exc.code() is grpc.StatusCode.CANCELLED and self._stop_stream.is_set():
                        break
                    raise from_rpc_error(exc) from None
                if msg is _EOF:
                    break
                self._on_message(msg, conn)
            return True
        finally:
            self._connected.clear()
            if self._conn is conn:
                self._conn = None
            conn.fail_pending()
            for task in (writer, heart):
                if task is not None:
                    task.cancel()
            for task in (writer, heart):
                if task is not None:
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            call.cancel()

    async def _write_loop(self, call: Any, conn: _Conn) -> None:
        while True:
            msg = await conn.queue.get()
            try:
                if msg is None:
                    await asyncio.wait_for(call.done_writing(), self._request_timeout_s)
                    return
                async with asyncio.timeout(self._request_timeout_s):
                    await call.write(msg)
            except (
                grpc.aio.AioRpcError,
                grpc.aio.UsageError,
                TimeoutError,
                asyncio.InvalidStateError,  # "RPC already finished": the server went away
            ) as exc:
                _log.debug("worker %s: write failed: %s", self.worker_id, exc)
                call.cancel()
                return

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            msg = self._heartbeat_message()
            if msg is None:
                continue
            try:
                results = await self._request(msg)
            except TickwheelError as exc:
                _log.debug("heartbeat failed: %s", exc)
                continue
            for res in results:
                if res.ok:
                    continue
                held = self._held.get(uuid.UUID(res.task_id))
                if held is not None and not held.released:
                    _log.warning(
                        "zombie: task %s lost its lease (%s); its result will be rejected",
                        res.task_id,
                        res.reason,
                    )
                    cancel(held.ctx, LEASE_LOST)

    def _heartbeat_message(self) -> pb.WorkerMessage | None:
        refs = [h.ref for h in self._held.values() if h.acked and not h.released]
        if not refs:
            return None
        return pb.WorkerMessage(heartbeat=pb.Heartbeat(tasks=refs))

    def _free_slots(self) -> int:
        return self._slots.free()

    def _is_stopping(self) -> bool:
        return self._stopping

    # -- requests --------------------------------------------------------------------

    def _send(self, msg: pb.WorkerMessage) -> None:
        """Fire and forget on the current stream (dropped when disconnected)."""
        conn = self._conn
        if conn is not None:
            conn.queue.put_nowait(msg)

    def _start_request(self, msg: pb.WorkerMessage) -> asyncio.Future[list[pb.TaskResult]]:
        conn = self._conn
        fut: asyncio.Future[list[pb.TaskResult]] = asyncio.get_running_loop().create_future()
        if conn is None:
            fut.set_exception(Unavailable("worker stream not connected"))
            return fut
        msg.request_id = next(self._ids)
        conn.pending[msg.request_id] = fut
        conn.queue.put_nowait(msg)
        return fut

    async def _request(
        self, msg: pb.WorkerMessage, timeout_s: float | None = None
    ) -> list[pb.TaskResult]:
        timeout = self._request_timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(timeout):
                if not self._connected.is_set():
                    await self._connected.wait()
                return await self._start_request(msg)
        except TimeoutError:
            raise Unavailable("no answer from the server in time") from None

    async def _commit(
        self, msg: pb.WorkerMessage | pb.Completion, task_id: uuid.UUID
    ) -> pb.TaskResult | None:
        """Send a fenced write, retrying across reconnects; None if it never got through.

        A completion (given as a bare ``Completion``) joins the others finished in the
        same loop turn in one ``Completions`` message (one write and one Result for
        many tasks).
        """
        for attempt in range(5):
            try:
                if isinstance(msg, pb.Completion):
                    return await self._complete_batched(msg)
                results = await self._request(msg)
                return results[0] if results else None
            except Unavailable as exc:
                if self._stop_stream.is_set():
                    break
                _log.info("task %s: commit retry %d: %s", task_id, attempt + 1, exc)
        _log.warning("task %s: could not commit its outcome; its lease will expire", task_id)
        return None

    async def _complete_batched(self, completion: pb.Completion) -> pb.TaskResult | None:
        if not self._connected.is_set():
            try:
                async with asyncio.timeout(self._request_timeout_s):
                    await self._connected.wait()
            except TimeoutError:
                raise Unavailable("no answer from the server in time") from None
        if self._completion_batch is None:
            batch: asyncio.Future[dict[str, pb.TaskResult]] = (
                asyncio.get_running_loop().create_future()
            )
            _expire(batch, self._request_timeout_s)
            self._completion_batch = (pb.WorkerMessage(completions=pb.Completions()), batch)
            asyncio.get_running_loop().call_soon(self._flush_completions)
        msg, fut = self._completion_batch
        msg.completions.items.append(completion)  # built into the message that is sent
        results = await asyncio.shield(fut)
        return results.get(completion.task.task_id)

    def _flush_completions(self) -> None:
        assert self._completion_batch is not None
        msg, fut = self._completion_batch
        self._completion_batch = None
        indexed = _indexed(self._start_request(msg))

        def done(f: asyncio.Future[dict[str, pb.TaskResult]]) -> None:
            if fut.done():
                return
            if f.cancelled():
                fut.cancel()
            elif (exc := f.exception()) is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(f.result())

        indexed.add_done_callback(done)

    async def _checkpoint(self, ctx: TaskContext, data: JSON) -> None:
        held = self._held.get(ctx.task_id)
        if held is None or held.ctx is not ctx:  # superseded by a later attempt
            raise StaleFencingToken(str(ctx.task_id), ctx.fencing_token, "task no longer held")
        msg = pb.WorkerMessage(checkpoint=pb.Checkpoint(task=held.ref, data=dict_to_struct(data)))
        results = await self._request(msg)
        if results and not results[0].ok:
            raise StaleFencingToken(str(ctx.task_id), ctx.fencing_token, results[0].reason)

    # -- assignments -----------------------------------------------------------------

    def _on_message(self, msg: pb.ServerMessage, conn: _Conn) -> None:
        kind = msg.WhichOneof("kind")
        if kind == "result":
            fut = conn.pending.pop(msg.result.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(list(msg.result.results))
        elif kind == "assignments":
            self._on_assignments(msg.assignments.tasks)
        elif kind == "cancel":
            held = self._held.get(uuid.UUID(msg.cancel.task.task_id))
            if held is not None and held.ref.fencing_token == msg.cancel.task.fencing_token:
                _log.info("task %s: cancel requested by a client", held.ctx.task_id)
                cancel(held.ctx, CANCELLED)
        else:
            _log.debug("ignoring server message %s", kind)

    def _on_assignments(self, tasks: Iterable[pb.Assignment]) -> None:
        received_at = datetime.now(UTC)
        fresh: list[Held] = []
        give_back: list[pb.TaskRef] = []
        for a in tasks:
            task_id = uuid.UUID(a.task_id)
            if self._stopping or a.type not in self._handlers or task_id in self._held:
                give_back.append(_ref(a))
                continue
            held = self._held_from(a, received_at, conv.trace_from_proto(a.trace_context), task_id)
            self._held[task_id] = held
            fresh.append(held)
        for ref in give_back:
            self._send(pb.WorkerMessage(release=pb.Release(task=ref)))
        self._launch(fresh)

    async def _on_records(self, records: Sequence[Any]) -> None:
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
            if self._stopping:
                give_back.append(_ref(a))
                continue
            if a.type not in self._handlers:
                _log.warning(
                    "task %s: no handler for type %r in this worker; skipped (its lease "
                    "lapses and it is produced again; give every group member the same types)",
                    task_id,
                    a.type,
                )
                continue
            current = self._held.get(task_id)
            if current is not None:
                if a.fencing_token <= current.ref.fencing_token:
                    _log.info(
                        "task %s: duplicate record (token %d) skipped", task_id, a.fencing_token
                    )
                    continue
                # A later attempt of a task still running here: this attempt lost its
                # lease; its writes will be rejected. The new attempt takes over.
                _log.warning(
                    "zombie: task %s token %d superseded by token %d",
                    task_id,
                    current.ref.fencing_token,
                    a.fencing_token,
                )
                cancel(current.ctx, LEASE_LOST)
                del self._held[task_id]
            submit = trace_headers(record.headers or ()) or conv.trace_from_proto(a.trace_context)
            held = self._held_from(a, received_at, submit, task_id)
            self._held[task_id] = held
            fresh.append(held)
        if give_back:
            await asyncio.gather(
                *(
                    self._commit(pb.WorkerMessage(release=pb.Release(task=r)), uuid.UUID(r.task_id))
                    for r in give_back
                )
            )
        ack = self._launch(fresh)
        if ack is not None:
            with contextlib.suppress(TickwheelError):  # it expires on its own (_launch)
                await asyncio.shield(ack)

    def _held_from(
        self,
        a: pb.Assignment,
        received_at: datetime,
        submit_trace: dict[str, str] | None,
        task_id: uuid.UUID,
    ) -> Held:
        assert self._loop is not None
        ctx = TaskContext(
            task_id=task_id,
            type=a.type,
            attempt=a.attempt,
            max_retries=a.max_retries,
            payload=struct_to_dict(a.payload),
            fencing_token=a.fencing_token,
            checkpoint_data=struct_to_dict(a.checkpoint) if a.HasField("checkpoint") else None,
            trace_context=submit_trace,
            scheduled_at=conv.from_timestamp(a.scheduled_at),
            due_at=conv.from_timestamp(a.due_at),
            timeout_s=a.timeout_s,
            received_at=received_at,
            loop=self._loop,
            checkpointer=self._checkpoint,
        )
        return Held(
            ref=_ref(a), ctx=ctx, dispatch_trace=conv.trace_from_proto(a.dispatch_trace_context)
        )

    def _launch(self, fresh: list[Held]) -> asyncio.Future[dict[str, pb.TaskResult]] | None:
        """Ack the new tasks in one message and start their handlers (no ack when
        starting on delivery: the server committed them as RUNNING)."""
        if not fresh:
            return None
        ack: asyncio.Future[dict[str, pb.TaskResult]] | None = None
        if not self._start_on_delivery:
            ack = _indexed(
                self._start_request(pb.WorkerMessage(ack=pb.Ack(tasks=[h.ref for h in fresh])))
            )
            _expire(ack, self._request_timeout_s)
        for held in fresh:
            held.acked = ack is None  # starting on delivery: RUNNING from the dispatch
            held.task = asyncio.create_task(
                self._run(held, ack), name=f"tickwheel-task-{held.ctx.task_id}"
            )
        return ack

    async def _run(self, held: Held, ack: asyncio.Future[dict[str, pb.TaskResult]] | None) -> None:
        ctx = held.ctx
        try:
            if ack is not None and not await self._acked(held, ack):
                return
            if tracing_off(self._tracer_provider):
                held.span = trace.INVALID_SPAN  # every call on it is a no-op
                await self._attempt(held, held.span)
                return
            held.span = span = start_attempt_span(self._tracer, ctx, held.dispatch_trace)
            with trace.use_span(
                span, end_on_exit=True, record_exception=False, set_status_on_exception=False
            ):
                await self._attempt(held, span)
        finally:
            self._slots.drop(held)

    async def _acked(self, held: Held, ack: asyncio.Future[dict[str, pb.TaskResult]]) -> bool:
        """Wait for the ack of the task's batch; whether the task is ours to run."""
        ctx = held.ctx
        try:
            results = await asyncio.shield(ack)  # expires with its batch (_launch)
        except TickwheelError as exc:
            # Not acked: the server put the task back (session closed) or its lease
            # lapses; either way another attempt will run it.
            _log.info("task %s: not acknowledged (%s); dropped", ctx.task_id, exc)
            return False
        mine = results.get(held.ref.task_id)
        if mine is None or not mine.ok:
            _log.info("task %s: ack rejected (%s)", ctx.task_id, mine.reason if mine else "missing")
            return False
        held.acked = True
        return True

    async def _attempt(self, held: Held, span: Span) -> None:
        """Run the handler and commit what it came to, under the attempt's token."""
        ctx = held.ctx
        outcome = await self._invoke(held)
        if held.released:  # released at the drain deadline while it ran
            return
        reason = ctx.cancel_reason
        msg: pb.WorkerMessage | pb.Completion | None
        if reason == CANCELLED:
            msg = pb.WorkerMessage(cancel_confirmed=pb.CancelConfirmed(task=held.ref))
        elif isinstance(outcome, Interrupted) and reason == DRAIN:
            msg = held.release_message()
        elif isinstance(outcome, Interrupted) and reason == LEASE_LOST:
            msg = None  # any write would be rejected: another attempt owns the task
        elif isinstance(outcome, BaseException):
            retryable = not (isinstance(outcome, ApplicationError) and outcome.non_retryable)
            text = str(outcome) or type(outcome).__name__
            msg = pb.WorkerMessage(
                failure=pb.Failure(task=held.ref, error=text[:4000], retryable=retryable)
            )
            span.record_exception(outcome)
            span.set_status(Status(StatusCode.ERROR, text[:200]))
        else:
            msg = pb.Completion(task=held.ref, result=outcome)  # joins a Completions batch
        if msg is None:
            span.set_attribute("tickwheel.outcome", "lease_lost")
            self._count("rejected")
            return
        kind = "completion" if isinstance(msg, pb.Completion) else str(msg.WhichOneof("kind"))
        span.set_attribute("tickwheel.outcome", _OUTCOME_OF_KIND[kind])
        res = await self._commit(msg, ctx.task_id)
        if res is None:
            self._count("uncommitted")
        elif not res.ok:
            self._count("rejected")
            _log.warning(
                "zombie: %s of task %s with fencing token %d was rejected (%s); "
                "another attempt owns the task, this outcome is discarded",
                kind,
                ctx.task_id,
                ctx.fencing_token,
                res.reason,
            )
        else:
            self._count(_OUTCOME_OF_KIND[kind])
            if kind == "release":
                _log.info("task %s: released with checkpoint %s", ctx.task_id, ctx.checkpoint_data)

    async def _invoke(self, held: Held) -> struct_pb2.Struct | BaseException:
        """Run the handler; its result as a Struct, or the exception it raised (a
        result JSON cannot hold, such as a set or a NaN, fails the attempt)."""
        ctx = held.ctx
        handler = self._handlers[ctx.type]
        try:
            if ctx.timeout_s > 0:
                async with asyncio.timeout(ctx.timeout_s):
                    value = await self._call(handler, ctx)
            else:
                value = await self._call(handler, ctx)
        except TimeoutError:
            return TimeoutError(f"handler exceeded its timeout of {ctx.timeout_s} s")
        except Exception as exc:
            if ctx.cancel_reason is None:
                _log.info("task %s: handler raised %r", ctx.task_id, exc)
            return exc
        try:
            return dict_to_struct(_as_result(value))
        except (TypeError, ValueError) as exc:
            _log.warning("task %s: the handler's result is not JSON: %s", ctx.task_id, exc)
            return TypeError(f"the handler's result is not JSON: {exc}")

    async def _call(self, handler: Handler, ctx: TaskContext) -> Any:
        if ctx.type in self._async_types:
            return await handler(ctx)
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, self._in_thread, handler, ctx)
        value = await loop.run_in_executor(self._executor, call)
        if inspect.isawaitable(value):
            value = await value
        return value

    def _in_thread(self, handler: Handler, ctx: TaskContext) -> Any:
        with self._threads_lock:
            self._threads_busy += 1
        try:
            return handler(ctx)
        finally:
            with self._threads_lock:
                self._threads_busy -= 1


def _ref(a: pb.Assignment) -> pb.TaskRef:
    return pb.TaskRef(task_id=a.task_id, fencing_token=a.fencing_token, scheduled_at=a.scheduled_at)


def _where(record: Any) -> tuple[str, str]:
    return f"{record.topic}[{record.partition}]", str(record.offset)


def _as_result(value: Any) -> JSON:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    return {"result": value}
