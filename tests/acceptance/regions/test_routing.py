"""Routing home across two regions (issue 16): real ``tickwheel serve`` processes of
regions ``us`` and ``eu``, each on a PostgreSQL server of its own, one directory.

- a tenant of EU created and used through US lives only in EU's database, and its task
  runs there;
- an EU worker pointed at US is sent home (WRONG_REGION) and works;
- a key of a region that does not exist gets UNKNOWN_REGION, never INTERNAL;
- a forwarded call's errors, details and deadline are the home region's; the loop guard
  refuses a second forward;
- the SDKs go straight to their key's region and fail over to its next endpoint;
- and, without any server, the routing decision itself.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from scheduler._errors import FailedPrecondition, InvalidArgument, UnknownRegion
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import AdminClient, Client
from scheduler.engine import EngineConfig, SubmitSpec
from scheduler.regions import Region, RegionDirectory, key_region
from scheduler.server._regions import (
    FORWARDED_FROM_HEADER,
    REGION_HEADER,
    forward_metadata,
    relayed_trailers,
    static_home,
)
from scheduler.states import TaskState
from scheduler.testing import start_local
from scheduler.wire import STATUS_DETAILS_KEY
from scheduler.worker import ClusterWorker, TaskContext, Worker
from tests.support.processes import ADMIN_TOKEN, WorkerProcess, run_cli
from tests.support.regions import Regions, start_regions
from tests.support.servers import PostgresServer, free_port

pytestmark = pytest.mark.postgres

HANDLER = {"work": "tests.acceptance.handlers:work"}


@dataclass
class Tenants:
    """A tenant of each region, made through the *other* region's node."""

    eu_id: uuid.UUID
    eu_key: str
    us_id: uuid.UUID
    us_key: str


@pytest.fixture(scope="module")
def regions(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Regions]:
    """US on the session's PostgreSQL, EU on one of its own; one node each."""
    with start_regions(
        tmp_path_factory.mktemp("regions"), ("us", "eu"), postgres={"us": postgres_server}
    ) as started:
        yield started


async def _admin_call(target: str, method: str, request: Any, region: str | None = None) -> Any:
    metadata = [("x-admin-token", ADMIN_TOKEN)]
    if region:
        metadata.append((REGION_HEADER, region))
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pbg.AdminServiceStub(channel)  # type: ignore[no-untyped-call]
        return await getattr(stub, method)(request, metadata=metadata, timeout=10)


@pytest.fixture(scope="module")
def tenants(regions: Regions) -> Tenants:
    async def make() -> Tenants:
        us = regions["us"].target
        # CreateTenant through US naming EU: forwarded, so written in EU only.
        request = pb.CreateTenantRequest(tenant=pb.Tenant(name="eu-t", home_region="eu"))
        eu_tenant = (await _admin_call(us, "CreateTenant", request)).tenant
        # Its key, through US with the admin token and x-tickwheel-region.
        eu_key = await _admin_call(
            us, "CreateApiKey", pb.CreateApiKeyRequest(tenant_id=eu_tenant.id, name="k"), "eu"
        )
        # A tenant created without a home: the creating node's region.
        async with await AdminClient.connect(us, admin_token=ADMIN_TOKEN) as admin:
            us_tenant = await admin.create_tenant("us-t")
            us_key = (await admin.create_api_key(us_tenant.id, "k")).secret
        assert (eu_tenant.home_region, us_tenant.home_region) == ("eu", "us")
        return Tenants(uuid.UUID(eu_tenant.id), eu_key.secret, us_tenant.id, us_key)

    return asyncio.run(make())


async def _count(dsn: str, sql: str, *args: Any) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql, *args))
    finally:
        await conn.close()


def _status(exc: grpc.aio.AioRpcError) -> status_pb2.Status:
    for k, v in exc.trailing_metadata() or ():
        if k == STATUS_DETAILS_KEY:
            return status_pb2.Status.FromString(v)
    raise AssertionError(f"no {STATUS_DETAILS_KEY} in {exc.trailing_metadata()!r}")


