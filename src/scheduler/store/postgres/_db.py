"""The PostgreSQL handle the parts share: the asyncpg pool, the SQL map, the error boundary.

Owns :class:`Db` (a connection from the pool per call, driver errors turned into
:class:`StoreError`, each call's tenant scope for row-level security), :class:`Part` (the
base of every part: the handle, the SQL and the config), :data:`SYSTEM`,
:func:`scope_of`, :func:`driver_errors`, :func:`column` and :func:`uniform` (array
arguments), the pool's no-op reset hook and :data:`SQL`,
every named section of ``sql/postgres/{queries,orchestration}.sql`` with its
state-machine guards expanded. Calls asyncpg and :mod:`scheduler.store._sql`;
:class:`~scheduler.store.postgres.PostgresStore` builds the handle and inherits every
part, and ``migrate`` uses :func:`driver_errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

import asyncpg

from scheduler._errors import StoreError, TickwheelError
from scheduler.store import _sql
from scheduler.store._config import StoreConfig
from scheduler.store._errors import StoreUnavailable

if TYPE_CHECKING:
    Conn: TypeAlias = asyncpg.pool.PoolConnectionProxy[asyncpg.Record]
    """A pooled connection, as the parts receive it."""

SQL: Mapping[str, str] = _sql.all_queries("postgres")
"""Every named PostgreSQL statement, templates expanded."""

SCOPE_SETTING: Final = "tickwheel.tenant"
"""The setting the row-level security policies read (migrations/0007)."""
BY_KEY: Final = (
    "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"
)
"""Sent at the start of a hot call's transaction (``Db.conn(..., by_key=True)``): the
writes that name their tasks by key (dispatch, ack, heartbeat, completion, failure,
release) must probe the primary key once a key, and the claim, the reaper and the
pre-loaded pages must walk their own ordered index (issue 41). The schema and the
statements leave no other index to the writes (migration 0015, queries.sql), but the
planner still priced one sequential scan of the partition below a 1,000-task batch's
probes once the batch was above about 2% of it (50 tuples a task on 50,000), and on a
partition never analyzed it answered the claim with a bitmap of every task in the
look-ahead window, or with a range of the forecast's index and a sort (35-48 index
entries a task): costs that grow with the tasks outstanding. Turning sequential and
bitmap scans and sorts off for those transactions alone leaves the key probes and the
ordered index scans (the claim's due_at, the reaper's lease, the pages' preloaded
index).

"""
GENERIC: Final = "SET LOCAL plan_cache_mode = force_generic_plan"
"""Added to :data:`BY_KEY` for a small batch (``Db.conn(..., generic=True)``, below
:data:`GENERIC_BELOW` tasks): the call runs its prepared statement's generic plan,
planned once per connection (issue 41, the stampede's CPU). Under ``plan_cache_mode =
auto`` PostgreSQL prices the generic plan of these partitioned-table statements above
the custom ones (it cannot prune partitions at plan time) and plans every call again:
about 0.8 ms of the backend's CPU a call whatever its batch, 80 us a task in a batch of
10, the small completion batches and dispatch rounds of a flat stream. The generic plan
prunes at executor start-up and probes the same indexes
(``tests/integration/store/test_plans.py`` checks both plans of every hot statement),
at a few microseconds a row more than the custom one: a large batch keeps planning."""
CUSTOM: Final = "SET LOCAL plan_cache_mode = force_custom_plan"
"""A tenant's listing and count (``Db.conn(..., custom=True)``): planned for the call's
tenant and filters every time. They join ``task_keys`` to ``tasks`` (migration 0022), and
the generic plan, blind to the tenant, can drive the join from the wrong side (a walk of
every task in id order for a page of 100). Planning costs well under a millisecond; a
listing is a read of a person or a script, not the hot path."""
GENERIC_BELOW: Final = 100
"""Batches below this many tasks run the generic plan (:data:`GENERIC`): measured on
PostgreSQL 15, a batch of 10 cost the backend 95 instead of 170 us a task, of 25 about
60 instead of 65, of 100 and 1,000 the same or a little more (docs/benchmarks.md)."""


SYSTEM: Final = "*"
"""The scope of the scheduler's own paths (pre-load, dispatch, worker writes, lease
expiry, schedules firing, admin), which mix tenants by design: every row visible."""
Scope: TypeAlias = uuid.UUID | Literal["*"]
"""A tenant's id, or :data:`SYSTEM`."""


