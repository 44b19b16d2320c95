"""The embedded store: SQLite (stdlib ``sqlite3``) in one file, WAL mode, single node.

Every call runs on one dedicated thread (a single-worker executor) that owns the only
connection; a batch is a loop inside one ``BEGIN IMMEDIATE`` transaction, so it is
atomic and round trips cost nothing. No partitions: ``scheduled_at`` is kept for the
protocol's keys and checked on every fenced write like in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sqlite3
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from scheduler._errors import (
    AlreadyExists,
    InvalidArgument,
    InvalidTransition,
    NotFound,
    StoreError,
    TickwheelError,
)
from scheduler.jitter import JitterMode
from scheduler.states import TaskState, check_transition, sources
from scheduler.store import _common, _sql, _validate
from scheduler.store._config import StoreConfig
from scheduler.store._sqlite_orchestration import SqliteOrchestration
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

__all__ = ["SqliteStore"]

T = TypeVar("T")
Q = _sql.queries("sqlite")
_STEPS: dict[tuple[TaskState, TaskState], list[tuple[TaskState, TaskState]]] = {}
for _a, _b, _f, _t in _sql.route_steps():
    _STEPS.setdefault((_a, _b), []).append((_f, _t))
_FAILED = (TaskState.DEAD_LETTER, TaskState.CANCELLED)
"""States whose entry applies a workflow task's upstream policy (same transaction)."""


def _us(t: datetime) -> int:
    return (t - _common.EPOCH) // timedelta(microseconds=1)


def _dt(us: int) -> datetime:
    return _common.EPOCH + timedelta(microseconds=us)


def _opt_dt(us: int | None) -> datetime | None:
    return None if us is None else _dt(us)


def _opt_uuid(v: str | None) -> uuid.UUID | None:
    return None if v is None else uuid.UUID(v)


def _opt_str(v: uuid.UUID | None) -> str | None:
    return None if v is None else str(v)


def _task(r: sqlite3.Row) -> TaskRecord:
    return TaskRecord(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        type=r["type"],
        status=TaskState(r["status"]),
        scheduled_at=_dt(r["scheduled_at"]),
        due_at=_dt(r["due_at"]),
        idempotency_key=r["idempotency_key"],
        shard_id=r["shard_id"],
        pool=Pool(r["pool"]),
        strict_timing=bool(r["strict_timing"]),
        jitter_mode=JitterMode(r["jitter_mode"]),
        fencing_token=r["fencing_token"],
        retry_count=r["retry_count"],
        max_retries=r["max_retries"],
        timeout_s=float(r["timeout_s"]),
        payload=json.loads(r["payload"]),
        result_payload=_common.loads(r["result_payload"]),
        checkpoint=_common.loads(r["checkpoint"]),
        trace_context=_common.loads(r["trace_context"]),
        last_error=r["last_error"],
        worker_id=r["worker_id"],
        lease_expires_at=_opt_dt(r["lease_expires_at"]),
        cancel_requested=bool(r["cancel_requested"]),
        workflow_id=_opt_uuid(r["workflow_id"]),
        unresolved_dependencies=r["unresolved_dependencies"],
        schedule_id=_opt_uuid(r["schedule_id"]),
        created_at=_dt(r["created_at"]),
        updated_at=_dt(r["updated_at"]),
    )


def _preloaded(r: sqlite3.Row) -> Preloaded:
    return Preloaded(
        TaskKey(uuid.UUID(r["id"]), _dt(r["scheduled_at"])),
        _dt(r["due_at"]),
        uuid.UUID(r["tenant_id"]),
        r["shard_id"],
        Pool(r["pool"]),
        r["type"],
    )


def _tenant(r: sqlite3.Row) -> Tenant:
    return Tenant(
        id=uuid.UUID(r["id"]),
        name=r["name"],
        tier=r["tier"],
        rate_limit_rps=r["rate_limit_rps"],
        max_concurrent_workers=r["max_concurrent_workers"],
        home_region=r["home_region"],
        created_at=_dt(r["created_at"]),
    )