def _error_info(exc: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    for detail in _status(exc).details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    raise AssertionError("no ErrorInfo")


@pytest.fixture
async def channels(regions: Regions) -> AsyncIterator[dict[str, grpc.aio.Channel]]:
    opened = {name: grpc.aio.insecure_channel(regions[name].target) for name in ("us", "eu")}
    try:
        yield opened
    finally:
        for channel in opened.values():
            await channel.close(None)


# -- real processes --------------------------------------------------------------------


async def test_keys_name_their_region_and_tenant_rows_live_only_at_home(
    regions: Regions, tenants: Tenants
) -> None:
    assert key_region(tenants.eu_key) == "eu"
    assert key_region(tenants.us_key) == "us"
    tenant_sql = "SELECT count(*) FROM tenants WHERE id = $1"
    assert await _count(regions["eu"].admin_dsn, tenant_sql, tenants.eu_id) == 1
    assert await _count(regions["us"].admin_dsn, tenant_sql, tenants.eu_id) == 0
    assert await _count(regions["us"].admin_dsn, tenant_sql, tenants.us_id) == 1
    assert await _count(regions["eu"].admin_dsn, tenant_sql, tenants.us_id) == 0


async def test_eu_task_submitted_in_us_is_stored_and_completes_only_in_eu(
    regions: Regions, tenants: Tenants, tmp_path: Path
) -> None:
    worker = WorkerProcess(
        tmp_path / "w", regions["eu"].target, tenants.eu_key, HANDLER, name="eu-home"
    )
    regions.group.procs.append(worker)
    worker.start()
    try:
        async with await Client.connect(regions["us"].target, api_key=tenants.eu_key) as client:
            task = await client.submit("work", {"n": 1})
            done = await client.wait(task.id, timeout_s=20)
        assert done.state is TaskState.COMPLETED
        assert done.result is not None
        assert done.result.get("worker") == "eu-home"
        task_sql = "SELECT count(*) FROM tasks WHERE tenant_id = $1"
        assert await _count(regions["eu"].admin_dsn, task_sql, tenants.eu_id) >= 1
        assert await _count(regions["us"].admin_dsn, task_sql, tenants.eu_id) == 0
        ledger = "SELECT count(*) FROM task_transitions WHERE task_id = $1"
        assert await _count(regions["us"].admin_dsn, ledger, task.id) == 0
    finally:
        worker.stop()


async def test_eu_worker_pointed_at_us_is_sent_home_and_works(
    regions: Regions, tenants: Tenants, tmp_path: Path
) -> None:
    worker = WorkerProcess(
        tmp_path / "w", regions["us"].target, tenants.eu_key, HANDLER, name="eu-lost"
    )
    regions.group.procs.append(worker)
    worker.start()  # waits for "worker eu-lost connected": after the redirect
    try:
        assert worker.log_has(r"lives in region eu: reconnecting to " + regions["eu"].target)
        async with await Client.connect(regions["eu"].target, api_key=tenants.eu_key) as client:
            task = await client.submit("work", {"n": 2})
            done = await client.wait(task.id, timeout_s=20)
        assert done.state is TaskState.COMPLETED
        assert done.result is not None
        assert done.result.get("worker") == "eu-lost"
    finally:
        worker.stop()


async def test_a_stream_in_the_wrong_region_gets_wrong_region_with_the_endpoints(
    regions: Regions, tenants: Tenants, channels: dict[str, grpc.aio.Channel]
) -> None:
    stub = pbg.WorkerServiceStub(channels["us"])  # type: ignore[no-untyped-call]
    call = stub.Connect(metadata=(("x-api-key", tenants.eu_key),))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call.read()
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    info = _error_info(caught.value)
    assert (info.reason, info.domain) == ("WRONG_REGION", "tickwheel.dev")
    assert dict(info.metadata) == {"region": "eu", "endpoints": ",".join(regions["eu"].endpoints)}


async def test_a_key_of_a_region_that_does_not_exist_gets_a_clear_error(
    regions: Regions, channels: dict[str, grpc.aio.Channel]
) -> None:
    key = "tw_mars.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    sched = pbg.SchedulerServiceStub(channels["us"])  # type: ignore[no-untyped-call]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await sched.GetTask(
            pb.GetTaskRequest(task_id=str(uuid.uuid4())), metadata=(("x-api-key", key),), timeout=10
        )
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "x-api-key: unknown region 'mars' (known: eu, us)"
    info = _error_info(caught.value)
    assert info.reason == "UNKNOWN_REGION"
    assert info.metadata["region"] == "mars"
    assert info.metadata["known"] == "eu, us"
    # The worker stream, and the SDK's typed error.
    worker = pbg.WorkerServiceStub(channels["eu"])  # type: ignore[no-untyped-call]
    with pytest.raises(grpc.aio.AioRpcError) as streamed:
        await worker.Connect(metadata=(("x-api-key", key),)).read()
    assert streamed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    async with await Client.connect(regions["eu"].target, api_key=key) as client:
        with pytest.raises(UnknownRegion) as typed:
            await client.get(uuid.uuid4())
    assert typed.value.field == "x-api-key"
    assert typed.value.region == "mars"
    # CreateTenant naming an unknown home.
    with pytest.raises(grpc.aio.AioRpcError) as created:
        await _admin_call(
            regions["us"].target,
            "CreateTenant",
            pb.CreateTenantRequest(tenant=pb.Tenant(name="x", home_region="xx")),
        )
    assert created.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert created.value.details() == "tenant.home_region: unknown region 'xx' (known: eu, us)"


