"""The worker stream's hot messages on the wire: fenced writes read, Results and
assignments written, without a generated message per task.

Owns :class:`Writes` (an ack, heartbeat or completions message already read into the
engine's items), :func:`decode_worker_message` (the stream's decoder: the native
reader of ``scheduler.server._stream_c`` first, the generated class for everything
else), :func:`encode_result` (a ``ServerMessage`` holding a ``Result``, as bytes) and
:func:`encode_assignments` (a ``ServerMessage`` holding ``Assignments``, as bytes).
Calls ``scheduler.server._decode`` for the general decode; used by the worker
service (``scheduler.server._worker``).

The native reader is a Cython extension built with the wheel (``setup.py``).
Without it (not built, or ``TICKWHEEL_NO_EXTENSIONS=1``, read by ``_wheel`` as for the
timing wheel) every message takes the general path, which gives the same items (and
writes the same bytes) at a higher cost per task; ``STREAM_DECODER`` says which is in
use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, cast, final

from scheduler._native import extension
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.server._decode import decode
from scheduler.types import Assignment, Outcome
from scheduler.wire import varint

_decode_writes: Callable[[bytes], tuple[int, str, list[Any], list[bytes]] | None] | None
_Encode = Callable[[Sequence[Assignment], Callable[[Assignment], bytes], int], bytes]
_encode_assignments: _Encode | None
STREAM_DECODER: Literal["c", "python"]

_native, STREAM_DECODER_ERROR = extension("scheduler.server._stream_c")
"""The native reader and writer, or None and why they are not in use."""
if _native is not None:
    _decode_writes = _native.decode_writes
    _encode_assignments = _native.encode_assignments
    STREAM_DECODER = "c"
else:
    _decode_writes = _encode_assignments = None
    STREAM_DECODER = "python"


@final
class Writes:
    """A worker's ack, heartbeat or completions, read into the engine's items."""

    __slots__ = ("ids", "items", "kind", "request_id")

    def __init__(self, request_id: int, kind: str, items: list[Any], ids: list[bytes]) -> None:
        self.request_id = request_id
        self.kind = kind
        """The WorkerMessage field: ``ack``, ``heartbeat`` or ``completions``."""
        self.items = items
        """``FencedWrite`` (ack, heartbeat) or ``Completion``, one per task in order."""
        self.ids = ids
        """Each item's task id as its 36 bytes of text (for the Result)."""


WorkerMessage = pb.WorkerMessage | Writes
"""What the worker stream's reader hands on: a read fenced write, or a generated message."""


def decode_worker_message(data: bytes) -> WorkerMessage:
    """One worker stream message: :class:`Writes` when the native reader takes it,
    else the generated message (InvalidArgument when the bytes are not one)."""
    if _decode_writes is not None:
        fast = _decode_writes(data)
        if fast is not None:
            return Writes(*fast)
    return cast(pb.WorkerMessage, decode(pb.WorkerMessage, data))


def kind_of(msg: WorkerMessage) -> str | None:
    """The message's kind (its ``oneof kind`` field name), None for an empty one."""
    if type(msg) is Writes:
        return msg.kind
    return cast(str | None, msg.WhichOneof("kind"))


_REASON = {
    Outcome.OK: b"\x10\x01",  # ok = true
    Outcome.STALE: b"\x1a\x13stale_fencing_token",
    Outcome.NOT_FOUND: b"\x1a\x09not_found",
}
"""Per outcome, what follows the task id in its TaskResult (``ok`` or ``reason``: the
proto documents these strings)."""

_ITEM = {o: (b"\x12" + varint(38 + len(r)) + b"\x0a\x24", r) for o, r in _REASON.items()}
"""Per outcome, the bytes before the id (``results`` tag, length, ``task_id`` tag and
length) and after it."""


def encode_result(request_id: int, ids: Sequence[bytes], outcomes: Sequence[Outcome]) -> bytes:
    """``ServerMessage{result: Result{request_id, results}}`` as bytes: one TaskResult
    per (id, outcome), ``ids`` each a task id's 36 bytes of text."""
    if len(ids) != len(outcomes):
        raise ValueError(f"{len(ids)} ids, {len(outcomes)} outcomes")
    parts = [b"\x08" + varint(request_id)] if request_id else []
    item = _ITEM
    for task_id, outcome in zip(ids, outcomes, strict=True):
        head, tail = item[outcome]
        parts.append(head + task_id + tail)
    body = b"".join(parts)
    return b"\x22" + varint(len(body)) + body


def encode_assignments(
    assignments: Sequence[Assignment], one: Callable[[Assignment], bytes], now_us: int = 0
) -> bytes:
    """``ServerMessage{assignments: Assignments{tasks}}`` as bytes, JSON as bytes.
    ``one(a)`` writes one assignment's ``Assignment`` bytes through the generated class
    (recording a traced one's dispatch span; it sets ``start_in_us`` itself): the
    native writer calls it only for a traced assignment, without the extension it
    writes every one. ``now_us`` (epoch microseconds, 0: none): the push's instant on a
    stream that holds early pushes, each assignment not yet due written with the time
    left (``start_in_us``)."""
    if _encode_assignments is not None:
        return _encode_assignments(assignments, one, now_us)
    body = b"".join(b"\x0a" + varint(len(data)) + data for data in map(one, assignments))
    return b"\x12" + varint(len(body)) + body