def _audit(
    c: sqlite3.Connection,
    task_id: str,
    sched: int,
    start: TaskState,
    finish: TaskState,
    token: int,
    actor: str | None,
    at: int,
) -> None:
    steps = _STEPS.get((start, finish))
    if steps is None:
        check_transition(task_id, start, finish)
        steps = [(start, finish)]
    c.executemany(
        Q["audit"],
        [(task_id, sched, f.value, t.value, token, actor or "", at) for f, t in steps],
    )


class SqliteStore(SqliteOrchestration):
    """The :class:`~scheduler.store.Store` on SQLite."""

    def __init__(
        self, conn: sqlite3.Connection, executor: concurrent.futures.Executor, config: StoreConfig
    ) -> None:
        self._db = conn
        self._executor = executor
        self.config = config
        self._closed = False

    @classmethod
    async def open(cls, path: str, config: StoreConfig | None = None) -> SqliteStore:
        """Open (creating if needed) the database file at ``path`` (or ``:memory:``)."""
        config = config or StoreConfig()
        executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tickwheel-sqlite")

        def connect() -> sqlite3.Connection:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.executescript(_sql.read_text("sqlite", "schema.sql"))
            return conn

        loop = asyncio.get_running_loop()
        try:
            conn = await loop.run_in_executor(executor, connect)
        except sqlite3.Error as exc:
            executor.shutdown(wait=False)
            raise StoreError(f"SQLite: {exc}") from exc
        return cls(conn, executor, config)

    async def listen_work(self, on_notice: WorkCallback) -> WorkNotices | None:
        """No channel: an embedded store serves one process, which owns every shard."""
        return None

    async def close(self) -> None:
        """Close the connection and stop the thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._db.close)
        self._executor.shutdown(wait=True)

    async def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one IMMEDIATE transaction on the store's thread."""
        if self._closed:
            raise StoreError("SQLite store is closed")

        def run() -> T:
            c = self._db
            c.execute("BEGIN IMMEDIATE")
            try:
                out = fn(c)
            except BaseException:
                c.execute("ROLLBACK")
                raise
            c.execute("COMMIT")
            return out

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, run)
        except TickwheelError:
            raise
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite: {type(exc).__name__}: {exc}") from exc

    async def maintain(self, now: datetime) -> MaintenanceResult:
        """Nothing to do: SQLite has no partitions."""
        _validate.aware("now", now)
        return MaintenanceResult()

    # -- tenants -----------------------------------------------------------------------
    async def create_tenant(self, tenant: Tenant) -> Tenant:
        """Insert a tenant."""
        _common.check_tenant(tenant)
        created = tenant.created_at or datetime.now(UTC)

        def fn(c: sqlite3.Connection) -> Tenant:
            try:
                c.execute(
                    Q["insert_tenant"],
                    (
                        str(tenant.id),
                        tenant.name,
                        tenant.tier,
                        tenant.rate_limit_rps,
                        tenant.max_concurrent_workers,
                        tenant.home_region,
                        _us(created),
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists("tenant", str(tenant.id)) from exc
            return _tenant(c.execute(Q["get_tenant"], (str(tenant.id),)).fetchone())

        return await self._tx(fn)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """A tenant by id; NotFound when absent."""

        def fn(c: sqlite3.Connection) -> Tenant:
            row = c.execute(Q["get_tenant"], (str(tenant_id),)).fetchone()
            if row is None:
                raise NotFound("tenant", str(tenant_id))
            return _tenant(row)

        return await self._tx(fn)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change name, tier, quotas or home region."""
        t = _common.tenant_changes(await self.get_tenant(tenant_id), changes)

        def fn(c: sqlite3.Connection) -> Tenant:
            c.execute(
                Q["update_tenant"],
                (
                    t.name,
                    t.tier,
                    t.rate_limit_rps,
                    t.max_concurrent_workers,
                    t.home_region,
                    str(tenant_id),
                ),
            )
            return _tenant(c.execute(Q["get_tenant"], (str(tenant_id),)).fetchone())

        return await self._tx(fn)

    async def create_api_key(self, tenant_id: uuid.UUID, name: str, secret_hash: bytes) -> ApiKey:
        """Store an API key's hash for a tenant."""
        _validate.text("name", name, 128)
        await self.get_tenant(tenant_id)
        key = ApiKey(id=uuid.uuid4(), tenant_id=tenant_id, name=name, created_at=datetime.now(UTC))
        assert key.created_at is not None
        created = _us(key.created_at)

        def fn(c: sqlite3.Connection) -> None:
            c.execute(
                Q["insert_api_key"],
                (str(key.id), str(tenant_id), name, secret_hash, created),
            )

        await self._tx(fn)
        return ApiKey(id=key.id, tenant_id=tenant_id, name=name, created_at=_dt(created))

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a (non-revoked) key hash."""

        def fn(c: sqlite3.Connection) -> uuid.UUID | None:
            row = c.execute(
                Q["tenant_for_key_hash"],
                (secret_hash,),
            ).fetchone()
            return None if row is None else uuid.UUID(row[0])

        return await self._tx(fn)

    # -- submission ------------------------------------------------------------------
    async def insert_tasks(self, tasks: Sequence[NewTask], now: datetime) -> list[InsertResult]:
        """Insert many in one transaction; a result per item (created or duplicate)."""
        _validate.aware("now", now)
        if not tasks:
            return []
        encoded = _validate.new_tasks(tasks, self.config.payload_limit_bytes)
        n = _us(now)

        def fn(c: sqlite3.Connection) -> list[InsertResult]:
            tenants = {str(t.tenant_id) for t in tasks}
            for tid in sorted(tenants):
                if c.execute(Q["known_tenant"], (tid,)).fetchone() is None:
                    raise NotFound("tenant", tid)
            out = []
            for t, (payload, trace) in zip(tasks, encoded, strict=True):
                deps = len(set(t.depends_on)) if t.depends_on else t.unresolved_dependencies
                cur = c.execute(
                    Q["insert_task"],
                    (
                        str(t.id),
                        str(t.tenant_id),
                        t.type,
                        _us(t.scheduled_at),
                        _us(t.due_at),
                        t.initial_state.value,
                        t.idempotency_key,
                        t.max_retries,
                        payload,
                        deps,
                        t.shard_id,
                        t.pool.value,
                        int(t.strict_timing),
                        t.jitter_mode.value,
                        float(t.timeout_s),
                        trace,
                        _opt_str(t.workflow_id),
                        _opt_str(t.schedule_id),
                        n,
                        n,
                    ),
                )
                created = cur.rowcount == 1
                if created:
                    c.executemany(
                        Q["insert_dependency"],
                        [
                            (str(t.workflow_id), str(p), str(t.id))
                            for p in dict.fromkeys(t.depends_on)
                        ],
                    )
                row = c.execute(
                    Q["task_by_idempotency"], (str(t.tenant_id), t.idempotency_key)
                ).fetchone()
                out.append(InsertResult(_task(row), created))
            return out

        try:
            return await self._tx(fn)
        except StoreError as exc:
            if isinstance(exc.__cause__, sqlite3.IntegrityError) and "tasks.id" in str(exc):
                raise InvalidArgument("tasks.id", "a task with this id already exists") from exc
            raise

    async def get_task(self, tenant_id: uuid.UUID | None, task_id: uuid.UUID) -> TaskRecord:
        """By id; NotFound for other tenants."""

        def fn(c: sqlite3.Connection) -> TaskRecord:
            row = c.execute(Q["get_task"], (str(task_id),)).fetchone()
            if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
                raise NotFound("task", str(task_id))
            return _task(row)

        return await self._tx(fn)

    async def list_tasks(
        self, tenant_id: uuid.UUID, flt: TaskFilter, page_size: int, page_token: str
    ) -> Page:
        """Keyset-paginated by (scheduled_at, id)."""
        if not 1 <= page_size <= 1000:
            raise InvalidArgument("page_size", "must be between 1 and 1000")
        after = _common.decode_page_token(page_token)
        lo = _us(_validate.aware("scheduled_from", flt.scheduled_from or _common.FAR_PAST))
        hi = _us(_validate.aware("scheduled_to", flt.scheduled_to or _common.FAR_FUTURE))
        a_t = _us(after.scheduled_at) if after else _us(_common.FAR_PAST)
        a_id = str(after.id) if after else str(_common.ZERO_UUID)
        statuses = json.dumps([s.value for s in flt.statuses]) if flt.statuses else None

        def fn(c: sqlite3.Connection) -> list[sqlite3.Row]:
            return c.execute(
                Q["list_tasks"],
                (str(tenant_id), statuses, flt.type, lo, hi, a_t, a_id, page_size + 1),
            ).fetchall()

        rows = await self._tx(fn)
        tasks = tuple(_task(r) for r in rows[:page_size])
        token = _common.encode_page_token(tasks[-1].key) if len(rows) > page_size else ""
        return Page(tasks, token)

    # -- pre-load --------------------------------------------------------------------
    async def claim_preload(
        self, shards: Sequence[int] | None, horizon: datetime, limit: int, now: datetime
    ) -> list[Preloaded]:
        """SCHEDULED/RETRYING due by ``horizon`` -> PRELOADED."""
        h = _us(_validate.aware("horizon", horizon))
        n = _us(_validate.aware("now", now))
        allowed = None if shards is None else set(shards)
        actor = self.config.actor

        def fn(c: sqlite3.Connection) -> list[Preloaded]:
            out: list[Preloaded] = []
            for row in c.execute(Q["claim_candidates"], (h,)).fetchall():
                if len(out) >= limit:
                    break
                if allowed is not None and row["shard_id"] not in allowed:
                    continue
                # The guard again on the write itself (like every other write).
                moved = c.execute(Q["claim_preload"], (n, row["id"], h)).fetchone()
                if moved is None:
                    continue
                _audit(
                    c,
                    row["id"],
                    moved["scheduled_at"],
                    TaskState(row["status"]),
                    TaskState.PRELOADED,
                    moved["fencing_token"],
                    actor,
                    n,
                )
                out.append(_preloaded(moved))
            return out

        return await self._tx(fn)

    async def load_preloaded(
        self,
        shards: Sequence[int] | None,
        horizon: datetime,
        limit: int,
        after: TaskKey | None,
        changed_since: datetime | None = None,
    ) -> list[Preloaded]:
        """PRELOADED tasks (recovery), keyset-paginated by (scheduled_at, id)."""
        h = _us(_validate.aware("horizon", horizon))
        since = (
            None if changed_since is None else _us(_validate.aware("changed_since", changed_since))
        )
        a_t = _us(after.scheduled_at) if after else _us(_common.FAR_PAST)
        a_id = str(after.id) if after else str(_common.ZERO_UUID)
        allowed = None if shards is None else set(shards)

        def fn(c: sqlite3.Connection) -> list[Preloaded]:
            out: list[Preloaded] = []
            for row in c.execute(Q["load_preloaded"], (h, since, since, a_t, a_t, a_id)):
                if allowed is not None and row["shard_id"] not in allowed:
                    continue
                out.append(_preloaded(row))
                if len(out) >= limit:
                    break
            return out

        return await self._tx(fn)

    # -- dispatch and worker writes ----------------------------------------------------
    async def claim_shards(
        self, shards: Sequence[int], owner: str, now: datetime
    ) -> dict[int, int]:
        """Raise each shard's epoch by one for ``owner``."""
        n = _us(_validate.aware("now", now))

        def fn(c: sqlite3.Connection) -> dict[int, int]:
            out: dict[int, int] = {}
            for shard in sorted(set(shards)):
                row = c.execute(Q["claim_shard"], (shard, owner, n)).fetchone()
                out[int(row["shard_id"])] = int(row["epoch"])
                c.execute(Q["record_claim"], (shard, row["epoch"], owner, n))
            return out

        return await self._tx(fn)

    async def shard_claims(self) -> list[ShardClaim]:
        """The whole ownership history."""

        def fn(c: sqlite3.Connection) -> list[ShardClaim]:
            return [
                ShardClaim(int(r["shard_id"]), int(r["epoch"]), r["owner"], _dt(r["claimed_at"]))
                for r in c.execute(Q["shard_claims"]).fetchall()
            ]

        return await self._tx(fn)

    async def mark_dispatched(
        self, requests: Sequence[DispatchRequest], now: datetime
    ) -> list[Assignment | None]:
        """PRELOADED -> DISPATCHED (RUNNING when ``running``) with token + 1."""
        n = _us(_validate.aware("now", now))
        _validate.keys("requests", requests)
        _validate.dispatch_requests(requests)
        actor = self.config.actor

        def fn(c: sqlite3.Connection) -> list[Assignment | None]:
            out: list[Assignment | None] = []
            for r in requests:
                state = TaskState.RUNNING if r.running else TaskState.DISPATCHED
                row = c.execute(
                    Q["mark_dispatched"],
                    (
                        state.value,
                        r.worker_id,
                        _us(r.lease_expires_at),
                        n,
                        str(r.key.id),
                        _us(r.key.scheduled_at),
                        r.epoch,
                        r.epoch,
                    ),
                ).fetchone()
                if row is None:
                    out.append(None)
                    continue
                _audit(
                    c,
                    row["id"],
                    row["scheduled_at"],
                    TaskState.PRELOADED,
                    state,
                    row["fencing_token"],
                    actor,
                    n,
                )
                out.append(_assignment(row))
            return out

        return await self._tx(fn)

    @staticmethod
    def _miss(c: sqlite3.Connection, key: TaskKey) -> Outcome:
        found = c.execute(Q["exists_key"], (str(key.id), _us(key.scheduled_at))).fetchone()
        return Outcome.STALE if found else Outcome.NOT_FOUND

    async def ack(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """DISPATCHED -> RUNNING with the current token (a repeated ack is OK)."""
        lease = _us(_validate.aware("lease_expires_at", lease_expires_at))
        n = _us(_validate.aware("now", now))
        _validate.keys("writes", writes)

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            for w in writes:
                args = (lease, n, str(w.key.id), _us(w.key.scheduled_at), w.token)
                row = c.execute(Q["ack"], args).fetchone()
                if row is not None:
                    _audit(
                        c,
                        str(w.key.id),
                        _us(w.key.scheduled_at),
                        TaskState.DISPATCHED,
                        TaskState.RUNNING,
                        row["fencing_token"],
                        row["worker_id"],
                        n,
                    )
                    out.append(Outcome.OK)
                elif c.execute(Q["extend_running"], args).fetchone() is not None:
                    out.append(Outcome.OK)
                else:
                    out.append(self._miss(c, w.key))
            return out

        return await self._tx(fn)

    async def heartbeat(
        self, writes: Sequence[FencedWrite], lease_expires_at: datetime, now: datetime
    ) -> list[Outcome]:
        """Extend leases held with the current token."""
        lease = _us(_validate.aware("lease_expires_at", lease_expires_at))
        n = _us(_validate.aware("now", now))
        _validate.keys("writes", writes)

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            for w in writes:
                row = c.execute(
                    Q["heartbeat"], (lease, n, str(w.key.id), _us(w.key.scheduled_at), w.token)
                ).fetchone()
                out.append(Outcome.OK if row is not None else self._miss(c, w.key))
            return out

        return await self._tx(fn)

    async def checkpoint(
        self, key: TaskKey, token: int, data: dict[str, Any], now: datetime
    ) -> Outcome:
        """Save a RUNNING task's progress (fenced)."""
        _validate.keys("key", [FencedWrite(key=key, token=token)])
        n = _us(_validate.aware("now", now))
        encoded = _validate.json_object("data", data, self.config.payload_limit_bytes)

        def fn(c: sqlite3.Connection) -> Outcome:
            row = c.execute(
                Q["checkpoint"], (encoded, n, str(key.id), _us(key.scheduled_at), token)
            ).fetchone()
            return Outcome.OK if row is not None else self._miss(c, key)

        return await self._tx(fn)

    async def complete(self, items: Sequence[Completion], now: datetime) -> list[CompleteResult]:
        """RUNNING -> COMPLETED, ledger row and DAG decrement in one transaction."""
        n = _us(_validate.aware("now", now))
        _validate.keys("items", items)
        results = [
            _validate.json_object(
                f"items[{i}].result", c.result, self.config.payload_limit_bytes, optional=True
            )
            for i, c in enumerate(items)
        ]
        actor = self.config.actor

        def fn(c: sqlite3.Connection) -> list[CompleteResult]:
            outcomes = []
            ready: list[tuple[Preloaded, list[uuid.UUID]]] = []
            for item, result in zip(items, results, strict=True):
                row = c.execute(
                    Q["complete"],
                    (result, n, str(item.key.id), _us(item.key.scheduled_at), item.token),
                ).fetchone()
                if row is None:
                    outcomes.append(self._miss(c, item.key))
                    continue
                outcomes.append(Outcome.OK)
                c.execute(
                    Q["ledger"],
                    (
                        row["id"],
                        row["scheduled_at"],
                        row["tenant_id"],
                        row["type"],
                        row["schedule_id"],
                        row["schedule_id"],
                        row["fencing_token"],
                        row["worker_id"],
                        n,
                    ),
                )
                _audit(
                    c,
                    row["id"],
                    row["scheduled_at"],
                    TaskState.RUNNING,
                    TaskState.COMPLETED,
                    row["fencing_token"],
                    row["worker_id"],
                    n,
                )
                if row["workflow_id"] is None:
                    continue
                for (child,) in c.execute(Q["children"], (row["id"],)).fetchall():
                    ch = c.execute(Q["decrement_child"], (n, child)).fetchone()
                    if ch is not None and ch["status"] == TaskState.PRELOADED.value:
                        _audit(
                            c,
                            ch["id"],
                            ch["scheduled_at"],
                            TaskState.SCHEDULED,
                            TaskState.PRELOADED,
                            ch["fencing_token"],
                            actor,
                            n,
                        )
                        ready.append((_preloaded(ch), [item.key.id]))
            order = [i.key.id for i, o in zip(items, outcomes, strict=True) if o is Outcome.OK]
            children = _common.assign_children(order, ready)
            return _common.complete_results([i.key for i in items], outcomes, children)

        return await self._tx(fn)

    async def fail(self, items: Sequence[Failure], now: datetime) -> list[FailResult]:
        """RUNNING -> RETRYING, or on to DEAD_LETTER when no attempt remains; a workflow
        task's upstream policy is applied in the same transaction."""
        n = _us(_validate.aware("now", now))
        _validate.keys("items", items)
        _validate.failures(items)

        def fn(c: sqlite3.Connection) -> list[FailResult]:
            out = []
            dead: list[tuple[str, int]] = []
            for f in items:
                retry_at = _us(f.retry_at) if f.retry_at is not None else n
                row = c.execute(
                    Q["fail"],
                    (
                        int(f.retryable),
                        int(f.retryable),
                        retry_at,
                        f.error,
                        n,
                        str(f.key.id),
                        _us(f.key.scheduled_at),
                        f.token,
                    ),
                ).fetchone()
                if row is None:
                    out.append(FailResult(self._miss(c, f.key)))
                    continue
                state = TaskState(row["status"])
                _audit(
                    c,
                    str(f.key.id),
                    _us(f.key.scheduled_at),
                    TaskState.RUNNING,
                    state,
                    row["fencing_token"],
                    row["worker_id"],
                    n,
                )
                if state is TaskState.DEAD_LETTER and row["workflow_id"] is not None:
                    dead.append((str(f.key.id), _us(f.key.scheduled_at)))
                out.append(FailResult(Outcome.OK, state))
            if dead:
                self._apply_upstream(c, dead, n)
            return out

        return await self._tx(fn)

    async def release(self, items: Sequence[Release], now: datetime) -> list[Outcome]:
        """RUNNING/DISPATCHED -> PRELOADED (attempt not counted), saving a checkpoint; with
        a cancel pending -> CANCELLED and the upstream policy, in one transaction."""
        n = _us(_validate.aware("now", now))
        _validate.keys("items", items)
        cps = [
            _validate.json_object(
                f"items[{i}].checkpoint",
                r.checkpoint,
                self.config.payload_limit_bytes,
                optional=True,
            )
            for i, r in enumerate(items)
        ]

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            gone: list[tuple[str, int]] = []
            for r, cp in zip(items, cps, strict=True):
                key = (str(r.key.id), _us(r.key.scheduled_at), r.token)
                old = c.execute(
                    Q["lock_fenced"], (*key, TaskState.RUNNING.value, TaskState.DISPATCHED.value)
                ).fetchone()
                row = c.execute(Q["release"], (cp, n, *key)).fetchone() if old is not None else None
                if row is None:
                    out.append(self._miss(c, r.key))
                    continue
                _audit(
                    c,
                    key[0],
                    key[1],
                    TaskState(old["status"]),
                    TaskState(row["status"]),
                    r.token,
                    old["worker_id"],
                    n,
                )
                # A cancel was pending: the task went CANCELLED, not back to PRELOADED.
                if row["status"] == TaskState.CANCELLED and row["workflow_id"] is not None:
                    gone.append((key[0], key[1]))
                out.append(Outcome.OK)
            if gone:
                self._apply_upstream(c, gone, n)
            return out

        return await self._tx(fn)

    async def confirm_cancel(self, writes: Sequence[FencedWrite], now: datetime) -> list[Outcome]:
        """RUNNING with a cancel pending -> CANCELLED, with the upstream policy of workflow
        tasks in the same transaction."""
        n = _us(_validate.aware("now", now))
        _validate.keys("writes", writes)

        def fn(c: sqlite3.Connection) -> list[Outcome]:
            out = []
            gone: list[tuple[str, int]] = []
            for w in writes:
                row = c.execute(
                    Q["confirm_cancel"], (n, str(w.key.id), _us(w.key.scheduled_at), w.token)
                ).fetchone()
                if row is None:
                    out.append(self._miss(c, w.key))
                    continue
                _audit(
                    c,
                    str(w.key.id),
                    _us(w.key.scheduled_at),
                    TaskState.RUNNING,
                    TaskState.CANCELLED,
                    row["fencing_token"],
                    row["worker_id"],
                    n,
                )
                if row["workflow_id"] is not None:
                    gone.append((str(w.key.id), _us(w.key.scheduled_at)))
                out.append(Outcome.OK)
            if gone:
                self._apply_upstream(c, gone, n)
            return out

        return await self._tx(fn)

    async def reclaim_expired(
        self, shards: Sequence[int] | None, now: datetime, limit: int
    ) -> ReclaimResult:
        """Apply lease expiry per the state table."""
        n = _us(_validate.aware("now", now))
        allowed = None if shards is None else set(shards)
        actor = self.config.actor

        def fn(c: sqlite3.Connection) -> ReclaimResult:
            requeued, retrying, dead, cancelled = [], [], [], []
            failed: list[tuple[str, int]] = []
            count = 0
            for old in c.execute(Q["expired"], (n,)).fetchall():
                if count >= limit:
                    break
                if allowed is not None and old["shard_id"] not in allowed:
                    continue
                count += 1
                row = c.execute(Q["reclaim_one"], (n, n, old["id"])).fetchone()
                status = TaskState(row["status"])
                _audit(
                    c,
                    row["id"],
                    row["scheduled_at"],
                    TaskState(old["status"]),
                    status,
                    row["fencing_token"],
                    actor,
                    n,
                )
                key = TaskKey(uuid.UUID(row["id"]), _dt(row["scheduled_at"]))
                if status is TaskState.PRELOADED:
                    requeued.append(_preloaded(row))
                elif status is TaskState.RETRYING:
                    retrying.append(key)
                elif status is TaskState.DEAD_LETTER:
                    dead.append(key)
                else:
                    cancelled.append(key)
                if status in _FAILED and row["workflow_id"] is not None:
                    failed.append((row["id"], row["scheduled_at"]))
            if failed:
                self._apply_upstream(c, failed, n)
            return ReclaimResult(tuple(requeued), tuple(retrying), tuple(dead), tuple(cancelled))

        return await self._tx(fn)

    # -- operator actions ----------------------------------------------------------------
    def _move(
        self,
        c: sqlite3.Connection,
        row: sqlite3.Row,
        to_state: TaskState,
        n: int,
        actor: str,
        due_at: int | None = None,
    ) -> TaskRecord:
        task = _task(row)
        check_transition(str(task.id), task.status, to_state)
        guard = json.dumps([s.value for s in sources(to_state)])
        new = c.execute(Q["set_status"], (to_state.value, n, due_at, row["id"], guard)).fetchone()
        if new is None:
            raise InvalidTransition(
                str(task.id), task.status.value, to_state.value, "guard refused"
            )
        _audit(
            c, row["id"], row["scheduled_at"], task.status, to_state, task.fencing_token, actor, n
        )
        return _task(new)

    def _find(
        self, c: sqlite3.Connection, tenant_id: uuid.UUID | None, task_id: uuid.UUID
    ) -> sqlite3.Row:
        row: sqlite3.Row | None = c.execute(Q["get_task"], (str(task_id),)).fetchone()
        if row is None or (tenant_id is not None and row["tenant_id"] != str(tenant_id)):
            raise NotFound("task", str(task_id))
        return row

    async def cancel(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime
    ) -> CancelResult:
        """Immediate from SCHEDULED/PRELOADED/RETRYING; requested from DISPATCHED/RUNNING."""
        n = _us(_validate.aware("now", now))
        actor = self.config.actor

        def fn(c: sqlite3.Connection) -> CancelResult:
            row = self._find(c, tenant_id, task_id)
            task = _task(row)
            if task.status in (TaskState.DISPATCHED, TaskState.RUNNING):
                if task.cancel_requested:
                    return CancelResult(task, task.worker_id)
                new = c.execute(Q["request_cancel"], (n, row["id"])).fetchone()
                return CancelResult(_task(new), task.worker_id)
            moved = self._move(c, row, TaskState.CANCELLED, n, actor)
            if moved.workflow_id is not None:
                self._apply_upstream(c, [(row["id"], row["scheduled_at"])], n)
            return CancelResult(moved, None)

        return await self._tx(fn)

    async def redrive(
        self, tenant_id: uuid.UUID | None, task_id: uuid.UUID, now: datetime, due_at: datetime
    ) -> TaskRecord:
        """DEAD_LETTER -> SCHEDULED, retry_count reset, due at ``due_at``."""
        n = _us(_validate.aware("now", now))
        due = _us(_validate.aware("due_at", due_at))

        def fn(c: sqlite3.Connection) -> TaskRecord:
            row = self._find(c, tenant_id, task_id)
            return self._move(c, row, TaskState.SCHEDULED, n, "operator", due)

        return await self._tx(fn)

    async def transition(
        self, key: TaskKey, to_state: TaskState, now: datetime, *, actor: str = "operator"
    ) -> TaskRecord:
        """Operator move to ``to_state``; InvalidTransition (nothing written) if illegal."""
        n = _us(_validate.aware("now", now))
        _validate.keys("key", [FencedWrite(key=key, token=0)])

        def fn(c: sqlite3.Connection) -> TaskRecord:
            row = c.execute(Q["get_task_by_key"], (str(key.id), _us(key.scheduled_at))).fetchone()
            if row is None:
                raise NotFound("task", str(key.id))
            moved = self._move(c, row, to_state, n, actor)
            if moved.workflow_id is not None and to_state in _FAILED:
                self._apply_upstream(c, [(row["id"], row["scheduled_at"])], n)
            return moved

        return await self._tx(fn)

    async def _guarded_set_status_unchecked(
        self, key: TaskKey, to_state: TaskState, now: datetime
    ) -> bool:
        """The SQL guard alone, without the check in code (for tests of the guard)."""
        guard = json.dumps([s.value for s in sources(to_state)])

        def fn(c: sqlite3.Connection) -> bool:
            row = c.execute(
                Q["set_status"], (to_state.value, _us(now), None, str(key.id), guard)
            ).fetchone()
            return row is not None

        return await self._tx(fn)

    async def transitions_of(self, task_id: uuid.UUID) -> list[Transition]:
        """The audit trail of a task."""

        def fn(c: sqlite3.Connection) -> list[Transition]:
            rows = c.execute(Q["transitions_of"], (str(task_id),)).fetchall()
            return [
                Transition(TaskState(r[0]), TaskState(r[1]), r[2], r[3], _dt(r[4])) for r in rows
            ]

        return await self._tx(fn)


def _assignment(r: sqlite3.Row) -> Assignment:
    return Assignment(
        key=TaskKey(uuid.UUID(r["id"]), _dt(r["scheduled_at"])),
        tenant_id=uuid.UUID(r["tenant_id"]),
        type=r["type"],
        payload=json.loads(r["payload"]),
        fencing_token=r["fencing_token"],
        attempt=r["retry_count"] + 1,
        max_retries=r["max_retries"],
        due_at=_dt(r["due_at"]),
        lease_expires_at=_dt(r["lease_expires_at"]),
        checkpoint=_common.loads(r["checkpoint"]),
        trace_context=_common.loads(r["trace_context"]),
        pool=Pool(r["pool"]),
        worker_id=r["worker_id"],
        timeout_s=float(r["timeout_s"]),
    )