async def test_the_home_regions_errors_come_back_unchanged(
    regions: Regions, tenants: Tenants, channels: dict[str, grpc.aio.Channel]
) -> None:
    request = pb.GetTaskRequest(task_id=str(uuid.uuid4()))
    metadata = (("x-api-key", tenants.eu_key),)
    answers = []
    for region in ("us", "eu"):  # through US (forwarded), then at home
        sched = pbg.SchedulerServiceStub(channels[region])  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await sched.GetTask(request, metadata=metadata, timeout=10)
        answers.append(caught.value)
    forwarded, home = answers
    assert forwarded.code() is home.code() is grpc.StatusCode.NOT_FOUND
    assert forwarded.details() == home.details() == f"task {request.task_id} not found"
    assert _status(forwarded) == _status(home)
    assert _error_info(forwarded).reason == "NOT_FOUND"


async def test_a_forward_keeps_the_callers_deadline(
    regions: Regions, tenants: Tenants, channels: dict[str, grpc.aio.Channel]
) -> None:
    async with await Client.connect(regions["eu"].target, api_key=tenants.eu_key) as client:
        later = await client.submit(
            "never-run", {}, scheduled_at=datetime.now(UTC) + timedelta(hours=2)
        )
    sched = pbg.SchedulerServiceStub(channels["us"])  # type: ignore[no-untyped-call]
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        # The home would hold this long poll 30 s; the caller gave 1 s.
        await sched.WaitTask(
            pb.WaitTaskRequest(task_id=str(later.id), timeout_s=30),
            metadata=(("x-api-key", tenants.eu_key),),
            timeout=1.0,
        )
    assert caught.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 10  # the forward did not outlive the caller


async def _copy_rows(src: str, dst: str, table: str, tenant_column: str, tenant_id: Any) -> None:
    """Copy ``table``'s rows of one tenant between two regions' databases (as a move
    would), keeping every column."""
    source, target = await asyncpg.connect(src), await asyncpg.connect(dst)
    try:
        for row in await source.fetch(
            f"SELECT * FROM {table} WHERE {tenant_column} = $1", tenant_id
        ):
            columns = list(row.keys())
            marks = ", ".join(f"${i + 1}" for i in range(len(columns)))
            await target.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", *row.values()
            )
    finally:
        await source.close()
        await target.close()


