"""The PostgreSQL store (asyncpg): the production durable record.

Owns the facade :class:`PostgresStore`: it owns the pool (through
:class:`~scheduler.store.postgres._db.Db`, where driver errors become
:class:`StoreError`), opens the work-notice listener and delegates each
:class:`~scheduler.store.Store` method to the part that owns it: ``partitions`` (day
partitions, ``maintain``), ``tenants`` (tenants and API keys), ``tasks`` (insert and
reads), ``dispatch`` (pre-load, dispatch, lease expiry), ``writes`` (fenced worker
writes), ``actions`` (cancel, redrive, transition), ``shards``, ``workflows`` and
``schedules`` (schedules, expectations, canaries). The parts share ``rows``, ``notices``
and ``upstream`` (the upstream policy the task writes apply in their own transaction);
they get the handle, the SQL (``sql/postgres/*.sql``) and the config, never the facade.
Re-exports :func:`~.migrate.migrate`, :data:`Q` and :data:`WORK_CHANNEL` for the CLI,
the tests and the benchmarks. See ``docs/store.md`` for the schema, fencing and
partitions. Called through :func:`scheduler.store.open_store`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from scheduler.states import TaskState
from scheduler.store._config import StoreConfig
from scheduler.store._facts import JobFacts
from scheduler.store.postgres._db import (
    POOL_TAKES_RESET,
    SCOPE_SETTING,
    SQL,
    SYSTEM,
    Db,
    driver_errors,
    no_session_state,
)
from scheduler.store.postgres.actions import Actions
from scheduler.store.postgres.dispatch import Dispatch
from scheduler.store.postgres.history import History
from scheduler.store.postgres.metrics import Metrics
from scheduler.store.postgres.migrate import migrate
from scheduler.store.postgres.notices import WORK_CHANNEL, PgWorkNotices
from scheduler.store.postgres.partitions import Partitions
from scheduler.store.postgres.schedules import Schedules
from scheduler.store.postgres.shards import Shards
from scheduler.store.postgres.tasks import Tasks
from scheduler.store.postgres.tenants import Tenants
from scheduler.store.postgres.workflows import Workflows
from scheduler.store.postgres.writes import WorkerWrites
from scheduler.store.protocol import DepthRow, ReplicationLag, WorkCallback, WorkNotices
from scheduler.store.protocol.tenants import MoveState
from scheduler.types import (
    DEFAULT_SCOPES,
    ActivityBucket,
    ApiKey,
    Assignment,
    CancelResult,
    CompleteResult,
    Completion,
    DispatchRequest,
    Expectation,
    FailResult,
    Failure,
    FencedWrite,
    Forecast,
    InsertResult,
    MaintenanceResult,
    NewTask,
    Outcome,
    OverdueGroup,
    Page,
    Pool,
    Preloaded,
    PreloadedPage,
    RawJSON,
    ReclaimResult,
    RefusedWrite,
    Release,
    Schedule,
    Scope,
    ShardClaim,
    TaskCounts,
    TaskFilter,
    TaskKey,
    TaskRecord,
    Tenant,
    Transition,
    Workflow,
    WorkflowView,
)

__all__ = ["SCOPE_SETTING", "SYSTEM", "WORK_CHANNEL", "PostgresStore", "Q", "migrate"]

log = logging.getLogger(__name__)

Q = SQL
"""Every named PostgreSQL statement (``sql/postgres/*.sql``), templates expanded."""

HOT_STATEMENTS = (
    "claim_preload",
    "mark_dispatched",
    "ack",
    "heartbeat",
    "complete",
    "fail",
    "release",
    "existing_keys",
    "insert_tasks",
)
"""What ``StoreConfig.warm_up`` prepares on each connection: a task's lifecycle."""


class PostgresStore:
    """The :class:`~scheduler.store.Store` on PostgreSQL: owns the pool, delegates."""

    def __init__(self, pool: asyncpg.Pool, config: StoreConfig, dsn: str | None = None) -> None:
        self._pool = pool
        self._dsn = dsn  # for the work-notice listener's own connection
        self.config = config
        self._closed = False
        rls, timeout = config.row_level_security, config.call_timeout_s
        db, q = Db(pool, row_level_security=rls, call_timeout_s=timeout), SQL
        self._partitions = Partitions(db, q, config)
        self._tenants = Tenants(db, q)
        self._tasks = Tasks(db, q, config, self._partitions, self._tenants)
        self._dispatch = Dispatch(db, q, config)
        self._writes = WorkerWrites(db, q, config)
        self._actions = Actions(db, q, config)
        self._shards = Shards(db, q)
        self._workflows = Workflows(db, q)
        self._schedules = Schedules(db, q)
        self._metrics = Metrics(db)
        self._history = History(db, q)

    @classmethod
    async def open(cls, dsn: str, config: StoreConfig | None = None) -> PostgresStore:
        """Connect (the schema must be migrated) and create the partitions ahead."""
        config = config or StoreConfig()
        extra: dict[str, Any] = {}
        if POOL_TAKES_RESET:
            extra["reset"] = no_session_state
        async with driver_errors():
            pool = await asyncpg.create_pool(
                dsn,
                min_size=config.pool_min_size,
                max_size=config.pool_max_size,
                command_timeout=config.command_timeout_s,
                timeout=config.connect_timeout_s,
                # Row-level security on: no row outside a scoped transaction, whatever
                # the role's default; off: every row (docs/security.md).
                server_settings={
                    "jit": "off",
                    "timezone": "UTC",
                    SCOPE_SETTING: "" if config.row_level_security else SYSTEM,
                    **config.session_settings(),
                },
                **extra,
            )
        store = cls(pool, config, dsn)
        try:
            if config.row_level_security:
                await store._warn_if_rls_bypassed()
            await store._partitions.load()
            await store._partitions.create_ahead(datetime.now(UTC))
            if config.warm_up:
                await store._warm_up()
        except BaseException:
            await store.close()
            raise
        return store

    async def _warm_up(self) -> None:
        """Every pool connection opened, with the hot statements prepared once on it:
        a backend's first statement on the task partitions loads their catalog
        entries (about 10 ms each, 0.3 ms after); afterwards the first real call
        costs what any other does. The pool keeps idle connections for asyncpg's
        inactive lifetime (5 minutes)."""
        n = self.config.pool_max_size
        async with driver_errors():
            conns = [await self._pool.acquire() for _ in range(n)]
            try:
                await asyncio.gather(*(self._prepare_hot(c) for c in conns))
            finally:
                for c in conns:
                    await self._pool.release(c)

    @staticmethod
    async def _prepare_hot(conn: Any) -> None:
        for name in HOT_STATEMENTS:
            await conn.prepare(Q[name])

    async def _warn_if_rls_bypassed(self) -> None:
        async with driver_errors():
            row = await self._pool.fetchrow(
                "SELECT current_user AS name, rolsuper OR rolbypassrls AS bypass"
                " FROM pg_roles WHERE rolname = current_user"
            )
        if row is not None and row["bypass"]:
            log.warning(
                "PostgreSQL role %s is a superuser or has BYPASSRLS: row-level security "
                "does not apply to it; connect as the (non-superuser) owner of the tables",
                row["name"],
            )

    async def listen_work(self, on_notice: WorkCallback) -> WorkNotices | None:
        """LISTEN on its own connection (a pooled one would be reset and reused)."""
        if self._dsn is None:
            return None
        async with driver_errors():
            settings, timeout = {"timezone": "UTC"}, self.config.connect_timeout_s
            conn = await asyncpg.connect(self._dsn, server_settings=settings, timeout=timeout)
        notices = PgWorkNotices(conn, on_notice)
        try:
            async with driver_errors():
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

    # -- partitions ---------------------------------------------------------------------
    async def partitions(self) -> list[str]:
        """Names of the attached day partitions, oldest first."""
        return await self._partitions.names()

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Create partitions ahead; detach expired ones that hold only terminal tasks.

        Detaching never deletes task rows: the table is renamed ``tasks_detached_pDAY``
        for the operator to archive or drop. The idempotency keys of its tasks go.
        """
        return await self._partitions.maintain(now)

    # -- tenants and keys ----------------------------------------------------------------
    async def create_tenant(self, tenant: Tenant) -> Tenant:
        """Insert a tenant."""
        return await self._tenants.create_tenant(tenant)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """A tenant by id; NotFound when absent."""
        return await self._tenants.get_tenant(tenant_id)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change name, tier, quotas or home region."""
        return await self._tenants.update_tenant(tenant_id, changes)

    async def create_api_key(
        self,
        tenant_id: uuid.UUID,
        name: str,
        secret_hash: bytes,
        *,
        scopes: frozenset[Scope] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
    ) -> ApiKey:
        """Store an API key's hash for a tenant, with its scopes and expiry."""
        return await self._tenants.create_api_key(
            tenant_id, name, secret_hash, scopes=scopes, expires_at=expires_at
        )

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a key hash that is neither revoked nor expired."""
        return await self._tenants.tenant_for_key_hash(secret_hash)

    async def api_key_for_hash(self, secret_hash: bytes) -> ApiKey | None:
        """The key of a hash, revoked and expired ones too."""
        return await self._tenants.api_key_for_hash(secret_hash)

    async def get_api_key(self, key_id: uuid.UUID) -> ApiKey:
        """A key by id; NotFound when absent."""
        return await self._tenants.get_api_key(key_id)

    async def list_api_keys(self, tenant_id: uuid.UUID) -> list[ApiKey]:
        """Every key of a tenant, oldest first."""
        return await self._tenants.list_api_keys(tenant_id)

    async def revoke_api_key(self, key_id: uuid.UUID, at: datetime) -> ApiKey:
        """Mark a key revoked; NotFound when absent."""
        return await self._tenants.revoke_api_key(key_id, at)

    async def rotate_api_key(
        self,
        key_id: uuid.UUID,
        new_id: uuid.UUID,
        secret_hash: bytes,
        *,
        at: datetime,
        grace_until: datetime,
        expires_at: datetime | None,
    ) -> tuple[ApiKey, ApiKey]:
        """A new key like the old one, and the old one's grace expiry, atomically."""
        return await self._tenants.rotate_api_key(
            key_id, new_id, secret_hash, at=at, grace_until=grace_until, expires_at=expires_at
        )

    async def touch_api_keys(self, used: Mapping[uuid.UUID, datetime]) -> None:
        """Record last use."""
        await self._tenants.touch_api_keys(used)

    async def list_tenants(self, after: uuid.UUID | None, limit: int) -> list[Tenant]:
        """Tenants in id order after ``after``."""
        return await self._tenants.list_tenants(after, limit)

    async def tenant_moves(self) -> dict[uuid.UUID, MoveState]:
        """Every tenant a home move touched here (frozen, gone or arrived)."""
        return await self._tenants.tenant_moves()

    # -- submission and reads ------------------------------------------------------------
    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many in one statement; a result per item (created or duplicate)."""
        return await self._tasks.insert_tasks(tasks, now)

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id alone: task_keys maps id -> scheduled_at, then one partition is read."""
        return await self._tasks.get_task(tenant_id, task_id)

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """Keyset-paginated by (scheduled_at, id)."""
        return await self._tasks.list_tasks(tenant_id, flt, page_size, page_token)

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        """Matching tasks grouped by (tenant,) state, type and pool."""
        return await self._tasks.count_tasks(tenant_id, flt)

    async def forecast(
        self,
        tenant_id: uuid.UUID | None,
        start: datetime,
        bucket_s: int,
        buckets: int,
        pools: Sequence[Pool],
    ) -> Forecast:
        """Tasks still to fire per bucket of the window, firing and nominal."""
        return await self._tasks.forecast(tenant_id, start, bucket_s, buckets, pools)

    async def overdue(self, tenant_id: uuid.UUID | None, now: datetime) -> list[OverdueGroup]:
        """Tasks due before ``now`` and not yet dispatched, by tenant, type and pool."""
        return await self._tasks.overdue(tenant_id, now)

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task."""
        return await self._tasks.transitions_of(task_id)

    async def record_refused(self, writes: Sequence[RefusedWrite]) -> None:
        """Record refused worker writes (only on refusal)."""
        await self._history.record_refused(writes)

    async def refused_writes_of(self, key: TaskKey) -> list[RefusedWrite]:
        """A task's refused worker writes, oldest first (the last 1,000)."""
        return await self._history.refused_writes_of(key)

    async def activity(
        self, tenant_id: uuid.UUID | None, start: datetime, end: datetime, bucket_s: int
    ) -> list[ActivityBucket]:
        """Dispatches, completions, failed attempts and lateness per bucket (audit)."""
        return await self._history.activity(tenant_id, start, end, bucket_s)

    # -- pre-load, dispatch, lease expiry ------------------------------------------------
    async def claim_preload(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        now: datetime,
        retry_horizon: datetime | None = None,
    ) -> list[Preloaded]:
        """Move due SCHEDULED/RETRYING tasks to PRELOADED, one statement per day partition
        of the look-ahead window; every ``preload_sweep_interval_s`` also every day."""
        return await self._dispatch.claim_preload(shards, horizon, limit, now, retry_horizon)

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        """PRELOADED tasks (recovery), keyset-paginated by (scheduled_at, id)."""
        return await self._dispatch.load_preloaded(shards, horizon, limit, after, changed_since)

    async def load_preloaded_packed(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> PreloadedPage:
        """``load_preloaded``'s pages packed per (tenant, type, pool)."""
        return await self._dispatch.load_preloaded_packed(
            shards, horizon, limit, after, changed_since
        )

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | None]:
        """PRELOADED -> DISPATCHED (RUNNING when ``running``) with token + 1, in one
        statement."""
        return await self._dispatch.mark_dispatched(requests, now)

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry (state table): DISPATCHED -> PRELOADED, RUNNING ->
        RETRYING / DEAD_LETTER, pending cancels -> CANCELLED."""
        return await self._dispatch.reclaim_expired(shards, now, limit)

    # -- fenced worker writes ------------------------------------------------------------
    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING with the current token."""
        return await self._writes.ack(writes, lease_expires_at, now)

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """Extend leases held with the current token."""
        return await self._writes.heartbeat(writes, lease_expires_at, now)

    async def checkpoint(
        self, key: TaskKey, token: int, data: dict[str, Any] | RawJSON, now: datetime
    ) -> Outcome:
        """Save a RUNNING task's progress (fenced)."""
        return await self._writes.checkpoint(key, token, data, now)

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        """RUNNING -> COMPLETED, ledger row and DAG decrement in one transaction."""
        return await self._writes.complete(items, now)

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        """RUNNING -> RETRYING, or on to DEAD_LETTER when no attempt remains; a workflow
        task's upstream policy is applied in the same transaction."""
        return await self._writes.fail(items, now)

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        """RUNNING/DISPATCHED -> PRELOADED (attempt not counted), saving a checkpoint; with
        a cancel pending -> CANCELLED and the upstream policy, in one transaction."""
        return await self._writes.release(items, now)

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING with a cancel pending -> CANCELLED (the worker confirmed), with the
        upstream policy of workflow tasks in the same transaction."""
        return await self._writes.confirm_cancel(writes, now)

    # -- operator actions ----------------------------------------------------------------
    async def cancel(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime
    ) -> CancelResult:
        """Immediate from SCHEDULED/PRELOADED/RETRYING; requested from DISPATCHED/RUNNING."""
        return await self._actions.cancel(tenant_id, task_id, now)

    async def redrive(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime, due_at: datetime
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED, retry_count reset, due at ``due_at``."""
        return await self._actions.redrive(tenant_id, task_id, now, due_at)

    async def transition(
        self, key: TaskKey, to_state: TaskState, now: datetime, *, actor: str = "operator"
    ) -> TaskRecord:
        """Operator move to ``to_state``; InvalidTransition (nothing written) if illegal."""
        return await self._actions.transition(key, to_state, now, actor=actor)

    async def _guarded_set_status_unchecked(
        self, key: TaskKey, to_state: TaskState, now: datetime
    ) -> bool:
        """The SQL guard alone, without the check in code (for tests of the guard)."""
        return await self._actions.guarded_set_status_unchecked(key, to_state, now)

    # -- shards --------------------------------------------------------------------------
    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """Raise each shard's epoch by one for ``owner`` (one statement)."""
        return await self._shards.claim_shards(shards, owner, now)

    async def shard_claims(self) -> list[ShardClaim]:
        """The whole ownership history."""
        return await self._shards.shard_claims()

    async def queue_depth(self, now: datetime) -> list[DepthRow]:
        """Open tasks per (pool, state, horizon) (``/metrics``)."""
        return await self._metrics.queue_depth(now)

    async def replication_lag(self) -> ReplicationLag | None:
        """Standbys and their replay lag (``/metrics``)."""
        return await self._metrics.replication_lag()

    # -- workflows -----------------------------------------------------------------------
    async def create_workflow(self, workflow: Workflow) -> tuple[Workflow, bool]:
        """Insert, or return the existing workflow of the same idempotency key."""
        return await self._workflows.create_workflow(workflow)

    async def get_workflow(
        self, tenant_id: uuid.UUID | None, workflow_id: uuid.UUID
    ) -> WorkflowView:
        """The workflow, its tasks and edges."""
        return await self._workflows.get_workflow(tenant_id, workflow_id)

    async def list_workflows(self, tenant_id: uuid.UUID, limit: int) -> list[Workflow]:
        """The tenant's workflows, newest first."""
        return await self._workflows.list_workflows(tenant_id, limit)

    # -- schedules, expectations, canaries -----------------------------------------------
    async def create_schedule(self, schedule: Schedule) -> Schedule:
        """Insert; AlreadyExists for a duplicate name."""
        return await self._schedules.create_schedule(schedule)

    async def get_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> Schedule:
        """One schedule; NotFound for other tenants."""
        return await self._schedules.get_schedule(tenant_id, schedule_id)

    async def list_schedules(self, tenant_id: uuid.UUID) -> list[Schedule]:
        """The tenant's schedules."""
        return await self._schedules.list_schedules(tenant_id)

    async def set_schedule_enabled(
        self,
        tenant_id: uuid.UUID | None,
        schedule_id: uuid.UUID,
        enabled: bool,
        next_fire_at: datetime | None,
        now: datetime,
    ) -> Schedule:
        """Pause or resume."""
        return await self._schedules.set_schedule_enabled(
            tenant_id, schedule_id, enabled, next_fire_at, now
        )

    async def delete_schedule(self, tenant_id: uuid.UUID | None, schedule_id: uuid.UUID) -> None:
        """Delete the schedule (its tasks stay)."""
        return await self._schedules.delete_schedule(tenant_id, schedule_id)

    async def due_schedules(self, now: datetime, limit: int) -> list[Schedule]:
        """Schedules with an occurrence due (or buffered)."""
        return await self._schedules.due_schedules(now, limit)

    async def advance_schedule(
        self,
        schedule_id: uuid.UUID,
        expected_next: datetime | None,
        next_fire_at: datetime | None,
        last_fired_at: datetime | None,
        buffered_at: datetime | None,
        now: datetime,
    ) -> bool:
        """Compare-and-set on ``next_fire_at``."""
        return await self._schedules.advance_schedule(
            schedule_id, expected_next, next_fire_at, last_fired_at, buffered_at, now
        )

    async def active_schedule_tasks(
        self, schedule_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, int]:
        """Live tasks per schedule."""
        return await self._schedules.active_schedule_tasks(schedule_ids)

    async def register_expectation(self, expectation: Expectation) -> Expectation:
        """Insert or replace by (tenant, job_id)."""
        return await self._schedules.register_expectation(expectation)

    async def list_expectations(self, tenant_id: uuid.UUID | None) -> list[Expectation]:
        """Expectations of a tenant (None: all)."""
        return await self._schedules.list_expectations(tenant_id)

    async def expectation_facts(self, tenant_id: uuid.UUID | None) -> list[JobFacts]:
        """What the watchdog would read about a tenant's expectations (None: all)."""
        return await self._schedules.expectation_facts(tenant_id)

    async def delete_expectation(self, tenant_id: uuid.UUID, job_id: str) -> bool:
        """Delete the tenant's expectation for ``job_id``; whether there was one."""
        return await self._schedules.delete_expectation(tenant_id, job_id)

    async def record_canary(
        self,
        canary_id: uuid.UUID,
        scheduled_at: datetime,
        *,
        dispatched_at: datetime | None = None,
        completed_at: datetime | None = None,
    ) -> bool:
        """Create the canary row if new, then record the times given."""
        return await self._schedules.record_canary(
            canary_id, scheduled_at, dispatched_at=dispatched_at, completed_at=completed_at
        )
