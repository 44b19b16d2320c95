"""Moving a tenant's home between two PostgreSQL databases (issue 16): the store side of
``tickwheel tenants move`` (``scheduler.store.postgres.move``) on real databases.

What moves (live tasks with their tokens, workers and leases, their keys, schedules,
the tenant and its keys, its flow control rows and the tasks of its open windows), what
stays (terminal history), the checked flip that copies again when the source changed
after a copy, and a re-run that resumes.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from scheduler._errors import FailedPrecondition, TenantMoving
from scheduler.ids import uuid7
from scheduler.states import TaskState
from scheduler.store import StoreConfig, open_store
from scheduler.store.postgres import PostgresStore
from scheduler.store.postgres.move import MoveReport, fingerprint, move_tenant
from scheduler.types import (
    ALL_TENANTS,
    Debounce,
    FlowOptions,
    NewTask,
    Pool,
    TaskKey,
    Tenant,
    Throttle,
)
from tests.support.servers import PostgresServer
from tests.support.stores import force_status, new_task

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def second_dsn(postgres_server: PostgresServer, pg_template: str) -> Iterator[str]:
    """A second migrated database: the other region's."""
    name = f"eu_{uuid.uuid4().hex[:10]}"
    owner = postgres_server.app_user
    postgres_server.psql(f"CREATE DATABASE {name} TEMPLATE {pg_template} OWNER {owner}")
    try:
        yield postgres_server.app_dsn(name)
    finally:
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def us(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    s = await open_store(pg_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    assert isinstance(s, PostgresStore)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def eu(second_dsn: str) -> AsyncIterator[PostgresStore]:
    s = await open_store(second_dsn, config=StoreConfig(preload_sweep_interval_s=0))
    assert isinstance(s, PostgresStore)
    try:
        yield s
    finally:
        await s.close()


async def _conn(dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(dsn, server_settings={"tickwheel.tenant": "*"})


async def _states(dsn: str, tenant_id: uuid.UUID) -> dict[uuid.UUID, tuple[str, int, str | None]]:
    conn = await _conn(dsn)
    try:
        rows = await conn.fetch(
            "SELECT id, status, fencing_token, worker_id FROM tasks WHERE tenant_id = $1",
            tenant_id,
        )
    finally:
        await conn.close()
    return {r["id"]: (r["status"], r["fencing_token"], r["worker_id"]) for r in rows}


async def _seed(store: PostgresStore) -> tuple[Tenant, dict[str, uuid.UUID]]:
    """A tenant at home in "us" with a task in each state that matters."""
    tenant = await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme", home_region="us"))
    await store.create_api_key(tenant.id, "k", b"\x01" * 32)
    soon, later = NOW + timedelta(seconds=5), NOW + timedelta(hours=2)
    specs = {
        "scheduled": new_task(tenant, later),
        "preloaded": new_task(tenant, soon),
        "running": new_task(tenant, NOW),
        "retrying": new_task(tenant, NOW),
        "completed": new_task(tenant, NOW - timedelta(minutes=1)),
    }
    await store.insert_tasks(list(specs.values()), NOW)
    keys = {name: TaskKey(t.id, t.scheduled_at) for name, t in specs.items()}
    await force_status(store, keys["preloaded"], TaskState.PRELOADED)
    await force_status(
        store,
        keys["running"],
        TaskState.RUNNING,
        fencing_token=4,
        worker_id="w-1",
        lease_expires_at=NOW + timedelta(seconds=30),
    )
    await force_status(store, keys["retrying"], TaskState.RETRYING, retry_count=1)
    await force_status(store, keys["completed"], TaskState.COMPLETED, fencing_token=2)
    return tenant, {name: k.id for name, k in keys.items()}


async def _us_to_eu(tenant: Tenant, us_dsn: str, eu_dsn: str, **kw: Any) -> MoveReport:
    return await move_tenant(
        tenant.id,
        source_dsn=us_dsn,
        target_dsn=eu_dsn,
        source_region="us",
        target_region="eu",
        settle_s=0,
        **kw,
    )


def _after_first_copy(write: Callable[[], Awaitable[None]]) -> Callable[[str], Awaitable[None]]:
    """A move's ``on_step`` that makes ``write`` at the source once, after the first copy
    (a write in flight when the freeze began)."""
    copies = 0

    async def on_step(step: str) -> None:
        nonlocal copies
        if step.startswith("copied"):
            copies += 1
            if copies == 1:
                await write()

    return on_step


async def test_a_move_copies_live_rows_flips_the_home_and_keeps_history(
    us: PostgresStore, eu: PostgresStore, pg_dsn: str, second_dsn: str
) -> None:
    tenant, ids = await _seed(us)
    seen_frozen: list[object] = []

    async def on_step(step: str) -> None:
        if step == "frozen":
            seen_frozen.append(await us.tenant_moves())
            seen_frozen.append(await eu.tenant_moves())

    report = await _us_to_eu(tenant, pg_dsn, second_dsn, on_step=on_step)
    # While frozen, neither region served the tenant.
    assert seen_frozen == [{tenant.id: "frozen"}, {tenant.id: "frozen"}]
    assert report.tasks_moved == 4
    assert report.copies == 1
    # Everything went over before the freeze; the frozen copy had nothing left to carry.
    assert report.precopied == 4
    assert report.copied_frozen == 0
    assert not report.resumed
    assert report.frozen_s > 0

    at_eu = await _states(second_dsn, tenant.id)
    assert set(at_eu) == {ids["scheduled"], ids["preloaded"], ids["running"], ids["retrying"]}
    assert at_eu[ids["preloaded"]][0] == "SCHEDULED"  # eu's pre-loader claims it
    assert at_eu[ids["running"]] == ("RUNNING", 4, "w-1")  # token and worker kept
    assert at_eu[ids["retrying"]][0] == "RETRYING"
    at_us = await _states(pg_dsn, tenant.id)
    assert at_us == {ids["completed"]: ("COMPLETED", 2, None)}  # history stays

    # The tenant and its key are at home in eu; us forwards (gone), eu serves it.
    assert (await eu.get_tenant(tenant.id)).home_region == "eu"
    assert (await us.get_tenant(tenant.id)).home_region == "eu"
    assert await eu.api_key_for_hash(b"\x01" * 32) is not None
    assert await us.tenant_moves() == {tenant.id: "gone"}
    assert await eu.tenant_moves() == {tenant.id: "arrived"}
    # Found by id and by its idempotency key at the new home.
    moved = await eu.get_task(tenant.id, ids["running"])
    assert moved.fencing_token == 4

    # A re-run finds the move done and changes nothing.
    again = await _us_to_eu(tenant, pg_dsn, second_dsn)
    assert again.resumed
    assert await _states(second_dsn, tenant.id) == at_eu


async def test_a_write_after_the_copy_makes_the_flip_copy_again(
    us: PostgresStore, eu: PostgresStore, pg_dsn: str, second_dsn: str
) -> None:
    """A completion that lands at the source after the copy (it was in flight when the
    freeze began) is caught by the flip's check: the task is not left live at the new
    home, and it is in no region twice."""
    tenant, ids = await _seed(us)

    async def complete() -> None:
        conn = await _conn(pg_dsn)
        try:
            await conn.execute(
                "UPDATE tasks SET status = 'COMPLETED' WHERE id = $1", ids["running"]
            )
        finally:
            await conn.close()

    report = await _us_to_eu(tenant, pg_dsn, second_dsn, on_step=_after_first_copy(complete))
    assert report.copies == 2
    at_eu = await _states(second_dsn, tenant.id)
    assert ids["running"] not in at_eu
    assert report.tasks_moved == 3 == len(at_eu)
    assert (await _states(pg_dsn, tenant.id))[ids["running"]][0] == "COMPLETED"


async def test_a_task_is_not_added_where_its_tenant_is_moving_away_or_moved(
    us: PostgresStore, eu: PostgresStore, pg_dsn: str, second_dsn: str
) -> None:
    """The statement that inserts tasks checks the tenant's move itself: a submission
    that passed a node's check before the freeze reached it cannot add a row behind the
    flip (it gets TENANT_MOVING, retried by the SDK, and lands at the new home)."""
    tenant, ids = await _seed(us)
    other = await us.create_tenant(Tenant(id=uuid.uuid4(), name="other", home_region="us"))
    conn = await _conn(pg_dsn)
    try:
        await conn.execute(
            "INSERT INTO tenant_moves (tenant_id, role, phase, from_region, to_region)"
            " VALUES ($1, 'source', 'frozen', 'us', 'eu')",
            tenant.id,
        )
    finally:
        await conn.close()
    late = new_task(tenant, NOW)
    with pytest.raises(TenantMoving):
        await us.insert_tasks([late], NOW)
    assert late.id not in await _states(pg_dsn, tenant.id)
    # Nor does a dead letter come back to life there (a redrive).
    await force_status(
        us, TaskKey(ids["completed"], NOW - timedelta(minutes=1)), TaskState.DEAD_LETTER
    )
    with pytest.raises(TenantMoving):
        await us.redrive(tenant.id, ids["completed"], NOW, NOW)
    assert (await _states(pg_dsn, tenant.id))[ids["completed"]][0] == "DEAD_LETTER"
    # Another tenant is not held up, and a duplicate is still answered as one.
    (made,) = await us.insert_tasks([new_task(other, NOW)], NOW)
    assert made.created


async def test_a_move_from_a_region_that_is_not_home_is_refused(
    us: PostgresStore, pg_dsn: str, second_dsn: str
) -> None:
    tenant, _ = await _seed(us)
    with pytest.raises(FailedPrecondition, match="lives in 'us', not 'ap'"):
        await move_tenant(
            tenant.id,
            source_dsn=pg_dsn,
            target_dsn=second_dsn,
            source_region="ap",
            target_region="eu",
        )
    with pytest.raises(FailedPrecondition, match="already in"):
        await move_tenant(
            tenant.id,
            source_dsn=pg_dsn,
            target_dsn=second_dsn,
            source_region="us",
            target_region="us",
        )
    assert await us.tenant_moves() == {}


async def test_the_fingerprint_ignores_a_claim_and_a_heartbeat(
    us: PostgresStore, pg_dsn: str
) -> None:
    """A pre-loader claim (SCHEDULED -> PRELOADED) and a lease extension change nothing
    that moves, so they never make the flip copy again."""
    tenant, ids = await _seed(us)
    conn = await _conn(pg_dsn)
    try:
        before = await fingerprint(conn, tenant.id)
        await conn.execute("UPDATE tasks SET status = 'PRELOADED' WHERE id = $1", ids["scheduled"])
        await conn.execute(
            "UPDATE tasks SET lease_expires_at = lease_expires_at + interval '10 s' WHERE id = $1",
            ids["running"],
        )
        assert await fingerprint(conn, tenant.id) == before
        await conn.execute("UPDATE tasks SET fencing_token = 5 WHERE id = $1", ids["running"])
        assert await fingerprint(conn, tenant.id) != before
    finally:
        await conn.close()


def _flow_task(tenant: Tenant, at: datetime, payload: Any = None, **flow: Any) -> NewTask:
    task_id = uuid7()
    more = {} if payload is None else {"payload": payload}
    return new_task(
        tenant, at, id=task_id, idempotency_key=str(task_id), flow=FlowOptions(**flow), **more
    )


async def test_a_move_carries_the_tenants_flow_control(
    us: PostgresStore, eu: PostgresStore, pg_dsn: str, second_dsn: str
) -> None:
    """Issue 43's tenant-scoped rows move with the tenant: its concurrency and rate
    limits and pauses (an all-tenants pause stays where it is), and its debounce,
    throttle and idempotency windows hold at the new home, including those whose task
    already finished (copied for the window's sake)."""
    tenant, _ = await _seed(us)
    await us.set_concurrency_limit(tenant.id, "email.send", 3, NOW)
    await us.set_rate_limit(tenant.id, "partner", 5.0, 10, NOW)
    await us.pause_dispatch(tenant.id, "report.build", None, NOW)
    await us.pause_dispatch(ALL_TENANTS, "", Pool.BULK, NOW)
    later = NOW + timedelta(hours=1)
    debounce = Debounce(key="doc-1", period_s=60, max_delay_s=60)
    first = _flow_task(tenant, later, debounce=debounce, payload={"rev": 1})
    [pending] = await us.insert_tasks([first], NOW)
    throttle = Throttle(key="acct-42", period_s=3600)
    [period] = await us.insert_tasks([_flow_task(tenant, NOW, throttle=throttle)], NOW)
    ttl = new_task(tenant, NOW, idempotency_key="inv-77", flow=FlowOptions(idempotency_ttl_s=3600))
    [keyed] = await us.insert_tasks([ttl], NOW)
    for done in (period, keyed):  # finished: their windows still hold
        await force_status(us, done.task.key, TaskState.COMPLETED)

    async def replace_payload() -> None:
        # After the pre-copy, a submission of the burst that replaces the payload alone
        # (its due time held at the max_delay cap): the task digest does not see it.
        again = _flow_task(tenant, later, debounce=debounce, payload={"rev": 2})
        [joined] = await us.insert_tasks([again], NOW)
        assert joined.debounced

    async def on_step(step: str) -> None:
        if step.startswith("pre-copied"):
            await replace_payload()

    await _us_to_eu(tenant, pg_dsn, second_dsn, on_step=on_step)
    assert (await eu.get_task(tenant.id, pending.task.id)).payload == {"rev": 2}

    assert [(c.type, c.limit) for c in await eu.concurrency_limits(tenant.id)] == [
        ("email.send", 3)
    ]
    assert [(r.key, r.rate, r.burst) for r in await eu.list_rate_limits(tenant.id)] == [
        ("partner", 5.0, 10)
    ]
    assert [(p.tenant_id, p.task_type) for p in await eu.list_dispatch_pauses(tenant.id)] == [
        (tenant.id, "report.build")
    ]
    # The source applies none of its rules any more; the all-tenants pause stays.
    assert await us.concurrency_limits(tenant.id) == []
    assert await us.list_rate_limits(tenant.id) == []
    assert [p.tenant_id for p in await us.list_dispatch_pauses(tenant.id)] == [ALL_TENANTS]
    assert [p.tenant_id for p in await eu.list_dispatch_pauses()] == [tenant.id]

    # The windows hold at the new home: the burst's pending task takes the next
    # submission, the throttle period and the key's TTL answer their finished tasks.
    [joined] = await eu.insert_tasks([_flow_task(tenant, later, debounce=debounce)], NOW)
    assert (joined.created, joined.debounced, joined.task.id) == (False, True, pending.task.id)
    [held] = await eu.insert_tasks([_flow_task(tenant, NOW, throttle=throttle)], NOW)
    assert (held.created, held.throttled, held.task.id) == (False, True, period.task.id)
    assert held.task.status is TaskState.COMPLETED
    again = new_task(
        tenant, NOW, idempotency_key="inv-77", flow=FlowOptions(idempotency_ttl_s=3600)
    )
    [same] = await eu.insert_tasks([again], NOW)
    assert (same.created, same.task.id) == (False, keyed.task.id)
    # Other finished tasks stay at the source only.
    completed = {
        t
        for t, (state, _, _) in (await _states(second_dsn, tenant.id)).items()
        if state == "COMPLETED"
    }
    assert completed == {period.task.id, keyed.task.id}


async def test_a_flow_rule_set_after_the_copy_makes_the_flip_copy_again(
    us: PostgresStore, eu: PostgresStore, pg_dsn: str, second_dsn: str
) -> None:
    tenant, _ = await _seed(us)

    async def set_limit() -> None:
        await us.set_rate_limit(tenant.id, "late", 1.0, 1, NOW)

    report = await _us_to_eu(tenant, pg_dsn, second_dsn, on_step=_after_first_copy(set_limit))
    assert report.copies == 2
    assert [r.key for r in await eu.list_rate_limits(tenant.id)] == ["late"]