async def test_the_loop_guard_refuses_a_second_forward(
    regions: Regions, channels: dict[str, grpc.aio.Channel]
) -> None:
    # A tenant both regions hold, each saying the other is its home (a move gone wrong).
    us, eu = regions["us"], regions["eu"]
    async with await AdminClient.connect(us.target, admin_token=ADMIN_TOKEN) as admin:
        split = await admin.create_tenant("split")
        key = (await admin.create_api_key(split.id, "k")).secret
    await _copy_rows(us.admin_dsn, eu.admin_dsn, "tenants", "id", split.id)
    await _copy_rows(us.admin_dsn, eu.admin_dsn, "api_keys", "tenant_id", split.id)
    conn = await asyncpg.connect(us.admin_dsn)
    try:
        await conn.execute("UPDATE tenants SET home_region = 'eu' WHERE id = $1", split.id)
    finally:
        await conn.close()
    sched = pbg.SchedulerServiceStub(channels["us"])  # type: ignore[no-untyped-call]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        # US forwards to EU (the tenant's home, says US); EU would send it back.
        await sched.GetTask(
            pb.GetTaskRequest(task_id=str(uuid.uuid4())), metadata=(("x-api-key", key),), timeout=10
        )
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details() == (
        f"{FORWARDED_FROM_HEADER}: region 'us' forwarded this call to region 'eu', which "
        "would forward it again to region 'us': the regions disagree about its home (their "
        "directories or the tenant's home differ); not forwarded"
    )
    assert _error_info(caught.value).metadata["field"] == FORWARDED_FROM_HEADER


async def test_the_sdks_go_to_their_keys_region_and_fail_over_to_its_next_endpoint(
    regions: Regions, tenants: Tenants
) -> None:
    dead = f"127.0.0.1:{free_port()}"  # listed first: nothing answers there
    directory = RegionDirectory(
        {
            "us": Region("us", regions["us"].endpoints),
            "eu": Region("eu", (dead, *regions["eu"].endpoints)),
        }
    )
    ran: list[uuid.UUID] = []

    async def work(ctx: TaskContext) -> dict[str, Any]:
        ran.append(ctx.task_id)
        return {"ok": True}

    worker = Worker(api_key=tenants.eu_key, regions=directory, handlers={"sdk-work": work})
    running = asyncio.create_task(worker.run(), name="region-sdk-worker")
    try:
        async with await Client.connect(api_key=tenants.eu_key, regions=directory) as client:
            task = await client.submit("sdk-work", {})
            done = await client.wait(task.id, timeout_s=20)
            # Every later call of this client goes to the endpoint that answered.
            assert (await client.get(task.id)).state is TaskState.COMPLETED
        assert done.state is TaskState.COMPLETED
        assert ran == [task.id]
    finally:
        await worker.shutdown(grace_s=2)
        await running


async def test_a_cluster_worker_seeds_from_its_keys_region_past_a_dead_endpoint(
    regions: Regions, tenants: Tenants
) -> None:
    """Regions choose the cluster (the eu endpoints, the dead one skipped), members
    choose the nodes of that cluster the worker streams to (issue 17)."""
    dead = f"127.0.0.1:{free_port()}"
    directory = RegionDirectory(
        {
            "us": Region("us", regions["us"].endpoints),
            "eu": Region("eu", (dead, *regions["eu"].endpoints)),
        }
    )
    ran: list[uuid.UUID] = []

    async def work(ctx: TaskContext) -> dict[str, Any]:
        ran.append(ctx.task_id)
        return {"ok": True}

    worker = ClusterWorker(
        None, api_key=tenants.eu_key, regions=directory, handlers={"sdk-work": work}
    )
    running = asyncio.create_task(worker.run(), name="region-cluster-worker")
    try:
        async with await Client.connect(api_key=tenants.eu_key, regions=directory) as client:
            task = await client.submit("sdk-work", {})
            done = await client.wait(task.id, timeout_s=20)
        assert done.state is TaskState.COMPLETED
        assert ran == [task.id]
        assert set(worker.members.values()) <= set(regions["eu"].endpoints)
    finally:
        await worker.shutdown(grace_s=2)
        await running


