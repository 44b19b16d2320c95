"""WorkerService: the worker stream (Connect) and the unary fenced writes.

One Connect call is one :class:`~scheduler.engine.WorkerSession`. Two tasks serve it:
a *pump* moving session events (assignments, cancel notices) into an outbound queue,
and a *reader* handling the worker's messages strictly in order. The handler itself is
the only writer to the response stream: it drains the outbound queue, so gRPC never
sees concurrent writes.

Tracing: each assignment delivered gets a PRODUCER span ``tickwheel.dispatch``, a child
of the trace context captured at submission; its context travels in
``Assignment.dispatch_trace_context`` so the worker's CONSUMER span joins the same
trace however long the task waited. opentelemetry-api only: a no-op unless the process
configured an SDK ``TracerProvider``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, ClassVar

import grpc
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler._aio import cancel_and_wait
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.engine import (
    AssignmentBatch,
    BacklogNotice,
    CancelNotice,
    Engine,
    WorkerHello,
    WorkerSession,
)
from scheduler.engine._timeline import to_us
from scheduler.limits import (
    MAX_EARLY_MS,
    MAX_SLOTS,
    MAX_TASK_TYPES,
    MAX_TYPE_CHARS,
    MAX_WORKER_ID_CHARS,
)
from scheduler.logs import task_extra, trace_id_of
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._config import ServerConfig
from scheduler.server._outbound import Outbound, Pushes
from scheduler.server._status import abort, unary
from scheduler.server._stream_wire import WorkerMessage, decode_worker_message, encode_assignments
from scheduler.server._worker_messages import MAX_COALESCE, Inbox, Reply, apply_inbox, receive
from scheduler.types import Assignment, Pool, Scope

Context = grpc.aio.ServicerContext[Any, Any]

_log = logging.getLogger("tickwheel.server")
_tracer = trace.get_tracer("tickwheel.server")
_W3C = TraceContextTextMapPropagator()


class _End:
    """Outbound sentinel: the stream is over (``error`` set when it failed)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


_Out = Reply | _End


def hello_from_proto(hello: pb.Hello, tenant_id: uuid.UUID) -> WorkerHello:
    """A validated :class:`WorkerHello`."""
    if not hello.worker_id:
        raise InvalidArgument("hello.worker_id", "required")
    if len(hello.worker_id) > MAX_WORKER_ID_CHARS:
        raise InvalidArgument("hello.worker_id", f"longer than {MAX_WORKER_ID_CHARS} characters")
    if not hello.task_types:
        raise InvalidArgument("hello.task_types", "at least one task type is required")
    if len(hello.task_types) > MAX_TASK_TYPES:
        raise InvalidArgument("hello.task_types", f"at most {MAX_TASK_TYPES}")
    for i, t in enumerate(hello.task_types):
        if not t or len(t) > MAX_TYPE_CHARS:
            raise InvalidArgument(f"hello.task_types[{i}]", "must be 1-64 characters")
    pools = frozenset(
        conv.pool_from_proto(p, f"hello.pools[{i}]") for i, p in enumerate(hello.pools)
    )
    if hello.slots > MAX_SLOTS:
        raise InvalidArgument("hello.slots", f"at most {MAX_SLOTS}")
    if hello.early_ms > MAX_EARLY_MS:
        raise InvalidArgument("hello.early_ms", f"at most {MAX_EARLY_MS}")
    return WorkerHello(
        worker_id=hello.worker_id,
        tenant_id=tenant_id,
        task_types=frozenset(hello.task_types),
        pools=pools or frozenset(Pool),
        slots=hello.slots,
        start_on_delivery=hello.start_on_delivery,
        backlog=hello.backlog,
        early_ms=hello.early_ms,
    )


def event_to_proto(
    event: AssignmentBatch | CancelNotice | BacklogNotice,
    worker_id: str = "",
    *,
    json_bytes: bool = False,
    now_us: int = 0,
) -> Reply:
    """A session event as the message pushed to the worker; ``json_bytes``: payloads
    and checkpoints as JSON bytes (the worker's ``Hello.json_bytes``), and assignments
    written as bytes (``_stream_wire.encode_assignments``) unless DEBUG logging wants
    each message. ``now_us`` (epoch microseconds, on a stream that holds early pushes):
    each assignment not yet due says how long until it is (``start_in_us``)."""
    if isinstance(event, BacklogNotice):
        return pb.ServerMessage(backlog=pb.Backlog(waiting=event.waiting))
    if isinstance(event, AssignmentBatch):
        if json_bytes and not _log.isEnabledFor(logging.DEBUG):
            # Written natively; a traced assignment through the generated class.
            return encode_assignments(
                event.assignments, lambda a: _traced_assignment(a, worker_id, now_us), now_us
            )
        tasks = []
        for a in event.assignments:
            msg = conv.assignment_to_proto(a, json_bytes=json_bytes, now_us=now_us)
            _trace_dispatch(msg, worker_id)
            tasks.append(msg)
        if _log.isEnabledFor(logging.DEBUG):
            for msg in tasks:
                _log.debug(
                    "task %s: pushed to worker %s with fencing token %d",
                    msg.task_id,
                    worker_id,
                    msg.fencing_token,
                    extra=task_extra(
                        task_id=msg.task_id,
                        tenant_id=msg.tenant_id or None,
                        fencing_token=msg.fencing_token,
                        worker_id=worker_id,
                        trace_id=trace_id_of(msg.trace_context.traceparent),
                    ),
                )
        return pb.ServerMessage(assignments=pb.Assignments(tasks=tasks))
    return pb.ServerMessage(cancel=pb.CancelRequest(task=conv.ref_to_proto(event.key, event.token)))