def scope_of(tenant_id: uuid.UUID | None) -> Scope:
    """The scope of a call made for ``tenant_id`` (None: a platform caller, SYSTEM)."""
    return SYSTEM if tenant_id is None else tenant_id


def scope_of_all(tenant_ids: Iterable[uuid.UUID]) -> Scope:
    """One tenant's scope when every id is that tenant's; SYSTEM for a mixed batch."""
    ids = set(tenant_ids)
    return ids.pop() if len(ids) == 1 else SYSTEM


def _scope_text(scope: Scope) -> str:
    if scope == SYSTEM:
        return SYSTEM
    if not isinstance(scope, uuid.UUID):
        raise TypeError(f"scope must be a tenant UUID or SYSTEM, got {scope!r}")
    return str(scope)  # hex digits and dashes only: safe to quote into SQL text


def column(values: list[Any]) -> list[Any] | None:
    """An array argument for ``unnest``: None for a column of NULLs only.

    ``unnest`` of several arrays pads a shorter one with NULLs, a NULL array included,
    so the rows are the same; asyncpg then encodes no element (each costs it an
    ``isinstance`` check against three ABCs, a Python-level call, and its encoding).
    The columns most batches leave empty (a trace context, a workflow, a schedule, a
    retry policy, a shard epoch, a folded ack) cost nothing a task."""
    if not values or values[0] is not None:
        return values
    return None if values.count(None) == len(values) else values


def uniform(values: list[Any]) -> list[Any]:
    """An array argument the statement reads through ``tickwheel_fill`` (migration
    0014): a column whose values are all equal as that one value, any other as it is.
    A submit's tenant, type, state, times and pool, a dispatch round's worker, lease and
    mode: about 0.2 us a value less for asyncpg to encode, 3 us a submitted task."""
    if len(values) > 1 and values.count(values[0]) == len(values):
        return values[:1]
    return values


UNREACHABLE: Final = (
    OSError,  # refused, reset, no route
    TimeoutError,  # a call past its deadline, a connect that never answered
    asyncpg.InterfaceError,  # the connection was closed or lost under the call
    asyncpg.InternalClientError,  # a connection left mid-protocol by a lost server
    asyncpg.PostgresConnectionError,  # class 08
    asyncpg.OperatorInterventionError,  # class 57: shutting down, recovering, cancelled
    asyncpg.ReadOnlySQLTransactionError,  # a primary demoted under us (a failover)
)
"""Driver errors that say the store is not there (or not writable) right now, rather
than that the call was wrong: they become :class:`StoreUnavailable`."""


