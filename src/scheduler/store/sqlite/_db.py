"""The SQLite connection handle the parts share: one thread, one connection, one SQL map.

Owns :class:`Db` (open, ``tx``, close), :class:`Part` (the base of every part: the
handle, the SQL and the config) and :data:`SQL`, every named section of
``sql/sqlite/{queries,orchestration}.sql`` with its state-machine guards expanded. Calls
only :mod:`sqlite3` and :mod:`scheduler.store._sql`;
:class:`~scheduler.store.sqlite.SqliteStore` opens the handle and inherits every part.
Driver errors become :class:`StoreError` here, at the adapter boundary.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sqlite3
from collections.abc import Callable, Mapping
from typing import TypeVar

from scheduler._errors import StoreError, TickwheelError
from scheduler.store import _sql
from scheduler.store._config import StoreConfig

T = TypeVar("T")

SQL: Mapping[str, str] = _sql.all_queries("sqlite")
"""Every named SQLite statement, templates expanded."""


def connect(path: str) -> sqlite3.Connection:
    """Open the file (or ``:memory:``) in WAL mode and create the schema if needed."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.executescript(_sql.read_text("sqlite", "schema.sql"))
    upgrade(conn)
    return conn


UPGRADE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("api_keys", "scopes", "TEXT NOT NULL DEFAULT 'submit,read,work'"),
    ("api_keys", "expires_at", "INTEGER"),
    ("api_keys", "revoked_at", "INTEGER"),
    ("api_keys", "last_used_at", "INTEGER"),
    ("api_keys", "rotated_from", "TEXT"),
    ("tasks", "retry_policy", "TEXT"),
    ("tasks", "last_error_type", "TEXT"),
    ("tasks", "last_traceback", "TEXT"),
    # The idempotency key's window (issue 43; PostgreSQL keeps it in task_keys).
    ("tasks", "key_expires_at", "INTEGER"),
    ("tasks", "key_until_finished", "INTEGER NOT NULL DEFAULT 0"),
    ("tasks", "concurrency_key", "TEXT"),
    ("tasks", "rate_limit_key", "TEXT"),
    ("task_transitions", "reason", "TEXT NOT NULL DEFAULT ''"),
    ("task_transitions", "due_at", "INTEGER"),
)
"""Columns added after a table first shipped: ``schema.sql`` creates them in a new file
(``CREATE TABLE IF NOT EXISTS`` leaves an older file's table as it was), and
:func:`upgrade` adds them to an older file, with the same definition."""


UNIQUE_NAMES = (
    # Tenant names are unique (issue 40), as on PostgreSQL (migration 0016): of an older
    # file's tenants that share a name the oldest keeps it, each other one is renamed
    # NAME-<the first 8 characters of its id>.
    "UPDATE tenants SET name = substr(name, 1, 119) || '-' || substr(id, 1, 8)"
    " WHERE EXISTS (SELECT 1 FROM tenants o WHERE o.name = tenants.name"
    " AND (o.created_at < tenants.created_at"
    " OR (o.created_at = tenants.created_at AND o.id < tenants.id)))",
    "CREATE UNIQUE INDEX IF NOT EXISTS tenants_name_key ON tenants (name)",
)
"""What makes tenant names unique in a file made before they were."""


CONCURRENCY_INDEX = (
    "CREATE INDEX IF NOT EXISTS idx_tasks_concurrency_active"
    " ON tasks (tenant_id, type, concurrency_key)"
    " WHERE concurrency_key IS NOT NULL AND status IN ('DISPATCHED', 'RUNNING')"
)
"""The running tasks of a concurrency key: what a keyed dispatch counts (made after the
column, which an older file gains in :func:`upgrade`)."""


def upgrade(conn: sqlite3.Connection) -> None:
    """Add every column of :data:`UPGRADE_COLUMNS` that the file's table lacks, and the
    unique index on tenant names (:data:`UNIQUE_NAMES`) where it is missing."""
    for table, column, ddl in UPGRADE_COLUMNS:
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
    conn.execute(CONCURRENCY_INDEX)
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(tenants)")}
    if "tenants_name_key" not in indexes:
        for statement in UNIQUE_NAMES:
            conn.execute(statement)


class Db:
    """The only connection, used only on its executor's single thread."""

    def __init__(self, conn: sqlite3.Connection, executor: concurrent.futures.Executor) -> None:
        self._conn = conn
        self._executor = executor
        self._closed = False

    async def tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one IMMEDIATE transaction on the store's thread."""
        if self._closed:
            raise StoreError("SQLite store is closed")

        def run() -> T:
            c = self._conn
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

    async def close(self) -> None:
        """Close the connection and stop the thread; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._conn.close)
        self._executor.shutdown(wait=True)


class Part:
    """The base of every SQLite part (``tasks``, ``dispatch``, ``writes``, …): the
    handle, the SQL and the config. :class:`~scheduler.store.sqlite.SqliteStore`
    inherits every part, so one object holds them once and a part calls another part's
    method on ``self``."""

    def __init__(self, db: Db, q: Mapping[str, str], config: StoreConfig) -> None:
        self._db = db
        self._q = q
        self.config = config
