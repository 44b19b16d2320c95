"""The worker's hot writes, as bytes: an ack of a push's tasks and a task's completion.

A busy worker acks and completes thousands of tasks a second. Built through the
generated classes, each costs a ``TaskRef`` copied into its message (and a
``Completion`` copied again into its ``Completions``); here each is written from the
bytes of the task's ``TaskRef`` (:data:`~scheduler.worker._slots.Held.ref_bytes`,
which the native push reader keeps as it came) with a few concatenations, in the
field order the generated class writes.

:class:`Encoded` is a ``WorkerMessage`` so written: the stream sets its request id as
on a generated message, and its writer serialises either with ``SerializeToString``.
:class:`Completed` is one ``Completion``, joined into a ``Completions`` message by the
stream's batching.

May call: the generated proto (to read one back: ``message``). Called by: the handler
runner (writes them), the stream (batches and sends them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.wire import varint

_ACK = b"\x22"  # WorkerMessage.ack: field 4
_COMPLETIONS = b"\x62"  # WorkerMessage.completions: field 12
_ITEM = b"\x0a"  # Ack.tasks, Completions.items, Completion.task: field 1
_RESULT_JSON = b"\x1a"  # Completion.result_json: field 3


def _field(tag: bytes, data: bytes) -> bytes:
    return tag + varint(len(data)) + data


@final
class Encoded:
    """A ``WorkerMessage`` of one kind written as bytes; ``request_id`` is set by the
    stream before it is sent, and written first. Its items (each a repeated field's
    tag, length and bytes) are joined when it is serialised, so more may join it
    until then (:meth:`extend`: the stream merges acks waiting to be written)."""

    __slots__ = ("_items", "_kind", "_tag", "request_id")

    def __init__(self, kind: str, tag: bytes, items: list[bytes]) -> None:
        self._kind = kind
        self._tag = tag
        self._items = items
        self.request_id = 0

    def extend(self, items: Iterable[bytes]) -> None:
        """Add items (written by :func:`items`) after those it holds."""
        self._items.extend(items)

    def WhichOneof(self, name: str) -> str:  # as the generated class
        """The message's kind (``kind`` is its only oneof)."""
        assert name == "kind"
        return self._kind

    def SerializeToString(self) -> bytes:  # as the generated class
        """The message's bytes."""
        head = b"\x08" + varint(self.request_id) if self.request_id else b""
        return head + _field(self._tag, b"".join(self._items))

    def message(self) -> pb.WorkerMessage:
        """The message read back through the generated class (tests, fakes)."""
        return pb.WorkerMessage.FromString(self.SerializeToString())


@final
class Completed:
    """One ``Completion`` written as bytes, for the stream to batch; ``task_id`` is
    its ref's id text (its Result is found by it)."""

    __slots__ = ("item", "task_id")

    def __init__(self, task_id: str, ref: bytes, result_json: bytes) -> None:
        self.task_id = task_id
        self.item = _field(_ITEM, ref) + (_field(_RESULT_JSON, result_json) if result_json else b"")
        """The ``Completion``'s bytes."""

    def message(self) -> pb.Completion:
        """The completion read back through the generated class (tests, fakes)."""
        return pb.Completion.FromString(self.item)


def ack(refs: Iterable[bytes]) -> Encoded:
    """``WorkerMessage{ack: Ack{tasks}}`` of serialised ``TaskRef``s."""
    return Encoded("ack", _ACK, items(refs))


def completions(completed: Iterable[bytes]) -> Encoded:
    """``WorkerMessage{completions: Completions{items}}`` of serialised
    ``Completion``s."""
    return Encoded("completions", _COMPLETIONS, items(completed))


def items(parts: Iterable[bytes]) -> list[bytes]:
    """Serialised messages as the items of a repeated field 1 (``Ack.tasks``,
    ``Completions.items``): what :class:`Encoded` holds and :meth:`Encoded.extend`
    takes."""
    return [_field(_ITEM, p) for p in parts]


def serialize(message: pb.WorkerMessage | Encoded) -> bytes:
    """A worker message's bytes, whichever way it was built (the stream's writer)."""
    return message.SerializeToString()
