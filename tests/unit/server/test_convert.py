"""Proto <-> engine conversion and field validation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from google.protobuf import timestamp_pb2

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.client import _convert as cconv
from scheduler.client._types import TaskSpec
from scheduler.engine import AssignmentBatch, CancelNotice
from scheduler.jitter import JitterMode
from scheduler.jsonbytes import as_dict
from scheduler.server import _convert as conv
from scheduler.server._worker import event_to_proto, hello_from_proto
from scheduler.states import TaskState
from scheduler.types import Pool, RawJSON, TaskKey, TaskRecord, Tenant
from tests.support.records import NOW, assignment, task_record

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _spec(**kw: Any) -> pb.TaskSpec:
    return pb.TaskSpec(**{"type": "email", **kw})


def _parse(spec: pb.TaskSpec, field: str = "task", **kw: Any) -> Any:
    return conv.spec_from_proto(spec, field, max_payload_bytes=1024, **kw)


def test_spec_defaults() -> None:
    spec = _parse(_spec())
    assert spec.type == "email"
    assert spec.payload == {}
    assert spec.scheduled_at is None
    assert spec.idempotency_key is None
    assert spec.pool is Pool.STANDARD
    assert spec.jitter_mode is None  # the default rule, decided at admission
    assert spec.max_retries == 3
    assert spec.trace_context is None


def test_spec_full() -> None:
    msg = _spec(
        idempotency_key="k",
        pool=pb.POOL_BULK,
        jitter_mode=pb.JITTER_MODE_LATE_ONLY,
        max_retries=7,
        timeout_s=1.5,
        scheduled_at=cconv.to_timestamp(NOW),
        trace_context=pb.TraceContext(traceparent=TP, tracestate="a=b"),
    )
    msg.payload.update({"n": 2, "f": 2.5, "list": [1, {"x": True}], "none": None})
    spec = _parse(msg)
    assert spec.payload == {"n": 2, "f": 2.5, "list": [1, {"x": True}], "none": None}
    assert isinstance(spec.payload["n"], int)
    assert spec.scheduled_at == NOW
    assert spec.pool is Pool.BULK
    assert spec.jitter_mode is JitterMode.LATE_ONLY
    assert spec.max_retries == 7
    assert spec.timeout_s == 1.5
    assert spec.trace_context == {"traceparent": TP, "tracestate": "a=b"}


def test_strict_timing_means_no_jitter_and_no_retries_means_zero() -> None:
    spec = _parse(_spec(strict_timing=True, jitter_mode=pb.JITTER_MODE_SYMMETRIC, no_retries=True))
    assert spec.jitter_mode is JitterMode.NONE
    assert spec.strict_timing
    assert spec.max_retries == 0


def test_trace_context_from_metadata_is_a_fallback() -> None:
    meta = (("traceparent", TP), ("tracestate", "k=v"))
    default = conv.trace_from_metadata(meta)
    assert default == {"traceparent": TP, "tracestate": "k=v"}
    assert _parse(_spec(), default_trace=default).trace_context == default
    own = "00-11111111111111111111111111111111-2222222222222222-01"
    spec = _parse(_spec(trace_context=pb.TraceContext(traceparent=own)), default_trace=default)
    assert spec.trace_context == {"traceparent": own, "tracestate": ""}
    assert conv.trace_from_metadata((("traceparent", "garbage"),)) is None
    assert conv.trace_from_metadata(None) is None


BAD: list[tuple[pb.TaskSpec, str]] = [
    (_spec(type=""), "type"),
    (_spec(type="x" * 65), "type"),
    (_spec(type="with space"), "type"),
    (_spec(type="email\n"), "type"),  # `$` in a pattern matches before a last newline
    (_spec(idempotency_key="k" * 129), "idempotency_key"),
    (_spec(pool=17), "pool"),
    (_spec(jitter_mode=17), "jitter_mode"),
    (_spec(max_retries=1001), "max_retries"),
    (_spec(max_retries=1, no_retries=True), "max_retries"),
    (_spec(timeout_s=-0.5), "timeout_s"),
    (_spec(timeout_s=float("inf")), "timeout_s"),
    (_spec(scheduled_at=timestamp_pb2.Timestamp(seconds=10**13)), "scheduled_at"),
    (_spec(scheduled_at=timestamp_pb2.Timestamp(seconds=1, nanos=-5)), "scheduled_at"),
    (_spec(trace_context=pb.TraceContext(traceparent="00-xyz")), "trace_context.traceparent"),
    (_spec(trace_context=pb.TraceContext(tracestate="a=b")), "trace_context.traceparent"),
    (_spec(trace_context=pb.TraceContext(traceparent=TP + "\n")), "trace_context.traceparent"),
]


@pytest.mark.parametrize(("msg", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_spec_names_the_field(msg: pb.TaskSpec, field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        _parse(msg, "tasks[3]")
    assert info.value.field == f"tasks[3].{field}"
    assert str(info.value).startswith(f"tasks[3].{field}: ")


def test_payload_size_limit() -> None:
    msg = _spec()
    msg.payload.update({"blob": "x" * 2000})
    with pytest.raises(InvalidArgument) as info:
        _parse(msg, "tasks[0]")
    assert info.value.field == "tasks[0].payload"


def test_uuid_and_filters() -> None:
    with pytest.raises(InvalidArgument, match=r"^task_id: required"):
        conv.parse_uuid("", "task_id")
    with pytest.raises(InvalidArgument, match=r"^task_id: not a UUID"):
        conv.parse_uuid("nope", "task_id")
    # A newline after a well-formed id is no UUID either (it raised ValueError: INTERNAL).
    with pytest.raises(InvalidArgument, match=r"^task_id: not a UUID"):
        conv.parse_uuid(f"{uuid.uuid4()}\n", "task_id")
    flt, size = conv.filter_from_proto(
        pb.ListTasksRequest(states=[pb.TASK_STATE_RUNNING, pb.TASK_STATE_DEAD_LETTER], type="x")
    )
    assert tuple(flt.statuses) == (TaskState.RUNNING, TaskState.DEAD_LETTER)
    assert flt.type == "x"
    assert size == 100
    for req, field in [
        (pb.ListTasksRequest(states=[0]), "states[0]"),
        (pb.ListTasksRequest(page_size=1001), "page_size"),
    ]:
        with pytest.raises(InvalidArgument) as info:
            conv.filter_from_proto(req)
        assert info.value.field == field


def _record(**kw: Any) -> TaskRecord:
    """A row a worker ran: every field a Task carries is set."""
    ran: dict[str, Any] = dict(
        status=TaskState.RUNNING,
        idempotency_key="k",
        pool=Pool.CRITICAL,
        fencing_token=4,
        retry_count=1,
        payload={"a": 1},
        result_payload={"ok": True},
        checkpoint={"step": 2},
        trace_context={"traceparent": TP, "tracestate": ""},
        last_error="boom",
        worker_id="w1",
        lease_expires_at=NOW,
        cancel_requested=True,
    )
    return task_record(**{**ran, **kw})


def test_task_round_trip_to_client_type() -> None:
    rec = _record()
    task = cconv.task_from_proto(conv.task_to_proto(rec))
    assert task.id == rec.id
    assert task.tenant_id == rec.tenant_id
    assert task.state is TaskState.RUNNING
    assert task.scheduled_at == NOW
    assert task.due_at == rec.due_at
    assert task.pool is Pool.CRITICAL
    assert task.fencing_token == 4
    assert task.payload == {"a": 1}
    assert task.result == {"ok": True}
    assert task.checkpoint == {"step": 2}
    assert task.last_error == "boom"
    assert task.worker_id == "w1"
    assert task.cancel_requested
    assert task.trace_context == {"traceparent": TP, "tracestate": ""}
    empty = cconv.task_from_proto(
        conv.task_to_proto(
            _record(result_payload=None, checkpoint=None, last_error=None, trace_context=None)
        )
    )
    assert empty.result is None
    assert empty.checkpoint is None
    assert empty.last_error is None
    assert empty.trace_context is None


@pytest.mark.parametrize("state", list(TaskState))
def test_every_state_maps(state: TaskState) -> None:
    assert cconv.state_from_proto(conv.state_to_proto(state)) is state
    assert conv.state_from_proto(conv.state_to_proto(state), "s") is state


def test_a_state_the_client_does_not_know_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="999"):
        cconv.state_from_proto(999)


def test_client_spec_to_proto_and_back() -> None:
    spec = TaskSpec(
        type="t",
        payload={"x": 1},
        scheduled_at=NOW,
        pool=Pool.BULK,
        jitter_mode=JitterMode.NONE,
        max_retries=0,
        trace_context={"traceparent": TP, "tracestate": ""},
    )
    msg = cconv.spec_to_proto(spec)
    assert msg.payload_json
    assert not msg.HasField("payload")
    back = _parse(msg)
    assert isinstance(back.payload, RawJSON)  # kept as text for the store
    assert as_dict(back.payload) == {"x": 1}
    assert back.scheduled_at == NOW
    assert back.pool is Pool.BULK
    assert back.jitter_mode is JitterMode.NONE
    assert back.max_retries == 0
    assert back.trace_context == {"traceparent": TP, "tracestate": ""}


def test_assignment_and_cancel_events() -> None:
    key = TaskKey(uuid.uuid4(), NOW)
    a = assignment(
        key=key, payload={"p": 1}, fencing_token=9, attempt=2, due_at=NOW, checkpoint={"c": 1}
    )
    msg = event_to_proto(AssignmentBatch((a,)))
    (out,) = msg.assignments.tasks
    assert out.task_id == str(key.id)
    assert out.fencing_token == 9
    assert out.attempt == 2
    assert cconv.from_timestamp(out.scheduled_at) == NOW
    assert cconv.struct_to_dict(out.checkpoint) == {"c": 1}
    assert not out.HasField("trace_context")
    cancel = event_to_proto(CancelNotice(key, 9)).cancel
    assert cancel.task.task_id == str(key.id)
    assert cancel.task.fencing_token == 9
    write = conv.write_from_proto(cancel.task, "x")
    assert write.key == key
    assert write.token == 9


def test_stream_refs_need_scheduled_at_and_token() -> None:
    with pytest.raises(InvalidArgument, match=r"^ack\.tasks\[0\]\.scheduled_at"):
        conv.writes_from_proto(
            [pb.TaskRef(task_id=str(uuid.uuid4()), fencing_token=1)], "ack.tasks"
        )
    ref = pb.TaskRef(task_id=str(uuid.uuid4()), scheduled_at=cconv.to_timestamp(NOW))
    with pytest.raises(InvalidArgument, match=r"^completion\.task\.fencing_token"):
        conv.completion_from_proto(pb.Completion(task=ref), "completion")
    with pytest.raises(InvalidArgument, match=r"^failure\.task: required"):
        conv.failure_from_proto(pb.Failure(), "failure")


def test_hello_validation() -> None:
    tenant = uuid.uuid4()
    hello = hello_from_proto(
        pb.Hello(worker_id="w", task_types=["a", "b"], pools=[pb.POOL_BULK], slots=5), tenant
    )
    assert hello.task_types == frozenset({"a", "b"})
    assert hello.pools == frozenset({Pool.BULK})
    assert hello.slots == 5
    assert hello.early_ms == 0  # a worker that does not hold early pushes
    assert (
        hello_from_proto(
            pb.Hello(worker_id="w", task_types=["a"], early_ms=60_000), tenant
        ).early_ms
        == 60_000
    )
    with pytest.raises(InvalidArgument, match=r"^hello\.early_ms: at most 60000"):
        hello_from_proto(pb.Hello(worker_id="w", task_types=["a"], early_ms=60_001), tenant)
    assert hello_from_proto(pb.Hello(worker_id="w", task_types=["a"]), tenant).pools == frozenset(
        Pool
    )
    with pytest.raises(InvalidArgument, match=r"^hello\.task_types\[1\]"):
        hello_from_proto(pb.Hello(worker_id="w", task_types=["a", ""]), tenant)


def test_tenant_conversion() -> None:
    t = Tenant(id=uuid.uuid4(), name="acme", tier="ENTERPRISE", rate_limit_rps=5)
    info = cconv.tenant_from_proto(conv.tenant_to_proto(t))
    assert info.id == t.id
    assert info.tier == "ENTERPRISE"
    assert info.rate_limit_rps == 5
    with pytest.raises(InvalidArgument, match=r"^tenant\.tier"):
        conv.tier_from_proto("gold", "tenant.tier")
