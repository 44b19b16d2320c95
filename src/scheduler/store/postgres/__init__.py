"""The PostgreSQL store (asyncpg): the production durable record.

Owns :class:`PostgresStore`: it opens the pool (through
:class:`~scheduler.store.postgres._db.Db`, where driver errors become :class:`StoreError`,
with the fence hook ``dr.FenceWatch`` behind ``on_fence``), warms its connections up, opens
the work-notice listener and closes; every other :class:`~scheduler.store.Store` method is
inherited from the part that implements its protocol file, of the same name: ``tasks``
(insert and reads), ``dispatch`` (pre-load, dispatch, lease expiry), ``writes`` (fenced
worker writes), ``actions`` (cancel, redrive, transition), ``history`` (audit trail, refused
writes, activity), ``tenants`` (tenants and API keys), ``shards``, ``workflows``,
``schedules`` (schedules, expectations, canaries), ``metrics`` and ``partitions`` (day
partitions, ``maintain``). Each part derives from
:class:`~scheduler.store.postgres._db.Part` (the handle, the SQL of ``sql/postgres/*.sql``,
the config) and calls another part's method on ``self``. The parts share ``rows``,
``notices`` and ``upstream`` (the upstream policy the task writes apply in their own
transaction). Re-exports :func:`~.migrate.migrate`, :data:`Q` and :data:`WORK_CHANNEL` for
the CLI, the tests and the benchmarks. See ``docs/store.md`` for the schema, fencing and
partitions. Called through :func:`scheduler.store.open_store`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from scheduler.store._config import StoreConfig
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
from scheduler.store.postgres.concurrency import Concurrency
from scheduler.store.postgres.dispatch import Dispatch
from scheduler.store.postgres.dr import FenceWatch
from scheduler.store.postgres.flow import Flow
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
from scheduler.store.protocol import MoveCallback, WorkCallback, WorkNotices

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


class PostgresStore(
    Tasks,
    Dispatch,
    WorkerWrites,
    Actions,
    History,
    Tenants,
    Shards,
    Workflows,
    Schedules,
    Metrics,
    Partitions,
    Concurrency,
    Flow,
):
    """The :class:`~scheduler.store.Store` on PostgreSQL: owns the pool; every store
    method is its parts' (it inherits them)."""

    def __init__(
        self, pool: asyncpg.Pool, config: StoreConfig, dsn: str, fence: FenceWatch
    ) -> None:
        rls, timeout = config.row_level_security, config.call_timeout_s
        super().__init__(Db(pool, row_level_security=rls, call_timeout_s=timeout), SQL, config)
        self._pool = pool
        self._fence = fence
        self._dsn = dsn  # for the work-notice listener's own connection
        self._closed = False

    @classmethod
    async def open(cls, dsn: str, config: StoreConfig | None = None) -> PostgresStore:
        """Connect (the schema must be migrated) and create the partitions ahead."""
        config = config or StoreConfig()
        extra: dict[str, Any] = {}
        fence = FenceWatch()  # a primary promoted under us: fenced before first use
        if POOL_TAKES_RESET:
            extra["reset"] = no_session_state
        async with driver_errors():
            pool = await asyncpg.create_pool(
                dsn,
                min_size=config.pool_min_size,
                max_size=config.pool_max_size,
                command_timeout=config.command_timeout_s,
                timeout=config.connect_timeout_s,
                init=fence.on_connect,
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
        # Named, not cls: mypy then refuses a PostgresStore that lacks a protocol method.
        store = PostgresStore(pool, config, dsn, fence)
        try:
            if config.row_level_security:
                await store._warn_if_rls_bypassed()
            await store.load_partitions()
            await store.create_ahead(datetime.now(UTC))
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

    async def listen_work(
        self, on_notice: WorkCallback, on_move: MoveCallback | None = None
    ) -> WorkNotices | None:
        """LISTEN on its own connection (a pooled one would be reset and reused)."""
        if self._dsn is None:
            return None
        async with driver_errors():
            settings, timeout = {"timezone": "UTC"}, self.config.connect_timeout_s
            conn = await asyncpg.connect(self._dsn, server_settings=settings, timeout=timeout)
        notices = PgWorkNotices(conn, on_notice, on_move)
        try:
            async with driver_errors():
                await conn.add_listener(WORK_CHANNEL, notices.heard)
        except BaseException:
            await notices.close()
            raise
        return notices

    def on_fence(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(generation)`` when a fence is raised under this store."""
        self._fence.listen(callback)

    async def close(self) -> None:
        """Close the pool; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()
