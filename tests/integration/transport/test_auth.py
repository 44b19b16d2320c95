"""The auth matrix: one tenant's key never reaches another tenant's tasks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import (
    AdminClient,
    Client,
    NotFound,
    PermissionDenied,
    StaleFencingToken,
    TaskState,
    Unauthenticated,
)
from scheduler.engine import Engine
from scheduler.server import Server, ServerConfig
from tests.integration.transport.conftest import Stack


async def test_missing_or_unknown_key_is_unauthenticated(stack: Stack) -> None:
    async with grpc.aio.insecure_channel(stack.target) as channel:
        stub = pbg.SchedulerServiceStub(channel)
        for metadata in ((), (("x-api-key", "not-a-key"),)):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.GetTask(
                    pb.GetTaskRequest(task_id="0190d6c4-0000-7000-8000-000000000000"),
                    metadata=metadata,
                    timeout=10,
                )
            assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
    bad = await Client.connect(stack.target, api_key="wrong")
    try:
        with pytest.raises(Unauthenticated):
            await bad.submit("t")
    finally:
        await bad.close()


async def test_tenant_b_cannot_touch_tenant_a_tasks(stack: Stack) -> None:
    a = await stack.client(stack.key_a)
    b = await stack.client(stack.key_b)
    try:
        later = datetime.now(UTC) + timedelta(hours=3)
        task = await a.submit("t", {"secret": 1}, scheduled_at=later)
        with pytest.raises(NotFound):
            await b.get(task.id)
        with pytest.raises(NotFound):
            await b.cancel(task.id)
        with pytest.raises(NotFound):
            await b.redrive(task.id)
        with pytest.raises((NotFound, StaleFencingToken)):
            await b.complete(task.id, task.fencing_token + 1, {"x": 1})
        with pytest.raises((NotFound, StaleFencingToken)):
            await b.fail(task.id, task.fencing_token + 1, "boom")
        assert [t async for t in b.list()] == []
        # Tenant A still sees its task untouched.
        mine = await a.get(task.id)
        assert mine.state is TaskState.SCHEDULED
        assert mine.payload == {"secret": 1}
    finally:
        await a.close()
        await b.close()


async def test_admin_token_is_required(stack: Stack) -> None:
    for token in ("", "wrong-token-wrong-token"):
        admin = await AdminClient.connect(stack.target, admin_token=token)
        try:
            with pytest.raises(Unauthenticated):
                await admin.create_tenant("intruder")
        finally:
            await admin.close()
    # An API key is not an admin token.
    async with grpc.aio.insecure_channel(stack.target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await pbg.AdminServiceStub(channel).CreateTenant(
                pb.CreateTenantRequest(tenant=pb.Tenant(name="x")),
                metadata=(("x-api-key", stack.key_a),),
                timeout=10,
            )
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_admin_disabled_without_token(stack: Stack) -> None:
    server = Server(stack.engine, ServerConfig(listen="127.0.0.1:0"))
    port = await server.start()
    try:
        admin = await AdminClient.connect(f"127.0.0.1:{port}", admin_token="anything-at-all-123")
        try:
            with pytest.raises(PermissionDenied):
                await admin.create_tenant("x")
        finally:
            await admin.close()
    finally:
        await server.stop(0)


async def test_server_stop_is_safe_before_start_and_twice(stack: Stack) -> None:
    engine: Engine = stack.engine
    server = Server(engine, ServerConfig(listen="127.0.0.1:0"))
    await server.stop()
    await server.start()
    await server.stop(0)
    await server.stop(0)
