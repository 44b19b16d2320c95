"""API keys over a real server: scopes per RPC, expiry, revocation (new calls and open
worker streams, with the bound measured), rotation, last use, and what a tenant's admin
key may do (issue 15; docs/keys.md)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import (
    AdminClient,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Scope,
    Unauthenticated,
)
from scheduler.node import Node, NodeConfig
from scheduler.server import ServerConfig
from scheduler.server._auth import PLATFORM_ONLY_RPCS, RPC_SCOPES
from scheduler.types import DEFAULT_SCOPES
from tests.integration.transport.conftest import ADMIN_TOKEN, Stack, engine_config

RECHECK_S = 0.5
"""The stream re-check of these tests' server (the default is 5 s)."""
AUTH_CACHE_S = 1.0
"""The auth cache of these tests' engine (the default is 5 s)."""


@contextlib.asynccontextmanager
async def keyed_stack(url: str, **server: Any) -> AsyncIterator[Stack]:
    """A node with two tenants, a short auth cache and a short stream re-check."""
    cfg = engine_config()
    engine = type(cfg)(**{**_fields(cfg), "auth_cache_s": AUTH_CACHE_S})
    node = Node(
        NodeConfig(
            store_url=url,
            engine=engine,
            server=ServerConfig(
                listen="127.0.0.1:0",
                admin_token=ADMIN_TOKEN,
                stream_key_recheck_s=RECHECK_S,
                **server,
            ),
        )
    )
    try:
        await node.start()
        admin = await AdminClient.connect(node.target, admin_token=ADMIN_TOKEN)
        try:
            a = await admin.create_tenant("tenant-a")
            b = await admin.create_tenant("tenant-b")
            key_a = (await admin.create_api_key(a.id, "a")).secret
            key_b = (await admin.create_api_key(b.id, "b")).secret
            yield Stack(
                node.engine, node.server, node.target, admin, key_a, key_b, str(a.id), str(b.id)
            )
        finally:
            await admin.close()
    finally:
        await node.stop(0)


def _fields(cfg: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.init}


@pytest.fixture(params=["sqlite", "postgres"])
async def kstack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stack]:
    url = (
        f"sqlite:///{tmp_path / 'k.db'}"
        if request.param == "sqlite"
        else str(request.getfixturevalue("pg_dsn"))
    )
    async with keyed_stack(url) as s:
        yield s


def _md(key: str) -> tuple[tuple[str, str], ...]:
    return (("x-api-key", key),)


async def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


async def _open_stream(
    channel: grpc.aio.Channel, key: str, worker_id: str = "w"
) -> grpc.aio.StreamStreamCall[Any, Any]:
    """A worker stream past its hello (the welcome read)."""
    call = pbg.WorkerServiceStub(channel).Connect(metadata=_md(key))  # type: ignore[no-untyped-call]
    await call.write(
        pb.WorkerMessage(hello=pb.Hello(worker_id=worker_id, task_types=["t"], slots=1))
    )
    first = await call.read()
    assert first is not grpc.aio.EOF, await call.details()
    assert first.WhichOneof("kind") == "welcome"
    return call  # type: ignore[no-any-return]


async def _stream_end(call: Any, timeout_s: float) -> tuple[grpc.StatusCode, str, float]:
    """Read until the stream ends; its status and how long that took."""
    t0 = time.monotonic()
    with contextlib.suppress(grpc.aio.AioRpcError):
        async with asyncio.timeout(timeout_s):
            while await call.read() is not grpc.aio.EOF:
                pass
    return await call.code(), await call.details() or "", time.monotonic() - t0


# -- the scope table -----------------------------------------------------------------------
def test_every_rpc_of_the_proto_has_a_scope_or_is_platform_only() -> None:
    for service in ("SchedulerService", "WorkerService", "AdminService"):
        for method in pb.DESCRIPTOR.services_by_name[service].methods:
            assert method.name in RPC_SCOPES or (
                service == "AdminService" and method.name in PLATFORM_ONLY_RPCS
            ), f"{service}.{method.name} has no scope in scheduler.server._auth.RPC_SCOPES"


def _unary_calls() -> list[tuple[str, str, Any]]:
    out = []
    for service in ("SchedulerService", "WorkerService"):
        for method in pb.DESCRIPTOR.services_by_name[service].methods:
            if method.client_streaming or method.server_streaming:
                continue
            request = getattr(pb, method.input_type.name)()
            out.append((service, method.name, request))
    return out


