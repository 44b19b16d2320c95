"""Bad input the transport validation table (tests/integration/transport/test_validation.py)
does not cover yet, sent to a real ``tickwheel serve`` on PostgreSQL: every answer is
INVALID_ARGUMENT naming the field, never INTERNAL or a silent success."""

# ruff: noqa: E501  (the case table reads best one case per line)

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import AdminClient
from tests.support.processes import ADMIN_TOKEN, ProcessGroup
from tests.support.servers import PostgresServer

GOOD_ID = "0190d6c4-0000-7000-8000-000000000000"
TS = timestamp_pb2.Timestamp(seconds=1_900_000_000)


def _ref(**kw: Any) -> pb.TaskRef:
    return pb.TaskRef(**{"task_id": GOOD_ID, "fencing_token": 1, "scheduled_at": TS, **kw})


def _big_struct() -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update({"blob": "x" * (1 << 20)})
    return s


S, W, A = "scheduler", "worker", "admin"


@dataclasses.dataclass(frozen=True)
class Served:
    target: str
    api_key: str


async def _tenant_key(target: str) -> str:
    async with await AdminClient.connect(target, admin_token=ADMIN_TOKEN) as admin:
        tenant = await admin.create_tenant("validation")
        return (await admin.create_api_key(tenant.id, "validation")).secret