@contextlib.asynccontextmanager
async def driver_errors() -> AsyncIterator[None]:
    """Turn driver and network errors into StoreError (ours pass through): those of an
    unreachable store (:data:`UNREACHABLE`) into StoreUnavailable."""
    try:
        yield
    except TickwheelError:
        raise
    except UNREACHABLE as exc:
        raise StoreUnavailable(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc
    except asyncpg.PostgresError as exc:
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
    """The pool, lent one connection at a time, each time for one scope."""

    def __init__(
        self, pool: asyncpg.Pool, *, row_level_security: bool = True, call_timeout_s: float = 30.0
    ) -> None:
        self.pool = pool
        self.row_level_security = row_level_security
        self.call_timeout_s = call_timeout_s
        """The deadline of one whole call: waiting for a connection, every statement
        and the commit. Past it the call ends with StoreUnavailable, whatever hung."""

    @contextlib.asynccontextmanager
    async def conn(
        self,
        scope: Scope,
        *,
        tx: bool = False,
        by_key: bool = False,
        generic: bool = False,
        custom: bool = False,
    ) -> AsyncIterator[Conn]:
        """A pooled connection for ``scope``; driver errors leave as StoreError.

        ``by_key``: the call's statements find their tasks by key; its transaction starts
        with :data:`BY_KEY` (in the same message as ``BEGIN``), and with ``generic`` (a
        small batch) with :data:`GENERIC` too. ``custom``: its transaction starts with
        :data:`CUSTOM`.

        With row-level security the call runs in one transaction that starts with
        ``SET LOCAL tickwheel.tenant`` (sent with ``BEGIN`` in one message, so a call
        that needed a transaction anyway costs no extra round trip; a single statement
        costs two: ``BEGIN``/``SET`` and ``COMMIT``). The pool's connections start with
        the setting empty, so a statement outside such a transaction sees no row.
        Without it the connections start with ``'*'`` and ``tx`` alone decides whether
        there is a transaction.
        """
        # The deadline covers the caller's statements too (they run inside this block):
        # no store call waits for ever on a server that accepts and never answers, or on
        # a pool whose connections all went with a restart (issue 42). It closes the
        # connection rather than cancel the call: asyncpg answers a cancelled query with
        # a cancel request on a new connection, and its pool waits for that before it
        # takes the connection back (30 s on a server that never answers).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.call_timeout_s
        expired = False
        async with driver_errors(), self.pool.acquire(timeout=self.call_timeout_s) as conn:

            def expire() -> None:
                nonlocal expired
                expired = True
                conn.terminate()

            timer = loop.call_at(deadline, expire)
            try:
                local = _local(by_key, generic, custom)
                if not self.row_level_security:
                    try:
                        if tx or local:
                            async with conn.transaction():
                                if local:
                                    await conn.execute(local)
                                yield conn
                        else:
                            yield conn
                    except BaseException as exc:
                        _drop_if_lost(conn, exc)
                        raise
                    return
                pin = f"; {local}" if local else ""
                await conn.execute(
                    f"BEGIN; SET LOCAL {SCOPE_SETTING} = '{_scope_text(scope)}'{pin}"
                )
                try:
                    yield conn
                except BaseException as exc:
                    if not _drop_if_lost(conn, exc):
                        with contextlib.suppress(Exception):
                            await conn.execute("ROLLBACK")
                    raise
                await conn.execute("COMMIT")
            except UNREACHABLE as exc:
                if expired:
                    raise StoreUnavailable(
                        f"PostgreSQL: no answer within the call's {self.call_timeout_s:g} s"
                    ) from exc
                raise
            finally:
                timer.cancel()


def _local(by_key: bool, generic: bool, custom: bool) -> str:
    """The SET LOCAL statements a call's transaction starts with ("" for none)."""
    return "; ".join(
        s for s, on in ((BY_KEY, by_key), (GENERIC, by_key and generic), (CUSTOM, custom)) if on
    )


def _drop_if_lost(conn: Conn, exc: BaseException) -> bool:
    """Close ``conn`` at once, without a round trip, when ``exc`` says its server is
    lost or the call ran past its deadline (the cancellation): a ROLLBACK there, or
    the pool's reset on release, would wait out the statement timeout on a socket
    nobody answers. The pool opens a new connection in its place. Whether it closed."""
    if conn.is_closed():
        return True
    if isinstance(exc, (asyncio.CancelledError, *UNREACHABLE)):
        conn.terminate()
        return True
    return False


class Part:
    """The base of every PostgreSQL part (``tasks``, ``dispatch``, ``writes``, …): the
    handle, the SQL and the config. :class:`~scheduler.store.postgres.PostgresStore`
    inherits every part, so one object holds them once and a part calls another part's
    method on ``self``. A part with state of its own extends ``__init__`` (calling
    ``super().__init__`` with the same arguments)."""

    def __init__(self, db: Db, q: Mapping[str, str], config: StoreConfig) -> None:
        self._db = db
        self._q = q
        self.config = config