async def test_the_cli_creates_a_tenant_at_home_and_its_worker_follows_the_directory(
    regions: Regions, tmp_path: Path
) -> None:
    us, eu = regions["us"], regions["eu"]
    out = await asyncio.to_thread(
        run_cli,
        [
            "tenants", "create", "cli-t", "--home-region", "eu",
            "--target", us.target, "--admin-token", ADMIN_TOKEN, "--json",
        ],
    )  # fmt: skip
    tenant = json.loads(out)
    assert tenant["home_region"] == "eu"
    tenant_sql = "SELECT count(*) FROM tenants WHERE id = $1"
    assert await _count(eu.admin_dsn, tenant_sql, uuid.UUID(tenant["id"])) == 1
    assert await _count(us.admin_dsn, tenant_sql, uuid.UUID(tenant["id"])) == 0
    async with await AdminClient.connect(us.target, admin_token=ADMIN_TOKEN, region="eu") as admin:
        key = (await admin.create_api_key(tenant["id"], "k")).secret
    # EU's first endpoint answers nothing; --target names US: the worker goes to EU's next.
    dead = f"127.0.0.1:{free_port()}"
    directory = f"us={us.target},eu={dead}|{eu.target}"
    worker = WorkerProcess(
        tmp_path / "w", us.target, key, HANDLER, name="cli-w", extra_args=("--regions", directory)
    )
    regions.group.procs.append(worker)
    worker.start()
    try:
        assert worker.log_has(rf"{dead} is unreachable; trying {eu.target}")
        assert worker.log_has(rf"worker cli-w connected .*server {eu.target}\)")
        async with await Client.connect(us.target, api_key=key) as client:
            task = await client.submit("work", {})
            done = await client.wait(task.id, timeout_s=20)
        assert done.state is TaskState.COMPLETED
    finally:
        worker.stop()


async def test_a_node_never_writes_a_tenant_of_another_region() -> None:
    """Under the routing (here: a node without a directory, so nothing is routed), the
    engine itself refuses writes of a tenant whose home is elsewhere."""
    async with start_local(engine=EngineConfig(region="us")) as env:
        assert env.api_key.startswith("tw_us.")
        assert (await env.client.submit("t", {})).state is TaskState.PRELOADED
        await env.node.store.update_tenant(env.tenant_id, {"home_region": "eu"})
        env.engine.tenancy.forget_home(env.tenant_id)
        with pytest.raises(
            FailedPrecondition, match="lives in region 'eu', not in this region 'us'"
        ):
            await env.client.submit("t", {})
        with pytest.raises(FailedPrecondition):
            await env.engine.submit(env.tenant_id, [SubmitSpec(type="t")])
        assert len([t async for t in env.client.list()]) == 1  # reads still answer


# -- the routing decision, no server -------------------------------------------------

DIRECTORY = RegionDirectory({"us": Region("us", ("u:1",)), "eu": Region("eu", ("e:1", "e:2"))})


def _home(method: str, metadata: list[tuple[str, str]], request: bytes = b"") -> str | None:
    return static_home(method, metadata, request, here="us", directory=DIRECTORY)


