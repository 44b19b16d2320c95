"""Proto <-> engine types, and validation of every request field.

Each ``*_from_proto`` function raises :class:`~scheduler._errors.InvalidArgument`
naming the offending field with its full path (``task.type``, ``tasks[3].payload``),
so bad input always answers INVALID_ARGUMENT and never reaches the engine malformed.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from scheduler import jsonbytes, wire
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import (
    dict_to_struct,
    set_timestamp,
    struct_to_dict,
    timestamp,
    utc_datetime,
)
from scheduler.engine import FailureReport, SubmitSpec
from scheduler.ids import uuid_of_bytes
from scheduler.jitter import JitterMode
from scheduler.limits import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_PAGE_SIZE,
    MAX_BACKOFF_S,
    MAX_ERROR_CHARS,
    MAX_ERROR_TYPE_CHARS,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_JSON_DEPTH,
    MAX_NAME_CHARS,
    MAX_NON_RETRYABLE_TYPES,
    MAX_PAGE_SIZE,
    MAX_RESULT_BYTES,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    MAX_TIMESTAMP_SECONDS,
    MAX_TRACEBACK_CHARS,
    MAX_TYPE_CHARS,
    MIN_TIMESTAMP_SECONDS,
    TIMESTAMP_RANGE_TEXT,
)
from scheduler.states import TaskState
from scheduler.types import (
    JSON,
    Assignment,
    Completion,
    FencedWrite,
    Pool,
    RawJSON,
    Release,
    RetryPolicy,
    TaskFilter,
    TaskKey,
    TaskOrder,
    TaskRecord,
    Tenant,
)

TIERS = frozenset({"STANDARD", "ENTERPRISE", "SYSTEM"})

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")
_TYPE_CHARS = re.compile(r"^[\x21-\x7e]+\Z")

_POOL_TO_PROTO = wire.POOL_TO_PROTO
_POOL_FROM_PROTO: Mapping[int, Pool] = {**wire.POOL_FROM_PROTO, pb.POOL_UNSPECIFIED: Pool.STANDARD}
_JITTER_TO_PROTO = wire.JITTER_TO_PROTO
_JITTER_FROM_PROTO = wire.JITTER_FROM_PROTO
_STATE_TO_PROTO = wire.STATE_TO_PROTO
_STATE_FROM_PROTO = wire.STATE_FROM_PROTO


# -- scalars -------------------------------------------------------------------------


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
"""The canonical text form of a UUID (8-4-4-4-12 hex digits), the only one accepted:
``uuid.UUID`` also takes braces, a ``urn:uuid:`` prefix and 32 bare digits."""


def parse_uuid(value: str, field: str) -> uuid.UUID:
    """A UUID from its canonical text form; InvalidArgument naming ``field`` otherwise."""
    if not value:
        raise InvalidArgument(field, "required")
    if not _UUID.match(value):
        raise InvalidArgument(field, f"not a UUID in its 8-4-4-4-12 hex form: {value[:64]!r}")
    return uuid_of_bytes(bytes.fromhex(value.replace("-", "")))


def to_datetime(ts: timestamp_pb2.Timestamp, field: str) -> datetime:
    """A timezone-aware UTC datetime from a Timestamp inside the accepted range
    (``scheduler.limits``: after the epoch, before 9999-12-31)."""
    if not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(field, "nanos must be 0..999999999")
    if not MIN_TIMESTAMP_SECONDS <= ts.seconds < MAX_TIMESTAMP_SECONDS:
        raise InvalidArgument(
            field, f"out of range: a Timestamp must be {TIMESTAMP_RANGE_TEXT} (UTC)"
        )
    return utc_datetime(ts)


def from_datetime(dt: datetime) -> timestamp_pb2.Timestamp:
    """A Timestamp from a timezone-aware datetime."""
    return timestamp(dt)


# -- enums ---------------------------------------------------------------------------


def pool_from_proto(value: int, field: str) -> Pool:
    """Pool enum; unspecified means standard."""
    try:
        return _POOL_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown pool {value}") from None


def filter_pool(value: int, field: str) -> Pool:
    """A pool a filter names: unspecified and unknown values are rejected."""
    try:
        return wire.POOL_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(
            field, f"unknown pool {value} (POOL_CRITICAL, POOL_STANDARD or POOL_BULK)"
        ) from None


def pool_to_proto(pool: Pool) -> pb.Pool:
    """The proto pool."""
    return _POOL_TO_PROTO[pool]


def state_to_proto(state: TaskState) -> pb.TaskState:
    """The proto state."""
    return _STATE_TO_PROTO[state]


def state_from_proto(value: int, field: str) -> TaskState:
    """A task state; unspecified and unknown values are rejected."""
    try:
        return _STATE_FROM_PROTO[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown task state {value}") from None


# -- trace context -------------------------------------------------------------------


def trace_from_proto(tc: pb.TraceContext, field: str) -> JSON | None:
    """A validated W3C trace context, or None when traceparent is empty."""
    if not tc.traceparent:
        if tc.tracestate:
            raise InvalidArgument(f"{field}.traceparent", "required when tracestate is set")
        return None
    if not _TRACEPARENT.match(tc.traceparent):
        raise InvalidArgument(f"{field}.traceparent", "not a W3C traceparent")
    if len(tc.tracestate) > 512:
        raise InvalidArgument(f"{field}.tracestate", "longer than 512 characters")
    return {"traceparent": tc.traceparent, "tracestate": tc.tracestate}


def trace_from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> JSON | None:
    """W3C trace context from call metadata; an invalid header is ignored (W3C §3.2)."""
    traceparent = tracestate = ""
    for key, value in metadata or ():
        if isinstance(value, bytes):
            continue
        if key == "traceparent":
            traceparent = value.strip()
        elif key == "tracestate":
            tracestate = value.strip()
    if not _TRACEPARENT.match(traceparent):
        return None
    return {"traceparent": traceparent, "tracestate": tracestate[:512]}


def trace_to_proto(trace: JSON | None) -> pb.TraceContext:
    """Proto trace context (empty when none)."""
    if not trace:
        return pb.TraceContext()
    return pb.TraceContext(
        traceparent=str(trace.get("traceparent", "")),
        tracestate=str(trace.get("tracestate", "")),
    )


# -- tasks ---------------------------------------------------------------------------


def spec_from_proto(
    spec: pb.TaskSpec,
    field: str,
    *,
    max_payload_bytes: int,
    default_trace: JSON | None = None,
) -> SubmitSpec:
    """A validated :class:`SubmitSpec`; ``field`` prefixes every error (``task``)."""
    if not spec.type:
        raise InvalidArgument(f"{field}.type", "required")
    if len(spec.type) > MAX_TYPE_CHARS:
        raise InvalidArgument(f"{field}.type", f"longer than {MAX_TYPE_CHARS} characters")
    if not _TYPE_CHARS.match(spec.type):
        raise InvalidArgument(f"{field}.type", "must be printable ASCII without spaces")
    payload = json_field(spec.payload, spec.payload_json, f"{field}.payload", max_payload_bytes)
    if len(spec.idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(
            f"{field}.idempotency_key", f"longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters"
        )
    pool = pool_from_proto(spec.pool, f"{field}.pool")
    jitter: JitterMode | None
    if spec.jitter_mode == pb.JITTER_MODE_UNSPECIFIED:
        jitter = None  # the default rule (scheduler.jitter.effective_mode)
    else:
        try:
            jitter = _JITTER_FROM_PROTO[spec.jitter_mode]
        except KeyError:
            raise InvalidArgument(
                f"{field}.jitter_mode", f"unknown jitter mode {spec.jitter_mode}"
            ) from None
    if spec.strict_timing:
        jitter = JitterMode.NONE
    policy = (
        retry_policy_from_proto(spec.retry_policy, f"{field}.retry_policy")
        if spec.HasField("retry_policy")
        else None
    )
    attempts = spec.retry_policy.max_attempts if spec.HasField("retry_policy") else 0
    if attempts and (spec.max_retries or spec.no_retries):
        raise InvalidArgument(
            f"{field}.retry_policy.max_attempts", "set it or max_retries/no_retries, not both"
        )
    if attempts:
        max_retries = attempts - 1
    elif spec.no_retries:
        if spec.max_retries:
            raise InvalidArgument(f"{field}.max_retries", "must be 0 when no_retries is set")
        max_retries = 0
    else:
        max_retries = spec.max_retries or DEFAULT_MAX_RETRIES
    if max_retries > MAX_RETRIES:
        raise InvalidArgument(f"{field}.max_retries", f"at most {MAX_RETRIES}")
    if not math.isfinite(spec.timeout_s) or not 0 <= spec.timeout_s <= MAX_TIMEOUT_S:
        raise InvalidArgument(
            f"{field}.timeout_s", f"must be a number of seconds in 0..{MAX_TIMEOUT_S}"
        )
    scheduled_at = (
        to_datetime(spec.scheduled_at, f"{field}.scheduled_at")
        if spec.HasField("scheduled_at")
        else None
    )
    trace = (
        trace_from_proto(spec.trace_context, f"{field}.trace_context")
        if spec.HasField("trace_context")
        else None
    )
    return SubmitSpec(
        type=spec.type,
        payload=payload,
        scheduled_at=scheduled_at,
        idempotency_key=spec.idempotency_key or None,
        pool=pool,
        strict_timing=spec.strict_timing,
        jitter_mode=jitter,
        max_retries=max_retries,
        timeout_s=spec.timeout_s,
        trace_context=trace if trace is not None else default_trace,
        retry_policy=policy,
    )


def retry_policy_from_proto(msg: pb.RetryPolicy, field: str) -> RetryPolicy | None:
    """A validated task retry policy (None when every field is unset)."""
    for name in ("initial_backoff_s", "max_backoff_s"):
        value = getattr(msg, name)
        if not math.isfinite(value) or not 0 <= value <= MAX_BACKOFF_S:
            raise InvalidArgument(f"{field}.{name}", f"must be 0..{MAX_BACKOFF_S:g} seconds")
    if msg.initial_backoff_s and msg.max_backoff_s and msg.max_backoff_s < msg.initial_backoff_s:
        raise InvalidArgument(f"{field}.max_backoff_s", "must be >= initial_backoff_s")
    if msg.max_backoff_s and not msg.initial_backoff_s:
        raise InvalidArgument(f"{field}.initial_backoff_s", "required with max_backoff_s")
    if msg.max_attempts > MAX_RETRIES + 1:
        raise InvalidArgument(f"{field}.max_attempts", f"at most {MAX_RETRIES + 1}")
    types = tuple(msg.non_retryable_error_types)
    if len(types) > MAX_NON_RETRYABLE_TYPES:
        raise InvalidArgument(
            f"{field}.non_retryable_error_types", f"at most {MAX_NON_RETRYABLE_TYPES} types"
        )
    for i, t in enumerate(types):
        if not t or len(t) > MAX_ERROR_TYPE_CHARS or not _TYPE_CHARS.match(t):
            raise InvalidArgument(
                f"{field}.non_retryable_error_types[{i}]",
                f"must be 1-{MAX_ERROR_TYPE_CHARS} printable ASCII characters without spaces",
            )
    if not (msg.initial_backoff_s or types):
        return None
    return RetryPolicy(
        initial_backoff_s=msg.initial_backoff_s,
        max_backoff_s=msg.max_backoff_s,
        non_retryable=types,
    )


def retry_policy_to_proto(policy: RetryPolicy, msg: pb.RetryPolicy) -> None:
    """Write a stored retry policy into ``msg``."""
    msg.initial_backoff_s = policy.initial_backoff_s
    msg.max_backoff_s = policy.max_backoff_s
    msg.non_retryable_error_types.extend(policy.error_types())


def wants_json_bytes(metadata: Iterable[tuple[str, str | bytes]] | None) -> bool:
    """Whether a call's metadata asks for JSON values as ``*_json`` bytes."""
    for key, value in metadata or ():
        if key == wire.JSON_HEADER:
            return value == "bytes"
    return False


