"""The worker's stream protocol: one ``WorkerService.Connect`` stream at a time.

Owns the gRPC channel (a :class:`~scheduler.client._channel.FailoverChannel` over the
endpoints to try, in order: the next one when one is unreachable, and the home region's
when a ``WRONG_REGION`` status names them, docs/regions.md), the current stream
attempt (:class:`Conn`: its outbound queue and the requests awaiting a ``Result``),
request ids, the batching of completions into one ``Completions`` message, the
reconnect loop (its delays from ``_backoff.py``: full jitter, capped at 2 s, cut short
when the channel connects again) and the per-stream writer and heartbeat-timer tasks.
It knows the wire, not the tasks: the server's messages come as bytes, a push of
assignments read natively where it can be (``_pushed.py``); what an assignment, a
cancel or a heartbeat *means* belongs to its :class:`StreamListener` (the handler
runner, ``_runner.py``).

May call: ``scheduler.client`` (channel, conversions, error mapping), the generated
proto, ``_answers``, ``_backoff``, ``_outbox``, ``_pushed``, and its listener. Called by: the
:class:`~scheduler.worker.Worker` facade (run, close), the handler runner (send,
requests, commits), the drain (send, finish) and the slots (credit, through ``send``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

import grpc

from scheduler._aio import cancel_and_wait, wait_event
from scheduler._errors import (
    InvalidArgument,
    PermissionDenied,
    TickwheelError,
    Unauthenticated,
    Unavailable,
    WrongRegion,
)
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv
from scheduler.client._channel import FailoverChannel
from scheduler.client._errors import RPCError, from_rpc_error
from scheduler.client._tls import TLSConfig
from scheduler.types import Pool
from scheduler.worker import _outbox as outbox
from scheduler.worker._answers import Answer, Answers, Results
from scheduler.worker._backoff import Backoff, FailureLog, ReconnectConfig
from scheduler.worker._outbox import Completed, Encoded
from scheduler.worker._pushed import HOLD_EARLY_MS, Pushed, read_pushed, server_message

_log = logging.getLogger("tickwheel.worker")

T = TypeVar("T")

FATAL = (Unauthenticated, PermissionDenied, InvalidArgument)
"""Errors that end :meth:`Stream.run` instead of reconnecting."""
_EOF: Any = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from grpc-stubs

COMPLETION_LINGER_S = 0.005
"""Longest a completion waits for an earlier ``Completions`` message's Result before it
is sent (the completions that finish meanwhile share its message); with none awaiting
its Result it goes at once."""


class StreamListener(Protocol):
    """What the stream needs from the worker's task side (the handler runner)."""

    def hello_slots(self) -> int:
        """The slots announced in ``Hello``."""

    def on_welcome(self, announced: int) -> None:
        """The stream is up (``send`` works): top up credit, heartbeat held tasks."""

    def on_assignments(self, tasks: Sequence[pb.Assignment]) -> None:
        """The server pushed assignments (read by the generated class)."""

    def on_pushed(self, tasks: Sequence[Pushed]) -> None:
        """The server pushed assignments (read natively: ``_pushed.read_pushed``)."""

    def on_cancel(self, ref: pb.TaskRef) -> None:
        """A client cancelled the task ``ref`` names."""

    async def heartbeat(self) -> None:
        """Every heartbeat interval while a stream is up: renew the held leases."""

    def on_backlog(self, waiting: int) -> None:
        """The node reports ``waiting`` tasks for this stream (advisory)."""

    def on_closed(self) -> None:
        """A stream attempt ended (welcomed or not)."""


class Conn:
    """One stream attempt: its outbound queue and the requests awaiting a Result."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[pb.WorkerMessage | Encoded | None] = asyncio.Queue()
        self.pending: dict[int, Results] = {}

    def fail_pending(self) -> None:
        """The stream broke: every request still waiting fails with Unavailable."""
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(Unavailable("worker stream closed"))
        self.pending.clear()


def _unreachable(exc: BaseException) -> bool:
    """A stream attempt that reached no server (the next endpoint may answer)."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return exc.code() is grpc.StatusCode.UNAVAILABLE
    if isinstance(exc, RPCError):
        return exc.status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return isinstance(exc, Unavailable | OSError)


