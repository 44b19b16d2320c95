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
import collections
import contextlib
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import grpc
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler._aio import cancel_and_wait
from scheduler._errors import InvalidArgument, TickwheelError
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
from scheduler.limits import MAX_SLOTS, MAX_TASK_TYPES, MAX_TYPE_CHARS, MAX_WORKER_ID_CHARS
from scheduler.logs import task_extra, trace_id_of
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper, tenant_of
from scheduler.server._config import ServerConfig
from scheduler.server._outbound import Outbound, Pushes
from scheduler.server._status import abort, status_of, unary
from scheduler.server._stream_wire import (
    WorkerMessage,
    Writes,
    decode_worker_message,
    encode_assignments,
    encode_result,
    kind_of,
)
from scheduler.types import Assignment, Outcome, Pool, Scope

Context = grpc.aio.ServicerContext[Any, Any]

_log = logging.getLogger("tickwheel.server")
_tracer = trace.get_tracer("tickwheel.server")
_W3C = TraceContextTextMapPropagator()


REASONS = {
    Outcome.OK: "",
    Outcome.STALE: "stale_fencing_token",
    Outcome.NOT_FOUND: "not_found",
}
"""Per-task rejection reasons on the stream (the proto documents these strings)."""


class _End:
    """Outbound sentinel: the stream is over (``error`` set when it failed)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


Reply = pb.ServerMessage | bytes
"""A message to the worker, or its bytes (a Result is written directly)."""
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
    return WorkerHello(
        worker_id=hello.worker_id,
        tenant_id=tenant_id,
        task_types=frozenset(hello.task_types),
        pools=pools or frozenset(Pool),
        slots=hello.slots,
        start_on_delivery=hello.start_on_delivery,
        backlog=hello.backlog,
    )


def _result(request_id: int, ids: Sequence[uuid.UUID], outcomes: Sequence[Outcome]) -> bytes:
    return encode_result(request_id, [str(i).encode() for i in ids], outcomes)


def event_to_proto(
    event: AssignmentBatch | CancelNotice | BacklogNotice,
    worker_id: str = "",
    *,
    json_bytes: bool = False,
) -> Reply:
    """A session event as the message pushed to the worker; ``json_bytes``: payloads
    and checkpoints as JSON bytes (the worker's ``Hello.json_bytes``), and assignments
    written as bytes (``_stream_wire.encode_assignments``) unless DEBUG logging wants
    each message."""
    if isinstance(event, BacklogNotice):
        return pb.ServerMessage(backlog=pb.Backlog(waiting=event.waiting))
    if isinstance(event, AssignmentBatch):
        if json_bytes and not _log.isEnabledFor(logging.DEBUG):
            # Written natively; a traced assignment through the generated class.
            return encode_assignments(event.assignments, lambda a: _traced_assignment(a, worker_id))
        tasks = []
        for a in event.assignments:
            msg = conv.assignment_to_proto(a, json_bytes=json_bytes)
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


def _traced_assignment(a: Assignment, worker_id: str) -> bytes:
    """The bytes of a traced assignment (JSON as bytes), its dispatch span recorded."""
    msg = conv.assignment_to_proto(a, json_bytes=True)
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


_BATCHABLE = frozenset(
    {"ack", "heartbeat", "completion", "completions", "failure", "release", "cancel_confirmed"}
)
MAX_COALESCE = 1000
"""Most consecutive same-kind messages applied as one engine call."""


def _parse(msg: WorkerMessage, kind: str) -> list[Any]:
    """The engine items of one batchable message (validated)."""
    if type(msg) is Writes:
        return msg.items  # read (and checked) from its bytes already
    assert isinstance(msg, pb.WorkerMessage)
    if kind in ("ack", "heartbeat"):
        refs = msg.ack.tasks if kind == "ack" else msg.heartbeat.tasks
        return conv.writes_from_proto(refs, f"{kind}.tasks")
    if kind == "cancel_confirmed":
        if not msg.cancel_confirmed.HasField("task"):
            raise InvalidArgument("cancel_confirmed.task", "required")
        return [conv.write_from_proto(msg.cancel_confirmed.task, "cancel_confirmed.task")]
    if kind == "completion":
        return [conv.completion_from_proto(msg.completion, "completion")]
    if kind == "completions":
        return [
            conv.completion_from_proto(c, f"completions.items[{i}]")
            for i, c in enumerate(msg.completions.items)
        ]
    if kind == "failure":
        return [conv.failure_from_proto(msg.failure, "failure")]
    return [conv.release_from_proto(msg.release, "release")]


async def _apply(session: WorkerSession, kind: str, items: list[Any]) -> list[Outcome]:
    if not items:
        return []
    if kind == "ack":
        return await session.ack(items)
    if kind == "heartbeat":
        return await session.heartbeat(items)
    if kind == "cancel_confirmed":
        return await session.confirm_cancel(items)
    if kind in ("completion", "completions"):
        return await session.complete(items)
    if kind == "failure":
        return await session.fail(items)
    return await session.release(items)


def _refusal(request_id: int, exc: TickwheelError) -> pb.ServerMessage:
    """The Result that refuses one whole message: its status, message and field."""
    status = status_of(exc)
    return pb.ServerMessage(
        result=pb.Result(
            request_id=request_id,
            code=status.code.value[0],
            message=status.details,
            field=getattr(exc, "field", ""),
        )
    )


def _distinct(items: Sequence[Any], kind: str) -> None:
    """One message names each task at most once (the per-task Results are by id)."""
    seen: set[uuid.UUID] = set()
    for i, item in enumerate(items):
        if item.key.id in seen:
            raise InvalidArgument(f"{kind}[{i}].task_id", "the same task twice in one message")
        seen.add(item.key.id)


async def handle_messages(session: WorkerSession, msgs: Sequence[WorkerMessage]) -> list[Reply]:
    """Apply consecutive worker messages of one kind to the session, in order.

    Batchable kinds (fenced writes) become ONE engine call for the whole group, so a
    busy worker's completions share a store statement; the Results go back per message.
    A message with a problem of its own (a missing field, a bad id, a value over a
    limit) is refused in its Result and the others still apply: only protocol
    violations (raised as :class:`ProtocolViolation`) end the stream.
    """
    kind = kind_of(msgs[0])
    if kind not in _BATCHABLE:
        singles: list[Reply] = []
        for m in msgs:
            reply = await handle_message(session, m)
            if reply is not None:
                singles.append(reply)
        return singles
    parsed: list[list[Any] | TickwheelError] = []
    for m in msgs:
        try:
            items = _parse(m, kind)
            _distinct(items, kind)
            parsed.append(items)
        except TickwheelError as exc:
            parsed.append(exc)
    answers: list[list[Outcome] | TickwheelError] = [
        p if isinstance(p, TickwheelError) else [] for p in parsed
    ]
    # Runs of messages that name no task twice go to the engine as one call each.
    run: list[int] = []
    seen: set[uuid.UUID] = set()
    for i, p in enumerate(parsed):
        if isinstance(p, TickwheelError):
            continue
        ids = {item.key.id for item in p}
        if ids & seen:
            await _apply_run(session, kind, parsed, run, answers)
            run, seen = [], set()
        run.append(i)
        seen |= ids
    await _apply_run(session, kind, parsed, run, answers)
    replies: list[Reply] = []
    for m, p, a in zip(msgs, parsed, answers, strict=True):
        if isinstance(a, TickwheelError):
            replies.append(_refusal(m.request_id, a))
        elif m.request_id:
            assert not isinstance(p, TickwheelError)
            replies.append(
                encode_result(m.request_id, m.ids, a)
                if type(m) is Writes
                else _result(m.request_id, [i.key.id for i in p], a)
            )
    return replies


class Inbox(asyncio.Queue[WorkerMessage | None]):
    """A stream's messages waiting to be applied (``asyncio.Queue``), and those taken
    out of it and not applied yet (the group :func:`apply_inbox` gathers and applies,
    and the one message it read ahead): what an ack answered out of its turn must not
    overtake."""

    def _init(self, maxsize: int) -> None:  # asyncio.Queue's storage hooks
        self._queue: collections.deque[WorkerMessage | None] = collections.deque()
        self.taken: list[WorkerMessage | None] = []
        """Taken out by ``get`` and not yet applied, oldest first."""

    def _get(self) -> WorkerMessage | None:
        item = self._queue.popleft()
        self.taken.append(item)
        return item

    def settle(self, carried: int) -> None:
        """The messages taken are applied, but the last ``carried`` (read ahead)."""
        del self.taken[: len(self.taken) - carried]

    def waiting(self) -> Iterable[WorkerMessage | None]:
        """The messages received and not yet applied, in order."""
        return itertools.chain(self.taken, self._queue)


_NAMES_NO_TASK = frozenset({"credit", "drain"})
"""Kinds of worker message that name no task: an ack may overtake them."""


def _ack_at_once(session: WorkerSession, inbox: Inbox, msg: Writes) -> bool:
    """Answer an ack the moment it is read, ahead of the writes waiting before it, when
    the session would answer it from memory (every task held under the token given,
    ``WorkerSession.ack_at_once``) and nothing waiting names any of its tasks: then
    its turn changes no outcome, and the handlers waiting for it do not wait for the
    commit of the completions ahead of it. True if answered; else it takes its turn."""
    ids = {w.key.id for w in msg.items}
    if len(ids) != len(msg.items):
        return False  # the same task twice: refused in its turn
    for waiting in inbox.waiting():
        if waiting is None:
            continue
        if type(waiting) is not Writes:
            if waiting.WhichOneof("kind") in _NAMES_NO_TASK:
                continue
            return False  # a message read by the generated class: not looked into
        for item in waiting.items:
            if item.key.id in ids:
                return False
    return session.ack_at_once(msg.items)


async def receive(
    requests: AsyncIterator[WorkerMessage],
    inbox: Inbox,
    session: WorkerSession,
    reply: Callable[[Reply], None],
) -> None:
    """Read a stream's messages into ``inbox`` (then a None), answering an ack that can
    go out of its turn at once (:func:`_ack_at_once`)."""
    seen = session.seen
    try:
        async for msg in requests:
            seen()
            if type(msg) is Writes and msg.kind == "ack" and _ack_at_once(session, inbox, msg):
                if msg.request_id:
                    reply(encode_result(msg.request_id, msg.ids, [Outcome.OK] * len(msg.ids)))
                continue
            await inbox.put(msg)
    except Exception:
        await inbox.put(None)  # the handler loop ends, then sees this error
        raise
    await inbox.put(None)


async def apply_inbox(
    session: WorkerSession,
    inbox: asyncio.Queue[WorkerMessage | None],
    reply: Callable[[Reply], None],
) -> None:
    """Apply a stream's messages from ``inbox`` to the session until a None, handing
    each Result to ``reply``.

    Messages are applied in the order they came, with two refinements:
    - what waits in ``inbox`` behind a batchable message (a fenced write) is
      coalesced with it while it is of the same kind: one engine call, one store write
      (:func:`handle_messages`);
    - a ``credit`` waiting among them is applied at once, out of its turn. A credit
      commutes with every fenced write (it only lets the server push more), and a
      worker sends one after each Result that frees slots: taken in turn, credits cut
      a busy worker's completions into a store write each, and the slower the
      handler, the smaller the writes. A ``drain`` (or any other kind) ends the group
      and is applied in its turn, so a credit behind a drain stays behind it.
    """
    carry: list[WorkerMessage | None] = []  # at most one message read ahead
    while True:
        msg = carry.pop() if carry else await inbox.get()
        if msg is None:
            return
        group = [msg]
        kind = kind_of(msg)
        while kind in _BATCHABLE and len(group) < MAX_COALESCE and not inbox.empty():
            nxt = inbox.get_nowait()
            nxt_kind = None if nxt is None else kind_of(nxt)
            if nxt is None or nxt_kind not in (kind, "credit"):
                carry.append(nxt)
                break
            if nxt_kind == kind:
                group.append(nxt)
                continue
            answer = await handle_message(session, nxt)
            if answer is not None:
                reply(answer)
        for answer in await handle_messages(session, group):
            reply(answer)
        if isinstance(inbox, Inbox):
            inbox.settle(len(carry))


async def _apply_run(
    session: WorkerSession,
    kind: str,
    parsed: Sequence[list[Any] | TickwheelError],
    run: Sequence[int],
    answers: list[list[Outcome] | TickwheelError],
) -> None:
    """Apply the messages ``run`` (indexes into ``parsed``) as one engine call; if the
    engine refuses the call (one item over a limit), apply them one by one so only
    the message at fault is refused."""
    if not run:
        return
    groups = [g for g in (parsed[i] for i in run) if not isinstance(g, TickwheelError)]
    flat = [item for g in groups for item in g]
    try:
        outcomes = await _apply(session, kind, flat)
    except TickwheelError as exc:
        if len(run) == 1:
            answers[run[0]] = exc
            return
        for i in run:
            await _apply_run(session, kind, parsed, [i], answers)
        return
    at = 0
    for i, g in zip(run, groups, strict=True):
        answers[i] = outcomes[at : at + len(g)]
        at += len(g)
    if outcomes.count(Outcome.OK) != len(outcomes) and _log.isEnabledFor(logging.INFO):
        _log_refused(session, kind, flat, outcomes)  # (the count is a C loop: all OK, mostly)


def _log_refused(
    session: WorkerSession, kind: str, items: Sequence[Any], outcomes: Sequence[Outcome]
) -> None:
    """One INFO line per fenced write the store refused (a stale token, a task the
    session does not hold), with the task's fields."""
    for item, outcome in zip(items, outcomes, strict=True):
        if outcome is Outcome.OK:
            continue
        _log.info(
            "worker %s: %s of task %s with fencing token %d refused (%s)",
            session.worker_id,
            kind,
            item.key.id,
            item.token,
            REASONS[outcome],
            extra=task_extra(
                task_id=item.key.id,
                tenant_id=session.scope,
                fencing_token=item.token,
                worker_id=session.worker_id,
            ),
        )


class ProtocolViolation(InvalidArgument):
    """A message that breaks the stream protocol (a second hello): the stream ends."""


async def handle_message(session: WorkerSession, msg: WorkerMessage) -> Reply | None:
    """Apply one worker message to the session; the Result to send back, if any.

    A problem with the message itself is answered in its Result (the stream stays
    open); a protocol violation raises :class:`ProtocolViolation`.
    """
    kind = kind_of(msg)
    if kind == "hello":
        raise ProtocolViolation("hello", "sent twice on one stream")
    if kind in _BATCHABLE:
        replies = await handle_messages(session, [msg])
        return replies[0] if replies else None
    assert isinstance(msg, pb.WorkerMessage)  # Writes are batchable
    try:
        return await _handle_one(session, msg, kind)
    except TickwheelError as exc:
        return _refusal(msg.request_id, exc)


async def _handle_one(
    session: WorkerSession, msg: pb.WorkerMessage, kind: str | None
) -> Reply | None:
    if kind == "credit":
        if msg.credit.slots == 0 or msg.credit.slots > MAX_SLOTS:
            raise InvalidArgument("credit.slots", f"must be 1-{MAX_SLOTS}")
        session.grant(msg.credit.slots)
        return _result(msg.request_id, [], []) if msg.request_id else None
    if kind == "drain":
        session.drain()
        return _result(msg.request_id, [], []) if msg.request_id else None
    if kind == "checkpoint":
        if not msg.checkpoint.HasField("task"):
            raise InvalidArgument("checkpoint.task", "required")
        write = conv.write_from_proto(msg.checkpoint.task, "checkpoint.task")
        data = conv.json_field(msg.checkpoint.data, msg.checkpoint.data_json, "checkpoint.data")
        outcome = await session.checkpoint(write.key, write.token, data)
        return _result(msg.request_id, [write.key.id], [outcome]) if msg.request_id else None
    raise InvalidArgument("kind", "empty worker message (no kind set)")


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
                        yield event_to_proto(batch, session.worker_id, json_bytes=json_bytes)
                        continue
                    if isinstance(item, _End):
                        error = item.error
                        break
                    yield item
            finally:
                await cancel_and_wait((pump, reader, watch))
        finally:
            # Tasks dispatched but never acked go back to PRELOADED at once.
            await session.close()
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
