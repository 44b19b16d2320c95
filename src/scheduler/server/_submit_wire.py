"""A ``SubmitTasks`` call on the wire: its request read, and its answer written,
without a generated message per task.

**The request.** :func:`read_submit` hands a request's bytes to the native reader of
``scheduler.server._submit_c``, which makes each task's ``SubmitSpec`` straight from
them with ``spec_from_proto``'s checks (about 4 µs a task through the generated
classes). What it does not take plainly (a ``Struct`` payload, a trace context, a
retry policy, anything out of range or malformed) it leaves to the general path, the
generated class and ``scheduler.server._convert``, which accepts or refuses it with
the error that names the field. Without the extension (not built, or
``TICKWHEEL_NO_EXTENSIONS=1``) every request takes the general path;
``SUBMIT_DECODER`` says which is in use.

**The answer.** Building it through the generated classes (a ``Task`` per item from
:func:`~scheduler.server._convert.task_to_proto`, each copied into its
``SubmitTaskResponse`` and the list copied again into the response) took about 7 µs of
``serve``'s CPU per submitted task. A batch's new tasks share most of their fields, so
:func:`encode_submit_response` writes the same protobuf wire format with a few
concatenations per task:

- everything but the per-task fields is encoded once per distinct combination, by
  ``task_to_proto`` itself, and reused as bytes;
- per task only ``id``, ``scheduled_at``, ``due_at`` (cached per instant),
  ``idempotency_key``, ``shard_id`` and the payload the request sent are appended.

A task the request did not create (its idempotency key named an existing one) or one
with anything a new task does not have (a result, a checkpoint, an error, a worker)
goes through ``task_to_proto`` whole. Fields may come in any order in protobuf's wire
format, so the bytes parse to the message the generated classes build (a unit test
compares the two).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from google.protobuf import struct_pb2

from scheduler._native import extension
from scheduler.engine import SubmitSpec
from scheduler.server import _convert as conv
from scheduler.types import JSON, InsertResult, TaskRecord
from scheduler.wire import shared_part, timestamp_bytes, varint

Echo = bytes | struct_pb2.Struct
"""What a task sent as its payload, echoed in the answer: its JSON bytes, or its
Struct (an empty one when it sent neither)."""

_native, SUBMIT_DECODER_ERROR = extension("scheduler.server._submit_c")
"""The native reader, or None and why it is not in use."""
_decode_submit: (
    Callable[[bytes, int, JSON | None], tuple[list[SubmitSpec], list[Echo]] | None] | None
) = _native.decode_submit if _native is not None else None
SUBMIT_DECODER: Literal["c", "python"] = "c" if _native is not None else "python"


def read_submit(
    data: bytes, max_payload_bytes: int, default_trace: JSON | None
) -> tuple[list[SubmitSpec], list[Echo]] | None:
    """A ``SubmitTasksRequest``'s specs (``default_trace`` as each one's trace
    context) and each task's payload as sent, read natively; None when the request
    must take the general path (or the reader is not in use)."""
    if _decode_submit is None:
        return None
    return _decode_submit(data, max_payload_bytes, default_trace)


_RESULTS = b"\x0a"  # SubmitTasksResponse.results: field 1, length-delimited
_TASK = b"\x0a"  # SubmitTaskResponse.task: field 1, length-delimited
_CREATED = b"\x10\x01"  # SubmitTaskResponse.created = true: field 2, varint
_DEBOUNCED = b"\xd0\x05\x01"  # SubmitTaskResponse.debounced = true: field 90, varint
_THROTTLED = b"\xd8\x05\x01"  # SubmitTaskResponse.throttled = true: field 91, varint
_ID = b"\x0a\x24"  # Task.id: field 1, 36 characters
_SCHEDULED_AT = b"\x2a"  # Task.scheduled_at: field 5
_DUE_AT = b"\x32"  # Task.due_at: field 6
_IDEMPOTENCY_KEY = b"\x3a"  # Task.idempotency_key: field 7
_SHARD_ID = b"\x90\x01"  # Task.shard_id: field 18, varint
_PAYLOAD = b"\x62"  # Task.payload: field 12, length-delimited
_PAYLOAD_JSON = b"\xc2\x01"  # Task.payload_json: field 24, length-delimited
_PER_TASK = ("id", "scheduled_at", "due_at", "idempotency_key", "shard_id")


def _fresh(rec: TaskRecord) -> bool:
    """Whether the row holds nothing a task just created does not (the fast path)."""
    return (
        rec.result_payload is None
        and rec.checkpoint is None
        and not rec.last_error
        and not rec.worker_id
        and not rec.cancel_requested
        and rec.workflow_id is None
        and rec.schedule_id is None
    )


def _shared(rec: TaskRecord, json_bytes: bool) -> bytes:
    """The bytes of every field of ``rec``'s Task but the per-task ones and the
    payload."""
    task = conv.task_to_proto(rec, b"-", json_bytes=json_bytes)
    for name in (*_PER_TASK, "payload_json"):
        task.ClearField(name)
    return task.SerializeToString()


def _item(task: bytes, created: bool, debounced: bool = False, throttled: bool = False) -> bytes:
    """One ``SubmitTaskResponse`` as a ``results`` entry."""
    body = (
        _TASK
        + varint(len(task))
        + task
        + (_CREATED if created else b"")
        + (_DEBOUNCED if debounced else b"")
        + (_THROTTLED if throttled else b"")
    )
    return _RESULTS + varint(len(body)) + body


def encode_submit_response(
    results: Sequence[InsertResult], sent: Sequence[Echo], json_bytes: bool
) -> bytes:
    """The serialised ``SubmitTasksResponse`` for ``results`` (one per request item,
    in order; ``sent`` is each item's payload as it was sent: its JSON bytes or its
    Struct): what ``SubmitTasksResponse(results=[SubmitTaskResponse(
    task=task_to_proto(...), created=...)])`` serialises to, as a created task holds
    the payload it was sent."""
    shared: dict[Any, bytes] = {}
    last_key: Any = None
    last_body = b""
    out: list[bytes] = []
    append = out.append
    join = b"".join
    for result, echo in zip(results, sent, strict=True):
        rec = result.task
        if not (result.created and _fresh(rec)):
            payload = echo if result.created else None
            whole = conv.task_to_proto(rec, payload, json_bytes=json_bytes)
            append(
                _item(whole.SerializeToString(), result.created, result.debounced, result.throttled)
            )
            continue
        trace = rec.trace_context
        key: Any = (
            rec.tenant_id,
            rec.type,
            rec.status,
            rec.pool,
            rec.fencing_token,
            rec.retry_count,
            rec.max_retries,
            rec.strict_timing,
            rec.created_at,
            rec.updated_at,
            (trace.get("traceparent"), trace.get("tracestate")) if trace else None,
            rec.retry_policy,
        )
        # A batch's tasks mostly share these, as the same objects: equal by identity,
        # without hashing (a UUID's hash is a Python call).
        if key == last_key:
            body = last_body
        else:
            body = last_body = shared_part(shared, key, _shared, rec, json_bytes)
            last_key = key
        if isinstance(echo, bytes):
            payload = _PAYLOAD_JSON + varint(len(echo)) + echo
        else:
            p = echo.SerializeToString()
            payload = _PAYLOAD + varint(len(p)) + p
        task = join(
            (
                _ID,
                str(rec.id).encode(),
                _SCHEDULED_AT,
                timestamp_bytes(rec.scheduled_at),
                _DUE_AT,
                timestamp_bytes(rec.due_at),
                _IDEMPOTENCY_KEY + varint(len(k)) + k
                if (k := rec.idempotency_key.encode())
                else b"",
                _SHARD_ID + varint(rec.shard_id) if rec.shard_id else b"",
                body,
                payload,
            )
        )
        append(_item(task, True))
    return join(out)
