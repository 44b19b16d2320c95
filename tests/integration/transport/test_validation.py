"""Bad input on every RPC answers INVALID_ARGUMENT naming the field, never INTERNAL."""

# ruff: noqa: E501  (the case table reads best one case per line)

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from tests.integration.transport.conftest import ADMIN_TOKEN, Stack

GOOD_ID = "0190d6c4-0000-7000-8000-000000000000"
TS = timestamp_pb2.Timestamp(seconds=1_900_000_000)
BAD_TS = timestamp_pb2.Timestamp(seconds=10**12)


def _spec(**kw: Any) -> pb.TaskSpec:
    return pb.TaskSpec(**{"type": "t", **kw})


def _big_payload() -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update({"blob": "x" * (1 << 20)})
    return s


def _struct_with(number: float) -> struct_pb2.Struct:
    """A Struct holding a number JSON cannot (NaN, an infinity), nested."""
    s = struct_pb2.Struct()
    s.fields["a"].struct_value.fields["b"].number_value = number
    return s


def _ref(**kw: Any) -> pb.TaskRef:
    return pb.TaskRef(**{"task_id": GOOD_ID, "fencing_token": 1, "scheduled_at": TS, **kw})


S, W, A = "scheduler", "worker", "admin"

CASES: list[tuple[str, str, Callable[[], Any], str]] = [
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(), "task"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(type="")), "task.type"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(type="x" * 65)), "task.type"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(type="a b")), "task.type"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(payload=_big_payload())), "task.payload"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(payload=_struct_with(float("nan")))), "task.payload"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(idempotency_key="k" * 129)), "task.idempotency_key"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(pool=42)), "task.pool"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(jitter_mode=42)), "task.jitter_mode"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(max_retries=100_000)), "task.max_retries"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(max_retries=2, no_retries=True)), "task.max_retries"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(timeout_s=-1)), "task.timeout_s"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(timeout_s=float("nan"))), "task.timeout_s"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(scheduled_at=BAD_TS)), "task.scheduled_at"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(trace_context=pb.TraceContext(traceparent="nope"))), "task.trace_context.traceparent"),
    (S, "SubmitTasks", lambda: pb.SubmitTasksRequest(), "tasks"),
    (S, "SubmitTasks", lambda: pb.SubmitTasksRequest(tasks=[_spec(), _spec(), _spec(), _spec(type="")]), "tasks[3].type"),
    (S, "SubmitTasks", lambda: pb.SubmitTasksRequest(tasks=[_spec(), _spec(pool=9)]), "tasks[1].pool"),
    (S, "SubmitTasks", lambda: pb.SubmitTasksRequest(tasks=[_spec(), _spec(payload=_struct_with(float("inf")))]), "tasks[1].payload"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(payload_json=b"{nope")), "task.payload_json"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(payload_json=b"[1]")), "task.payload_json"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(payload_json=b'{"b": "' + b"x" * (1 << 20) + b'"}')), "task.payload_json"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(payload=_struct_with(1.0), payload_json=b"{}")), "task.payload_json"),
    (S, "SubmitTasks", lambda: pb.SubmitTasksRequest(tasks=[_spec(), _spec(payload_json=b"\xff")]), "tasks[1].payload_json"),
    (S, "GetTask", lambda: pb.GetTaskRequest(), "task_id"),
    (S, "GetTask", lambda: pb.GetTaskRequest(task_id="not-a-uuid"), "task_id"),
    (S, "GetTask", lambda: pb.GetTaskRequest(task_id=GOOD_ID + "\n"), "task_id"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(type="email\n")), "task.type"),
    (S, "CancelTask", lambda: pb.CancelTaskRequest(task_id="zzz"), "task_id"),
    (S, "ListTasks", lambda: pb.ListTasksRequest(states=[pb.TASK_STATE_RUNNING, 0]), "states[1]"),
    (S, "ListTasks", lambda: pb.ListTasksRequest(page_size=5000), "page_size"),
    (S, "ListTasks", lambda: pb.ListTasksRequest(scheduled_from=TS, scheduled_to=timestamp_pb2.Timestamp(seconds=1)), "scheduled_to"),
    (S, "ListTasks", lambda: pb.ListTasksRequest(scheduled_from=BAD_TS), "scheduled_from"),
    (S, "RedriveTask", lambda: pb.RedriveTaskRequest(task_id=""), "task_id"),
    (S, "RedriveTask", lambda: pb.RedriveTaskRequest(task_id=GOOD_ID, scheduled_at=BAD_TS), "scheduled_at"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(), "task"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(task=_ref(task_id="x")), "task.task_id"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(task=_ref(fencing_token=0)), "task.fencing_token"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(task=_ref(scheduled_at=BAD_TS)), "task.scheduled_at"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(task=_ref(), result_json=b"{1: 2}"), "result_json"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(task=_ref(), result=_struct_with(1.0), result_json=b"{}"), "result_json"),
    (W, "CompleteTask", lambda: pb.CompleteTaskRequest(task=_ref(), result=_struct_with(float("-inf"))), "result"),
    (W, "FailTask", lambda: pb.FailTaskRequest(task=_ref(task_id="")), "task.task_id"),
    (W, "FailTask", lambda: pb.FailTaskRequest(task=_ref(), error="e" * 5000), "error"),
    (A, "CreateTenant", lambda: pb.CreateTenantRequest(), "tenant"),
    (A, "CreateTenant", lambda: pb.CreateTenantRequest(tenant=pb.Tenant(name="")), "tenant.name"),
    (A, "CreateTenant", lambda: pb.CreateTenantRequest(tenant=pb.Tenant(name="n", tier="GOLD")), "tenant.tier"),
    (A, "GetTenant", lambda: pb.GetTenantRequest(tenant_id="nope"), "tenant_id"),
    (A, "UpdateTenant", lambda: pb.UpdateTenantRequest(tenant_id=GOOD_ID, tier="GOLD"), "tier"),
    (A, "CreateApiKey", lambda: pb.CreateApiKeyRequest(tenant_id="x", name="k"), "tenant_id"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(concurrency_key="k" * 129)), "task.concurrency_key"),
    (S, "SubmitTask", lambda: pb.SubmitTaskRequest(task=_spec(concurrency_key="a\x00b")), "task.concurrency_key"),
    (S, "SubmitTasks", lambda: pb.SubmitTasksRequest(tasks=[_spec(), _spec(concurrency_key="k" * 200)]), "tasks[1].concurrency_key"),
    (A, "SetConcurrencyLimit", lambda: pb.SetConcurrencyLimitRequest(tenant_id="x", type="t", limit=2), "tenant_id"),
    (A, "SetConcurrencyLimit", lambda: pb.SetConcurrencyLimitRequest(tenant_id=GOOD_ID, type="", limit=2), "type"),
    (A, "SetConcurrencyLimit", lambda: pb.SetConcurrencyLimitRequest(tenant_id=GOOD_ID, type="t", limit=100_001), "limit"),
    (A, "ListConcurrencyLimits", lambda: pb.ListConcurrencyLimitsRequest(tenant_id="nope"), "tenant_id"),
]  # fmt: skip


