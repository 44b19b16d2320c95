"""Row-level security on PostgreSQL (issue 15): the second line of tenant isolation.

The test databases belong to the application role (not a superuser), as in production,
so the policies of migration 0007 apply (FORCE ROW LEVEL SECURITY: the owner too).
Raw queries here forget ``tenant_id`` on purpose: the policies alone must hide and
protect the other tenant's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from scheduler._errors import NotFound
from scheduler.store import StoreConfig
from scheduler.store.postgres import PostgresStore
from scheduler.types import Expectation, Pool, Schedule, Tenant, UpstreamPolicy, Workflow
from tests.support.stores import NOW, new_task

pytestmark = pytest.mark.postgres

TENANT_TABLES = (
    "tenants",
    "tasks",
    "task_keys",
    "task_transitions",
    "task_dependencies",
    "task_completions",
    "workflows",
    "cron_schedules",
    "job_expectations",
    "api_keys",
)


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.open(pg_dsn, StoreConfig(preload_sweep_interval_s=0))
    try:
        yield s
    finally:
        await s.close()


async def _two_tenants(pg: PostgresStore) -> tuple[Tenant, Tenant, dict[str, Any]]:
    """Tenants A and B, each with a row in every tenant-owned table."""
    a = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="a"))
    b = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="b"))
    made: dict[str, Any] = {}
    for t in (a, b):
        wf = Workflow(
            id=uuid.uuid4(),
            tenant_id=t.id,
            name="wf",
            idempotency_key="wf",
            on_upstream_failure=UpstreamPolicy.CANCEL,
            node_count=2,
            created_at=NOW,
        )
        await pg.create_workflow(wf)
        parent = new_task(t, workflow_id=wf.id)
        child = new_task(t, workflow_id=wf.id, depends_on=(parent.id,))
        await pg.insert_tasks([parent, child], NOW)
        await pg.claim_preload(None, NOW + timedelta(minutes=1), 10, NOW)  # audit rows
        await pg.cancel(t.id, parent.id, NOW)  # a completion-free audit trail
        await pg.create_api_key(t.id, "k", uuid.uuid4().bytes)
        await pg.create_schedule(
            Schedule(
                id=uuid.uuid4(),
                tenant_id=t.id,
                name="nightly",
                cron_expr="0 3 * * *",
                interval_s=0.0,
                timezone="UTC",
                task_type="x",
                payload={},
                pool=Pool.STANDARD,
                next_fire_at=NOW,
                created_at=NOW,
            )
        )
        await pg.register_expectation(
            Expectation(
                id=uuid.uuid4(),
                tenant_id=t.id,
                job_id="job",
                interval_s=60,
                tolerance_s=300,
                created_at=NOW,
            )
        )
        made[str(t.id)] = parent
    # The ledger is written by completions (system paths); one row per tenant here.
    async with pg._pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL tickwheel.tenant = '*'")
        for t in (a, b):
            await conn.execute(
                "INSERT INTO task_completions (task_id, scheduled_at, tenant_id, type,"
                " fencing_token, completed_at) VALUES ($1, $2, $3, 'x', 1, $2)",
                uuid.uuid4(),
                NOW,
                t.id,
            )
    return a, b, made


async def _counts(conn: Any) -> dict[str, int]:
    return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TENANT_TABLES}


async def test_every_tenant_owned_table_has_forced_row_level_security(pg: PostgresStore) -> None:
    async with pg._pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class"
            " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
            "   AND (relname = ANY($1::text[]) OR relname ~ '^tasks_p[0-9]{8}$')",
            list(TENANT_TABLES),
        )
        bypass = await conn.fetchval(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
    assert not bypass  # the harness connects as the owner, not a superuser
    found = {r["relname"]: (r["relrowsecurity"], r["relforcerowsecurity"]) for r in rows}
    assert set(TENANT_TABLES) <= set(found)
    assert any(name.startswith("tasks_p") for name in found)  # the day partitions too
    assert all(flags == (True, True) for flags in found.values()), found


async def test_a_query_without_a_tenant_setting_sees_no_rows(pg: PostgresStore) -> None:
    await _two_tenants(pg)
    # The store's own pooled connection, outside a scoped transaction.
    async with pg._pool.acquire() as conn:
        assert await _counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        # Nor can it write: a row it inserts must pass the same policy.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("INSERT INTO tenants (id, name) VALUES ($1, 'x')", uuid.uuid4())
        assert await conn.execute("UPDATE tasks SET last_error = 'x'") == "UPDATE 0"
        assert await conn.execute("DELETE FROM task_keys") == "DELETE 0"
    # And the system scope does see them all (the check above is not vacuous).
    async with pg._pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL tickwheel.tenant = '*'")
        assert all(n >= 2 for n in (await _counts(conn)).values()), await _counts(conn)


@pytest.mark.parametrize("form", ["upper", "braces", "garbage", "spaces"])
async def test_a_scope_not_written_as_the_store_writes_it_sees_no_rows(
    pg: PostgresStore, form: str
) -> None:
    """Only '*' and a tenant's id in lowercase canonical form select rows (migration
    0013 keeps 0007's rule): any other text fails closed, it never widens the scope."""
    a, _b, _made = await _two_tenants(pg)
    text = {
        "upper": str(a.id).upper(),
        "braces": "{" + str(a.id) + "}",
        "garbage": "not-a-tenant",
        "spaces": f" {a.id}",
    }[form]
    async with pg._pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT set_config('tickwheel.tenant', $1, true)", text)
        assert await _counts(conn) == dict.fromkeys(TENANT_TABLES, 0)
        assert await conn.execute("UPDATE tasks SET last_error = 'x'") == "UPDATE 0"


