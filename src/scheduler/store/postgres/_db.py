"""The PostgreSQL handle the parts share: the asyncpg pool, the SQL map, the error boundary.

Owns :class:`Db` (a connection from the pool per call, driver errors turned into
:class:`StoreError`), :func:`driver_errors`, the pool's no-op reset hook and :data:`SQL`,
every named section of ``sql/postgres/{queries,orchestration}.sql`` with its
state-machine guards expanded. Calls asyncpg and :mod:`scheduler.store._sql`; the facade
(:class:`~scheduler.store.postgres.PostgresStore`) builds it and hands it to every part,
and ``migrate`` uses :func:`driver_errors`.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, TypeAlias

import asyncpg

from scheduler._errors import StoreError, TickwheelError
from scheduler.store import _sql

if TYPE_CHECKING:
    Conn: TypeAlias = asyncpg.pool.PoolConnectionProxy[asyncpg.Record]
    """A pooled connection, as the parts receive it."""

SQL: Mapping[str, str] = _sql.all_queries("postgres")
"""Every named PostgreSQL statement, templates expanded."""


@contextlib.asynccontextmanager
async def driver_errors() -> AsyncIterator[None]:
    """Turn driver and network errors into StoreError (ours pass through)."""
    try:
        yield
    except TickwheelError:
        raise
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        raise StoreError(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc


async def no_session_state(conn: asyncpg.Connection) -> None:
    """Pool release hook: nothing to reset.

    asyncpg's default reset sends ``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
    RESET ALL`` on every release, one more round trip per store call. The store leaves no
    session state behind (no SET, LISTEN, cursors or session advisory locks; ``migrate``
    uses a connection of its own), and asyncpg still rolls back an open transaction before
    calling this hook.
    """


POOL_TAKES_RESET = "reset" in inspect.signature(asyncpg.create_pool).parameters
"""asyncpg >= 0.30 lets the pool's reset be replaced."""


class Db:
    """The pool, lent one connection at a time."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @contextlib.asynccontextmanager
    async def conn(self) -> AsyncIterator[Conn]:
        """A pooled connection; driver errors leave as StoreError."""
        async with driver_errors(), self.pool.acquire() as conn:
            yield conn
