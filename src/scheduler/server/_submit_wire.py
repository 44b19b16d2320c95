"""A ``SubmitTasksResponse``'s bytes, written directly: the server's submit answer.

Building the answer through the generated classes (a ``Task`` per item from
:func:`~scheduler.server._convert.task_to_proto`, each copied into its
``SubmitTaskResponse`` and the list copied again into the response) took about 7 µs of
``serve``'s CPU per submitted task. A batch's new tasks share most of their fields, so
this module writes the same protobuf wire format with a few concatenations per task:

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

from collections.abc import Sequence
from typing import Any

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.server import _convert as conv
from scheduler.types import InsertResult, TaskRecord
from scheduler.wire import shared_part, timestamp_bytes, varint

_RESULTS = b"\x0a"  # SubmitTasksResponse.results: field 1, length-delimited
_TASK = b"\x0a"  # SubmitTaskResponse.task: field 1, length-delimited
_CREATED = b"\x10\x01"  # SubmitTaskResponse.created = true: field 2, varint
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
    )


def _shared(rec: TaskRecord, json_bytes: bool) -> bytes:
    """The bytes of every field of ``rec``'s Task but the per-task ones and the
    payload."""
    task = conv.task_to_proto(rec, b"-", json_bytes=json_bytes)
    for name in (*_PER_TASK, "payload_json"):
        task.ClearField(name)
    return task.SerializeToString()


def _item(task: bytes, created: bool) -> bytes:
    """One ``SubmitTaskResponse`` as a ``results`` entry."""
    body = _TASK + varint(len(task)) + task + (_CREATED if created else b"")
    return _RESULTS + varint(len(body)) + body


def encode_submit_response(
    results: Sequence[InsertResult], given: Sequence[pb.TaskSpec], json_bytes: bool
) -> bytes:
    """The serialised ``SubmitTasksResponse`` for ``results`` (one per request item of
    ``given``, in order): what ``SubmitTasksResponse(results=[SubmitTaskResponse(
    task=task_to_proto(...), created=...)])`` serialises to, as a created task holds
    the payload it was sent (its bytes or its Struct)."""
    shared: dict[Any, bytes] = {}
    last_key: Any = None
    last_body = b""
    out: list[bytes] = []
    append = out.append
    join = b"".join
    for result, spec in zip(results, given, strict=True):
        rec = result.task
        if not (result.created and _fresh(rec)):
            payload = (spec.payload_json or spec.payload) if result.created else None
            whole = conv.task_to_proto(rec, payload, json_bytes=json_bytes)
            append(_item(whole.SerializeToString(), result.created))
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
        if spec.payload_json:
            p = spec.payload_json
            payload = _PAYLOAD_JSON + varint(len(p)) + p
        else:
            p = spec.payload.SerializeToString()
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