async def test_the_policies_read_the_scope_once_per_statement(pg: PostgresStore) -> None:
    """The scope is an InitPlan, not a call per row (migration 0013): a plan's per-row
    filter names no current_setting."""
    a, _b, _made = await _two_tenants(pg)
    async with pg._pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL tickwheel.tenant = '{a.id}'")
        for table in TENANT_TABLES:
            plan = "\n".join(
                r[0] for r in await conn.fetch(f"EXPLAIN (VERBOSE) SELECT * FROM {table}")
            )
            assert "InitPlan" in plan, plan
            filters = [line for line in plan.splitlines() if "Filter:" in line]
            assert filters, plan
            assert not any("current_setting" in f for f in filters), plan


async def test_a_tenant_scope_cannot_read_or_change_another_tenants_rows(
    pg: PostgresStore,
) -> None:
    a, b, made = await _two_tenants(pg)
    b_task = made[str(b.id)]
    async with pg._pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL tickwheel.tenant = '{a.id}'")
        # Every table: only A's rows, though no query names a tenant.
        for table in TENANT_TABLES:
            col = "id" if table == "tenants" else "tenant_id"
            if table in ("task_transitions", "task_dependencies"):
                continue  # no tenant column: checked through their task below
            owners = {r[0] for r in await conn.fetch(f"SELECT {col} FROM {table}")}
            assert owners == {a.id}, table
        # B's task by its own id, as a query that forgot `AND tenant_id = $2` would.
        assert await conn.fetchrow("SELECT * FROM tasks WHERE id = $1", b_task.id) is None
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM task_transitions WHERE task_id = $1", b_task.id
            )
            == 0
        )
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM task_dependencies WHERE parent_task_id = $1", b_task.id
            )
            == 0
        )
        # A partition named directly has the same policy.
        part = f"tasks_p{NOW:%Y%m%d}"
        assert await conn.fetchval(f"SELECT count(*) FROM {part} WHERE id = $1", b_task.id) == 0
        # Writes that forget the tenant change nothing of B's ...
        assert (
            await conn.execute("UPDATE tasks SET status = 'CANCELLED' WHERE id = $1", b_task.id)
            == "UPDATE 0"
        )
        assert await conn.execute("DELETE FROM cron_schedules WHERE tenant_id = $1", b.id) == (
            "DELETE 0"
        )
        assert await conn.execute("UPDATE tenants SET name = 'x' WHERE id = $1", b.id) == (
            "UPDATE 0"
        )
        # ... and cannot move one of A's rows to B, or insert one for B.
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with conn.transaction():
                await conn.execute("UPDATE workflows SET tenant_id = $1", b.id)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO job_expectations (id, tenant_id, job_id, interval_s)"
                    " VALUES ($1, $2, 'sneaky', 60)",
                    uuid.uuid4(),
                    b.id,
                )
    # B's rows are intact, seen from B's scope.
    async with pg._pool.acquire() as conn, conn.transaction():
        await conn.execute(f"SET LOCAL tickwheel.tenant = '{b.id}'")
        row = await conn.fetchrow("SELECT status FROM tasks WHERE id = $1", b_task.id)
        assert row is not None
        assert row["status"] == "CANCELLED"  # cancelled by B itself
        assert await conn.fetchval("SELECT name FROM tenants") == "b"
        assert await conn.fetchval("SELECT count(*) FROM cron_schedules") == 1
        assert await conn.fetchval("SELECT count(*) FROM workflows") == 1
        assert await conn.fetchval("SELECT count(*) FROM job_expectations") == 1


async def test_the_store_scopes_tenant_calls_and_the_system_paths(pg: PostgresStore) -> None:
    a, b, made = await _two_tenants(pg)
    b_task = made[str(b.id)]
    # Tenant-facing calls run in the caller's scope: B's task is not found for A ...
    with pytest.raises(NotFound):
        await pg.get_task(a.id, b_task.id)
    with pytest.raises(NotFound):
        await pg.redrive(a.id, b_task.id, NOW, NOW)
    assert [s.tenant_id for s in await pg.list_schedules(a.id)] == [a.id]
    assert {e.tenant_id for e in await pg.list_expectations(a.id)} == {a.id}
    # ... the platform's (tenant None) and the system paths see every tenant.
    assert (await pg.get_task(None, b_task.id)).tenant_id == b.id
    assert {e.tenant_id for e in await pg.list_expectations(None)} == {a.id, b.id}
    due = await pg.due_schedules(NOW + timedelta(days=1), 10)
    assert {s.tenant_id for s in due} == {a.id, b.id}
    assert len(await pg.transitions_of(b_task.id)) >= 2


async def test_the_option_off_sees_every_row_without_a_scope(pg_dsn: str) -> None:
    on = await PostgresStore.open(pg_dsn)
    off = await PostgresStore.open(pg_dsn, StoreConfig(row_level_security=False))
    try:
        await _two_tenants(on)
        async with off._pool.acquire() as conn:  # no transaction, no SET: '*' per session
            assert all(n >= 2 for n in (await _counts(conn)).values())
        async with on._pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM tasks") == 0
    finally:
        await off.close()
        await on.close()