class Stream:
    """The worker's side of ``WorkerService.Connect``, across reconnects."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        api_key: str,
        tls: TLSConfig | None,
        worker_id: str,
        task_types: Iterable[str],
        pools: Sequence[Pool],
        start_on_delivery: bool,
        heartbeat_interval_s: float | None,
        request_timeout_s: float,
        reconnect: ReconnectConfig,
    ) -> None:
        self._targets = (target,) if isinstance(target, str) else tuple(target)
        self._metadata = (("x-api-key", api_key),)
        self._tls = tls
        self.worker_id = worker_id
        self._task_types = sorted(task_types)
        self.pools = tuple(pools)
        self._start_on_delivery = start_on_delivery
        self._heartbeat_override = heartbeat_interval_s
        self.heartbeat_s = heartbeat_interval_s or 10.0
        """Seconds between heartbeats: the override, else the server's (Welcome)."""
        self.request_timeout_s = request_timeout_s
        self.want_backlog = False
        """Ask the server for Backlog messages (``Hello.backlog``; a cluster worker)."""
        self.server_backlog = False
        """Whether the server of the current stream said it sends them (Welcome)."""
        self._reconnect = reconnect
        self._listener: StreamListener | None = None
        self._reconnecting = False
        self._attempt_welcomed = False
        self.reconnects = 0
        """Times the stream broke and the worker tried again (``/metrics``)."""
        self._channel: FailoverChannel | None = None
        self._conn: Conn | None = None
        self.connected = asyncio.Event()
        """Set while a welcomed stream is up."""
        self.closing = asyncio.Event()
        """Set when the worker stops: no more reconnects; commits stop retrying."""
        self._ids = itertools.count(1)
        self._completion_batch: tuple[list[bytes], Answers] | None = None
        self._ack_waiting: tuple[Conn, Encoded, Answers] | None = None
        """The ack in the current stream's queue not yet taken by its writer."""
        self._completions_in_flight = 0
        self._linger: asyncio.TimerHandle | None = None

    def attach(self, listener: StreamListener) -> None:
        """Name the listener (before :meth:`run`)."""
        self._listener = listener

    # -- lifecycle -------------------------------------------------------------------

    @property
    def target(self) -> str:
        """The endpoint the worker connects to now."""
        return self._channel.target if self._channel is not None else self._targets[0]

    def open(self) -> None:
        """Open the channel (no I/O yet)."""
        self._channel = FailoverChannel(self._targets, self._tls)

    async def run(self) -> None:
        """Stream attempts until :attr:`closing` is set; raises the :data:`FATAL`
        errors (bad API key, rejected hello). Transient failures reconnect with backoff,
        to the next endpoint when this one is unreachable; a WRONG_REGION status sends
        the worker to the endpoints it names at once (with backoff if that happens
        twice in a row: regions that disagree never make it spin)."""
        channel = self._channel
        assert channel is not None
        # The server's messages come as bytes (a push may be read natively: _pushed).
        connect = channel.stream_stream(
            "/tickwheel.v1.WorkerService/Connect",
            request_serializer=outbox.serialize,  # generated, or written (_outbox)
            response_deserializer=None,
        )
        backoff = Backoff(self._reconnect)
        redirected = False
        pacing = FailureLog()
        while not self.closing.is_set():
            welcomed = False
            moved = False
            self._attempt_welcomed = False
            try:
                welcomed = await self._stream(connect)
            except WrongRegion as exc:
                endpoints = [e.strip() for e in exc.endpoints.split(",") if e.strip()]
                if endpoints:
                    _log.info(
                        "worker %s: the tenant lives in region %s: reconnecting to %s",
                        self.worker_id,
                        exc.region,
                        ", ".join(endpoints),
                    )
                    await channel.retarget(endpoints)
                    moved = True
                else:
                    _log.warning("worker %s: %s", self.worker_id, exc)
            except FATAL:
                raise
            except (TickwheelError, grpc.aio.AioRpcError, OSError) as exc:
                pacing.failed(after_welcome=self._attempt_welcomed)
                msg = "worker %s: stream broke: %s%s"
                _log.log(pacing.broke_level, msg, self.worker_id, exc, pacing.note)
                if not welcomed and _unreachable(exc) and len(channel.targets) > 1:
                    _log.info(
                        "worker %s: %s is unreachable; trying %s",
                        self.worker_id,
                        channel.target,
                        channel.advance(),
                    )
            if self.closing.is_set():
                break
            if welcomed:
                backoff.reset()
                pacing.reset()
            if moved and not redirected:
                redirected = True
                continue  # the first redirect goes at once
            redirected = moved
            delay = backoff.next_delay_s()
            msg = "worker %s: reconnecting to %s in %.1f s"
            _log.log(pacing.reconnect_level, msg, self.worker_id, channel.target, delay)
            self.reconnects += 1
            await self._pause(delay)

    async def _pause(self, delay_s: float) -> None:
        """Wait ``delay_s`` before the next attempt, or until the worker stops; cut
        short when the channel, which had lost its connection, connects again (the node
        is back: gRPC retries the connection at most every second meanwhile). A channel
        that stayed connected (the server refused the stream) waits the whole delay."""
        channel = self._channel
        if channel is None or channel.get_state() is grpc.ChannelConnectivity.READY:
            await wait_event(self.closing, delay_s)
            return
        waits = [
            asyncio.ensure_future(channel.channel_ready()),
            asyncio.ensure_future(self.closing.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=delay_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def close(self) -> None:
        """Close the channel (after :meth:`run` returned)."""
        if self._channel is not None:
            await self._channel.close(None)

    def finish(self) -> None:
        """Stop reconnecting and half-close the current stream (the server ends it)."""
        self.closing.set()
        conn = self._conn
        if conn is not None:
            conn.queue.put_nowait(None)

    # -- one stream attempt ----------------------------------------------------------

    async def _stream(self, connect: Any) -> bool:
        """One stream attempt; returns whether the server welcomed it."""
        listener = self._listener
        assert listener is not None
        call = connect(metadata=self._metadata)
        conn = Conn()
        hello = pb.Hello(
            worker_id=self.worker_id,
            task_types=self._task_types,
            pools=[conv.pool_to_proto(p) for p in self.pools],
            slots=(announced := listener.hello_slots()),
            start_on_delivery=self._start_on_delivery,
            json_bytes=True,  # payloads as the stored JSON text: orjson reads them
            backlog=self.want_backlog,
            early_ms=HOLD_EARLY_MS,  # the runner holds a task pushed ahead to its due time
        )
        writer: asyncio.Task[None] | None = None
        heart: asyncio.Task[None] | None = None
        try:
            try:
                await asyncio.wait_for(
                    call.write(pb.WorkerMessage(hello=hello)), self.request_timeout_s
                )
                first = await asyncio.wait_for(call.read(), self.request_timeout_s)
            except grpc.aio.AioRpcError as exc:
                raise from_rpc_error(exc) from None
            if first is not _EOF:
                first = server_message(first)
            if first is _EOF or first.WhichOneof("kind") != "welcome":
                raise Unavailable("server did not welcome the worker")
            welcome = first.welcome
            self.server_backlog = welcome.backlog
            if self._heartbeat_override is None and welcome.heartbeat_interval_s > 0:
                self.heartbeat_s = welcome.heartbeat_interval_s
            _log.info(
                "worker %s %s (session %s, %d slots, server %s)",
                self.worker_id,
                "reconnected" if self._reconnecting else "connected",
                welcome.session_id,
                announced,
                self.target,
            )
            # Until the first welcome it is a first connect, however many attempts it took.
            self._reconnecting = True
            self._attempt_welcomed = True
            name = f"tickwheel-worker-{self.worker_id}"
            writer = asyncio.create_task(self._write_loop(call, conn), name=f"{name}-write")
            heart = asyncio.create_task(self._heartbeat_loop(), name=f"{name}-heartbeat")
            self._conn = conn
            self.connected.set()
            listener.on_welcome(announced)
            while True:
                try:
                    msg = await call.read()
                except grpc.aio.AioRpcError as exc:
                    if exc.code() is grpc.StatusCode.CANCELLED and self.closing.is_set():
                        break
                    raise from_rpc_error(exc) from None
                if msg is _EOF:
                    break
                self._on_message(msg, conn, listener)
            return True
        finally:
            self.connected.clear()
            if self._conn is conn:
                self._conn = None
            conn.fail_pending()
            listener.on_closed()
            await cancel_and_wait((writer, heart))
            call.cancel()

    def _on_message(self, data: bytes, conn: Conn, listener: StreamListener) -> None:
        pushed = read_pushed(data)
        if pushed is not None:
            listener.on_pushed(pushed)
            return
        msg = server_message(data)
        kind = msg.WhichOneof("kind")
        if kind == "result":
            result = msg.result
            if result.code:
                # The server refused the whole message (a bad field): nothing of it was
                # applied and the stream stays open. The waiting request sees no
                # per-task result, so its write counts as not committed.
                _log.warning(
                    "worker %s: the server refused request %d (status %d, field %r): %s",
                    self.worker_id,
                    result.request_id,
                    result.code,
                    result.field,
                    result.message,
                )
            fut = conn.pending.pop(result.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(list(result.results))
        elif kind == "assignments":
            listener.on_assignments(msg.assignments.tasks)
        elif kind == "cancel":
            listener.on_cancel(msg.cancel.task)
        elif kind == "backlog":
            listener.on_backlog(msg.backlog.waiting)
        else:
            _log.debug("ignoring server message %s", kind)

    async def _write_loop(self, call: Any, conn: Conn) -> None:
        while True:
            msg = await conn.queue.get()
            waiting = self._ack_waiting
            if waiting is not None and waiting[1] is msg:
                self._ack_waiting = None  # written now: the next ack is a new message
            try:
                if msg is None:
                    await asyncio.wait_for(call.done_writing(), self.request_timeout_s)
                    return
                async with asyncio.timeout(self.request_timeout_s):
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
        listener = self._listener
        assert listener is not None
        while True:
            await asyncio.sleep(self.heartbeat_s)
            await listener.heartbeat()

    # -- requests --------------------------------------------------------------------

    def send(self, msg: pb.WorkerMessage) -> None:
        """Fire and forget on the current stream (dropped when disconnected)."""
        conn = self._conn
        if conn is not None:
            conn.queue.put_nowait(msg)

    def start_request(self, msg: pb.WorkerMessage | Encoded) -> Results:
        """Send ``msg`` with a fresh request id; the future of its Result (failed at
        once when no stream is up, or when the stream breaks before the answer)."""
        conn = self._conn
        fut: Results = asyncio.get_running_loop().create_future()
        if conn is None:
            fut.set_exception(Unavailable("worker stream not connected"))
            return fut
        msg.request_id = next(self._ids)
        conn.pending[msg.request_id] = fut
        conn.queue.put_nowait(msg)
        return fut

    def ack(self, refs: list[bytes]) -> Answers:
        """Acknowledge the tasks of ``refs`` (their ``TaskRef``s' bytes): their answers
        by task id. While an ack waits in the queue unwritten (the writer is busy with
        the message before it), new refs join it: one message and one Result for every
        push that arrived meanwhile, instead of one each."""
        conn = self._conn
        waiting = self._ack_waiting
        if waiting is not None and waiting[0] is conn and not waiting[2].done:
            waiting[1].extend(outbox.items(refs))
            return waiting[2]
        msg = outbox.ack(refs)
        answers = self.start_batch(msg)
        self._ack_waiting = (conn, msg, answers) if conn is not None else None
        return answers

    def start_batch(self, msg: pb.WorkerMessage | Encoded) -> Answers:
        """:meth:`start_request` for a message about many tasks (an ack): the answers
        by task id, failed with Unavailable after the request timeout."""
        answers = Answers(asyncio.get_running_loop(), self.request_timeout_s)
        answers.follow(self.start_request(msg))
        return answers

    async def request(
        self, msg: pb.WorkerMessage, timeout_s: float | None = None
    ) -> list[pb.TaskResult]:
        """Send ``msg`` (waiting for a stream if there is none) and its results."""
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(timeout):
                if not self.connected.is_set():
                    await self.connected.wait()
                return await self.start_request(msg)
        except TimeoutError:
            raise Unavailable("no answer from the server in time") from None

    async def commit(
        self, msg: pb.WorkerMessage | Completed, task_id: uuid.UUID
    ) -> pb.TaskResult | None:
        """Send a fenced write, retrying across reconnects; None if it never got through.

        A completion (a :class:`~scheduler.worker._outbox.Completed`) joins the others
        finished in the same loop turn in one ``Completions`` message (one write and
        one Result for many tasks).
        """
        for attempt in range(5):
            try:
                if isinstance(msg, Completed):
                    return await self._complete_batched(msg)
                results = await self.request(msg)
                return results[0] if results else None
            except Unavailable as exc:
                if self.closing.is_set():
                    break
                _log.info("task %s: commit retry %d: %s", task_id, attempt + 1, exc)
        _log.warning("task %s: could not commit its outcome; its lease will expire", task_id)
        return None

    def complete(
        self, completion: Completed, answered: Callable[[T, Answer], None], arg: T
    ) -> bool:
        """:meth:`commit` of a completion, tried once, with no coroutine waiting: it
        joins the ``Completions`` batch and ``answered(arg, answer)`` gets its Result
        (None if the answer named it not) or the batch's failure (Unavailable: the
        caller may :meth:`commit` it again). False, and nothing sent, while no stream
        is up (then :meth:`commit` waits for one)."""
        if not self.connected.is_set():
            return False
        self._join_completions(completion).on_answer(completion.task_id, answered, arg)
        return True

    async def _complete_batched(self, completion: Completed) -> pb.TaskResult | None:
        if not self.connected.is_set():
            try:
                async with asyncio.timeout(self.request_timeout_s):
                    await self.connected.wait()
            except TimeoutError:
                raise Unavailable("no answer from the server in time") from None
        return await self._join_completions(completion).wait(completion.task_id)

    def _join_completions(self, completion: Completed) -> Answers:
        """Add ``completion`` to the ``Completions`` batch being gathered (a new one,
        and its flush, when none is); the batch's answers."""
        if self._completion_batch is None:
            loop = asyncio.get_running_loop()
            batch = Answers(loop, self.request_timeout_s)
            self._completion_batch = ([], batch)
            # Nagle's rule: with no Completions awaiting its Result the batch goes at
            # the end of this loop turn; with one, it waits for that Result (at most
            # COMPLETION_LINGER_S), gathering what finishes meanwhile into one message.
            if self._completions_in_flight:
                self._linger = loop.call_later(COMPLETION_LINGER_S, self._flush_completions)
            else:
                loop.call_soon(self._flush_completions)
        items, batch = self._completion_batch
        items.append(completion.item)
        return batch

    def _flush_completions(self) -> None:
        if self._completion_batch is None:
            return  # sent already (its linger ended and the Result came, or vice versa)
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        items, batch = self._completion_batch
        self._completion_batch = None
        request = self.start_request(outbox.completions(items))
        self._completions_in_flight += 1
        request.add_done_callback(self._completions_answered)
        batch.follow(request)

    def _completions_answered(self, _request: Results) -> None:
        self._completions_in_flight -= 1
        if not self._completions_in_flight and self._linger is not None:
            self._flush_completions()
