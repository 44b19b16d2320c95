"""CountTasks, GetForecast, ListWorkers, the ListTasks filters and the admin token acting
for a tenant, over the real engine on SQLite and on PostgreSQL (issue 18)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import Client, Pool, Task, TaskSpec, TaskState
from scheduler.server import _convert as conv
from tests.integration.transport.conftest import (
    ADMIN_TOKEN,
    Stack,
    engine_config,
    eventually,
    running_stack,
)
from tests.integration.transport.test_stream_items import Wire

_POOL = {Pool.CRITICAL: pb.POOL_CRITICAL, Pool.STANDARD: pb.POOL_STANDARD, Pool.BULK: pb.POOL_BULK}
_STATE = {s: pb.TaskState.Value(f"TASK_STATE_{s.name}") for s in TaskState}


@pytest.fixture(params=["sqlite", "postgres"])
async def any_stack(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stack]:
    """The in-process stack on each store."""
    if request.param == "sqlite":
        url = "sqlite:///" + str(tmp_path / "t.db")
    else:
        url = request.getfixturevalue("pg_dsn")
    async with running_stack(url) as s:
        yield s


class Api:
    """The SchedulerService stub with one caller's credentials."""

    def __init__(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = pbg.SchedulerServiceStub(channel)
        self._md = metadata

    async def __call__(self, method: str, request: Any) -> Any:
        return await getattr(self._stub, method)(request, metadata=self._md)


@contextlib.asynccontextmanager
async def apis(stack: Stack) -> AsyncIterator[dict[str, Api]]:
    """Callers: tenant A's key, B's key, the admin token alone, and acting for A or B."""
    async with grpc.aio.insecure_channel(stack.target) as channel:
        admin = ("x-admin-token", ADMIN_TOKEN)
        yield {
            "a": Api(channel, (("x-api-key", stack.key_a),)),
            "b": Api(channel, (("x-api-key", stack.key_b),)),
            "admin": Api(channel, (admin,)),
            "admin_a": Api(channel, (admin, ("x-tenant-id", stack.tenant_a))),
            "admin_b": Api(channel, (admin, ("x-tenant-id", stack.tenant_b))),
        }


def _groups(resp: pb.CountTasksResponse) -> dict[tuple[str, int, str, int], int]:
    return {(c.tenant_id, c.state, c.type, c.pool): c.count for c in resp.counts}


async def _listed(api: Api, **fields: Any) -> list[pb.Task]:
    out: list[pb.Task] = []
    token = ""
    while True:
        page = await api("ListTasks", pb.ListTasksRequest(page_token=token, **fields))
        out.extend(page.tasks)
        token = page.next_page_token
        if not token:
            return out


async def _mixed(client: Client, when: datetime) -> list[Task]:
    """Tasks of several types, pools and states."""
    specs = [
        TaskSpec(type="email", payload={"i": i}, scheduled_at=when + timedelta(minutes=i), pool=p)
        for i, p in enumerate([Pool.CRITICAL, Pool.CRITICAL, Pool.STANDARD, Pool.BULK, Pool.BULK])
    ]
    specs += [
        TaskSpec(type="report", scheduled_at=when, pool=Pool.BULK, idempotency_key=f"r-{i}")
        for i in range(3)
    ]
    tasks = await client.submit_many(specs)
    await client.cancel(tasks[0].id)
    await client.cancel(tasks[5].id)
    return tasks


async def test_counts_equal_what_list_tasks_returns(any_stack: Stack) -> None:
    when = datetime.now(UTC) + timedelta(hours=2)
    a, b = await any_stack.client(any_stack.key_a), await any_stack.client(any_stack.key_b)
    try:
        await _mixed(a, when)
        await b.submit("other", {}, scheduled_at=when, pool=Pool.CRITICAL)
    finally:
        await a.close()
        await b.close()
    async with apis(any_stack) as api:
        resp = await api["a"]("CountTasks", pb.CountTasksRequest())
        listed = await _listed(api["a"])
        expect = collections.Counter(("", t.state, t.type, t.pool) for t in listed)
        assert _groups(resp) == dict(expect)
        assert resp.total == len(listed) == 8
        assert not resp.truncated
        assert resp.as_of.seconds > 0
        assert [(c.state, c.type, c.pool) for c in resp.counts] == sorted(
            (c.state, c.type, c.pool) for c in resp.counts
        )
        # The same filter on both: the counts equal the pages.
        cases: list[dict[str, Any]] = [
            {"states": [pb.TASK_STATE_SCHEDULED]},
            {"pools": [pb.POOL_BULK]},
            {"type": "email", "pools": [pb.POOL_CRITICAL, pb.POOL_BULK]},
            {"states": [pb.TASK_STATE_CANCELLED], "type": "report"},
            {"scheduled_from": conv.from_datetime(when + timedelta(minutes=2))},
            {"scheduled_to": conv.from_datetime(when + timedelta(minutes=2))},
        ]
        for case in cases:
            counted = await api["a"](
                "CountTasks", pb.CountTasksRequest(filter=pb.TaskFilter(**case))
            )
            rows = await _listed(api["a"], **case)
            assert counted.total == len(rows), case
            assert sum(c.count for c in counted.counts) == len(rows), case
            assert _groups(counted) == dict(
                collections.Counter(("", t.state, t.type, t.pool) for t in rows)
            ), case


async def test_count_and_forecast_are_per_tenant_and_the_admin_sees_all(any_stack: Stack) -> None:
    when = datetime.now(UTC) + timedelta(hours=2)  # past the pre-load horizon: SCHEDULED
    a, b = await any_stack.client(any_stack.key_a), await any_stack.client(any_stack.key_b)
    try:
        await a.submit("a", {}, scheduled_at=when, strict_timing=True)
        await a.submit("a", {}, scheduled_at=when, strict_timing=True, idempotency_key="2")
        await b.submit("b", {}, scheduled_at=when, strict_timing=True, pool=Pool.BULK)
    finally:
        await a.close()
        await b.close()
    ta, tb = any_stack.tenant_a, any_stack.tenant_b
    async with apis(any_stack) as api:
        only_a = await api["a"]("CountTasks", pb.CountTasksRequest())
        assert _groups(only_a) == {("", pb.TASK_STATE_SCHEDULED, "a", pb.POOL_STANDARD): 2}
        only_b = await api["b"]("CountTasks", pb.CountTasksRequest())
        assert _groups(only_b) == {("", pb.TASK_STATE_SCHEDULED, "b", pb.POOL_BULK): 1}
        every = await api["admin"]("CountTasks", pb.CountTasksRequest())
        assert _groups(every) == {
            (ta, pb.TASK_STATE_SCHEDULED, "a", pb.POOL_STANDARD): 2,
            (tb, pb.TASK_STATE_SCHEDULED, "b", pb.POOL_BULK): 1,
        }
        assert every.total == 3
        acting = await api["admin_b"]("CountTasks", pb.CountTasksRequest())
        assert _groups(acting) == _groups(only_b)

        def firing(resp: pb.GetForecastResponse) -> dict[int, int]:
            out: dict[int, int] = collections.Counter()
            for bk in resp.buckets:
                out[bk.pool] += bk.firing
            return dict(out)

        req = pb.GetForecastRequest(
            start=conv.from_datetime(when - timedelta(minutes=30)), buckets=60
        )
        fa = await api["a"]("GetForecast", req)
        assert firing(fa) == {pb.POOL_CRITICAL: 0, pb.POOL_STANDARD: 2, pb.POOL_BULK: 0}
        fb = await api["b"]("GetForecast", req)
        assert firing(fb) == {pb.POOL_CRITICAL: 0, pb.POOL_STANDARD: 0, pb.POOL_BULK: 1}
        fall = await api["admin"]("GetForecast", req)
        assert firing(fall) == {pb.POOL_CRITICAL: 0, pb.POOL_STANDARD: 2, pb.POOL_BULK: 1}
        assert firing(await api["admin_a"]("GetForecast", req)) == firing(fa)


async def test_counts_come_from_a_short_cache_and_follow_a_submit_after_its_ttl(
    pg_dsn: str,
) -> None:
    """CountTasks with the count cache on (a small TTL and hard max instead of the 5 s
    and 60 s defaults): a count within the TTL may be the cached one, and then its
    ``as_of`` is the earlier count's; past the hard max a count reflects the submit and
    says it was taken after it; a stale count (past the TTL) is refreshed."""
    engine = dataclasses.replace(engine_config(), count_cache_ttl_s=0.3, count_cache_max_age_s=1.0)
    when = datetime.now(UTC) + timedelta(hours=2)
    async with running_stack(pg_dsn, engine) as stack, apis(stack) as api:
        client = await stack.client()
        try:
            before = await api["a"]("CountTasks", pb.CountTasksRequest())
            assert before.total == 0
            loads = stack.engine.watch.counts.loads
            submitted = datetime.now(UTC)
            await client.submit("a", {}, scheduled_at=when)
            soon = await api["a"]("CountTasks", pb.CountTasksRequest())
            if soon.total == 0:  # served from the cache: says so by its as_of
                assert soon.as_of == before.as_of
            else:
                assert soon.total == 1
            await asyncio.sleep(1.1)  # past the hard max: this caller waits for a count
            after = await api["a"]("CountTasks", pb.CountTasksRequest())
            assert after.total == 1
            assert conv.to_datetime(after.as_of, "as_of") >= submitted
            assert stack.engine.watch.counts.loads > loads
            # Every tenant's count is its own key, exact as well.
            assert (await api["admin"]("CountTasks", pb.CountTasksRequest())).total == 1

            await client.submit("a", {}, scheduled_at=when, idempotency_key="second")
            await asyncio.sleep(0.4)  # past the TTL: answered (maybe stale), refreshed
            await eventually(
                lambda: api["a"]("CountTasks", pb.CountTasksRequest()),
                lambda r: r.total == 2,
                timeout_s=10,
            )
        finally:
            await client.close()


async def test_forecast_buckets_firing_after_jitter_and_nominal_before(any_stack: Stack) -> None:
    start = (datetime.now(UTC) + timedelta(hours=1)).replace(second=0, microsecond=0)
    client = await any_stack.client()
    try:
        # A whole minute: the default late-only jitter spreads them over [0, 120 s].
        crowd = await client.submit_many(
            [
                TaskSpec(
                    type="tick", scheduled_at=start + timedelta(minutes=2), idempotency_key=f"k{i}"
                )
                for i in range(20)
            ]
        )
        strict = await client.submit(
            "tick",
            {},
            scheduled_at=start + timedelta(minutes=5, seconds=30),
            strict_timing=True,
            pool=Pool.CRITICAL,
        )
        later = await client.submit("tick", {}, scheduled_at=start + timedelta(hours=3))
    finally:
        await client.close()
    tasks = [*crowd, strict]
    async with apis(any_stack) as api:
        for width, n in ((60, 60), (1, 3600)):
            resp = await api["a"](
                "GetForecast",
                pb.GetForecastRequest(start=conv.from_datetime(start), bucket_s=width, buckets=n),
            )
            assert resp.bucket_s == width
            assert resp.start.ToDatetime(tzinfo=UTC) == start
            assert len(resp.buckets) == n * 3  # every (bucket, pool), zeros included
            firing: dict[tuple[int, int], int] = collections.Counter()
            nominal: dict[tuple[int, int], int] = collections.Counter()
            for t in tasks:
                firing[(int((t.due_at - start).total_seconds() // width), _POOL[t.pool])] += 1
                nominal[
                    (int((t.scheduled_at - start).total_seconds() // width), _POOL[t.pool])
                ] += 1
            got_f: dict[tuple[int, int], int] = {}
            got_n: dict[tuple[int, int], int] = {}
            for i, bk in enumerate(resp.buckets):
                assert bk.start.seconds == int(start.timestamp()) + (i // 3) * width
                assert bk.pool == (pb.POOL_CRITICAL, pb.POOL_STANDARD, pb.POOL_BULK)[i % 3]
                if bk.firing:
                    got_f[(i // 3, bk.pool)] = bk.firing
                if bk.nominal:
                    got_n[(i // 3, bk.pool)] = bk.nominal
            assert got_f == dict(firing)
            assert got_n == dict(nominal)
            assert sum(got_f.values()) == len(tasks)  # `later` is past the window
            assert [o.firing for o in resp.overdue] == [0, 0, 0]
        # The jitter moved some of the crowd out of its nominal minute: firing differs.
        assert any(t.due_at >= start + timedelta(minutes=3) for t in crowd)
        assert all(t.due_at >= t.scheduled_at for t in crowd)
        assert later.due_at > start + timedelta(hours=1)
        # Only the pools asked for, in the fixed order.
        only = await api["a"](
            "GetForecast",
            pb.GetForecastRequest(
                start=conv.from_datetime(start), buckets=10, pools=[pb.POOL_BULK, pb.POOL_CRITICAL]
            ),
        )
        assert [bk.pool for bk in only.buckets[:2]] == [pb.POOL_CRITICAL, pb.POOL_BULK]
        assert sum(bk.firing for bk in only.buckets) == 1  # the strict critical task
        assert len(only.overdue) == 2


async def test_forecast_counts_overdue_tasks(any_stack: Stack) -> None:
    client = await any_stack.client()
    try:
        past = await client.submit(
            "late", {}, scheduled_at=datetime.now(UTC) - timedelta(minutes=5), pool=Pool.BULK
        )
        soon = await client.submit(
            "late", {}, scheduled_at=datetime.now(UTC) + timedelta(minutes=30), strict_timing=True
        )
    finally:
        await client.close()
    async with apis(any_stack) as api:
        resp = await api["a"]("GetForecast", pb.GetForecastRequest())
        # No worker takes "late": the past task waits (SCHEDULED or PRELOADED), overdue.
        assert [(o.pool, o.firing) for o in resp.overdue] == [
            (pb.POOL_CRITICAL, 0),
            (pb.POOL_STANDARD, 0),
            (pb.POOL_BULK, 1),
        ]
        assert resp.bucket_s == 60
        assert len(resp.buckets) == 180
        start = resp.start.ToDatetime(tzinfo=UTC)
        assert abs((start - datetime.now(UTC)).total_seconds()) < 60
        assert sum(bk.firing for bk in resp.buckets) == 1
        assert soon.due_at == soon.scheduled_at
        # A window that starts after `soon`: both are overdue then.
        after = await api["a"](
            "GetForecast",
            pb.GetForecastRequest(start=conv.from_datetime(datetime.now(UTC) + timedelta(hours=1))),
        )
        assert [o.firing for o in after.overdue] == [0, 1, 1]
        counted = await api["a"]("CountTasks", pb.CountTasksRequest())
        assert counted.total == 2
        assert {c.state for c in counted.counts} <= {
            pb.TASK_STATE_SCHEDULED,
            pb.TASK_STATE_PRELOADED,
        }
        assert past.due_at < start


@contextlib.asynccontextmanager
async def _worker(stack: Stack, key: str, worker_id: str, slots: int) -> AsyncIterator[Wire]:
    async with grpc.aio.insecure_channel(stack.target) as channel:
        call = pbg.WorkerServiceStub(channel).Connect(metadata=(("x-api-key", key),))
        await call.write(
            pb.WorkerMessage(
                hello=pb.Hello(
                    worker_id=worker_id,
                    task_types=["email", "sms"],
                    slots=slots,
                    pools=[pb.POOL_CRITICAL, pb.POOL_STANDARD],
                )
            )
        )
        welcome = await call.read()
        assert welcome.WhichOneof("kind") == "welcome"
        w = Wire(call)
        pump = asyncio.create_task(w.pump())
        try:
            yield w
        finally:
            call.cancel()
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump


async def test_list_workers_shows_slots_move(any_stack: Stack) -> None:
    async with (
        apis(any_stack) as api,
        _worker(any_stack, any_stack.key_a, "worker-a", 4) as wire,
        _worker(any_stack, any_stack.key_b, "worker-b", 2),
    ):
        before = datetime.now(UTC)
        listed = await api["a"]("ListWorkers", pb.ListWorkersRequest())
        assert listed.node_id == any_stack.engine.node_id
        assert [w.worker_id for w in listed.workers] == ["worker-a"]
        (w,) = listed.workers
        assert w.tenant_id == any_stack.tenant_a
        assert list(w.task_types) == ["email", "sms"]
        assert list(w.pools) == [pb.POOL_CRITICAL, pb.POOL_STANDARD]
        assert (w.slots, w.slots_used, w.slots_free) == (4, 0, 4)
        assert not w.start_on_delivery
        assert w.node_id == listed.node_id
        assert w.connected_at.ToDatetime(tzinfo=UTC) <= w.last_seen.ToDatetime(tzinfo=UTC)
        assert w.connected_at.ToDatetime(tzinfo=UTC) <= before + timedelta(seconds=1)

        client = await any_stack.client()
        try:
            await client.submit("email", {}, strict_timing=True)
        finally:
            await client.close()
        a = await asyncio.wait_for(wire.assignments.get(), 15)

        async def mine() -> pb.WorkerInfo:
            return (await api["a"]("ListWorkers", pb.ListWorkersRequest())).workers[0]

        held = await eventually(mine, lambda w: w.slots_used == 1)
        assert (held.slots, held.slots_free) == (4, 3)
        ref = pb.TaskRef(
            task_id=a.task_id, fencing_token=a.fencing_token, scheduled_at=a.scheduled_at
        )
        res = await wire.ask(pb.WorkerMessage(request_id=1, ack=pb.Ack(tasks=[ref])))
        assert [r.ok for r in res.results] == [True]
        acked = await mine()
        assert acked.last_seen.ToDatetime(tzinfo=UTC) >= held.last_seen.ToDatetime(tzinfo=UTC)
        res = await wire.ask(pb.WorkerMessage(request_id=2, completion=pb.Completion(task=ref)))
        assert [r.ok for r in res.results] == [True]
        done = await mine()
        assert (done.slots_used, done.slots_free) == (0, 3)
        await wire.ask(pb.WorkerMessage(request_id=3, credit=pb.Credit(slots=1)))
        assert (await mine()).slots_free == 4

        # Tenant B's key sees its own worker only; the admin sees both, or one tenant's.
        b_sees = await api["b"]("ListWorkers", pb.ListWorkersRequest())
        assert [w.worker_id for w in b_sees.workers] == ["worker-b"]
        every = await api["admin"]("ListWorkers", pb.ListWorkersRequest())
        assert [(w.worker_id, w.tenant_id) for w in every.workers] == [
            ("worker-a", any_stack.tenant_a),
            ("worker-b", any_stack.tenant_b),
        ]
        acting = await api["admin_b"]("ListWorkers", pb.ListWorkersRequest())
        assert [w.worker_id for w in acting.workers] == ["worker-b"]


async def test_list_workers_names_the_overdue_tasks_no_worker_takes(any_stack: Stack) -> None:
    """``unserved``: tenant A's overdue orphan (a type no worker names) and its BULK
    email (a pool its worker does not take); not A's future orphan, not what the worker
    takes; B sees none of A's; the admin sees A's with its tenant."""
    past = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
    async with apis(any_stack) as api, _worker(any_stack, any_stack.key_a, "worker-a", 4):
        client = await any_stack.client()
        try:
            await client.submit("orphan", {}, scheduled_at=past, strict_timing=True)
            await client.submit("orphan", {}, scheduled_at=past + timedelta(hours=2))
            await client.submit("email", {}, scheduled_at=past, strict_timing=True, pool=Pool.BULK)
        finally:
            await client.close()

        async def listed() -> pb.ListWorkersResponse:
            return await api["a"]("ListWorkers", pb.ListWorkersRequest())

        got = await eventually(listed, lambda r: len(r.unserved) == 2)
        assert [(u.type, u.pool, u.count) for u in got.unserved] == [
            ("email", pb.POOL_BULK, 1),
            ("orphan", pb.POOL_STANDARD, 1),
        ]
        assert {u.tenant_id for u in got.unserved} == {any_stack.tenant_a}
        assert {u.oldest_due_at.ToDatetime(tzinfo=UTC) for u in got.unserved} == {past}
        assert not (await api["b"]("ListWorkers", pb.ListWorkersRequest())).unserved
        every = await api["admin"]("ListWorkers", pb.ListWorkersRequest())
        assert {(u.tenant_id, u.type) for u in every.unserved} == {
            (any_stack.tenant_a, "email"),
            (any_stack.tenant_a, "orphan"),
        }


async def test_a_failed_attempts_type_and_traceback_reach_get_task(any_stack: Stack) -> None:
    async with apis(any_stack) as api, _worker(any_stack, any_stack.key_a, "worker-a", 4) as w:
        client = await any_stack.client()
        try:
            task = await client.submit("email", {}, strict_timing=True, max_retries=0)
        finally:
            await client.close()
        a = await asyncio.wait_for(w.assignments.get(), 15)
        assert a.task_id == str(task.id)
        ref = pb.TaskRef(
            task_id=a.task_id, fencing_token=a.fencing_token, scheduled_at=a.scheduled_at
        )
        await w.ask(pb.WorkerMessage(request_id=1, ack=pb.Ack(tasks=[ref])))
        trace = "Traceback (most recent call last):\n  ...\nKeyError: 'sku'\n"
        failure = pb.Failure(task=ref, error="'sku'", error_type="KeyError", traceback=trace)
        res = await w.ask(pb.WorkerMessage(request_id=2, failure=failure))
        assert [r.ok for r in res.results] == [True]
        got = (await api["a"]("GetTask", pb.GetTaskRequest(task_id=a.task_id))).task
        assert (got.state, got.last_error, got.last_error_type, got.last_traceback) == (
            pb.TASK_STATE_DEAD_LETTER,
            "'sku'",
            "KeyError",
            trace,
        )
        too_long = pb.FailTaskRequest(task=ref, error="x", traceback="t" * 16_385)
        async with grpc.aio.insecure_channel(any_stack.target) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await pbg.WorkerServiceStub(channel).FailTask(
                    too_long, metadata=(("x-api-key", any_stack.key_a),)
                )
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "traceback" in str(refused.value.details())


async def test_list_tasks_by_pool_and_idempotency_key(any_stack: Stack) -> None:
    when = datetime.now(UTC) + timedelta(hours=2)
    client = await any_stack.client()
    try:
        tasks = await _mixed(client, when)
    finally:
        await client.close()
    async with apis(any_stack) as api:
        bulk = await _listed(api["a"], pools=[pb.POOL_BULK], page_size=1)
        assert sorted(t.id for t in bulk) == sorted(str(t.id) for t in tasks if t.pool is Pool.BULK)
        crit = await _listed(api["a"], pools=[pb.POOL_CRITICAL, pb.POOL_STANDARD])
        assert {t.pool for t in crit} == {pb.POOL_CRITICAL, pb.POOL_STANDARD}
        assert len(crit) == 3
        by_key = await _listed(api["a"], idempotency_key="r-1")
        assert [t.id for t in by_key] == [str(tasks[6].id)]
        for order in (pb.TASK_ORDER_SCHEDULED_DESC, pb.TASK_ORDER_CREATED_ASC):
            assert len(await _listed(api["a"], idempotency_key="r-1", order=order)) == 1
        # The rest of the filter still narrows a key's task.
        assert await _listed(api["a"], idempotency_key="r-1", pools=[pb.POOL_CRITICAL]) == []
        assert await _listed(api["a"], idempotency_key="r-0", states=[pb.TASK_STATE_CANCELLED])
        assert await _listed(api["a"], idempotency_key="nope") == []
        # Another tenant's key: nothing.
        assert await _listed(api["b"], idempotency_key="r-1") == []
        # A page token is bound to the pools and the key of its filter.
        first = await api["a"]("ListTasks", pb.ListTasksRequest(pools=[pb.POOL_BULK], page_size=1))
        assert first.next_page_token
        for other in (
            {"pools": [pb.POOL_CRITICAL]},
            {"pools": []},
            {"pools": [pb.POOL_BULK], "idempotency_key": "r-0"},
        ):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await api["a"](
                    "ListTasks",
                    pb.ListTasksRequest(page_token=first.next_page_token, page_size=1, **other),
                )
            assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert "page_token: was issued for a different filter" in (err.value.details() or "")


async def test_admin_token_acts_for_the_tenant_it_names(any_stack: Stack) -> None:
    async with apis(any_stack) as api:
        made = await api["admin_b"](
            "SubmitTask", pb.SubmitTaskRequest(task=pb.TaskSpec(type="from-admin"))
        )
        assert made.task.tenant_id == any_stack.tenant_b
        got = await api["admin_b"]("GetTask", pb.GetTaskRequest(task_id=made.task.id))
        assert got.task.id == made.task.id
        # Tenant A (its key, or the admin acting for A) does not see B's task.
        for who in ("a", "admin_a"):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await api[who]("GetTask", pb.GetTaskRequest(task_id=made.task.id))
            assert err.value.code() is grpc.StatusCode.NOT_FOUND
        # Without x-tenant-id only the every-tenant reads answer.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await api["admin"]("ListTasks", pb.ListTasksRequest())
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == "x-tenant-id: required with the admin token"
        async with grpc.aio.insecure_channel(any_stack.target) as channel:
            stub = pbg.SchedulerServiceStub(channel)
            bad: list[tuple[tuple[tuple[str, str], ...], grpc.StatusCode, str]] = [
                (
                    (("x-admin-token", ADMIN_TOKEN), ("x-tenant-id", "nope")),
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "x-tenant-id: ",
                ),
                (
                    (("x-admin-token", ADMIN_TOKEN), ("x-tenant-id", str(uuid.uuid4()))),
                    grpc.StatusCode.NOT_FOUND,
                    "tenant ",
                ),
                (
                    (("x-admin-token", "wrong"), ("x-tenant-id", any_stack.tenant_a)),
                    grpc.StatusCode.UNAUTHENTICATED,
                    "invalid admin token",
                ),
            ]
            for md, code, text in bad:
                for call in (
                    stub.CountTasks(pb.CountTasksRequest(), metadata=md),
                    stub.ListTasks(pb.ListTasksRequest(), metadata=md),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await call
                    assert err.value.code() is code, md
                    assert (err.value.details() or "").startswith(text), err.value.details()
            # The admin token never opens a worker stream.
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await pbg.WorkerServiceStub(channel).CompleteTask(
                    pb.CompleteTaskRequest(), metadata=(("x-admin-token", ADMIN_TOKEN),)
                )
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