def task_to_proto(
    rec: TaskRecord, payload: struct_pb2.Struct | bytes | None = None, *, json_bytes: bool = False
) -> pb.Task:
    """The proto view of a task row; ``payload``, when given, is the row's payload in
    its wire form already (the request's own, for a task just created from it): a
    Struct, or JSON bytes. ``json_bytes``: payload, result and checkpoint in their
    ``*_json`` bytes fields instead of the Structs."""
    task = pb.Task(
        id=str(rec.id),
        tenant_id=str(rec.tenant_id),
        type=rec.type,
        state=state_to_proto(rec.status),
        idempotency_key=rec.idempotency_key,
        pool=pool_to_proto(rec.pool),
        fencing_token=rec.fencing_token,
        retry_count=rec.retry_count,
        max_retries=rec.max_retries,
        shard_id=rec.shard_id,
        strict_timing=rec.strict_timing,
    )
    if isinstance(payload, bytes):
        task.payload_json = payload
    elif payload is not None:
        task.payload.CopyFrom(payload)
    elif json_bytes:
        task.payload_json = jsonbytes.to_bytes(rec.payload)
    else:
        task.payload.CopyFrom(dict_to_struct(jsonbytes.as_dict(rec.payload)))
    # Timestamps written in place, and fields left at their defaults not passed: a
    # submit answers with thousands of these.
    set_timestamp(task.scheduled_at, rec.scheduled_at)
    set_timestamp(task.due_at, rec.due_at)
    set_timestamp(task.created_at, rec.created_at)
    set_timestamp(task.updated_at, rec.updated_at)
    if rec.last_error:
        task.last_error = rec.last_error
    if rec.last_error_type:
        task.last_error_type = rec.last_error_type
    if rec.last_traceback:
        task.last_traceback = rec.last_traceback
    if rec.workflow_id is not None:
        task.workflow_id = str(rec.workflow_id)
    if rec.schedule_id is not None:
        task.schedule_id = str(rec.schedule_id)
    if rec.worker_id:
        task.worker_id = rec.worker_id
    if rec.cancel_requested:
        task.cancel_requested = True
    if rec.result_payload is not None:
        if json_bytes:
            task.result_json = jsonbytes.to_bytes(rec.result_payload)
        else:
            task.result.CopyFrom(dict_to_struct(rec.result_payload))
    if rec.checkpoint is not None:
        if json_bytes:
            task.checkpoint_json = jsonbytes.to_bytes(rec.checkpoint)
        else:
            task.checkpoint.CopyFrom(dict_to_struct(rec.checkpoint))
    if rec.trace_context:
        task.trace_context.CopyFrom(trace_to_proto(rec.trace_context))
    if rec.retry_policy is not None:
        retry_policy_to_proto(rec.retry_policy, task.retry_policy)
        task.retry_policy.max_attempts = rec.max_retries + 1
    return task