def _traced_assignment(a: Assignment, worker_id: str, now_us: int = 0) -> bytes:
    """The bytes of a traced assignment (JSON as bytes), its dispatch span recorded."""
    msg = conv.assignment_to_proto(a, json_bytes=True, now_us=now_us)
    _trace_dispatch(msg, worker_id)
    return msg.SerializeToString()


def _trace_dispatch(msg: pb.Assignment, worker_id: str) -> None:
    """Record the dispatch span of a traced assignment and hand its context on."""
    if not msg.trace_context.traceparent:
        return
    carrier = {"traceparent": msg.trace_context.traceparent}
    if msg.trace_context.tracestate:
        carrier["tracestate"] = msg.trace_context.tracestate
    parent = _W3C.extract(carrier)
    if not trace.get_current_span(parent).get_span_context().is_valid:
        return
    span = _tracer.start_span(
        f"tickwheel.dispatch {msg.type}",
        context=parent,
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": "tickwheel",
            "messaging.operation.type": "send",
            "tickwheel.task_id": msg.task_id,
            "tickwheel.task_type": msg.type,
            "tickwheel.attempt": msg.attempt,
            "tickwheel.fencing_token": msg.fencing_token,
            "tickwheel.worker_id": worker_id,
        },
    )
    try:
        if span.is_recording():
            out: dict[str, str] = {}
            _W3C.inject(out, context=trace.set_span_in_context(span))
            msg.dispatch_trace_context.traceparent = out.get("traceparent", "")
            msg.dispatch_trace_context.tracestate = out.get("tracestate", "")
    finally:
        span.end()


async def _aclose(iterator: AsyncIterator[Any]) -> None:
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