async def test_a_key_without_the_scope_an_rpc_needs_gets_permission_denied_naming_it(
    tmp_path: Path,
) -> None:
    async with keyed_stack(f"sqlite:///{tmp_path / 'k.db'}") as stack:
        keys: dict[frozenset[Scope], str] = {}
        for scope in (Scope.SUBMIT, Scope.READ, Scope.WORK):
            rest = frozenset(set(Scope) - {scope})
            only = frozenset({scope})
            for scopes in (rest, only):
                made = await stack.admin.create_api_key(stack.tenant_a, "s", scopes=scopes)
                keys[scopes] = made.secret
        async with grpc.aio.insecure_channel(stack.target) as channel:
            stubs = {
                "SchedulerService": pbg.SchedulerServiceStub(channel),  # type: ignore[no-untyped-call]
                "WorkerService": pbg.WorkerServiceStub(channel),  # type: ignore[no-untyped-call]
            }
            calls = _unary_calls()
            assert len(calls) >= 18
            for service, name, request in calls:
                scope = RPC_SCOPES[name]
                rpc = getattr(stubs[service], name)
                without = keys[frozenset(set(Scope) - {scope})]
                code, details = await _code(rpc(request, metadata=_md(without), timeout=10))
                assert code is grpc.StatusCode.PERMISSION_DENIED, (name, code, details)
                assert f"'{scope.value}'" in details, (name, details)
                code, details = await _code(
                    rpc(request, metadata=_md(keys[frozenset({scope})]), timeout=10)
                )
                assert code not in (
                    grpc.StatusCode.PERMISSION_DENIED,
                    grpc.StatusCode.UNAUTHENTICATED,
                    grpc.StatusCode.INTERNAL,
                    grpc.StatusCode.UNKNOWN,
                ), (name, code, details)
            # The worker stream needs "work".
            no_work = keys[frozenset(set(Scope) - {Scope.WORK})]
            call = stubs["WorkerService"].Connect(metadata=_md(no_work))
            code, details, _ = await _stream_end(call, 10)
            assert code is grpc.StatusCode.PERMISSION_DENIED
            assert "'work'" in details
            ok = await _open_stream(channel, keys[frozenset({Scope.WORK})])
            ok.cancel()