def _struct_of(value: JSON | RawJSON) -> struct_pb2.Struct:
    return dict_to_struct(jsonbytes.as_dict(value))


def assignment_to_proto(a: Assignment, *, json_bytes: bool = False) -> pb.Assignment:
    """The proto view of an assignment pushed to a worker; ``json_bytes``: payload and
    checkpoint as ``*_json`` bytes (the stored text, passed through) instead of
    Structs."""
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
    return msg


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


def _too_deep(value: Any, depth: int) -> bool:
    """Whether ``value`` (at nesting ``depth``) nests deeper than MAX_JSON_DEPTH."""
    if isinstance(value, dict):
        if depth > MAX_JSON_DEPTH:
            return True
        return any(_too_deep(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        if depth > MAX_JSON_DEPTH:
            return True
        return any(_too_deep(v, depth + 1) for v in value)
    return False


DEPTH_PROBLEM = f"nested deeper than {MAX_JSON_DEPTH} levels (the limit of a JSON value)"
"""The error text of a Struct nested too deep (here and where a request cannot decode)."""


def json_of(value: struct_pb2.Struct, field: str) -> JSON:
    """A Struct as a JSON object; InvalidArgument naming ``field`` for a number JSON
    cannot hold (a Struct can carry NaN and the infinities) or nesting deeper than
    :data:`~scheduler.limits.MAX_JSON_DEPTH`."""
    try:
        data = struct_to_dict(value)
    except ValueError as exc:
        raise InvalidArgument(field, f"{exc}: NaN and infinities are not JSON") from None
    # Each level costs at least 4 bytes on the wire: a small Struct cannot be too deep.
    if value.ByteSize() > 4 * MAX_JSON_DEPTH and _too_deep(data, 1):
        raise InvalidArgument(field, DEPTH_PROBLEM)
    return data


def bounded_struct(value: struct_pb2.Struct, field: str) -> JSON:
    """A result or checkpoint as a dict, refused when over :data:`MAX_RESULT_BYTES`."""
    if value.ByteSize() > MAX_RESULT_BYTES:
        raise InvalidArgument(field, f"larger than {MAX_RESULT_BYTES} bytes")
    return json_of(value, field)


def json_field(
    struct: struct_pb2.Struct,
    data: bytes,
    field: str,
    limit_bytes: int = MAX_RESULT_BYTES,
) -> JSON | RawJSON:
    """A JSON object sent as a Struct (``field``) or as its bytes twin
    (``field``_json): the bytes checked and kept as text (``scheduler.jsonbytes``),
    the Struct read as a dict. Both set (a Struct with a field and non-empty bytes) is
    InvalidArgument naming the ``_json`` field."""
    if data:
        if struct.fields:
            name = field.rpartition(".")[2]
            raise InvalidArgument(f"{field}_json", f"set {name} or {name}_json, not both")
        return jsonbytes.raw(data, f"{field}_json", limit_bytes)
    if struct.ByteSize() > limit_bytes:
        raise InvalidArgument(field, f"larger than {limit_bytes} bytes")
    return json_of(struct, field)


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


_ORDER_FROM_PROTO = {
    pb.TASK_ORDER_UNSPECIFIED: TaskOrder.SCHEDULED_ASC,
    pb.TASK_ORDER_SCHEDULED_ASC: TaskOrder.SCHEDULED_ASC,
    pb.TASK_ORDER_SCHEDULED_DESC: TaskOrder.SCHEDULED_DESC,
    pb.TASK_ORDER_CREATED_ASC: TaskOrder.CREATED_ASC,
    pb.TASK_ORDER_CREATED_DESC: TaskOrder.CREATED_DESC,
}


_FilterMessage = pb.ListTasksRequest | pb.TaskFilter


def task_filter_from_proto(req: _FilterMessage, prefix: str = "") -> TaskFilter:
    """The narrowing fields (states, type, pools, scheduled_from/to) of a ListTasks
    request or a TaskFilter; ``prefix`` (``filter.``) goes before each field's name."""
    states = tuple(state_from_proto(s, f"{prefix}states[{i}]") for i, s in enumerate(req.states))
    if req.type and len(req.type) > MAX_TYPE_CHARS:
        raise InvalidArgument(f"{prefix}type", f"longer than {MAX_TYPE_CHARS} characters")
    pools = tuple(
        dict.fromkeys(filter_pool(p, f"{prefix}pools[{i}]") for i, p in enumerate(req.pools))
    )
    start = (
        to_datetime(req.scheduled_from, f"{prefix}scheduled_from")
        if req.HasField("scheduled_from")
        else None
    )
    end = (
        to_datetime(req.scheduled_to, f"{prefix}scheduled_to")
        if req.HasField("scheduled_to")
        else None
    )
    if start is not None and end is not None and end < start:
        raise InvalidArgument(f"{prefix}scheduled_to", "before scheduled_from")
    return TaskFilter(
        statuses=states, type=req.type or None, pools=pools, scheduled_from=start, scheduled_to=end
    )


def filter_from_proto(req: pb.ListTasksRequest) -> tuple[TaskFilter, int]:
    """The filter and page size of a ListTasks request."""
    narrowed = task_filter_from_proto(req)
    if len(req.idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(
            "idempotency_key", f"longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters"
        )
    if req.page_size > MAX_PAGE_SIZE:
        raise InvalidArgument("page_size", f"at most {MAX_PAGE_SIZE}")
    if len(req.page_token) > 1024:
        raise InvalidArgument("page_token", "malformed")
    order = _ORDER_FROM_PROTO.get(req.order)
    if order is None:
        raise InvalidArgument("order", f"unknown TaskOrder {req.order}")
    flt = dataclasses.replace(narrowed, order=order, idempotency_key=req.idempotency_key or None)
    return flt, req.page_size or DEFAULT_PAGE_SIZE


# -- page tokens ---------------------------------------------------------------------
# A page token is bound to the tenant and filter it was issued for: the store's keyset
# position, prefixed with a digest of both. Reused with another filter it answers
# INVALID_ARGUMENT instead of a silently wrong (often empty) page.

_PAGE_TOKEN_PREFIX = "p1."


def _filter_digest(tenant_id: uuid.UUID, flt: TaskFilter) -> str:
    parts = [
        str(tenant_id),
        ",".join(sorted(s.value for s in flt.statuses)),
        flt.type or "",
        flt.scheduled_from.isoformat() if flt.scheduled_from else "",
        flt.scheduled_to.isoformat() if flt.scheduled_to else "",
        ",".join(sorted(p.value for p in flt.pools)),
        flt.idempotency_key or "",
    ]
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=9).digest()
    return base64.urlsafe_b64encode(digest).decode()


def page_token_out(tenant_id: uuid.UUID, flt: TaskFilter, store_token: str) -> str:
    """The token a client gets for the store's next-page position ('' at the end)."""
    if not store_token:
        return ""
    return f"{_PAGE_TOKEN_PREFIX}{_filter_digest(tenant_id, flt)}.{store_token}"


def page_token_in(tenant_id: uuid.UUID, flt: TaskFilter, token: str) -> str:
    """The store's position inside a client's token ('' for the first page);
    InvalidArgument when it is not a token of this server or was issued for another
    filter."""
    if not token:
        return ""
    prefix, dot, rest = token.partition(".")
    digest, dot2, store_token = rest.partition(".")
    if f"{prefix}{dot}" != _PAGE_TOKEN_PREFIX or not dot2 or not store_token:
        raise InvalidArgument("page_token", "is not a token this server issued")
    if digest != _filter_digest(tenant_id, flt):
        raise InvalidArgument("page_token", "was issued for a different filter")
    return store_token


# -- tenants -------------------------------------------------------------------------


def tenant_to_proto(t: Tenant) -> pb.Tenant:
    """The proto view of a tenant."""
    return pb.Tenant(
        id=str(t.id),
        name=t.name,
        tier=t.tier,
        rate_limit_rps=t.rate_limit_rps,
        max_concurrent_workers=t.max_concurrent_workers,
        home_region=t.home_region,
    )


def tier_from_proto(value: str, field: str) -> str:
    """A tenant tier (STANDARD, ENTERPRISE, SYSTEM)."""
    tier = value.upper()
    if tier not in TIERS:
        raise InvalidArgument(field, f"must be one of {', '.join(sorted(TIERS))}")
    return tier


def name_from_proto(value: str, field: str) -> str:
    """A display name: 1-128 characters."""
    if not value.strip():
        raise InvalidArgument(field, "required")
    if len(value) > MAX_NAME_CHARS:
        raise InvalidArgument(field, f"longer than {MAX_NAME_CHARS} characters")
    return value
