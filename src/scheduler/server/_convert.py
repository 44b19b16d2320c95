"""Proto <-> engine types, and validation of every request field.

The module every servicer imports (``conv``); cut by concern, it holds the task's own
conversions (submission specs, retry policies, ``task_to_proto``) and tenants, and
re-exports ``_convert_fields`` (ids, timestamps, pools, states, traces, JSON values),
``_convert_writes`` (the worker stream's assignment and fenced writes) and
``_convert_listing`` (ListTasks filters, page tokens).

Each ``*_from_proto`` function raises :class:`~scheduler._errors.InvalidArgument`
naming the offending field with its full path (``task.type``, ``tasks[3].payload``),
so bad input always answers INVALID_ARGUMENT and never reaches the engine malformed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from google.protobuf import struct_pb2

from scheduler import jsonbytes, wire
from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import dict_to_struct, set_timestamp
from scheduler.engine import SubmitSpec
from scheduler.jitter import JitterMode
from scheduler.limits import (
    DEFAULT_MAX_RETRIES,
    MAX_BACKOFF_S,
    MAX_ERROR_TYPE_CHARS,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_NAME_CHARS,
    MAX_NON_RETRYABLE_TYPES,
    MAX_RETRIES,
    MAX_TIMEOUT_S,
    MAX_TYPE_CHARS,
    flow_key,
)
from scheduler.server._convert_fields import _TYPE_CHARS
from scheduler.server._convert_fields import (
    DEPTH_PROBLEM as DEPTH_PROBLEM,
)
from scheduler.server._convert_fields import (
    bounded_struct as bounded_struct,
)
from scheduler.server._convert_fields import (
    filter_pool as filter_pool,
)
from scheduler.server._convert_fields import (
    from_datetime as from_datetime,
)
from scheduler.server._convert_fields import (
    json_field as json_field,
)
from scheduler.server._convert_fields import (
    json_of as json_of,
)
from scheduler.server._convert_fields import (
    parse_uuid as parse_uuid,
)
from scheduler.server._convert_fields import (
    pool_from_proto as pool_from_proto,
)
from scheduler.server._convert_fields import (
    pool_to_proto as pool_to_proto,
)
from scheduler.server._convert_fields import (
    state_from_proto as state_from_proto,
)
from scheduler.server._convert_fields import (
    state_to_proto as state_to_proto,
)
from scheduler.server._convert_fields import (
    to_datetime as to_datetime,
)
from scheduler.server._convert_fields import (
    trace_from_metadata as trace_from_metadata,
)
from scheduler.server._convert_fields import (
    trace_from_proto as trace_from_proto,
)
from scheduler.server._convert_fields import (
    trace_to_proto as trace_to_proto,
)
from scheduler.server._convert_listing import (
    filter_from_proto as filter_from_proto,
)
from scheduler.server._convert_listing import (
    page_token_in as page_token_in,
)
from scheduler.server._convert_listing import (
    page_token_out as page_token_out,
)
from scheduler.server._convert_listing import (
    task_filter_from_proto as task_filter_from_proto,
)
from scheduler.server._convert_writes import (
    assignment_to_proto as assignment_to_proto,
)
from scheduler.server._convert_writes import (
    completion_from_proto as completion_from_proto,
)
from scheduler.server._convert_writes import (
    error_text as error_text,
)
from scheduler.server._convert_writes import (
    error_type_text as error_type_text,
)
from scheduler.server._convert_writes import (
    failure_from_proto as failure_from_proto,
)
from scheduler.server._convert_writes import (
    key_from_proto as key_from_proto,
)
from scheduler.server._convert_writes import (
    ref_to_proto as ref_to_proto,
)
from scheduler.server._convert_writes import (
    release_from_proto as release_from_proto,
)
from scheduler.server._convert_writes import (
    token_from_proto as token_from_proto,
)
from scheduler.server._convert_writes import (
    traceback_text as traceback_text,
)
from scheduler.server._convert_writes import (
    write_from_proto as write_from_proto,
)
from scheduler.server._convert_writes import (
    writes_from_proto as writes_from_proto,
)
from scheduler.types import (
    JSON,
    Debounce,
    DebouncePayload,
    FlowOptions,
    IdempotencyScope,
    RetryPolicy,
    TaskRecord,
    Tenant,
    Throttle,
    check_flow,
)

TIERS = frozenset({"STANDARD", "ENTERPRISE", "SYSTEM"})
_JITTER_TO_PROTO = wire.JITTER_TO_PROTO
_JITTER_FROM_PROTO = wire.JITTER_FROM_PROTO


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
    if spec.rate_limit_key:  # empty: no key
        flow_key(spec.rate_limit_key, f"{field}.rate_limit_key")
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
        flow=flow_from_proto(spec, field),
        concurrency_key=concurrency_key_from_proto(spec.concurrency_key, field),
        rate_limit_key=spec.rate_limit_key,
    )


_DEBOUNCE_PAYLOAD = {
    pb.DEBOUNCE_PAYLOAD_UNSPECIFIED: DebouncePayload.LATEST,
    pb.DEBOUNCE_PAYLOAD_LATEST: DebouncePayload.LATEST,
    pb.DEBOUNCE_PAYLOAD_FIRST: DebouncePayload.FIRST,
}


_NO_FLOW = FlowOptions()

_IDEMPOTENCY_SCOPE = {
    pb.IDEMPOTENCY_SCOPE_UNSPECIFIED: IdempotencyScope.FOREVER,
    pb.IDEMPOTENCY_SCOPE_FOREVER: IdempotencyScope.FOREVER,
    pb.IDEMPOTENCY_SCOPE_UNTIL_FINISHED: IdempotencyScope.UNTIL_FINISHED,
}


def flow_from_proto(spec: pb.TaskSpec, field: str) -> FlowOptions | None:
    """A task's flow control (issue 43), checked (``check_flow``), or None."""
    debounce = throttle = None
    if spec.HasField("debounce"):
        d = spec.debounce
        try:
            keep = _DEBOUNCE_PAYLOAD[d.payload]
        except KeyError:
            raise InvalidArgument(
                f"{field}.debounce.payload", f"unknown mode {d.payload}"
            ) from None
        debounce = Debounce(key=d.key, period_s=d.period_s, max_delay_s=d.max_delay_s, payload=keep)
    if spec.HasField("throttle"):
        throttle = Throttle(key=spec.throttle.key, period_s=spec.throttle.period_s)
    try:
        scope = _IDEMPOTENCY_SCOPE[spec.idempotency_scope]
    except KeyError:
        raise InvalidArgument(
            f"{field}.idempotency_scope", f"unknown scope {spec.idempotency_scope}"
        ) from None
    flow = FlowOptions(
        debounce=debounce,
        throttle=throttle,
        idempotency_ttl_s=spec.idempotency_ttl_s,
        idempotency_scope=scope,
    )
    if flow == _NO_FLOW:
        return None
    check_flow(flow, field, idempotency_key=bool(spec.idempotency_key))
    if debounce is not None and spec.HasField("scheduled_at"):
        raise InvalidArgument(
            f"{field}.scheduled_at",
            "a debounced task is due debounce.period_s after its"
            " last submission: leave scheduled_at unset",
        )
    return flow


def task_type_from_proto(value: str, field: str) -> str:
    """A task type: 1..64 printable ASCII characters without spaces."""
    if not value:
        raise InvalidArgument(field, "required")
    if len(value) > MAX_TYPE_CHARS:
        raise InvalidArgument(field, f"longer than {MAX_TYPE_CHARS} characters")
    if not _TYPE_CHARS.match(value):
        raise InvalidArgument(field, "must be printable ASCII without spaces")
    return value


def concurrency_key_from_proto(key: str, field: str) -> str | None:
    """``TaskSpec.concurrency_key``: None when empty; 1..128 characters, no NUL."""
    return flow_key(key, f"{field}.concurrency_key") if key else None


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
    if rec.concurrency_key is not None:
        task.concurrency_key = rec.concurrency_key
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