async def test_a_key_made_without_scopes_has_submit_read_and_work(kstack: Stack) -> None:
    keys = await kstack.admin.list_api_keys(kstack.tenant_a)
    assert [k.scopes for k in keys] == [DEFAULT_SCOPES]
    assert {Scope.SUBMIT, Scope.READ, Scope.WORK} == DEFAULT_SCOPES
    c = await kstack.client(kstack.key_a)
    try:
        task = await c.submit("t", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
        assert (await c.get(task.id)).id == task.id
    finally:
        await c.close()
    # ...and no admin: its own tenant's keys are out of reach.
    admin = await AdminClient.connect(kstack.target, api_key=kstack.key_a)
    try:
        with pytest.raises(PermissionDenied, match="'admin'"):
            await admin.list_api_keys(kstack.tenant_a)
    finally:
        await admin.close()


# -- expiry, revocation, rotation, last use -----------------------------------------------
async def test_an_expired_key_stops_working(kstack: Stack) -> None:
    with pytest.raises(InvalidArgument, match="expires_at"):
        await kstack.admin.create_api_key(
            kstack.tenant_a, "past", expires_at=datetime.now(UTC) - timedelta(seconds=1)
        )
    made = await kstack.admin.create_api_key(
        kstack.tenant_a, "short", expires_at=datetime.now(UTC) + timedelta(seconds=2)
    )
    c = await kstack.client(made.secret)
    try:
        assert [t async for t in c.list()] == []  # works now
        await asyncio.sleep(2.2)
        with pytest.raises(Unauthenticated, match="expired"):
            await c.submit("t")
    finally:
        await c.close()


async def test_a_revoked_key_fails_its_next_call_at_once(kstack: Stack) -> None:
    made = await kstack.admin.create_api_key(kstack.tenant_a, "doomed")
    c = await kstack.client(made.secret)
    try:
        assert [t async for t in c.list()] == []  # verified and cached on this node
        revoked = await kstack.admin.revoke_api_key(made.key_id)
        assert revoked.revoked
        assert revoked.revoked_at is not None
        with pytest.raises(Unauthenticated, match="revoked"):
            await c.submit("t")
        # Revoking twice is no error; the first time stays.
        assert (await kstack.admin.revoke_api_key(made.key_id)).revoked_at == revoked.revoked_at
    finally:
        await c.close()
    with pytest.raises(NotFound):
        await kstack.admin.revoke_api_key(uuid.uuid4())


@pytest.mark.parametrize("where", ["this node", "another node"])
async def test_a_revoked_key_ends_an_open_worker_stream_within_the_bound(
    tmp_path: Path, where: str
) -> None:
    """The bound: ``stream_key_recheck_s`` for a revocation through this node's admin
    API (its cache forgets the key), plus ``auth_cache_s`` for one made elsewhere (here:
    written to the store behind the node's back, as another node's admin API would)."""
    async with keyed_stack(f"sqlite:///{tmp_path / 'k.db'}") as stack:
        made = await stack.admin.create_api_key(stack.tenant_a, "worker")
        async with grpc.aio.insecure_channel(stack.target) as channel:
            call = await _open_stream(channel, made.secret)
            other = await _open_stream(channel, stack.key_a, "w2")  # another key: unaffected
            if where == "this node":
                await stack.admin.revoke_api_key(made.key_id)
                bound = RECHECK_S
            else:
                await stack.engine.store.revoke_api_key(made.key_id, datetime.now(UTC))
                bound = RECHECK_S + AUTH_CACHE_S
            code, details, took = await _stream_end(call, 30)
            print(f"revoked on {where}: stream ended after {took:.2f} s (bound {bound} s)")
            assert code is grpc.StatusCode.UNAUTHENTICATED
            assert "revoked" in details
            # Generous slack for a loaded machine; the bound itself is by construction.
            assert took < bound + 10
            await other.write(pb.WorkerMessage(request_id=1, heartbeat=pb.Heartbeat()))
            reply = await other.read()
            assert reply.result.request_id == 1
            other.cancel()


async def test_an_expired_key_ends_an_open_worker_stream(tmp_path: Path) -> None:
    async with keyed_stack(f"sqlite:///{tmp_path / 'k.db'}") as stack:
        made = await stack.admin.create_api_key(
            stack.tenant_a, "short", expires_at=datetime.now(UTC) + timedelta(seconds=1.5)
        )
        async with grpc.aio.insecure_channel(stack.target) as channel:
            call = await _open_stream(channel, made.secret)
            code, details, took = await _stream_end(call, 30)
            print(f"expired key: stream ended {took:.2f} s after its hello")
            assert code is grpc.StatusCode.UNAUTHENTICATED
            assert "expired" in details


async def test_rotation_keeps_both_keys_for_the_grace_then_only_the_new_one(
    kstack: Stack,
) -> None:
    made = await kstack.admin.create_api_key(
        kstack.tenant_a, "deploy", scopes=[Scope.SUBMIT, Scope.READ]
    )
    rotated = await kstack.admin.rotate_api_key(made.key_id, grace_s=2)
    assert rotated.old.id == made.key_id
    assert rotated.new.rotated_from == made.key_id
    assert rotated.new.name == "deploy"
    assert rotated.new.scopes == {Scope.SUBMIT, Scope.READ}
    assert rotated.old.expires_at is not None
    assert rotated.secret != made.secret
    old = await kstack.client(made.secret)
    new = await kstack.client(rotated.secret)
    try:
        # Both live during the grace.
        assert [t async for t in old.list()] == []
        assert [t async for t in new.list()] == []
        delay = (rotated.old.expires_at - datetime.now(UTC)).total_seconds()
        await asyncio.sleep(max(0.0, delay) + 0.2)
        with pytest.raises(Unauthenticated, match="expired"):
            await old.submit("t")
        task = await new.submit("t", scheduled_at=datetime.now(UTC) + timedelta(hours=1))
        assert (await new.get(task.id)).id == task.id
    finally:
        await old.close()
        await new.close()
    # An expired or revoked key cannot be rotated.
    with pytest.raises(InvalidArgument, match="expired"):
        await kstack.admin.rotate_api_key(made.key_id)
    await kstack.admin.revoke_api_key(rotated.new.id)
    with pytest.raises(InvalidArgument, match="revoked"):
        await kstack.admin.rotate_api_key(rotated.new.id)


async def test_last_used_is_recorded_and_list_never_shows_a_secret(kstack: Stack) -> None:
    made = await kstack.admin.create_api_key(kstack.tenant_a, "used")
    listed = await kstack.admin.list_api_keys(kstack.tenant_a)
    (before,) = [k for k in listed if k.id == made.key_id]
    assert before.last_used_at is None
    c = await kstack.client(made.secret)
    try:
        started = datetime.now(UTC)
        for _ in range(20):  # many calls, one write (at most once a minute per key)
            assert [t async for t in c.list()] == []
    finally:
        await c.close()
    listed = await kstack.admin.list_api_keys(kstack.tenant_a)
    (after,) = [k for k in listed if k.id == made.key_id]
    assert after.last_used_at is not None
    assert started - timedelta(seconds=1) <= after.last_used_at <= datetime.now(UTC)
    # The raw answer carries no secret (nor its hash).
    async with grpc.aio.insecure_channel(kstack.target) as channel:
        raw = await pbg.AdminServiceStub(channel).ListApiKeys(  # type: ignore[no-untyped-call]
            pb.ListApiKeysRequest(tenant_id=kstack.tenant_a),
            metadata=(("x-admin-token", ADMIN_TOKEN),),
            timeout=10,
        )
    blob = raw.SerializeToString()
    for secret in (made.secret, kstack.key_a):
        assert secret.encode() not in blob
    assert "secret" not in {f.name for f in pb.ApiKey.DESCRIPTOR.fields}


# -- a tenant's own admin key --------------------------------------------------------------
async def test_a_tenant_admin_key_manages_its_own_keys_and_no_other_tenant(
    kstack: Stack,
) -> None:
    boss = await kstack.admin.create_api_key(kstack.tenant_a, "boss", scopes=[Scope.ADMIN])
    b_key = (await kstack.admin.list_api_keys(kstack.tenant_b))[0]
    admin = await AdminClient.connect(kstack.target, api_key=boss.secret)
    try:
        # Its own tenant: read it, make, list, rotate and revoke keys.
        assert str((await admin.get_tenant(kstack.tenant_a)).id) == kstack.tenant_a
        made = await admin.create_api_key(kstack.tenant_a, "ci", scopes=[Scope.SUBMIT])
        assert made.key_id in {k.id for k in await admin.list_api_keys(kstack.tenant_a)}
        rotated = await admin.rotate_api_key(made.key_id, grace_s=60)
        assert (await admin.revoke_api_key(rotated.new.id)).revoked
        # Another tenant: nothing.
        with pytest.raises(PermissionDenied, match="administers tenant"):
            await admin.list_api_keys(kstack.tenant_b)
        with pytest.raises(PermissionDenied, match="administers tenant"):
            await admin.create_api_key(kstack.tenant_b, "intruder")
        with pytest.raises(PermissionDenied, match="administers tenant"):
            await admin.get_tenant(kstack.tenant_b)
        with pytest.raises(NotFound):
            await admin.revoke_api_key(b_key.id)
        with pytest.raises(NotFound):
            await admin.rotate_api_key(b_key.id)
        # Platform operations need the admin token.
        with pytest.raises(Unauthenticated, match="admin token"):
            await admin.create_tenant("mine")
        with pytest.raises(Unauthenticated, match="admin token"):
            await admin.update_tenant(kstack.tenant_a, rate_limit_rps=10**6)
        with pytest.raises(Unauthenticated, match="admin token"):
            _ = [t async for t in admin.list_tenants()]
        # An admin-only key does no tenant work.
        c = await kstack.client(boss.secret)
        try:
            with pytest.raises(PermissionDenied, match="'submit'"):
                await c.submit("t")
        finally:
            await c.close()
    finally:
        await admin.close()
    # Tenant B's key is untouched.
    (still,) = [k for k in await kstack.admin.list_api_keys(kstack.tenant_b) if k.id == b_key.id]
    assert not still.revoked
    assert still.expires_at is None


async def test_the_platform_admin_lists_every_tenant_a_page_at_a_time(kstack: Stack) -> None:
    for i in range(3):
        await kstack.admin.create_tenant(f"more-{i}")
    names = [t.name async for t in kstack.admin.list_tenants(page_size=2)]
    assert sorted(names) == sorted(["tenant-a", "tenant-b", "more-0", "more-1", "more-2"])
    with pytest.raises(InvalidArgument, match="page_size"):
        _ = [t async for t in kstack.admin.list_tenants(page_size=5000)]


async def test_an_unknown_scope_is_invalid_argument(kstack: Stack) -> None:
    with pytest.raises(InvalidArgument, match=r"scopes\[1\]"):
        await kstack.admin.create_api_key(kstack.tenant_a, "x", scopes=["read", "root"])


async def test_the_stream_watch_lets_a_good_key_stream_on(tmp_path: Path) -> None:
    async with (
        keyed_stack(f"sqlite:///{tmp_path / 'k.db'}") as stack,
        grpc.aio.insecure_channel(stack.target) as channel,
    ):
        call = await _open_stream(channel, stack.key_a)
        await asyncio.sleep(RECHECK_S * 4)  # several re-checks
        await call.write(pb.WorkerMessage(request_id=7, heartbeat=pb.Heartbeat()))
        reply = await call.read()
        assert reply.result.request_id == 7
        call.cancel()
