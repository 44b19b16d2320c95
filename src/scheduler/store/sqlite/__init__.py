"""The embedded store: SQLite (stdlib ``sqlite3``) in one file, WAL mode, single node.

Owns the facade :class:`SqliteStore`: it opens the one connection
(:class:`~scheduler.store.sqlite._db.Db`: a single-worker thread, every call one
``BEGIN IMMEDIATE`` transaction, so a batch is atomic and round trips cost nothing) and
delegates each :class:`~scheduler.store.Store` method to the part that owns it:
``tenants`` (tenants and API keys), ``tasks`` (insert and reads), ``dispatch`` (pre-load,
dispatch, lease expiry), ``writes`` (fenced worker writes), ``actions`` (cancel, redrive,
transition), ``shards``, ``workflows`` and ``schedules`` (schedules, expectations,
canaries). The parts share ``rows`` (codecs), ``audit`` and ``upstream`` (the upstream
policy the task writes apply in their own transaction). The parts get the handle, the SQL
(``sql/sqlite/*.sql``) and the config, never the facade. No partitions: ``scheduled_at``
is kept for the protocol's keys and checked on every fenced write like in PostgreSQL.
Called through :func:`scheduler.store.open_store`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from scheduler._errors import StoreError
from scheduler.states import TaskState
from scheduler.store import _validate
from scheduler.store._config import StoreConfig
from scheduler.store._facts import JobFacts
from scheduler.store.protocol import DepthRow, ReplicationLag, WorkCallback, WorkNotices
from scheduler.store.protocol.tenants import MoveState
from scheduler.store.sqlite._db import SQL, Db, connect
from scheduler.store.sqlite.actions import Actions
from scheduler.store.sqlite.dispatch import Dispatch
from scheduler.store.sqlite.history import History
from scheduler.store.sqlite.metrics import Metrics
from scheduler.store.sqlite.schedules import Schedules
from scheduler.store.sqlite.shards import Shards
from scheduler.store.sqlite.tasks import Tasks
from scheduler.store.sqlite.tenants import Tenants
from scheduler.store.sqlite.workflows import Workflows
from scheduler.store.sqlite.writes import WorkerWrites
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

__all__ = ["Q", "SqliteStore"]

T = TypeVar("T")

Q = SQL
"""Every named SQLite statement (``sql/sqlite/*.sql``), templates expanded."""


class SqliteStore:
    """The :class:`~scheduler.store.Store` on SQLite: owns the connection, delegates."""

    def __init__(
        self, conn: sqlite3.Connection, executor: concurrent.futures.Executor, config: StoreConfig
    ) -> None:
        self.config = config
        self._db = Db(conn, executor)
        db, q = self._db, SQL
        self._tenants = Tenants(db, q)
        self._tasks = Tasks(db, q, config)
        self._dispatch = Dispatch(db, q, config)
        self._writes = WorkerWrites(db, q, config)
        self._actions = Actions(db, q, config)
        self._shards = Shards(db, q)
        self._workflows = Workflows(db, q)
        self._schedules = Schedules(db, q)
        self._metrics = Metrics(db)
        self._history = History(db, q)

    @classmethod
    async def open(cls, path: str, config: StoreConfig | None = None) -> SqliteStore:
        """Open (creating if needed) the database file at ``path`` (or ``:memory:``)."""
        config = config or StoreConfig()
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tickwheel-sqlite")
        loop = asyncio.get_running_loop()
        try:
            conn = await loop.run_in_executor(executor, connect, path)
        except sqlite3.Error as exc:
            executor.shutdown(wait=False)
            raise StoreError(f"SQLite: {exc}") from exc
        return cls(conn, executor, config)

    async def listen_work(self, on_notice: WorkCallback) -> WorkNotices | None:
        """No channel: an embedded store serves one process, which owns every shard."""
        return None

    async def close(self) -> None:
        """Close the connection and stop the thread; safe to call twice."""
        await self._db.close()

    async def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one IMMEDIATE transaction on the store's thread (tests)."""
        return await self._db.tx(fn)

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Nothing to do: SQLite has no partitions."""
        _validate.aware("now", now)
        return MaintenanceResult()

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
        """None: moving a tenant's home needs PostgreSQL in both regions."""
        return {}

    # -- submission and reads ------------------------------------------------------------
    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many in one transaction; a result per item (created or duplicate)."""
        return await self._tasks.insert_tasks(tasks, now)

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id; NotFound for other tenants."""
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
        """SCHEDULED/RETRYING due by ``horizon`` -> PRELOADED."""
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
        """PRELOADED -> DISPATCHED (RUNNING when ``running``) with token + 1."""
        return await self._dispatch.mark_dispatched(requests, now)

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry per the state table."""
        return await self._dispatch.reclaim_expired(shards, now, limit)

    # -- fenced worker writes ------------------------------------------------------------
    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING with the current token (a repeated ack is OK)."""
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
        """RUNNING with a cancel pending -> CANCELLED, with the upstream policy of workflow
        tasks in the same transaction."""
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
        """Raise each shard's epoch by one for ``owner``."""
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
