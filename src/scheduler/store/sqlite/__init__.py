"""The embedded store: SQLite (stdlib ``sqlite3``) in one file, WAL mode, single node.

Owns :class:`SqliteStore`: it opens the one connection
(:class:`~scheduler.store.sqlite._db.Db`: a single-worker thread, every call one
``BEGIN IMMEDIATE`` transaction, so a batch is atomic and round trips cost nothing),
answers ``listen_work`` (no channel) and closes; every other
:class:`~scheduler.store.Store` method is inherited from the part that implements its
protocol file, of the same name: ``tasks``, ``dispatch``, ``writes``, ``actions``,
``history``, ``tenants``, ``shards``, ``workflows``, ``schedules``, ``metrics`` and
``partitions`` (none: ``maintain`` does nothing). Each part derives from
:class:`~scheduler.store.sqlite._db.Part` (the handle, the SQL of ``sql/sqlite/*.sql``,
the config). The parts share ``rows`` (codecs), ``audit`` and ``upstream`` (the upstream
policy the task writes apply in their own transaction). ``scheduled_at`` is kept for the
protocol's keys and checked on every fenced write like in PostgreSQL.
Called through :func:`scheduler.store.open_store`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
from collections.abc import Callable

from scheduler._errors import StoreError
from scheduler.store._config import StoreConfig
from scheduler.store.protocol import MoveCallback, WorkCallback, WorkNotices
from scheduler.store.sqlite._db import SQL, Db, connect
from scheduler.store.sqlite.actions import Actions
from scheduler.store.sqlite.concurrency import Concurrency
from scheduler.store.sqlite.dispatch import Dispatch
from scheduler.store.sqlite.flow import Flow
from scheduler.store.sqlite.history import History
from scheduler.store.sqlite.metrics import Metrics
from scheduler.store.sqlite.partitions import Partitions
from scheduler.store.sqlite.schedules import Schedules
from scheduler.store.sqlite.shards import Shards
from scheduler.store.sqlite.tasks import Tasks
from scheduler.store.sqlite.tenants import Tenants
from scheduler.store.sqlite.workflows import Workflows
from scheduler.store.sqlite.writes import WorkerWrites

__all__ = ["Q", "SqliteStore"]

Q = SQL
"""Every named SQLite statement (``sql/sqlite/*.sql``), templates expanded."""


class SqliteStore(
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
    """The :class:`~scheduler.store.Store` on SQLite: owns the connection; every store
    method is its parts' (it inherits them)."""

    def __init__(
        self, conn: sqlite3.Connection, executor: concurrent.futures.Executor, config: StoreConfig
    ) -> None:
        super().__init__(Db(conn, executor), SQL, config)

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
        # Named, not cls: mypy then refuses an SqliteStore that lacks a protocol method.
        return SqliteStore(conn, executor, config)

    async def listen_work(
        self, on_notice: WorkCallback, on_move: MoveCallback | None = None
    ) -> WorkNotices | None:
        """No channel: an embedded store serves one process, which owns every shard."""
        return None

    def on_fence(self, callback: Callable[[int], None]) -> None:
        """Never called: one file has no failover and no fence."""

    async def close(self) -> None:
        """Close the connection and stop the thread; safe to call twice."""
        await self._db.close()