def test_a_key_names_its_home_and_a_local_key_is_looked_up() -> None:
    assert _home("GetTask", [("x-api-key", "tw_eu.abc")]) == "eu"
    # Forwarded here by the key's own region (a moved tenant): looked up here.
    assert _home("GetTask", [("x-api-key", "tw_eu.a"), (FORWARDED_FROM_HEADER, "eu")]) is None
    assert _home("GetTask", [("x-api-key", "tw_eu.a"), (FORWARDED_FROM_HEADER, "ap")]) == "eu"
    assert _home("GetTask", [("x-api-key", "tw_us.abc")]) is None  # its tenant's home
    assert _home("GetTask", [("x-api-key", "tw_oldkeywithoutregion")]) is None
    # A key of a single-region set-up (region "local") belongs where it is held.
    assert _home("GetTask", [("x-api-key", "tw_local.abc")]) is None
    with pytest.raises(UnknownRegion, match=r"x-api-key: unknown region 'ap' \(known: eu, us\)"):
        _home("GetTask", [("x-api-key", "tw_ap.abc")])


def test_the_admin_token_goes_where_its_header_or_the_new_tenant_says() -> None:
    admin = [("x-admin-token", "t" * 20)]
    assert _home("ListTenants", admin) == "us"
    assert _home("ListTenants", [*admin, (REGION_HEADER, "eu")]) == "eu"
    with pytest.raises(UnknownRegion):
        _home("ListTenants", [*admin, (REGION_HEADER, "ap")])
    with pytest.raises(InvalidArgument, match=REGION_HEADER):
        _home("ListTenants", [*admin, (REGION_HEADER, "Not A Region")])
    create = pb.CreateTenantRequest(tenant=pb.Tenant(name="t", home_region="eu"))
    assert _home("CreateTenant", admin, create.SerializeToString()) == "eu"
    plain = pb.CreateTenantRequest(tenant=pb.Tenant(name="t")).SerializeToString()
    assert _home("CreateTenant", [*admin, (REGION_HEADER, "eu")], plain) == "eu"
    assert _home("CreateTenant", admin, b"\xff\xff not a message") == "us"
    bad = pb.CreateTenantRequest(tenant=pb.Tenant(name="t", home_region="x" * 65))
    with pytest.raises(InvalidArgument, match=r"tenant\.home_region"):
        _home("CreateTenant", admin, bad.SerializeToString())
    assert _home("GetTask", []) == "us"  # no credentials: answered here
    # An AdminService call with both goes by the token (as the service does).
    both = [*admin, ("x-api-key", "tw_eu.k")]
    assert _home("GetTenant", both) == "eu"
    assert (
        static_home("GetTenant", both, b"", here="us", directory=DIRECTORY, admin_wins=True) == "us"
    )


def test_without_a_directory_only_another_regions_key_is_refused() -> None:
    empty = RegionDirectory()
    assert (
        static_home("GetTask", [("x-api-key", "tw_us.a")], b"", here="us", directory=empty) is None
    )
    with pytest.raises(UnknownRegion, match=r"\(known: us\)"):
        static_home("GetTask", [("x-api-key", "tw_eu.a")], b"", here="us", directory=empty)


def test_a_forward_carries_the_callers_metadata_and_where_it_came_from() -> None:
    md = [
        (":authority", "x"),
        ("user-agent", "grpc-python"),
        ("grpc-timeout", "1S"),
        ("te", "trailers"),
        ("x-api-key", "tw_eu.k"),
        ("traceparent", "00-abc"),
        ("x-bin", b"\x00"),
        (FORWARDED_FROM_HEADER, "spoofed"),
    ]
    assert forward_metadata(md, "us") == (
        ("x-api-key", "tw_eu.k"),
        ("traceparent", "00-abc"),
        ("x-bin", b"\x00"),
        (FORWARDED_FROM_HEADER, "us"),
    )
    trailers = [("grpc-status", "5"), (STATUS_DETAILS_KEY, b"d"), ("x-extra", "1")]
    assert relayed_trailers(trailers) == [(STATUS_DETAILS_KEY, b"d"), ("x-extra", "1")]
