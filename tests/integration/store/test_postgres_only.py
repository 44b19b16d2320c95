"""PostgreSQL-only behaviour: migrations, partitions, pruning (EXPLAIN), concurrency."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from scheduler._errors import AlreadyExists
from scheduler.store import StoreConfig, _sql
from scheduler.store.postgres import PostgresStore, Q, migrate
from scheduler.store.postgres.migrate import MIGRATIONS_TABLE
from scheduler.types import Completion, DispatchRequest, FencedWrite, TaskKey, Tenant
from tests.support.servers import PostgresServer
from tests.support.stores import NOW, force_status, new_task, system_conn

pytestmark = pytest.mark.postgres

_CATALOG = """
SELECT 'column' AS kind, table_name || '.' || column_name AS name,
       data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS def
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'index', indexname, regexp_replace(indexdef, '^CREATE (UNIQUE )?INDEX \\S+ ', '')
FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'constraint', conrelid::regclass || '.' || conname, pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'function', proname, md5(prosrc) FROM pg_proc
WHERE pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger', tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'policy', tablename || '.' || policyname,
       cmd || ' ' || coalesce(qual, '') || ' ' || coalesce(with_check, '')
FROM pg_policies WHERE schemaname = 'public'
UNION ALL
SELECT 'row security', relname, relrowsecurity::text || ' ' || relforcerowsecurity::text
FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')
ORDER BY 1, 2, 3
"""


async def _catalog(dsn: str) -> list[tuple[str, str, str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(_CATALOG)
    finally:
        await conn.close()
    return [(r[0], r[1], r[2]) for r in rows if "tickwheel_schema_migrations" not in r[1]]


async def test_migrations_equal_fresh_schema_and_are_idempotent(
    pg_empty_dsn: str, postgres_server: PostgresServer
) -> None:
    versions = [v for v, _, _ in _sql.migrations()]
    assert await migrate(pg_empty_dsn, use_schema_file=False) == versions
    assert await migrate(pg_empty_dsn) == []
    name = f"fresh_{uuid.uuid4().hex[:8]}"
    postgres_server.psql(f"CREATE DATABASE {name}")
    try:
        fresh = postgres_server.dsn(name)
        assert await migrate(fresh) == versions
        assert await migrate(fresh) == []
        migrated, installed = await _catalog(pg_empty_dsn), await _catalog(fresh)
        assert len(installed) > 50
        assert migrated == installed
    finally:
        postgres_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_migration_0016_renames_duplicate_tenant_names(pg_empty_dsn: str) -> None:
    """Issue 40: a database made before names were unique migrates whatever it holds:
    of the tenants that share a name the oldest keeps it, each other one gets
    -<the first 8 hex digits of its id>, and the name is then taken once."""
    conn = await asyncpg.connect(pg_empty_dsn, server_settings={"tickwheel.tenant": "*"})
    try:
        await conn.execute(
            f"CREATE TABLE {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW())"
        )
        for version, name, text in _sql.migrations():
            if version < 16:
                await conn.execute(text)
                await conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES ($1, $2)", version, name
                )
        ids = [uuid.uuid4() for _ in range(4)]
        for tenant_id, name, day in zip(
            ids, ["acme", "acme", "solo", "acme"], [5, 7, 1, 3], strict=True
        ):
            await conn.execute(
                "INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)",
                tenant_id,
                name,
                NOW + timedelta(days=day),
            )
    finally:
        await conn.close()
    assert 16 in await migrate(pg_empty_dsn)
    store = await PostgresStore.open(pg_empty_dsn, StoreConfig(preload_sweep_interval_s=0))
    try:
        names = {t.id: t.name for t in await store.list_tenants(None, 10)}
        assert (
            names
            == {
                ids[3]: "acme",  # the oldest
                ids[0]: f"acme-{str(ids[0])[:8]}",
                ids[1]: f"acme-{str(ids[1])[:8]}",
                ids[2]: "solo",
            }
        )
        with pytest.raises(AlreadyExists, match=r"^tenant named 'acme' already exists$"):
            await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
    finally:
        await store.close()


async def test_concurrent_migrate_runs_once(pg_empty_dsn: str) -> None:
    results = await asyncio.gather(*(migrate(pg_empty_dsn) for _ in range(4)))
    assert sorted(len(r) for r in results) == [0, 0, 0, len(_sql.migrations())]


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.open(
        pg_dsn, StoreConfig(pool_max_size=10, retention_days=30, preload_sweep_interval_s=60)
    )
    try:
        yield s
    finally:
        await s.close()


async def test_partitions_ahead_on_demand_and_retention(pg: PostgresStore) -> None:
    tenant = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="p"))
    today = datetime.now(UTC)
    made = await pg.partitions()
    assert f"tasks_p{today:%Y%m%d}" in made
    assert f"tasks_p{today + timedelta(days=7):%Y%m%d}" in made
    far = today + timedelta(days=730)
    [r] = await pg.insert_tasks([new_task(tenant, far)], NOW)
    assert r.created
    assert f"tasks_p{far:%Y%m%d}" in await pg.partitions()
    assert (await pg.get_task(None, r.task.id)).scheduled_at == far

    old_done = NOW - timedelta(days=100)
    old_live = NOW - timedelta(days=99)
    done, _live = await pg.insert_tasks(
        [new_task(tenant, old_done, idempotency_key="old"), new_task(tenant, old_live)], NOW
    )
    await force_status(pg, done.task.key, __import__("scheduler.states").states.TaskState.COMPLETED)
    result = await pg.maintain(NOW)
    assert f"tasks_p{old_done:%Y%m%d}" in result.detached
    assert f"tasks_p{old_live:%Y%m%d}" not in result.detached  # a live task keeps it
    assert f"tasks_p{old_done:%Y%m%d}" not in await pg.partitions()
    async with system_conn(pg) as conn:
        kept = await conn.fetchval(f"SELECT count(*) FROM tasks_detached_p{old_done:%Y%m%d}")
    assert kept == 1  # detached, never deleted
    # Its idempotency key is released; the day can be written again (re-created).
    [again] = await pg.insert_tasks([new_task(tenant, old_done, idempotency_key="old")], NOW)
    assert again.created


def _relations(plan: Any) -> list[str]:
    out: list[str] = []
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            out.append(plan["Relation Name"])
        for v in plan.values():
            out += _relations(v)
    elif isinstance(plan, list):
        for v in plan:
            out += _relations(v)
    return out


@pytest.mark.parametrize("plan_mode", ["force_custom_plan", "force_generic_plan"])
async def test_hot_path_statements_touch_one_partition(pg: PostgresStore, plan_mode: str) -> None:
    tenant = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="e"))
    days = [NOW + timedelta(days=d) for d in range(-2, 4)]
    res = await pg.insert_tasks([new_task(tenant, d) for d in days for _ in range(3)], NOW)
    keys = [r.task.key for r in res if r.task.scheduled_at == NOW]
    ids = [k.id for k in keys]
    times = [k.scheduled_at for k in keys]
    tokens = [2] * len(keys)
    lo, hi = min(times), max(times)
    start = NOW.replace(hour=0, minute=0)
    statements: dict[str, tuple[Any, ...]] = {
        "claim_preload": (NOW, None, start, start + timedelta(days=1), 10, NOW, "t", NOW),
        "mark_dispatched": (
            ids,
            times,
            ["w"] * 3,
            [NOW] * 3,
            NOW,
            lo,
            hi,
            "t",
            [1] * 3,
            [False] * 3,
            False,
        ),
        "ack": (ids, times, tokens, NOW, NOW, lo, hi),
        "heartbeat": (ids, times, tokens, NOW, NOW, lo, hi, ["RUNNING"]),
        "complete": (ids, times, tokens, [None] * 3, NOW, lo, hi, [None] * 3),
        "fail": (
            *(ids, times, tokens, ["e"] * 3, [True] * 3, [None] * 3, NOW, lo, hi),
            *([""] * 3, [1.0] * 3, [""] * 3),  # error types, spread factors, tracebacks
        ),
        "release": (ids, times, tokens, [None] * 3, NOW, lo, hi, [False] * 3),
        "existing_keys": (ids, times, lo, hi),
    }
    async with system_conn(pg) as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute(f"SET LOCAL plan_cache_mode = {plan_mode}")
            for name, args in statements.items():
                # A generic plan prunes at executor start-up: ANALYZE shows what ran.
                analyze = "ANALYZE, " if plan_mode == "force_generic_plan" else ""
                raw = await conn.fetchval(f"EXPLAIN ({analyze}FORMAT JSON) {Q[name]}", *args)
                parts = {r for r in _relations(json.loads(raw)) if r.startswith("tasks_p")}
                assert parts == {f"tasks_p{NOW:%Y%m%d}"}, (name, parts)
        finally:
            await tx.rollback()  # EXPLAIN ANALYZE executed the writes


async def test_hundred_concurrent_submits_one_key_make_one_task(pg: PostgresStore) -> None:
    tenant = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="c"))
    tasks = [
        new_task(tenant, NOW + timedelta(minutes=i), idempotency_key="same") for i in range(100)
    ]
    results = await asyncio.gather(*(pg.insert_tasks([t], NOW) for t in tasks))
    created = [r[0] for r in results if r[0].created]
    assert len(created) == 1
    assert {r[0].task.id for r in results} == {created[0].task.id}
    async with system_conn(pg) as conn:
        assert await conn.fetchval("SELECT count(*) FROM tasks") == 1
        assert await conn.fetchval("SELECT count(*) FROM task_keys") == 1


async def test_two_nodes_never_claim_the_same_task(pg: PostgresStore, pg_dsn: str) -> None:
    tenant = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="n"))
    await pg.insert_tasks([new_task(tenant) for _ in range(300)], NOW)
    other = await PostgresStore.open(pg_dsn)
    try:
        got = await asyncio.gather(
            *(s.claim_preload(None, NOW, 25, NOW) for s in (pg, other) for _ in range(8))
        )
    finally:
        await other.close()
    ids = [p.key.id for batch in got for p in batch]
    assert len(ids) == len(set(ids)) == 300


async def _delete_audit_without_rls(conn: Any) -> None:
    async with conn.transaction():  # a savepoint: the error leaves the rest usable
        await conn.execute("ALTER TABLE task_transitions NO FORCE ROW LEVEL SECURITY")
        await conn.execute("DELETE FROM task_transitions")


async def test_transition_log_is_append_only(pg: PostgresStore) -> None:
    tenant = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="a"))
    [r] = await pg.insert_tasks([new_task(tenant)], NOW)
    await pg.claim_preload(None, NOW, 1, NOW)
    [a] = await pg.mark_dispatched(
        [DispatchRequest(key=r.task.key, worker_id="w", lease_expires_at=NOW)], NOW
    )
    assert a is not None
    await pg.ack([FencedWrite(key=a.key, token=a.fencing_token)], NOW, NOW)
    await pg.complete([Completion(key=a.key, token=a.fencing_token)], NOW)
    async with system_conn(pg) as conn:
        # Row-level security: no policy lets anyone delete (or update) an audit row.
        assert await conn.execute("DELETE FROM task_transitions") == "DELETE 0"
        # Without RLS for the owner, the trigger refuses it.
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await _delete_audit_without_rls(conn)
        assert await conn.fetchval("SELECT count(*) FROM task_transitions") == 4


async def test_warm_up_opens_the_whole_pool_with_the_hot_statements_prepared(
    pg_dsn: str,
) -> None:
    """``StoreConfig.warm_up`` (serve, dev): every pool connection is open at start and
    each has already run the lifecycle's statements once, so the first tasks do not
    pay a new backend's first use of the task partitions (issue 20's warm-up)."""
    from scheduler.store.postgres import HOT_STATEMENTS

    cold = await PostgresStore.open(pg_dsn, StoreConfig(pool_max_size=3))
    warm = await PostgresStore.open(pg_dsn, StoreConfig(pool_max_size=3, warm_up=True))
    try:
        assert cold._pool.get_size() == 1
        assert warm._pool.get_size() == 3
        assert set(HOT_STATEMENTS) <= set(Q)
        # Warmed, the store serves calls as any other.
        tenant = await warm.create_tenant(Tenant(id=uuid.uuid4(), name="warm"))
        assert await warm.get_tenant(tenant.id) is not None
    finally:
        await cold.close()
        await warm.close()


_WRITTEN = (
    "tenant_id",
    "type",
    "scheduled_at",
    "due_at",
    "idempotency_key",
    "shard_id",
    "pool",
    "strict_timing",
    "jitter_mode",
    "max_retries",
    "timeout_s",
    "payload",
    "status",
)


async def test_uniform_and_mixed_batches_write_the_same_rows(pg: PostgresStore) -> None:
    """A column whose values are all equal travels as one value and tickwheel_fill
    spreads it (migration 0014): a uniform batch and a batch where every such column
    differs write each task's own values, and so do their dispatch and completion."""
    from scheduler.jitter import JitterMode
    from scheduler.states import TaskState
    from scheduler.types import Pool

    a = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="fill-a"))
    b = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="fill-b"))
    uniform = [new_task(a, initial_state=TaskState.PRELOADED) for _ in range(3)]
    mixed = [
        new_task(a, initial_state=TaskState.PRELOADED),
        new_task(
            b,
            NOW + timedelta(seconds=1),
            type="report",
            due_at=NOW + timedelta(seconds=3),
            pool=Pool.CRITICAL,
            strict_timing=True,
            jitter_mode=JitterMode.NONE,
            max_retries=7,
            timeout_s=2.5,
            unresolved_dependencies=0,
            initial_state=TaskState.SCHEDULED,
        ),
        new_task(b, NOW + timedelta(seconds=2), type="x", pool=Pool.BULK, max_retries=0),
    ]
    for batch in (uniform, mixed):
        made = await pg.insert_tasks(batch, NOW)
        assert [r.created for r in made] == [True] * len(batch)
        for t in batch:
            row = await pg.get_task(None, t.id)
            want = {**{k: getattr(t, k) for k in _WRITTEN[:-1]}, "status": t.initial_state}
            assert {k: getattr(row, k) for k in _WRITTEN} == want, t.id
    lease = NOW + timedelta(seconds=30)
    requests = [
        DispatchRequest(key=TaskKey(t.id, t.scheduled_at), worker_id="w1", lease_expires_at=lease)
        for t in uniform
    ] + [
        DispatchRequest(
            key=TaskKey(mixed[0].id, mixed[0].scheduled_at),
            worker_id="w2",
            lease_expires_at=lease,
            running=True,
        )
    ]
    out = await pg.mark_dispatched(requests, NOW)
    assert all(x is not None for x in out)
    for r in requests:
        row = await pg.get_task(None, r.key.id)
        assert (row.worker_id, row.lease_expires_at) == (r.worker_id, lease)
        assert row.status is (TaskState.RUNNING if r.running else TaskState.DISPATCHED)


