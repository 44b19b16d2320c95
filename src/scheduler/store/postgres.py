"""The PostgreSQL store (asyncpg): the production durable record.

SQL lives in ``sql/postgres/*.sql``; driver errors become :class:`StoreError` only here,
at the adapter boundary. See ``docs/store.md`` for the schema, fencing and partitions.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from scheduler._errors import (
    InvalidArgument,
    InvalidTransition,
    NotFound,
    StoreError,
    TickwheelError,
)
from scheduler.jitter import JITTER_WINDOW_S, JitterMode
from scheduler.states import TaskState, check_transition, sources
from scheduler.store import _common, _sql, _validate
from scheduler.store._config import StoreConfig
from scheduler.store._pg_notices import WORK_CHANNEL, PgWorkNotices, notify_work
from scheduler.store._pg_orchestration import PostgresOrchestration
from scheduler.store.protocol import WorkCallback, WorkNotices
from scheduler.types import (
    ApiKey,
    Assignment,
    CancelResult,
    CompleteResult,
    Completion,
    DispatchRequest,
    FailResult,
    Failure,
    FencedWrite,
    InsertResult,
    MaintenanceResult,
    NewTask,
    Outcome,
    Page,
    Pool,
    Preloaded,
    ReclaimResult,
    Release,
    ShardClaim,
    TaskFilter,
    TaskKey,
    TaskRecord,
    Tenant,
    Transition,
)

__all__ = ["PostgresStore", "migrate"]

log = logging.getLogger(__name__)

_MIGRATIONS_TABLE = "tickwheel_schema_migrations"
_MIGRATE_LOCK = 7429000
_PARTITION_NAME = re.compile(r"^tasks_p(\d{8})$")
_POOLS = {p.value: p for p in Pool}
_FAILED = (TaskState.DEAD_LETTER, TaskState.CANCELLED)
"""States whose entry applies a workflow task's upstream policy (same transaction)."""

Q = _sql.queries("postgres")


@contextlib.asynccontextmanager
async def _driver_errors() -> AsyncIterator[None]:
    """Turn driver and network errors into StoreError (ours pass through)."""
    try:
        yield
    except TickwheelError:
        raise
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        raise StoreError(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc


async def _no_session_state(conn: asyncpg.Connection) -> None:
    """Pool release hook: nothing to reset.

    asyncpg's default reset sends ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` on every release, one more round trip per store call. The store leaves no
    session state behind (no SET, LISTEN, cursors or session advisory locks; ``migrate``
    uses a connection of its own), and asyncpg still rolls back an open transaction before
    calling this hook.
    """


_POOL_TAKES_RESET = "reset" in inspect.signature(asyncpg.create_pool).parameters
"""asyncpg >= 0.30 lets the pool's reset be replaced."""


# ---------------------------------------------------------------------------- migrations


async def migrate(dsn: str, *, use_schema_file: bool = True) -> list[int]:
    """Bring the database at ``dsn`` to the newest schema; returns the versions applied.

    Idempotent and safe to run concurrently (an advisory lock serialises runs). A fresh
    database gets ``schema.sql`` and every version recorded (``use_schema_file=False``
    applies the numbered migrations one by one instead, which the test suite compares
    with the fresh install).
    """
    async with _driver_errors():
        conn = await asyncpg.connect(dsn, timeout=30)
        try:
            await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATE_LOCK)
            try:
                return await _migrate(conn, use_schema_file)
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATE_LOCK)
        finally:
            await conn.close()


async def _migrate(conn: asyncpg.Connection, use_schema_file: bool) -> list[int]:
    await conn.execute(
        f"CREATE TABLE IF NOT EXISTS {_MIGRATIONS_TABLE} ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT NOW())"
    )
    done = {r["version"] for r in await conn.fetch(f"SELECT version FROM {_MIGRATIONS_TABLE}")}
    steps = _sql.migrations()
    pending = [s for s in steps if s[0] not in done]
    if not pending:
        return []
    fresh = not done and await conn.fetchval("SELECT to_regclass('public.tasks')") is None
    async with conn.transaction():
        if fresh and use_schema_file:
            await conn.execute(_sql.read_text("postgres", "schema.sql"))
        else:
            for _version, _name, text in pending:
                await conn.execute(text)
        await conn.executemany(
            f"INSERT INTO {_MIGRATIONS_TABLE} (version, name) VALUES ($1, $2)",
            [(v, n) for v, n, _ in pending],
        )
    return [v for v, _, _ in pending]


# ---------------------------------------------------------------------------- rows


