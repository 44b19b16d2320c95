"""Limits that protect a server from one caller, over a real server: open worker streams
per tenant, unary calls in flight per key, and failed authentications throttled per
source address (issue 15; docs/keys.md)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import AdminClient, ResourceExhausted, Unauthenticated
from scheduler.server import ServerConfig
from tests.integration.transport.conftest import eventually
from tests.integration.transport.test_keys import _code, _md, _open_stream, _stream_end, keyed_stack


def _url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'l.db'}"


def test_the_limits_are_positive_and_have_defaults() -> None:
    from scheduler import limits

    cfg = ServerConfig()
    assert cfg.max_streams_per_tenant == limits.MAX_STREAMS_PER_TENANT
    assert cfg.max_inflight_calls_per_key == limits.MAX_INFLIGHT_CALLS_PER_KEY
    assert cfg.auth_failures_per_source == limits.AUTH_FAILURES_PER_SOURCE
    for name in ("max_streams_per_tenant", "auth_failures_per_source", "stream_key_recheck_s"):
        with pytest.raises(ValueError, match=name):
            ServerConfig(**{name: 0})


async def test_streams_per_tenant_are_capped_and_named(tmp_path: Path) -> None:
    async with (
        keyed_stack(_url(tmp_path), max_streams_per_tenant=2) as stack,
        grpc.aio.insecure_channel(stack.target) as channel,
    ):
        second_key = (await stack.admin.create_api_key(stack.tenant_a, "a2")).secret
        one = await _open_stream(channel, stack.key_a, "w1")
        two = await _open_stream(channel, second_key, "w2")  # the cap is per tenant
        call = pbg.WorkerServiceStub(channel).Connect(metadata=_md(stack.key_a))  # type: ignore[no-untyped-call]
        # The refusal can end the stream before the hello is written (the write raises).
        with contextlib.suppress(grpc.aio.AioRpcError):
            await call.write(pb.WorkerMessage(hello=pb.Hello(worker_id="w3", task_types=["t"])))
        code, details, _ = await _stream_end(call, 10)
        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_streams_per_tenant" in details
        assert "2 worker streams" in details
        other = await _open_stream(channel, stack.key_b, "b1")  # another tenant: its own cap
        one.cancel()

        async def opens() -> bool:
            c = pbg.WorkerServiceStub(channel).Connect(metadata=_md(stack.key_a))  # type: ignore[no-untyped-call]
            try:
                # Until the server has seen the cancel, it refuses the stream, which can
                # end before the hello is written: the write raises then, not the read.
                await c.write(pb.WorkerMessage(hello=pb.Hello(worker_id="w4", task_types=["t"])))
                first = await c.read()
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                return False
            finally:
                c.cancel()
            return first is not grpc.aio.EOF and first.WhichOneof("kind") == "welcome"

        # The closed stream gave its place back.
        assert await eventually(opens, lambda ok: ok, timeout_s=10, interval_s=0.2)
        two.cancel()
        other.cancel()


async def test_unary_calls_in_flight_per_key_are_capped_and_named(tmp_path: Path) -> None:
    async with keyed_stack(_url(tmp_path), max_inflight_calls_per_key=2) as stack:
        engine: Any = stack.engine
        real = engine.store.get_task
        release = asyncio.Event()
        waiting = 0

        async def slow_get(tenant: uuid.UUID, task_id: uuid.UUID) -> Any:
            nonlocal waiting
            waiting += 1
            await release.wait()
            return await real(tenant, task_id)

        engine.store.get_task = slow_get
        other_key = (await stack.admin.create_api_key(stack.tenant_a, "a2")).secret
        async with grpc.aio.insecure_channel(stack.target) as channel:
            stub = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            req = pb.GetTaskRequest(task_id=str(uuid.uuid4()))
            held = [
                asyncio.ensure_future(_code(stub.GetTask(req, metadata=_md(stack.key_a))))
                for _ in range(2)
            ]

            async def blocked() -> int:
                return waiting

            await eventually(blocked, lambda n: n == 2, timeout_s=10)
            code, details = await _code(stub.GetTask(req, metadata=_md(stack.key_a), timeout=10))
            assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_inflight_calls_per_key" in details
            # The cap is per key: another key of the same tenant is served.
            engine.store.get_task = real
            code, _ = await _code(stub.GetTask(req, metadata=_md(other_key), timeout=10))
            assert code is grpc.StatusCode.NOT_FOUND
            release.set()
            assert [c for c, _ in await asyncio.gather(*held)] == [grpc.StatusCode.NOT_FOUND] * 2
            # Calls that ended (with an error, too) gave their places back.
            for _ in range(5):
                code, _ = await _code(stub.GetTask(req, metadata=_md(stack.key_a), timeout=10))
                assert code is grpc.StatusCode.NOT_FOUND


async def test_failed_authentications_are_throttled_per_source(tmp_path: Path) -> None:
    async with keyed_stack(_url(tmp_path), auth_failures_per_source=3, auth_throttle_s=2.0) as s:
        store: Any = s.engine.store
        real_lookup = store.api_key_for_hash
        lookups = 0

        async def counting(digest: bytes) -> Any:
            nonlocal lookups
            lookups += 1
            return await real_lookup(digest)

        store.api_key_for_hash = counting
        fresh = (await s.admin.create_api_key(s.tenant_a, "fresh")).secret  # never used yet
        async with grpc.aio.insecure_channel(s.target) as channel:
            stub = pbg.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            req = pb.ListTasksRequest()
            code, _ = await _code(stub.ListTasks(req, metadata=_md(s.key_a), timeout=10))
            assert code is grpc.StatusCode.OK  # key_a is now verified on this node
            for i in range(3):
                code, _ = await _code(stub.ListTasks(req, metadata=_md(f"tw_bad{i}"), timeout=10))
                assert code is grpc.StatusCode.UNAUTHENTICATED
            before = lookups
            for secret in ("tw_bad9", fresh):
                code, details = await _code(stub.ListTasks(req, metadata=_md(secret), timeout=10))
                assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "auth_failures_per_source" in details
                assert "retry in" in details
            assert lookups == before  # refused without touching the store
            # A key this node verified lately still passes.
            code, _ = await _code(stub.ListTasks(req, metadata=_md(s.key_a), timeout=10))
            assert code is grpc.StatusCode.OK
            await asyncio.sleep(2.2)  # the throttle lapses
            code, _ = await _code(stub.ListTasks(req, metadata=_md(fresh), timeout=10))
            assert code is grpc.StatusCode.OK


async def test_wrong_admin_tokens_are_throttled_too(tmp_path: Path) -> None:
    async with keyed_stack(_url(tmp_path), auth_failures_per_source=3, auth_throttle_s=2.0) as s:
        for i in range(3):
            wrong = await AdminClient.connect(s.target, admin_token=f"wrong-token-{i:012d}")
            try:
                with pytest.raises(Unauthenticated, match="invalid admin token"):
                    await wrong.create_tenant("x")
            finally:
                await wrong.close()
        # Even the right token is refused while the source is throttled: a guesser
        # learns nothing from the answer.
        with pytest.raises(ResourceExhausted, match="auth_failures_per_source"):
            await s.admin.create_tenant("x")
        await asyncio.sleep(2.2)
        assert (await s.admin.create_tenant("x")).name == "x"
