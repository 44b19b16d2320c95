"""Proto <-> engine conversion of the worker stream: the assignment pushed to a worker and
the fenced writes it sends back (refs, completions, failures, releases), each bad field
an :class:`~scheduler._errors.InvalidArgument` naming it; ``_convert.py`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from scheduler import jsonbytes
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import set_timestamp
from scheduler.engine import FailureReport
from scheduler.engine._timeline import to_us
from scheduler.limits import MAX_ERROR_CHARS, MAX_ERROR_TYPE_CHARS, MAX_TRACEBACK_CHARS
from scheduler.server._convert_fields import (
    _TYPE_CHARS,
    _struct_of,
    from_datetime,
    json_field,
    parse_uuid,
    pool_to_proto,
    to_datetime,
    trace_to_proto,
)
from scheduler.types import Assignment, Completion, FencedWrite, Release, TaskKey


def assignment_to_proto(
    a: Assignment, *, json_bytes: bool = False, now_us: int = 0
) -> pb.Assignment:
    """The proto view of an assignment pushed to a worker; ``json_bytes``: payload and
    checkpoint as ``*_json`` bytes (the stored text, passed through) instead of
    Structs; ``now_us`` (epoch microseconds, 0: none): when it is pushed to a worker
    that holds early pushes, for ``start_in_us``."""
    msg = pb.Assignment(
        task_id=str(a.key.id),
        tenant_id=str(a.tenant_id),
        type=a.type,
        fencing_token=a.fencing_token,
        attempt=a.attempt,
        max_retries=a.max_retries,
        pool=pool_to_proto(a.pool),
        timeout_s=a.timeout_s,
    )
    set_timestamp(msg.scheduled_at, a.key.scheduled_at)
    set_timestamp(msg.due_at, a.due_at)
    set_timestamp(msg.lease_expires_at, a.lease_expires_at)
    if json_bytes:
        msg.payload_json = jsonbytes.to_bytes(a.payload)
        if a.checkpoint is not None:
            msg.checkpoint_json = jsonbytes.to_bytes(a.checkpoint)
    else:
        msg.payload.CopyFrom(_struct_of(a.payload))
        if a.checkpoint is not None:
            msg.checkpoint.CopyFrom(_struct_of(a.checkpoint))
    if a.trace_context:
        msg.trace_context.CopyFrom(trace_to_proto(a.trace_context))
    if now_us:
        msg.start_in_us = start_in_us(a.due_at, now_us)
    return msg


MAX_START_IN_US = 0xFFFFFFFF
"""``Assignment.start_in_us`` is a uint32: about 71 minutes, far above any push ahead."""


def start_in_us(due_at: datetime, now_us: int) -> int:
    """Microseconds from ``now_us`` (epoch) to ``due_at``; 0 once it is due."""
    return max(0, min(to_us(due_at) - now_us, MAX_START_IN_US))


def ref_to_proto(key: TaskKey, token: int) -> pb.TaskRef:
    """A TaskRef naming ``key`` under ``token``."""
    return pb.TaskRef(
        task_id=str(key.id), fencing_token=token, scheduled_at=from_datetime(key.scheduled_at)
    )


def token_from_proto(ref: pb.TaskRef, field: str) -> int:
    """The fencing token of a ref (dispatch starts tokens at 1)."""
    if ref.fencing_token <= 0:
        raise InvalidArgument(f"{field}.fencing_token", "must be positive")
    return ref.fencing_token


def key_from_proto(ref: pb.TaskRef, field: str) -> TaskKey:
    """The full task key of a ref; ``scheduled_at`` is required on the stream."""
    task_id = parse_uuid(ref.task_id, f"{field}.task_id")
    if not ref.HasField("scheduled_at"):
        raise InvalidArgument(f"{field}.scheduled_at", "required (copy it from the assignment)")
    return TaskKey(task_id, to_datetime(ref.scheduled_at, f"{field}.scheduled_at"))


def write_from_proto(ref: pb.TaskRef, field: str) -> FencedWrite:
    """A fenced write from a ref."""
    return FencedWrite(key=key_from_proto(ref, field), token=token_from_proto(ref, field))


def writes_from_proto(refs: Iterable[pb.TaskRef], field: str) -> list[FencedWrite]:
    """Fenced writes from repeated refs (``ack.tasks[2].task_id``)."""
    return [write_from_proto(ref, f"{field}[{i}]") for i, ref in enumerate(refs)]


def _require_ref(parent: Any, field: str) -> pb.TaskRef:
    if not parent.HasField("task"):
        raise InvalidArgument(f"{field}.task", "required")
    ref: pb.TaskRef = parent.task
    return ref


def completion_from_proto(msg: pb.Completion, field: str) -> Completion:
    """A fenced completion from a stream message."""
    ref = _require_ref(msg, field)
    return Completion(
        key=key_from_proto(ref, f"{field}.task"),
        token=token_from_proto(ref, f"{field}.task"),
        result=json_field(msg.result, msg.result_json, f"{field}.result"),
    )


def error_text(value: str, field: str) -> str:
    """A failure message, bounded."""
    if len(value) > MAX_ERROR_CHARS:
        raise InvalidArgument(field, f"longer than {MAX_ERROR_CHARS} characters")
    return value


def failure_from_proto(msg: pb.Failure, field: str) -> FailureReport:
    """A fenced failure from a stream message."""
    ref = _require_ref(msg, field)
    return FailureReport(
        key=key_from_proto(ref, f"{field}.task"),
        token=token_from_proto(ref, f"{field}.task"),
        error=error_text(msg.error, f"{field}.error"),
        retryable=msg.retryable,
        error_type=error_type_text(msg.error_type, f"{field}.error_type"),
        traceback=traceback_text(msg.traceback, f"{field}.traceback"),
    )


def traceback_text(value: str, field: str) -> str:
    """A failure's traceback, bounded."""
    if len(value) > MAX_TRACEBACK_CHARS:
        raise InvalidArgument(field, f"longer than {MAX_TRACEBACK_CHARS} characters")
    return value


def error_type_text(value: str, field: str) -> str:
    """A failure's error type: empty, or up to 128 printable characters."""
    if value and (len(value) > MAX_ERROR_TYPE_CHARS or not _TYPE_CHARS.match(value)):
        raise InvalidArgument(
            field, f"must be 1-{MAX_ERROR_TYPE_CHARS} printable ASCII characters without spaces"
        )
    return value


def release_from_proto(msg: pb.Release, field: str) -> Release:
    """A fenced release from a stream message."""
    ref = _require_ref(msg, field)
    return Release(
        key=key_from_proto(ref, f"{field}.task"),
        token=token_from_proto(ref, f"{field}.task"),
        checkpoint=json_field(msg.checkpoint, msg.checkpoint_json, f"{field}.checkpoint")
        if msg.HasField("checkpoint") or msg.checkpoint_json
        else None,
    )