def _task(row: asyncpg.Record) -> TaskRecord:
    return TaskRecord(
        id=row["id"],
        tenant_id=row["tenant_id"],
        type=row["type"],
        status=TaskState(row["status"]),
        scheduled_at=row["scheduled_at"],
        due_at=row["due_at"],
        idempotency_key=row["idempotency_key"],
        shard_id=row["shard_id"],
        pool=Pool(row["pool"]),
        strict_timing=row["strict_timing"],
        jitter_mode=JitterMode(row["jitter_mode"]),
        fencing_token=row["fencing_token"],
        retry_count=row["retry_count"],
        max_retries=row["max_retries"],
        timeout_s=row["timeout_s"],
        payload=json.loads(row["payload"]),
        result_payload=_common.loads(row["result_payload"]),
        checkpoint=_common.loads(row["checkpoint"]),
        trace_context=_common.loads(row["trace_context"]),
        last_error=row["last_error"],
        worker_id=row["worker_id"],
        lease_expires_at=row["lease_expires_at"],
        cancel_requested=row["cancel_requested"],
        workflow_id=row["workflow_id"],
        unresolved_dependencies=row["unresolved_dependencies"],
        schedule_id=row["schedule_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _preloaded(row: asyncpg.Record) -> Preloaded:
    return Preloaded(
        TaskKey(row["id"], row["scheduled_at"]),
        row["due_at"],
        row["tenant_id"],
        row["shard_id"],
        Pool(row["pool"]),
        row["type"],
    )


def _keys_of(keys: Sequence[TaskKey], rows: Sequence[asyncpg.Record]) -> list[TaskKey]:
    """The keys (each once) of the tasks a batch statement returned (column ``id``)."""
    ids = {r["id"] for r in rows}
    return list({k.id: k for k in keys if k.id in ids}.values())


def _tenant(row: asyncpg.Record) -> Tenant:
    return Tenant(
        id=row["id"],
        name=row["name"],
        tier=row["tier"],
        rate_limit_rps=row["rate_limit_rps"],
        max_concurrent_workers=row["max_concurrent_workers"],
        home_region=row["home_region"],
        created_at=row["created_at"],
    )


def _record_from_new(t: NewTask, payload: str, trace: str | None, now: datetime) -> TaskRecord:
    deps = len(set(t.depends_on)) if t.depends_on else t.unresolved_dependencies
    return TaskRecord(
        id=t.id,
        tenant_id=t.tenant_id,
        type=t.type,
        status=t.initial_state,
        scheduled_at=t.scheduled_at,
        due_at=t.due_at,
        idempotency_key=t.idempotency_key,
        shard_id=t.shard_id,
        pool=t.pool,
        strict_timing=t.strict_timing,
        jitter_mode=t.jitter_mode,
        fencing_token=1,
        retry_count=0,
        max_retries=t.max_retries,
        timeout_s=float(t.timeout_s),
        payload=json.loads(payload),
        result_payload=None,
        checkpoint=None,
        trace_context=_common.loads(trace),
        last_error=None,
        worker_id=None,
        lease_expires_at=None,
        cancel_requested=False,
        workflow_id=t.workflow_id,
        unresolved_dependencies=deps,
        schedule_id=t.schedule_id,
        created_at=now,
        updated_at=now,
    )


def _partition_day(name: str) -> date | None:
    m = _PARTITION_NAME.match(name)
    return datetime.strptime(m.group(1), "%Y%m%d").date() if m else None


def _utc_day(t: datetime) -> date:
    return t.astimezone(UTC).date()


# ---------------------------------------------------------------------------- the store


class PostgresStore(PostgresOrchestration):
    """The :class:`~scheduler.store.Store` on PostgreSQL through an asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool, config: StoreConfig, dsn: str | None = None) -> None:
        self._pool = pool
        self._dsn = dsn  # for the work-notice listener's own connection
        self.config = config
        self._days: set[date] = set()
        self._tenants: set[uuid.UUID] = set()
        self._last_sweep: datetime | None = None
        self._closed = False

    @classmethod
    async def open(cls, dsn: str, config: StoreConfig | None = None) -> PostgresStore:
        """Connect (the schema must be migrated) and create the partitions ahead."""
        config = config or StoreConfig()
        extra: dict[str, Any] = {}
        if _POOL_TAKES_RESET:
            extra["reset"] = _no_session_state
        async with _driver_errors():
            pool = await asyncpg.create_pool(
                dsn,
                min_size=config.pool_min_size,
                max_size=config.pool_max_size,
                command_timeout=config.command_timeout_s,
                server_settings={"jit": "off", "timezone": "UTC"},
                **extra,
            )
        store = cls(pool, config, dsn)
        try:
            await store._load_partitions()
            await store._create_ahead(datetime.now(UTC))
        except BaseException:
            await store.close()
            raise
        return store

    async def listen_work(self, on_notice: WorkCallback) -> WorkNotices | None:
        """LISTEN on its own connection (a pooled one would be reset and reused)."""
        if self._dsn is None:
            return None
        async with _driver_errors():
            conn = await asyncpg.connect(self._dsn, server_settings={"timezone": "UTC"})
        notices = PgWorkNotices(conn, on_notice)
        try:
            async with _driver_errors():
                await conn.add_listener(WORK_CHANNEL, notices.heard)
        except BaseException:
            await notices.close()
            raise
        return notices

    async def close(self) -> None:
        """Close the pool; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy[asyncpg.Record]]:
        async with _driver_errors(), self._pool.acquire() as conn:
            yield conn

    # -- partitions ------------------------------------------------------------------
    async def _load_partitions(self) -> None:
        async with self._conn() as conn:
            rows = await conn.fetch(Q["list_partitions"])
        self._days = {d for r in rows if (d := _partition_day(r[0])) is not None}

    async def _ensure_days(self, days: set[date]) -> list[str]:
        created: list[str] = []
        missing = sorted(days - self._days)
        if not missing:
            return created
        async with self._conn() as conn:
            for day in missing:
                if await conn.fetchval(Q["ensure_partition"], day):
                    created.append(f"tasks_p{day:%Y%m%d}")
                self._days.add(day)
        return created

    async def _create_ahead(self, now: datetime) -> list[str]:
        today = _utc_day(now)
        ahead = self.config.partition_days_ahead
        return await self._ensure_days({today + timedelta(days=i) for i in range(ahead + 1)})

    async def partitions(self) -> list[str]:
        """Names of the attached day partitions, oldest first."""
        async with self._conn() as conn:
            rows = await conn.fetch(Q["list_partitions"])
        return sorted(r[0] for r in rows)

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Create partitions ahead; detach expired ones that hold only terminal tasks.

        Detaching never deletes task rows: the table is renamed ``tasks_detached_pDAY``
        for the operator to archive or drop. The idempotency keys of its tasks go.
        """
        _validate.aware("now", now)
        await self._load_partitions()
        created = await self._create_ahead(now)
        detached: list[str] = []
        if self.config.retention_days is not None:
            cutoff = _utc_day(now) - timedelta(days=self.config.retention_days)
            for day in sorted(self._days):
                if day + timedelta(days=1) > cutoff:
                    continue
                if await self._detach(day):
                    detached.append(f"tasks_p{day:%Y%m%d}")
        return MaintenanceResult(tuple(created), tuple(detached))

    async def _detach(self, day: date) -> bool:
        name = f"tasks_p{day:%Y%m%d}"
        lo = datetime(day.year, day.month, day.day, tzinfo=UTC)
        async with self._conn() as conn, conn.transaction():
            await conn.execute(f"LOCK TABLE {name} IN SHARE ROW EXCLUSIVE MODE")
            live = await conn.fetchval(Q["partition_live_count"], lo, lo + timedelta(days=1))
            if live:
                return False
            await conn.execute(f"DELETE FROM task_keys WHERE task_id IN (SELECT id FROM {name})")
            await conn.execute(f"ALTER TABLE tasks DETACH PARTITION {name}")
            await conn.execute(f"ALTER TABLE {name} RENAME TO tasks_detached_p{day:%Y%m%d}")
        self._days.discard(day)
        return True

    # -- tenants ---------------------------------------------------------------------
    async def create_tenant(self, tenant: Tenant) -> Tenant:
        """Insert a tenant."""
        _common.check_tenant(tenant)
        created = tenant.created_at or datetime.now(UTC)
        async with self._conn() as conn:
            try:
                row = await conn.fetchrow(
                    Q["insert_tenant"],
                    tenant.id,
                    tenant.name,
                    tenant.tier,
                    tenant.rate_limit_rps,
                    tenant.max_concurrent_workers,
                    tenant.home_region,
                    created,
                )
            except asyncpg.UniqueViolationError as exc:
                from scheduler._errors import AlreadyExists

                raise AlreadyExists("tenant", str(tenant.id)) from exc
        assert row is not None
        self._tenants.add(tenant.id)
        return _tenant(row)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """A tenant by id; NotFound when absent."""
        async with self._conn() as conn:
            row = await conn.fetchrow(Q["get_tenant"], tenant_id)
        if row is None:
            raise NotFound("tenant", str(tenant_id))
        return _tenant(row)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change name, tier, quotas or home region."""
        t = _common.tenant_changes(await self.get_tenant(tenant_id), changes)
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["update_tenant"],
                tenant_id,
                t.name,
                t.tier,
                t.rate_limit_rps,
                t.max_concurrent_workers,
                t.home_region,
            )
        if row is None:
            raise NotFound("tenant", str(tenant_id))
        return _tenant(row)

    async def create_api_key(self, tenant_id: uuid.UUID, name: str, secret_hash: bytes) -> ApiKey:
        """Store an API key's hash for a tenant."""
        _validate.text("name", name, 128)
        await self._check_tenants({tenant_id})
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["insert_api_key"], uuid.uuid4(), tenant_id, name, secret_hash, datetime.now(UTC)
            )
        assert row is not None
        return ApiKey(
            id=row["id"],
            tenant_id=row["tenant_id"],
            name=row["name"],
            created_at=row["created_at"],
            revoked=row["revoked"],
        )

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a (non-revoked) key hash."""
        async with self._conn() as conn:
            value: uuid.UUID | None = await conn.fetchval(Q["tenant_for_key_hash"], secret_hash)
        return value

    async def _check_tenants(self, ids: set[uuid.UUID]) -> None:
        unknown = ids - self._tenants
        if not unknown:
            return
        async with self._conn() as conn:
            rows = await conn.fetch(Q["known_tenants"], list(unknown))
        found = {r[0] for r in rows}
        self._tenants |= found
        missing = unknown - found
        if missing:
            raise NotFound("tenant", str(sorted(missing)[0]))

    # -- submission ------------------------------------------------------------------
    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many in one statement; a result per item (created or duplicate)."""
        _validate.aware("now", now)
        if not tasks:
            return []
        encoded = _validate.new_tasks(tasks, self.config.payload_limit_bytes)
        await self._check_tenants({t.tenant_id for t in tasks})
        await self._ensure_days({_utc_day(t.scheduled_at) for t in tasks})
        try:
            return await self._insert(tasks, encoded, now)
        except StoreError as exc:
            # A partition detached or dropped behind our back: forget, re-create, retry.
            if not isinstance(exc.__cause__, asyncpg.CheckViolationError):
                raise
            await self._load_partitions()
            await self._ensure_days({_utc_day(t.scheduled_at) for t in tasks})
            return await self._insert(tasks, encoded, now)

    async def _insert(
        self, tasks: Sequence[NewTask], encoded: Sequence[tuple[str, str | None]], now: datetime
    ) -> list[InsertResult]:
        args = (
            [t.id for t in tasks],
            [t.tenant_id for t in tasks],
            [t.type for t in tasks],
            [t.scheduled_at for t in tasks],
            [t.due_at for t in tasks],
            [t.initial_state.value for t in tasks],
            [t.idempotency_key for t in tasks],
            [t.max_retries for t in tasks],
            [p for p, _ in encoded],
            [len(set(t.depends_on)) if t.depends_on else t.unresolved_dependencies for t in tasks],
            [t.shard_id for t in tasks],
            [t.pool.value for t in tasks],
            [t.strict_timing for t in tasks],
            [t.jitter_mode.value for t in tasks],
            [float(t.timeout_s) for t in tasks],
            [tr for _, tr in encoded],
            [t.workflow_id for t in tasks],
            [t.schedule_id for t in tasks],
            now,
        )
        edges = [
            (t.workflow_id, parent, t.id, t.scheduled_at)
            for t in tasks
            for parent in dict.fromkeys(t.depends_on)
        ]
        async with self._conn() as conn, conn.transaction():
            created = {r[0] for r in await conn.fetch(Q["insert_tasks"], *args)}
            await notify_work(
                conn,
                {
                    t.shard_id
                    for t in tasks
                    if t.id in created and t.initial_state is TaskState.SCHEDULED
                },
                reconcile=False,
            )
            if edges:
                created_edges = [e for e in edges if e[2] in created]
                if created_edges:
                    await conn.execute(
                        Q["insert_dependencies"],
                        [e[0] for e in created_edges],
                        [e[1] for e in created_edges],
                        [e[2] for e in created_edges],
                        [e[3] for e in created_edges],
                    )
            dups = [i for i, t in enumerate(tasks) if t.id not in created]
            existing: dict[int, TaskRecord] = {}
            if dups:
                rows = await conn.fetch(
                    Q["tasks_by_idempotency"],
                    [tasks[i].tenant_id for i in dups],
                    [tasks[i].idempotency_key for i in dups],
                )
                existing = {dups[r["ord"] - 1]: _task(r) for r in rows}
        out = []
        seen: set[uuid.UUID] = set()
        for i, t in enumerate(tasks):
            if t.id in created and t.id not in seen:
                seen.add(t.id)
                out.append(InsertResult(_record_from_new(t, *encoded[i], now), True))
            elif i in existing:
                out.append(InsertResult(existing[i], False))
            else:
                raise StoreError(f"task {t.id}: key conflict without a visible task")
        return out

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id alone: task_keys maps id -> scheduled_at, then one partition is read."""
        async with self._conn() as conn:
            row = await conn.fetchrow(Q["get_task"], task_id)
        if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
            raise NotFound("task", str(task_id))
        return _task(row)

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """Keyset-paginated by (scheduled_at, id)."""
        if not 1 <= page_size <= 1000:
            raise InvalidArgument("page_size", "must be between 1 and 1000")
        after = _common.decode_page_token(page_token)
        lo = _validate.aware("scheduled_from", flt.scheduled_from or _common.FAR_PAST)
        hi = _validate.aware("scheduled_to", flt.scheduled_to or _common.FAR_FUTURE)
        async with self._conn() as conn:
            rows = await conn.fetch(
                Q["list_tasks"],
                tenant_id,
                [s.value for s in flt.statuses] or None,
                flt.type,
                lo,
                hi,
                after.scheduled_at if after else _common.FAR_PAST,
                after.id if after else _common.ZERO_UUID,
                page_size + 1,
            )
        tasks = tuple(_task(r) for r in rows[:page_size])
        token = _common.encode_page_token(tasks[-1].key) if len(rows) > page_size else ""
        return Page(tasks, token)

    # -- pre-load --------------------------------------------------------------------
    async def claim_preload(
        self, shards: Sequence[int] | None, horizon: datetime, limit: int, now: datetime
    ) -> list[Preloaded]:
        """Move due SCHEDULED/RETRYING tasks to PRELOADED, one statement per day partition
        of the look-ahead window; every ``preload_sweep_interval_s`` also every day."""
        _validate.aware("horizon", horizon)
        _validate.aware("now", now)
        if limit <= 0:
            return []
        jitter = timedelta(seconds=JITTER_WINDOW_S)
        hi = horizon + jitter + timedelta(microseconds=1)
        sweep = self._last_sweep is None or (now - self._last_sweep).total_seconds() >= (
            self.config.preload_sweep_interval_s
        )
        if sweep:
            self._last_sweep = now
            windows = [(_common.FAR_PAST, hi)]
        else:
            windows = _common.day_windows(_common.day_start(min(now, horizon) - jitter), hi)
        shard_list = list(shards) if shards is not None else None
        out: list[Preloaded] = []
        async with self._conn() as conn:
            for lo, end in windows:
                rows = await conn.fetch(
                    Q["claim_preload"],
                    horizon,
                    shard_list,
                    lo,
                    end,
                    limit - len(out),
                    now,
                    self.config.actor,
                )
                out.extend(_preloaded(r) for r in rows)
                if len(out) >= limit:
                    break
        out.sort(key=lambda p: p.due_at)
        return out

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        """PRELOADED tasks (recovery), keyset-paginated by (scheduled_at, id)."""
        _validate.aware("horizon", horizon)
        if changed_since is not None:
            _validate.aware("changed_since", changed_since)
        async with self._conn() as conn:
            rows = await conn.fetch(
                Q["load_preloaded"],
                horizon,
                list(shards) if shards is not None else None,
                after.scheduled_at if after else _common.FAR_PAST,
                after.id if after else _common.ZERO_UUID,
                limit,
                changed_since,
            )
        return [_preloaded(r) for r in rows]

    # -- dispatch and worker writes ----------------------------------------------------
    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """Raise each shard's epoch by one for ``owner`` (one statement)."""
        _validate.aware("now", now)
        if not shards:
            return {}
        async with self._conn() as conn:
            rows = await conn.fetch(Q["claim_shards"], sorted(set(shards)), owner, now)
        return {int(r["shard_id"]): int(r["epoch"]) for r in rows}

    async def shard_claims(self) -> list[ShardClaim]:
        """The whole ownership history."""
        async with self._conn() as conn:
            rows = await conn.fetch(Q["shard_claims"])
        return [
            ShardClaim(int(r["shard_id"]), int(r["epoch"]), r["owner"], r["claimed_at"])
            for r in rows
        ]

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | None]:
        """PRELOADED -> DISPATCHED (RUNNING when ``running``) with token + 1, in one
        statement."""
        _validate.aware("now", now)
        if not requests:
            return []
        _validate.keys("requests", requests)
        _validate.dispatch_requests(requests)
        # One row per task: the first request for a key wins, a repeat gets None.
        first: dict[uuid.UUID, DispatchRequest] = {}
        for r in requests:
            first.setdefault(r.key.id, r)
        todo = list(first.values())
        lo, hi = _common.bounds([r.key for r in todo])
        async with self._conn() as conn:
            rows = await conn.fetch(
                Q["mark_dispatched"],
                [r.key.id for r in todo],
                [r.key.scheduled_at for r in todo],
                [r.worker_id for r in todo],
                [r.lease_expires_at for r in todo],
                now,
                lo,
                hi,
                self.config.actor,
                [r.epoch for r in todo],
                [r.running for r in todo],
            )
        # The key, worker and lease are the request's (written as given); the rest is
        # the row's. Columns by position, in mark_dispatched's SELECT order.
        by_id = {r[0]: r for r in rows}
        pools = _POOLS
        loads = json.loads
        out: list[Assignment | None] = []
        append = out.append
        for req in requests:
            row = by_id.pop(req.key.id, None)
            if row is None:
                append(None)
                continue
            _id, tenant, typ, payload, token, retries, max_retries, due, cp, trace, pool, tmo = row
            append(
                Assignment(
                    key=req.key,
                    tenant_id=tenant,
                    type=typ,
                    payload=loads(payload),
                    fencing_token=token,
                    attempt=retries + 1,
                    max_retries=max_retries,
                    due_at=due,
                    lease_expires_at=req.lease_expires_at,
                    checkpoint=None if cp is None else loads(cp),
                    trace_context=None if trace is None else loads(trace),
                    pool=pools[pool],
                    worker_id=req.worker_id,
                    timeout_s=tmo,
                )
            )
        return out

    async def _outcomes(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        keys: Sequence[TaskKey],
        tokens: Sequence[int],
        ok: set[tuple[uuid.UUID, int]],
    ) -> list[Outcome]:
        """OK where (id, token) matched; else STALE if the task exists, else NOT_FOUND."""
        missed = [k for k, t in zip(keys, tokens, strict=True) if (k.id, t) not in ok]
        exists: set[uuid.UUID] = set()
        if missed:
            lo, hi = _common.bounds(missed)
            rows = await conn.fetch(
                Q["existing_keys"], [k.id for k in missed], [k.scheduled_at for k in missed], lo, hi
            )
            exists = {r[0] for r in rows}
        return [
            Outcome.OK
            if (k.id, t) in ok
            else Outcome.STALE
            if k.id in exists
            else Outcome.NOT_FOUND
            for k, t in zip(keys, tokens, strict=True)
        ]

    async def _fenced_common(
        self, name: str, writes: Sequence[FencedWrite], lease: datetime, now: datetime
    ) -> list[Outcome]:
        _validate.aware("lease_expires_at", lease)
        _validate.aware("now", now)
        if not writes:
            return []
        _validate.keys("writes", writes)
        keys = [w.key for w in writes]
        lo, hi = _common.bounds(keys)
        ids = [k.id for k in keys]
        times = [k.scheduled_at for k in keys]
        tokens = [w.token for w in writes]
        async with self._conn() as conn:
            if name == "ack":
                rows = await conn.fetch(Q["ack"], ids, times, tokens, lease, now, lo, hi)
                ok: set[tuple[uuid.UUID, int]] = {(r[0], r[1]) for r in rows}
                states = [TaskState.RUNNING.value]  # a repeated ack is OK
            else:
                ok = set()
                states = [TaskState.DISPATCHED.value, TaskState.RUNNING.value]
            rest = [w for w in writes if (w.key.id, w.token) not in ok]
            if rest:
                rows = await conn.fetch(
                    Q["heartbeat"],
                    [w.key.id for w in rest],
                    [w.key.scheduled_at for w in rest],
                    [w.token for w in rest],
                    lease,
                    now,
                    *_common.bounds([w.key for w in rest]),
                    states,
                )
                ok |= {(r[0], r[1]) for r in rows}
            return await self._outcomes(conn, keys, tokens, ok)

    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING with the current token."""
        return await self._fenced_common("ack", writes, lease_expires_at, now)

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """Extend leases held with the current token."""
        return await self._fenced_common("heartbeat", writes, lease_expires_at, now)

    async def checkpoint(
        self, key: TaskKey, token: int, data: dict[str, Any], now: datetime
    ) -> Outcome:
        """Save a RUNNING task's progress (fenced)."""
        _validate.keys("key", [FencedWrite(key=key, token=token)])
        _validate.aware("now", now)
        encoded = _validate.json_object("data", data, self.config.payload_limit_bytes)
        async with self._conn() as conn:
            row = await conn.fetchval(
                Q["checkpoint"], key.id, key.scheduled_at, token, encoded, now
            )
            if row is not None:
                return Outcome.OK
            return (await self._outcomes(conn, [key], [token], set()))[0]

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        """RUNNING -> COMPLETED, ledger row and DAG decrement in one transaction."""
        _validate.aware("now", now)
        if not items:
            return []
        _validate.keys("items", items)
        limit = self.config.payload_limit_bytes
        results = [
            None
            if c.result is None
            else _validate.json_object(f"items[{i}].result", c.result, limit)
            for i, c in enumerate(items)
        ]
        keys = [c.key for c in items]
        lo, hi = _common.bounds(keys)
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch(
                Q["complete"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [c.token for c in items],
                results,
                now,
                lo,
                hi,
            )
            ok = {(r[0], r[1]) for r in rows}
            parents = [r[0] for r in rows if r["workflow_id"] is not None]
            children: dict[uuid.UUID, list[Preloaded]] = {}
            if parents:
                ready = await conn.fetch(Q["release_children"], parents, now, self.config.actor)
                await notify_work(conn, {r["shard_id"] for r in ready}, reconcile=True)
                order = [r[0] for r in rows]
                children = _common.assign_children(
                    order, [(_preloaded(r), r["parents"]) for r in ready]
                )
            outcomes = await self._outcomes(conn, keys, [c.token for c in items], ok)
        return _common.complete_results(keys, outcomes, children)

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        """RUNNING -> RETRYING, or on to DEAD_LETTER when no attempt remains; a workflow
        task's upstream policy is applied in the same transaction."""
        _validate.aware("now", now)
        if not items:
            return []
        _validate.keys("items", items)
        _validate.failures(items)
        keys = [f.key for f in items]
        lo, hi = _common.bounds(keys)
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch(
                Q["fail"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [f.token for f in items],
                [f.error for f in items],
                [f.retryable for f in items],
                [f.retry_at for f in items],
                now,
                lo,
                hi,
            )
            state = {r[0]: TaskState(r[2]) for r in rows}
            dead = [r for r in rows if r["status"] == TaskState.DEAD_LETTER]
            if wf := [r for r in dead if r["workflow_id"] is not None]:
                await self._apply_upstream(conn, _keys_of(keys, wf), now)
            tokens = [f.token for f in items]
            outcomes = await self._outcomes(conn, keys, tokens, {(r[0], r[1]) for r in rows})
        return [
            FailResult(o, state.get(k.id) if o is Outcome.OK else None)
            for k, o in zip(keys, outcomes, strict=True)
        ]

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        """RUNNING/DISPATCHED -> PRELOADED (attempt not counted), saving a checkpoint; with
        a cancel pending -> CANCELLED and the upstream policy, in one transaction."""
        _validate.aware("now", now)
        if not items:
            return []
        _validate.keys("items", items)
        limit = self.config.payload_limit_bytes
        cps = [
            None
            if r.checkpoint is None
            else _validate.json_object(f"items[{i}].checkpoint", r.checkpoint, limit)
            for i, r in enumerate(items)
        ]
        keys = [r.key for r in items]
        lo, hi = _common.bounds(keys)
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch(
                Q["release"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [r.token for r in items],
                cps,
                now,
                lo,
                hi,
            )
            # A cancel was pending: the task went CANCELLED, not back to PRELOADED.
            gone = [r for r in rows if r["status"] == TaskState.CANCELLED]
            if wf := [r for r in gone if r["workflow_id"] is not None]:
                await self._apply_upstream(conn, _keys_of(keys, wf), now)
            tokens = [r.token for r in items]
            return await self._outcomes(conn, keys, tokens, {(r[0], r[1]) for r in rows})

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING with a cancel pending -> CANCELLED (the worker confirmed), with the
        upstream policy of workflow tasks in the same transaction."""
        _validate.aware("now", now)
        if not writes:
            return []
        _validate.keys("writes", writes)
        keys = [w.key for w in writes]
        lo, hi = _common.bounds(keys)
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch(
                Q["confirm_cancel"],
                [k.id for k in keys],
                [k.scheduled_at for k in keys],
                [w.token for w in writes],
                now,
                lo,
                hi,
            )
            if wf := [r for r in rows if r["workflow_id"] is not None]:
                await self._apply_upstream(conn, _keys_of(keys, wf), now)
            tokens = [w.token for w in writes]
            return await self._outcomes(conn, keys, tokens, {(r[0], r[1]) for r in rows})

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry (state table): DISPATCHED -> PRELOADED, RUNNING ->
        RETRYING / DEAD_LETTER, pending cancels -> CANCELLED."""
        _validate.aware("now", now)
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch(
                Q["reclaim_expired"],
                now,
                list(shards) if shards is not None else None,
                limit,
                self.config.actor,
            )
            failed = [
                TaskKey(r["id"], r["scheduled_at"])
                for r in rows
                if r["workflow_id"] is not None and r["status"] in _FAILED
            ]
            if failed:
                await self._apply_upstream(conn, failed, now)
        requeued, retrying, dead, cancelled = [], [], [], []
        for r in rows:
            key = TaskKey(r["id"], r["scheduled_at"])
            status = TaskState(r["status"])
            if status is TaskState.PRELOADED:
                requeued.append(_preloaded(r))
            elif status is TaskState.RETRYING:
                retrying.append(key)
            elif status is TaskState.DEAD_LETTER:
                dead.append(key)
            else:
                cancelled.append(key)
        return ReclaimResult(tuple(requeued), tuple(retrying), tuple(dead), tuple(cancelled))

    # -- operator actions ----------------------------------------------------------------
    async def _locked(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        tenant_id: uuid.UUID | None,
        task_id: uuid.UUID,
    ) -> TaskRecord:
        row = await conn.fetchrow(Q["get_task"], task_id)
        if row is None or (tenant_id is not None and row["tenant_id"] != tenant_id):
            raise NotFound("task", str(task_id))
        locked = await conn.fetchrow(Q["lock_task"], row["id"], row["scheduled_at"])
        if locked is None:
            raise NotFound("task", str(task_id))
        return _task(locked)

    async def _move(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        task: TaskRecord,
        steps: Sequence[TaskState],
        now: datetime,
        actor: str,
        due_at: datetime | None = None,
        guard: Sequence[TaskState] | None = None,
    ) -> TaskRecord:
        """Walk ``task`` through ``steps`` (each checked in code), one guarded UPDATE."""
        current = task.status
        for step in steps:
            check_transition(str(task.id), current, step)
            current = step
        target = steps[-1]
        allowed = (
            guard if guard is not None else sources(target) if len(steps) == 1 else (task.status,)
        )
        row = await conn.fetchrow(
            Q["set_status"],
            task.id,
            task.scheduled_at,
            target.value,
            [s.value for s in allowed],
            now,
            due_at,
        )
        if row is None:
            raise InvalidTransition(str(task.id), task.status.value, target.value, "guard refused")
        froms = [task.status, *steps[:-1]]
        await self._audit(conn, task, list(zip(froms, steps, strict=True)), now, actor)
        return _task(row)

    async def _audit(
        self,
        conn: asyncpg.pool.PoolConnectionProxy[asyncpg.Record],
        task: TaskRecord,
        moves: Sequence[tuple[TaskState, TaskState]],
        now: datetime,
        actor: str,
    ) -> None:
        n = len(moves)
        await conn.execute(
            Q["audit"],
            [task.id] * n,
            [task.scheduled_at] * n,
            [f.value for f, _ in moves],
            [t.value for _, t in moves],
            [task.fencing_token] * n,
            [actor] * n,
            [now] * n,
        )

    async def cancel(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime
    ) -> CancelResult:
        """Immediate from SCHEDULED/PRELOADED/RETRYING; requested from DISPATCHED/RUNNING."""
        _validate.aware("now", now)
        async with self._conn() as conn, conn.transaction():
            task = await self._locked(conn, tenant_id, task_id)
            if task.status in (TaskState.DISPATCHED, TaskState.RUNNING):
                if task.cancel_requested:
                    return CancelResult(task, task.worker_id)
                row = await conn.fetchrow(Q["request_cancel"], task.id, task.scheduled_at, now)
                assert row is not None
                return CancelResult(_task(row), task.worker_id)
            moved = await self._move(conn, task, [TaskState.CANCELLED], now, self.config.actor)
            if moved.workflow_id is not None:
                await self._apply_upstream(conn, [moved.key], now)
            return CancelResult(moved, None)

    async def redrive(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime, due_at: datetime
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED, retry_count reset, due at ``due_at``."""
        _validate.aware("now", now)
        _validate.aware("due_at", due_at)
        async with self._conn() as conn, conn.transaction():
            task = await self._locked(conn, tenant_id, task_id)
            return await self._move(conn, task, [TaskState.SCHEDULED], now, "operator", due_at)

    async def transition(
        self, key: TaskKey, to_state: TaskState, now: datetime, *, actor: str = "operator"
    ) -> TaskRecord:
        """Operator move to ``to_state``; InvalidTransition (nothing written) if illegal."""
        _validate.aware("now", now)
        _validate.keys("key", [FencedWrite(key=key, token=0)])
        async with self._conn() as conn, conn.transaction():
            row = await conn.fetchrow(Q["lock_task"], key.id, key.scheduled_at)
            if row is None:
                raise NotFound("task", str(key.id))
            moved = await self._move(conn, _task(row), [to_state], now, actor)
            if moved.workflow_id is not None and to_state in _FAILED:
                await self._apply_upstream(conn, [moved.key], now)
            return moved

    async def _guarded_set_status_unchecked(
        self, key: TaskKey, to_state: TaskState, now: datetime
    ) -> bool:
        """The SQL guard alone, without the check in code (for tests of the guard)."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                Q["set_status"],
                key.id,
                key.scheduled_at,
                to_state.value,
                [s.value for s in sources(to_state)],
                now,
                None,
            )
        return row is not None

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task."""
        async with self._conn() as conn:
            rows = await conn.fetch(Q["transitions_of"], task_id)
        return [Transition(TaskState(r[0]), TaskState(r[1]), r[2], r[3], r[4]) for r in rows]
