"""The worker stream's inbound messages: parsed, coalesced and applied to the session.

A stream's reader (:func:`receive`) puts each message in the :class:`Inbox`, answering
an ack that can go out of its turn at once; :func:`apply_inbox` applies the rest in the
order they came, consecutive fenced writes of one kind as one engine call
(:func:`handle_messages`), each message answered by its Result. ``_worker.py`` (the
WorkerService) runs both for every Connect.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from scheduler._errors import InvalidArgument, TickwheelError
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.engine import WorkerSession
from scheduler.limits import MAX_SLOTS
from scheduler.logs import task_extra
from scheduler.server import _convert as conv
from scheduler.server._status import status_of
from scheduler.server._stream_wire import WorkerMessage, Writes, encode_result, kind_of
from scheduler.types import Outcome

_log = logging.getLogger("tickwheel.server")

REASONS = {
    Outcome.OK: "",
    Outcome.STALE: "stale_fencing_token",
    Outcome.NOT_FOUND: "not_found",
}
"""Per-task rejection reasons on the stream (the proto documents these strings)."""

Reply = pb.ServerMessage | bytes
"""A message to the worker, or its bytes (a Result is written directly)."""


def _result(request_id: int, ids: Sequence[uuid.UUID], outcomes: Sequence[Outcome]) -> bytes:
    return encode_result(request_id, [str(i).encode() for i in ids], outcomes)


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
    # By the ids' text, which the native reader takes in one (canonical) form only: a
    # set test a waiting message, in C, where the completions waiting behind a commit
    # may hold hundreds of tasks.
    ids = set(msg.ids)
    if len(ids) != len(msg.ids):
        return False  # the same task twice: refused in its turn
    for waiting in inbox.waiting():
        if waiting is None:
            continue
        if type(waiting) is not Writes:
            if waiting.WhichOneof("kind") in _NAMES_NO_TASK:
                continue
            return False  # a message read by the generated class: not looked into
        if not ids.isdisjoint(waiting.ids):
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