class WorkerService(pbg.WorkerServiceServicer):
    """gRPC adapter over :class:`Engine` worker sessions."""

    REQUEST_DECODERS: ClassVar[Mapping[str, Callable[[bytes], WorkerMessage]]] = {
        "Connect": decode_worker_message
    }
    """The stream's messages are read by ``_stream_wire`` (fenced writes natively)."""

    def __init__(
        self, engine: Engine, config: ServerConfig, gate: Gatekeeper | None = None
    ) -> None:
        self._engine = engine
        self._config = config
        self._gate = gate or Gatekeeper(engine, config)
        self.stopping = False
        """The server is stopping: the streams it ends are not broken by their workers."""

    async def Connect(
        self, request_iterator: AsyncIterator[WorkerMessage], context: Context
    ) -> AsyncIterator[Reply]:
        """One worker's stream: hello first, then credit-based pushes and fenced writes."""
        # The request generator is always closed explicitly (a refused key included):
        # gRPC's receiver must not be finalised by the garbage collector.
        requests = aiter(request_iterator)
        try:
            # Inside the mapped block: a key checked against a store that is away is
            # UNAVAILABLE, as on every unary call (it reached grpc as UNKNOWN).
            tenant_id = await self._authenticate(context)
            try:
                first = await asyncio.wait_for(anext(requests), self._config.hello_timeout_s)
            except StopAsyncIteration:
                raise InvalidArgument("hello", "stream ended before hello") from None
            except TimeoutError:
                raise InvalidArgument("hello", "not received in time") from None
            if not isinstance(first, pb.WorkerMessage) or first.WhichOneof("kind") != "hello":
                raise InvalidArgument("hello", "the first message on the stream must be hello")
            hello = hello_from_proto(first.hello, tenant_id)
            json_bytes = first.hello.json_bytes
            session = await self._engine.open_session(hello)
        except Exception as exc:  # mapped through the one table
            await _aclose(requests)
            await abort(context, exc)
        error: BaseException | None = None
        try:
            yield pb.ServerMessage(
                welcome=pb.Welcome(
                    session_id=session.session_id,
                    lease_ttl_s=session.lease_ttl_s,
                    heartbeat_interval_s=session.heartbeat_interval_s,
                    members=self._member_list(),
                    backlog=session.wants_backlog and self._engine.config.backlog_interval_s > 0,
                )
            )
            out: Outbound[_Out] = Outbound()
            name = f"tickwheel-session-{session.session_id}"
            pump = asyncio.create_task(self._pump(session, out, json_bytes), name=f"{name}-pump")
            reader = asyncio.create_task(self._read(requests, session, out), name=f"{name}-read")
            watch = asyncio.create_task(self._watch_key(context, out), name=f"{name}-key")
            try:
                while True:
                    item = await out.get()
                    if isinstance(item, Pushes):
                        # Every push that waited behind the last write, as one message.
                        batch = AssignmentBatch(tuple(item))
                        # The engine's clock, as delivery's (a test's may be moved).
                        now_us = to_us(self._engine.now()) if session.early_us else 0
                        yield event_to_proto(
                            batch, session.worker_id, json_bytes=json_bytes, now_us=now_us
                        )
                        continue
                    if isinstance(item, _End):
                        error = item.error
                        break
                    yield item
            finally:
                await cancel_and_wait((pump, reader, watch))
        finally:
            # Tasks dispatched but never acked go back to PRELOADED at once; a stream
            # that ended on the worker's side (not by this server stopping or the
            # engine ending it) leaves its running tasks to the orphan grace.
            await session.close(orphaned=not self.stopping and session.ended is None)
            await _aclose(requests)
        if error is not None:
            await abort(context, error)

    def _member_list(self) -> pb.MemberList:
        membership = self._engine.membership
        revision, addresses = membership.members()
        own = self._config.advertise or self._config.listen
        members = [
            pb.Member(
                node_id=node,
                address=(own if node == membership.node_id and not addr else addr),
            )
            for node, addr in sorted(addresses.items())
        ]
        return pb.MemberList(members=members, revision=revision, node_id=membership.node_id)

    @unary
    async def Members(self, request: pb.MembersRequest, context: Context) -> pb.MembersResponse:
        """The live nodes and the address a worker dials for each."""
        await tenant_of(self._gate, context, Scope.WORK)
        return pb.MembersResponse(members=self._member_list())

    async def _authenticate(self, context: Context) -> uuid.UUID:
        try:
            return await self._gate.stream(context)
        except Exception as exc:  # mapped through the one table
            await abort(context, exc)

    async def _watch_key(self, context: Context, out: Outbound[_Out]) -> None:
        # A revoked or expired key ends the stream within stream_key_recheck_s.
        out.put(_End(await self._gate.lapsed(context)))

    async def _pump(self, session: WorkerSession, out: Outbound[_Out], json_bytes: bool) -> None:
        try:
            async for event in session.events():
                if type(event) is AssignmentBatch:
                    out.push(event.assignments)  # encoded when its turn to be written comes
                else:
                    out.put(event_to_proto(event, session.worker_id, json_bytes=json_bytes))
        except Exception as exc:  # handed to the stream handler
            out.put(_End(exc))
            return
        # The engine ended the stream (its tenant is moving): the worker reconnects.
        out.put(_End(session.ended))

    async def _read(
        self,
        requests: AsyncIterator[WorkerMessage],
        session: WorkerSession,
        out: Outbound[_Out],
    ) -> None:
        inbox = Inbox(maxsize=MAX_COALESCE * 4)
        receiver = asyncio.create_task(
            receive(requests, inbox, session, out.put),
            name=f"tickwheel-session-{session.session_id}-recv",
        )
        try:
            await apply_inbox(session, inbox, out.put)
            await receiver  # it has ended; re-raise its receive error, if any
        except Exception as exc:  # handed to the stream handler
            out.put(_End(exc))
            return
        finally:
            if not receiver.done():
                receiver.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await receiver
            elif not receiver.cancelled():
                receiver.exception()  # retrieved: the stream already failed or ended
        out.put(_End())

    @unary
    async def CompleteTask(
        self, request: pb.CompleteTaskRequest, context: Context
    ) -> pb.CompleteTaskResponse:
        """Fenced completion outside a stream."""
        tenant = await tenant_of(self._gate, context, Scope.WORK)
        if not request.HasField("task"):
            raise InvalidArgument("task", "required")
        task_id = conv.parse_uuid(request.task.task_id, "task.task_id")
        token = conv.token_from_proto(request.task, "task")
        when = (
            conv.to_datetime(request.task.scheduled_at, "task.scheduled_at")
            if request.task.HasField("scheduled_at")
            else None
        )
        result = conv.json_field(request.result, request.result_json, "result")
        rec = await self._engine.complete(tenant, task_id, token, result, when)
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.CompleteTaskResponse(task=conv.task_to_proto(rec, json_bytes=json_bytes))

    @unary
    async def FailTask(self, request: pb.FailTaskRequest, context: Context) -> pb.FailTaskResponse:
        """Fenced failure outside a stream."""
        tenant = await tenant_of(self._gate, context, Scope.WORK)
        if not request.HasField("task"):
            raise InvalidArgument("task", "required")
        task_id = conv.parse_uuid(request.task.task_id, "task.task_id")
        token = conv.token_from_proto(request.task, "task")
        when = (
            conv.to_datetime(request.task.scheduled_at, "task.scheduled_at")
            if request.task.HasField("scheduled_at")
            else None
        )
        error = conv.error_text(request.error, "error")
        rec = await self._engine.fail(
            tenant,
            task_id,
            token,
            error,
            retryable=request.retryable,
            scheduled_at=when,
            error_type=conv.error_type_text(request.error_type, "error_type"),
            traceback=conv.traceback_text(request.traceback, "traceback"),
        )
        json_bytes = conv.wants_json_bytes(context.invocation_metadata())
        return pb.FailTaskResponse(task=conv.task_to_proto(rec, json_bytes=json_bytes))