def _stub(channel: grpc.aio.Channel, service: str) -> Any:
    return {
        S: pbg.SchedulerServiceStub,
        W: pbg.WorkerServiceStub,
        A: pbg.AdminServiceStub,
    }[service](channel)


@pytest.mark.parametrize(
    ("service", "method", "make", "field"), CASES, ids=[f"{c[1]}-{c[3]}" for c in CASES]
)
async def test_bad_field_is_invalid_argument(
    stack: Stack, service: str, method: str, make: Callable[[], Any], field: str
) -> None:
    metadata = (("x-api-key", stack.key_a), ("x-admin-token", ADMIN_TOKEN))
    async with grpc.aio.insecure_channel(stack.target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await getattr(_stub(channel, service), method)(make(), metadata=metadata, timeout=10)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert (info.value.details() or "").startswith(f"{field}:"), info.value.details()


async def _connect_first(stack: Stack, first: pb.WorkerMessage) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(stack.target) as channel:
        call = pbg.WorkerServiceStub(channel).Connect(metadata=(("x-api-key", stack.key_a),))
        await call.write(first)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call.read()
        return info.value


async def test_connect_first_message_must_be_hello(stack: Stack) -> None:
    err = await _connect_first(stack, pb.WorkerMessage(credit=pb.Credit(slots=1)))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith("hello:")


@pytest.mark.parametrize(
    ("hello", "field"),
    [
        (pb.Hello(task_types=["t"], slots=1), "hello.worker_id"),
        (pb.Hello(worker_id="w", slots=1), "hello.task_types"),
        (pb.Hello(worker_id="w", task_types=["t"], pools=[7], slots=1), "hello.pools[0]"),
    ],
)
async def test_connect_bad_hello(stack: Stack, hello: pb.Hello, field: str) -> None:
    err = await _connect_first(stack, pb.WorkerMessage(hello=hello))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (err.details() or "").startswith(f"{field}:")


async def _read_until_error(call: Any) -> None:
    while True:
        await call.read()


async def test_stream_bad_ref_is_refused_in_its_result(stack: Stack) -> None:
    """A bad item is answered in its Result and keeps the stream (issue #15, case 6)."""
    async with grpc.aio.insecure_channel(stack.target) as channel:
        call = pbg.WorkerServiceStub(channel).Connect(metadata=(("x-api-key", stack.key_a),))
        await call.write(pb.WorkerMessage(hello=pb.Hello(worker_id="w", task_types=["t"], slots=1)))
        welcome = await call.read()
        assert welcome.WhichOneof("kind") == "welcome"
        await call.write(
            pb.WorkerMessage(request_id=1, completion=pb.Completion(task=_ref(task_id="bad")))
        )
        reply = await call.read()
        call.cancel()
    assert reply.WhichOneof("kind") == "result"
    assert reply.result.request_id == 1
    assert reply.result.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert reply.result.message.startswith("completion.task.task_id:")