@pytest.fixture(scope="module")
def cluster(
    postgres_server: PostgresServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One served Tickwheel for the whole module: every case here is read-only."""
    name = f"validation_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE DATABASE {name} TEMPLATE {pg_template}")
    group = ProcessGroup(tmp_path_factory.mktemp("validation"))
    try:
        server = group.serve(postgres_server.dsn(name), extra_args=("--canary-interval-s", "0"))
        yield Served(server.target, asyncio.run(_tenant_key(server.target)))
    finally:
        group.stop_all()
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


CASES: list[tuple[str, str, Callable[[], Any], str]] = [
    (S, "ListTasks", lambda: pb.ListTasksRequest(page_token="!!not-a-token!!"), "page_token"),
    (S, "ListTasks", lambda: pb.ListTasksRequest(type="x" * 65), "type"),
    (S, "CancelTask", lambda: pb.CancelTaskRequest(), "task_id"),
    (W, "FailTask", lambda: pb.FailTaskRequest(), "task"),
    (W, "FailTask", lambda: pb.FailTaskRequest(task=_ref(fencing_token=0)), "task.fencing_token"),
    (A, "CreateTenant", lambda: pb.CreateTenantRequest(tenant=pb.Tenant(name="n" * 129)), "tenant.name"),
    (A, "UpdateTenant", lambda: pb.UpdateTenantRequest(tenant_id="nope"), "tenant_id"),
    (A, "CreateApiKey", lambda: pb.CreateApiKeyRequest(tenant_id=GOOD_ID, name=""), "name"),
    (A, "CreateApiKey", lambda: pb.CreateApiKeyRequest(tenant_id=GOOD_ID, name="k" * 300), "name"),
]  # fmt: skip


PARAMS = [
    *(pytest.param(*c, id=f"{c[1]}-{c[3]}") for c in CASES),
    pytest.param(
        W,
        "CompleteTask",
        lambda: pb.CompleteTaskRequest(task=_ref(), result=_big_struct()),
        "result",
        id="CompleteTask-result-size",
    ),
]


def _stub(channel: grpc.aio.Channel, service: str) -> Any:
    return {S: pbg.SchedulerServiceStub, W: pbg.WorkerServiceStub, A: pbg.AdminServiceStub}[
        service
    ](channel)


@pytest.mark.parametrize(("service", "method", "make", "field"), PARAMS)
async def test_bad_field_is_invalid_argument(
    cluster: Served, service: str, method: str, make: Callable[[], Any], field: str
) -> None:
    metadata = (("x-api-key", cluster.api_key), ("x-admin-token", ADMIN_TOKEN))
    async with grpc.aio.insecure_channel(cluster.target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await getattr(_stub(channel, service), method)(make(), metadata=metadata, timeout=10)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert (info.value.details() or "").startswith(f"{field}:"), info.value.details()


async def test_oversized_batch_is_resource_exhausted(cluster: Served) -> None:
    request = pb.SubmitTasksRequest(tasks=[pb.TaskSpec(type="t")] * 10_001)
    async with grpc.aio.insecure_channel(cluster.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.SubmitTasks(request, metadata=(("x-api-key", cluster.api_key),), timeout=10)
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
    assert (info.value.details() or "").startswith("tasks:"), info.value.details()


STREAM_HELLO = [
    (pb.Hello(worker_id="w" * 257, task_types=["t"], slots=1), "hello.worker_id"),
    (pb.Hello(worker_id="w", task_types=["x" * 65], slots=1), "hello.task_types[0]"),
    (pb.Hello(worker_id="w", task_types=["t", ""], slots=1), "hello.task_types[1]"),
    (pb.Hello(worker_id="w", task_types=["t"], slots=1_000_000), "hello.slots"),
    (pb.Hello(worker_id="w", task_types=["t"], slots=1, early_ms=2**32 - 1), "hello.early_ms"),
]

STREAM_MESSAGES = [
    (pb.WorkerMessage(request_id=1, ack=pb.Ack(tasks=[_ref(task_id="bad")])), "ack.tasks[0].task_id"),
    (pb.WorkerMessage(request_id=1, heartbeat=pb.Heartbeat(tasks=[_ref(), _ref(fencing_token=0)])), "heartbeat.tasks[1].fencing_token"),
    (pb.WorkerMessage(request_id=1, failure=pb.Failure(task=_ref(), error="e" * 5000)), "failure.error"),
    (pb.WorkerMessage(request_id=1, release=pb.Release(task=_ref(task_id=""))), "release.task.task_id"),
    (pb.WorkerMessage(request_id=1, cancel_confirmed=pb.CancelConfirmed()), "cancel_confirmed.task"),
]  # fmt: skip


async def _stream_error(cluster: Served, *messages: pb.WorkerMessage) -> grpc.aio.AioRpcError:
    async with grpc.aio.insecure_channel(cluster.target) as channel:
        stub = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.Connect(metadata=(("x-api-key", cluster.api_key),))
        for msg in messages:
            await call.write(msg)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await asyncio.wait_for(_read_until_error(call), 10)
        return info.value


async def _read_until_error(call: Any) -> None:
    while True:
        msg = await call.read()
        kind = msg.WhichOneof("kind") if msg is not grpc.aio.EOF else "EOF"  # type: ignore[attr-defined]
        if kind not in ("welcome", "assignments"):
            raise AssertionError(f"expected INVALID_ARGUMENT, the server answered {msg}")


@pytest.mark.parametrize(("hello", "field"), STREAM_HELLO, ids=[f for _h, f in STREAM_HELLO])
async def test_bad_hello_is_invalid_argument(cluster: Served, hello: pb.Hello, field: str) -> None:
    err = await _stream_error(cluster, pb.WorkerMessage(hello=hello))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert (err.details() or "").startswith(f"{field}:"), err.details()


@pytest.mark.parametrize(("msg", "field"), STREAM_MESSAGES, ids=[f for _m, f in STREAM_MESSAGES])
async def test_bad_stream_message_is_refused_in_its_result(
    cluster: Served, msg: pb.WorkerMessage, field: str
) -> None:
    """A bad item is answered INVALID_ARGUMENT in the Result of its request id, naming
    the field, and the stream stays open (issue 15 case 6; it used to end the stream)."""
    hello = pb.WorkerMessage(hello=pb.Hello(worker_id="w", task_types=["t"], slots=1))
    async with grpc.aio.insecure_channel(cluster.target) as channel:
        stub = pbg.WorkerServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.Connect(metadata=(("x-api-key", cluster.api_key),))
        await call.write(hello)
        await call.write(msg)
        result = await asyncio.wait_for(_next_result(call), 10)
        assert result.request_id == msg.request_id
        assert result.code == grpc.StatusCode.INVALID_ARGUMENT.value[0], result
        assert result.field == field, result
        assert result.message.startswith(f"{field}:"), result
        # Still open: the next message is answered too.
        await call.write(pb.WorkerMessage(request_id=2, credit=pb.Credit(slots=1)))
        assert (await asyncio.wait_for(_next_result(call), 10)).code == 0
        call.cancel()


async def _next_result(call: Any) -> pb.Result:
    while True:
        msg = await call.read()
        if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
            raise AssertionError("the stream ended")
        if msg.WhichOneof("kind") == "result":
            return msg.result
