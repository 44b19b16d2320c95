"""An assignment as the worker holds it (:data:`Pushed`), made from the wire bytes of a
push or from the generated class.

A push of assignments on the worker stream is read by the Cython reader of
``scheduler.worker._pushed_c`` when every assignment in it is plainly in its usual
form; anything else (a ``Struct`` payload or checkpoint, a dispatch trace context, an
unknown or repeated field, an id in another form, a value out of range) is decoded by
the generated class, and :func:`pushed_of` makes the same tuple from each
``Assignment`` (a Kafka record's too). Without the extension (not built, or
``TICKWHEEL_NO_EXTENSIONS=1``, read by ``_wheel`` as for the timing wheel) every push
takes the general path; ``PUSHED_DECODER`` says which is in use.

May call: the native reader ``_pushed_c``, ``scheduler.client`` (conversions) and the
generated proto. Called by: the stream (:func:`read_pushed`, :func:`server_message`) and the handler
runner (:func:`pushed_of`, :func:`ref_of`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Literal

from google.protobuf.message import DecodeError

from scheduler._errors import Unavailable
from scheduler._native import extension
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as conv

Pushed = tuple[Any, ...]
"""``(task_id, type, attempt, max_retries, payload, fencing_token, checkpoint,
trace_context, scheduled_at, due_at, timeout_s, tenant_id, ref, dispatch_trace,
ref_bytes, start_in_us)``: a ``uuid.UUID``, the payload and checkpoint as JSON objects
(None: no checkpoint), the submitter's and the dispatch's trace contexts as dicts (or
None), aware UTC datetimes, the tenant id's text, the ``TaskRef`` the attempt writes
with, as a message and serialised, and how long after the push's arrival the handler
may start (microseconds, 0: at once). A tuple, not a class: a busy worker makes
thousands a second."""

HOLD_EARLY_MS = 1000
"""``Hello.early_ms``: a task may be pushed up to this far ahead of its due time, and
is held until then (the server pushes at most its own ``--push-ahead-ms`` ahead, 20 by
default)."""

_native, PUSHED_DECODER_ERROR = extension("scheduler.worker._pushed_c")
"""The native reader, or None and why it is not in use."""
_decode: Callable[[bytes], list[Pushed] | None] | None = (
    _native.decode_pushed if _native is not None else None
)
PUSHED_DECODER: Literal["c", "python"] = "c" if _native is not None else "python"


def read_pushed(data: bytes) -> list[Pushed] | None:
    """The assignments of a serialised ``ServerMessage`` that holds plain ones, read
    natively; None for any other message (or when the reader is not in use)."""
    return _decode(data) if _decode is not None else None


def server_message(data: bytes) -> pb.ServerMessage:
    """A server message from its bytes, read the general way; Unavailable (the stream
    breaks, and the worker reconnects) for bytes that are not one."""
    try:
        return pb.ServerMessage.FromString(data)
    except DecodeError:
        raise Unavailable("the server sent bytes that are not a ServerMessage") from None


def ref_of(a: pb.Assignment) -> pb.TaskRef:
    """The ``TaskRef`` an attempt of ``a`` writes with."""
    return pb.TaskRef(task_id=a.task_id, fencing_token=a.fencing_token, scheduled_at=a.scheduled_at)


def pushed_of(a: pb.Assignment, task_id: uuid.UUID, trace_context: dict[str, str] | None) -> Pushed:
    """``a`` as the worker holds it (``task_id`` its id, read already;
    ``trace_context`` the submitter's)."""
    ref = ref_of(a)
    return (
        task_id,
        a.type,
        a.attempt,
        a.max_retries,
        # Bytes on a stream (Hello.json_bytes), a Struct from a Kafka record.
        conv.json_of(a.payload, a.payload_json, True) or {},
        a.fencing_token,
        conv.json_of(a.checkpoint, a.checkpoint_json, a.HasField("checkpoint")),
        trace_context,
        conv.from_timestamp(a.scheduled_at),
        conv.from_timestamp(a.due_at),
        a.timeout_s,
        a.tenant_id,
        ref,
        conv.trace_from_proto(a.dispatch_trace_context),
        ref.SerializeToString(),
        a.start_in_us,
    )
