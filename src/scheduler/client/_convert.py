"""Proto <-> client types (the client and the worker SDK share these)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

from google.protobuf import struct_pb2, timestamp_pb2

from scheduler import jsonbytes, wire
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._wellknown import (
    struct_to_dict,
    timestamp,
    utc_datetime,
)
from scheduler.client._types import (
    ApiKeyInfo,
    ExpectationInfo,
    ScheduleInfo,
    Task,
    TaskSpec,
    TenantInfo,
    WorkflowInfo,
)
from scheduler.states import TaskState
from scheduler.types import (
    JSON,
    DebouncePayload,
    IdempotencyScope,
    OverlapPolicy,
    Pool,
    RetryPolicy,
    Scope,
    UpstreamPolicy,
)

_POOL_TO_PROTO = wire.POOL_TO_PROTO
_POOL_FROM_PROTO = wire.POOL_FROM_PROTO
_JITTER_TO_PROTO = wire.JITTER_TO_PROTO


def state_to_proto(state: TaskState) -> pb.TaskState:
    """The proto enum of a task state."""
    return wire.STATE_TO_PROTO[state]


def _state_by_name(value: int) -> TaskState:
    return TaskState(pb.TaskState.Name(cast(pb.TaskState, value)).removeprefix("TASK_STATE_"))


_STATE_FROM_PROTO = wire.STATE_FROM_PROTO


def state_from_proto(value: int) -> TaskState:
    """A task state from the proto enum (ValueError for one this client does not know)."""
    state = _STATE_FROM_PROTO.get(value)
    return state if state is not None else _state_by_name(value)


@functools.lru_cache(maxsize=256)
def _tenant_uuid(text: str) -> uuid.UUID:
    """A tenant id: a client sees a few, thousands of times each (a batch's results)."""
    return uuid.UUID(text)


def pool_to_proto(pool: Pool) -> pb.Pool:
    """The proto enum of a pool."""
    return _POOL_TO_PROTO[pool]


def pool_from_proto(value: int) -> Pool:
    """A pool from the proto enum (unspecified: standard)."""
    return _POOL_FROM_PROTO.get(value, Pool.STANDARD)


def to_timestamp(dt: datetime) -> timestamp_pb2.Timestamp:
    """A Timestamp from an aware datetime."""
    return timestamp(dt)


def from_timestamp(ts: timestamp_pb2.Timestamp) -> datetime:
    """An aware UTC datetime from a Timestamp."""
    return utc_datetime(ts)


def spec_to_proto(spec: TaskSpec) -> pb.TaskSpec:
    """The wire form of a task spec."""
    msg = pb.TaskSpec()
    spec_into_proto(spec, msg)
    return msg


def spec_into_proto(spec: TaskSpec, msg: pb.TaskSpec) -> None:
    """Write a task spec into a (fresh) message in place: a batch adds its items to the
    request instead of building each and copying it in."""
    msg.type = spec.type
    if spec.payload:
        msg.payload_json = jsonbytes.dumps(spec.payload)
    if spec.idempotency_key:
        msg.idempotency_key = spec.idempotency_key
    if spec.rate_limit_key:
        msg.rate_limit_key = spec.rate_limit_key
    msg.pool = pool_to_proto(spec.pool)
    msg.strict_timing = spec.strict_timing
    msg.timeout_s = spec.timeout_s
    if spec.jitter_mode is not None:
        msg.jitter_mode = _JITTER_TO_PROTO[spec.jitter_mode]
    if spec.max_retries == 0:
        msg.no_retries = True
    elif spec.max_retries is not None:
        msg.max_retries = spec.max_retries
    if spec.scheduled_at is not None:
        msg.scheduled_at.CopyFrom(to_timestamp(spec.scheduled_at))
    if spec.trace_context:
        msg.trace_context.traceparent = spec.trace_context.get("traceparent", "")
        msg.trace_context.tracestate = spec.trace_context.get("tracestate", "")
    if spec.concurrency_key:
        msg.concurrency_key = spec.concurrency_key
    if spec.retry_policy is not None:
        rp = spec.retry_policy
        if rp.max_attempts and spec.max_retries is not None:
            raise ValueError("TaskSpec: give retry_policy.max_attempts or max_retries, not both")
        msg.retry_policy.initial_backoff_s = rp.initial_backoff_s
        msg.retry_policy.max_backoff_s = rp.max_backoff_s
        msg.retry_policy.max_attempts = rp.max_attempts
        msg.retry_policy.non_retryable_error_types.extend(rp.error_types())
    if spec.debounce is not None:
        d = spec.debounce
        msg.debounce.key = d.key
        msg.debounce.period_s = d.period_s
        msg.debounce.max_delay_s = d.max_delay_s
        msg.debounce.payload = (
            pb.DEBOUNCE_PAYLOAD_FIRST
            if d.payload is DebouncePayload.FIRST
            else pb.DEBOUNCE_PAYLOAD_LATEST
        )
    if spec.throttle is not None:
        msg.throttle.key = spec.throttle.key
        msg.throttle.period_s = spec.throttle.period_s
    if spec.idempotency_ttl_s:
        msg.idempotency_ttl_s = spec.idempotency_ttl_s
    if spec.idempotency_scope is IdempotencyScope.UNTIL_FINISHED:
        msg.idempotency_scope = pb.IDEMPOTENCY_SCOPE_UNTIL_FINISHED


def trace_from_proto(tc: pb.TraceContext) -> dict[str, str] | None:
    """A trace context dict, or None when empty."""
    if not tc.traceparent:
        return None
    return {"traceparent": tc.traceparent, "tracestate": tc.tracestate}


def json_of(struct: struct_pb2.Struct, data: bytes, has_struct: bool) -> JSON | None:
    """A JSON value the server sent in either form (its ``*_json`` bytes, else its
    Struct); None when neither is set."""
    if data:
        return jsonbytes.loads(data)
    return struct_to_dict(struct) if has_struct else None


def json_fields(value: Mapping[str, Any] | None) -> bytes:
    """A JSON object as the bytes of a ``*_json`` field (b"" for None or empty: unset)."""
    return jsonbytes.dumps(value) if value else b""


def task_from_proto(
    msg: pb.Task, *, created: bool = True, debounced: bool = False, throttled: bool = False
) -> Task:
    """A :class:`Task` from its wire form."""
    return Task(
        id=uuid.UUID(msg.id),
        tenant_id=_tenant_uuid(msg.tenant_id),
        type=msg.type,
        state=state_from_proto(msg.state),
        scheduled_at=utc_datetime(msg.scheduled_at),
        due_at=utc_datetime(msg.due_at),
        idempotency_key=msg.idempotency_key,
        pool=pool_from_proto(msg.pool),
        fencing_token=msg.fencing_token,
        retry_count=msg.retry_count,
        max_retries=msg.max_retries,
        payload=json_of(msg.payload, msg.payload_json, msg.HasField("payload")) or {},
        result=json_of(msg.result, msg.result_json, msg.HasField("result")),
        last_error=msg.last_error or None,
        checkpoint=json_of(msg.checkpoint, msg.checkpoint_json, msg.HasField("checkpoint")),
        worker_id=msg.worker_id or None,
        cancel_requested=msg.cancel_requested,
        shard_id=msg.shard_id,
        strict_timing=msg.strict_timing,
        trace_context=trace_from_proto(msg.trace_context),
        created_at=utc_datetime(msg.created_at),
        updated_at=utc_datetime(msg.updated_at),
        created=created,
        debounced=debounced,
        throttled=throttled,
        retry_policy=(
            RetryPolicy(
                initial_backoff_s=msg.retry_policy.initial_backoff_s,
                max_backoff_s=msg.retry_policy.max_backoff_s,
                max_attempts=msg.retry_policy.max_attempts,
                non_retryable=tuple(msg.retry_policy.non_retryable_error_types),
            )
            if msg.HasField("retry_policy")
            else None
        ),
        last_error_type=msg.last_error_type or None,
        last_traceback=msg.last_traceback or None,
        workflow_id=uuid.UUID(msg.workflow_id) if msg.workflow_id else None,
        schedule_id=uuid.UUID(msg.schedule_id) if msg.schedule_id else None,
    )


def tenant_from_proto(msg: pb.Tenant) -> TenantInfo:
    """A :class:`TenantInfo` from its wire form."""
    return TenantInfo(
        id=uuid.UUID(msg.id),
        name=msg.name,
        tier=msg.tier,
        rate_limit_rps=msg.rate_limit_rps,
        max_concurrent_workers=msg.max_concurrent_workers,
        home_region=msg.home_region,
    )


# -- workflows, schedules, expectations ------------------------------------------------

_UPSTREAM_TO_PROTO = wire.UPSTREAM_TO_PROTO
_UPSTREAM_FROM_PROTO = wire.UPSTREAM_FROM_PROTO
_OVERLAP_TO_PROTO = wire.OVERLAP_TO_PROTO
_OVERLAP_FROM_PROTO = wire.OVERLAP_FROM_PROTO


def upstream_to_proto(policy: UpstreamPolicy) -> pb.UpstreamPolicy:
    """The proto enum of an upstream policy."""
    return _UPSTREAM_TO_PROTO[policy]


def overlap_to_proto(policy: OverlapPolicy) -> pb.OverlapPolicy:
    """The proto enum of an overlap policy."""
    return _OVERLAP_TO_PROTO[policy]


def _opt_time(msg: Any, name: str) -> datetime | None:
    return from_timestamp(getattr(msg, name)) if msg.HasField(name) else None


def workflow_request(
    nodes: Mapping[str, TaskSpec],
    edges: Iterable[tuple[str, str]],
    *,
    name: str,
    idempotency_key: str | None,
    on_upstream_failure: UpstreamPolicy,
) -> pb.SubmitWorkflowRequest:
    """The wire form of a workflow submission."""
    return pb.SubmitWorkflowRequest(
        name=name,
        nodes=[pb.WorkflowNodeSpec(id=n, task=spec_to_proto(s)) for n, s in nodes.items()],
        edges=[pb.WorkflowEdge(parent=p, child=c) for p, c in edges],
        idempotency_key=idempotency_key or "",
        on_upstream_failure=upstream_to_proto(on_upstream_failure),
    )


def workflow_from_proto(
    header: pb.Workflow,
    nodes: Iterable[pb.WorkflowNode],
    edges: Iterable[tuple[str, str]],
    *,
    created: bool = True,
) -> WorkflowInfo:
    """A :class:`WorkflowInfo` from its wire form."""
    return WorkflowInfo(
        id=uuid.UUID(header.id),
        tenant_id=uuid.UUID(header.tenant_id),
        name=header.name,
        idempotency_key=header.idempotency_key,
        on_upstream_failure=_UPSTREAM_FROM_PROTO.get(
            header.on_upstream_failure, UpstreamPolicy.CANCEL
        ),
        node_count=header.node_count,
        created_at=from_timestamp(header.created_at),
        nodes={n.id: task_from_proto(n.task) for n in nodes},
        edges=tuple(edges),
        created=created,
    )


def schedule_from_proto(msg: pb.Schedule) -> ScheduleInfo:
    """A :class:`ScheduleInfo` from its wire form."""
    return ScheduleInfo(
        id=uuid.UUID(msg.id),
        tenant_id=uuid.UUID(msg.tenant_id),
        name=msg.name,
        cron=msg.cron or None,
        interval_s=msg.interval_s or None,
        timezone=msg.timezone,
        task_type=msg.task_type,
        payload=struct_to_dict(msg.payload),
        pool=pool_from_proto(msg.pool),
        max_retries=msg.max_retries,
        timeout_s=msg.timeout_s,
        overlap_policy=_OVERLAP_FROM_PROTO.get(msg.overlap_policy, OverlapPolicy.SKIP),
        catchup_window_s=msg.catchup_window_s,
        jitter_s=msg.jitter_s,
        paused=msg.paused,
        next_fire_at=_opt_time(msg, "next_fire_at"),
        last_fired_at=_opt_time(msg, "last_fired_at"),
        buffered_at=_opt_time(msg, "buffered_at"),
        created_at=_opt_time(msg, "created_at"),
        updated_at=_opt_time(msg, "updated_at"),
    )


def expectation_from_proto(msg: pb.Expectation) -> ExpectationInfo:
    """An :class:`ExpectationInfo` from its wire form."""
    return ExpectationInfo(
        id=uuid.UUID(msg.id),
        tenant_id=uuid.UUID(msg.tenant_id),
        job_id=msg.job_id,
        schedule_id=uuid.UUID(msg.schedule_id) if msg.schedule_id else None,
        interval_s=msg.interval_s,
        tolerance_s=msg.tolerance_s,
        max_runtime_s=msg.max_runtime_s or None,
        created_at=_opt_time(msg, "created_at"),
        status=_EXPECTATION_STATUS.get(msg.status),
        last_completed_at=_opt_time(msg, "last_completed_at"),
        deadline_at=_opt_time(msg, "deadline_at"),
    )


_EXPECTATION_STATUS = {
    pb.EXPECTATION_STATUS_OK: "ok",
    pb.EXPECTATION_STATUS_LATE: "late",
    pb.EXPECTATION_STATUS_STUCK: "stuck",
}


# -- API keys (issue 15) -----------------------------------------------------------------
def api_key_from_proto(msg: pb.ApiKey) -> ApiKeyInfo:
    """An API key's public part from the wire (unknown scope names are skipped)."""
    known = {s.value: s for s in Scope}
    return ApiKeyInfo(
        id=uuid.UUID(msg.id),
        tenant_id=uuid.UUID(msg.tenant_id),
        name=msg.name,
        scopes=frozenset(known[s] for s in msg.scopes if s in known),
        created_at=_opt_time(msg, "created_at"),
        expires_at=_opt_time(msg, "expires_at"),
        revoked=msg.revoked,
        revoked_at=_opt_time(msg, "revoked_at"),
        last_used_at=_opt_time(msg, "last_used_at"),
        rotated_from=uuid.UUID(msg.rotated_from) if msg.rotated_from else None,
    )