async def test_a_batch_is_written_in_due_order(pg: PostgresStore) -> None:
    """A stampede's batch is due all over the jitter window in its submission order:
    the rows go in by due time (``in_due_order``), so a heap page holds tasks due
    together and the dispatch changes it once, not through the whole window. The
    answers stay in the request's order; a batch naming a key twice keeps the request's
    order, so the first of the two is created even when the other is due sooner."""
    import random

    t = await pg.create_tenant(Tenant(id=uuid.uuid4(), name="due-order"))
    offsets = list(range(200))
    random.Random(7).shuffle(offsets)
    batch = [new_task(t, NOW, due_at=NOW + timedelta(milliseconds=ms)) for ms in offsets]
    made = await pg.insert_tasks(batch, NOW)
    assert [r.task.id for r in made] == [x.id for x in batch]
    assert all(r.created for r in made)
    async with system_conn(pg) as conn:
        written = await conn.fetch(
            "SELECT due_at FROM tasks WHERE tenant_id = $1 ORDER BY ctid", t.id
        )
    assert [r[0] for r in written] == sorted(x.due_at for x in batch)

    first = new_task(t, NOW, due_at=NOW + timedelta(seconds=9), idempotency_key="twice")
    twin = new_task(t, NOW, due_at=NOW + timedelta(seconds=1), idempotency_key="twice")
    made = await pg.insert_tasks([first, twin], NOW)
    assert [r.created for r in made] == [True, False]
    assert made[1].task.id == first.id
