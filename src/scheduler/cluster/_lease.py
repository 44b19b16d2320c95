"""The exclusive lease of a node that runs without etcd: one dispatcher per database.

Without etcd every node owns every shard, so two nodes on one database would each
raise every shard's epoch and refuse each other's dispatches. A node without etcd
therefore takes this lease before it claims anything, and a second node is refused
with :class:`LeaseHeld`, which names the holder.

- :class:`PostgresLease`: a session advisory lock held by a dedicated asyncpg
  connection for the node's lifetime. The connection's ``application_name`` names the
  node (``tickwheel node ID HOST:PORT pid N``), so a refused node reads the holder from
  ``pg_locks`` and ``pg_stat_activity``. The lock goes with the connection: a node
  that dies or is cut off loses it, and :meth:`PostgresLease.wait_lost` tells the
  node's membership (``_leased.py``), which gives the shards up and tries again.
- :class:`FileLease`: an exclusive ``fcntl.flock`` on a lock file beside an SQLite
  database (``tickwheel dev``, ``serve --store sqlite:///…``); the holder's name is
  written into the file. A flock lasts as long as the process, so it is never lost.

Calls asyncpg and the OS only; used by ``_leased.py`` and by the composition root
(``scheduler.node``), which takes the lease after binding its port and before the
engine starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import Protocol

import asyncpg

from scheduler._errors import Unavailable

_log = logging.getLogger("tickwheel.cluster")

LOCK_KEY = 0x746B776C_00000001
"""The advisory lock key (``pg_try_advisory_lock(bigint)``): "tkwl", lock 1."""
_LOCK_CLASSID = LOCK_KEY >> 32
_LOCK_OBJID = LOCK_KEY & 0xFFFFFFFF

RUN_SEVERAL = "to run several nodes on one database, give each --etcd (docs/cluster.md)"
"""The advice every refusal ends with."""

_HOLDER_SQL = """
SELECT a.pid, a.application_name, a.client_addr::text AS addr
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 1
"""


class LeaseHeld(Unavailable):
    """Another node holds the database lease; ``holder`` says who (as far as known)."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"another Tickwheel node holds this database: {holder}; {RUN_SEVERAL}")
        self.holder = holder


class NodeLease(Protocol):
    """An exclusive lease on the node's database (the contract of both kinds)."""

    async def acquire(self) -> None:
        """Take the lease, or raise :class:`LeaseHeld`; a no-op while held."""
        ...

    async def wait_lost(self) -> None:
        """Return when the lease is lost (never, for a lease that cannot be lost)."""
        ...

    async def release(self) -> None:
        """Give the lease up; safe when not held and twice."""
        ...

    @property
    def held(self) -> bool:
        """Whether the lease is held right now, as far as this process knows."""
        ...


def holder_name(node_id: str, host: str, port: int) -> str:
    """How a node names itself as the lease holder."""
    return f"tickwheel node {node_id} {host}:{port} pid {os.getpid()}"


class PostgresLease:
    """A session advisory lock on one dedicated connection.

    The connection is checked every ``check_interval_s`` (``SELECT 1`` within
    ``timeout_s``): a node that cannot reach its database stops trusting the lease at
    most ``check_interval_s + timeout_s`` after the cut. The server holds the lock until
    it sees the session die, which the TCP keep-alives set on the connection make take
    ``keepalive_idle_s + 3 × 2`` seconds at least (11 s by default), so the node has
    given its shards up before another can take them. The shard epochs are the second
    line: a node that dispatches with a lost epoch is refused by the store.
    """

    def __init__(
        self,
        dsn: str,
        holder: str,
        *,
        check_interval_s: float = 1.0,
        timeout_s: float = 2.0,
        keepalive_idle_s: int = 5,
    ) -> None:
        if check_interval_s <= 0 or timeout_s <= 0:
            raise ValueError("check_interval_s and timeout_s must be positive")
        if check_interval_s + timeout_s >= keepalive_idle_s + 6:
            raise ValueError("the lease must be checked faster than the server drops it")
        self._dsn = dsn
        self._holder = holder
        self._check_s = check_interval_s
        self._timeout_s = timeout_s
        self._keepalive_idle_s = keepalive_idle_s
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()

    @property
    def holder(self) -> str:
        """This node's name as lease holder (the lock connection's application_name);
        set it before :meth:`acquire` once the node knows its port."""
        return self._holder

    @holder.setter
    def holder(self, holder: str) -> None:
        self._holder = holder

    @property
    def held(self) -> bool:
        """Whether this process holds the lock on a connection that is open."""
        return self._conn is not None and not self._conn.is_closed()

    @property
    def backend_pid(self) -> int | None:
        """The server pid of the lock connection (for operators and tests)."""
        return self._conn.get_server_pid() if self._conn is not None else None

    async def acquire(self) -> None:
        """Connect, take the lock or raise :class:`LeaseHeld` naming the holder."""
        if self.held:
            return
        await self._drop()
        conn = await asyncpg.connect(
            self._dsn,
            timeout=self._timeout_s,
            server_settings={
                # The server truncates to 63 bytes; the holder name fits in that.
                "application_name": self._holder[:63],
                "tcp_keepalives_idle": str(self._keepalive_idle_s),
                "tcp_keepalives_interval": "2",
                "tcp_keepalives_count": "3",
            },
        )
        try:
            got = await conn.fetchval(
                "SELECT pg_try_advisory_lock($1)", LOCK_KEY, timeout=self._timeout_s
            )
            if not got:
                raise LeaseHeld(await self._describe_holder(conn))
        except BaseException:
            await _close(conn)
            raise
        self._lost = asyncio.Event()
        conn.add_termination_listener(self._on_terminated)
        self._conn = conn

    async def _describe_holder(self, conn: asyncpg.Connection) -> str:
        row = await conn.fetchrow(_HOLDER_SQL, _LOCK_CLASSID, _LOCK_OBJID, timeout=self._timeout_s)
        if row is None:
            return "a session that has just ended (try again)"
        name = row["application_name"] or "an unnamed session"
        where = f" from {row['addr']}" if row["addr"] else ""
        return f"{name} (PostgreSQL backend pid {row['pid']}{where})"

    def _on_terminated(self, _conn: object) -> None:
        self._lost.set()

    async def wait_lost(self) -> None:
        """Return once the lock connection is gone or stops answering."""
        conn = self._conn
        if conn is None:
            return
        while not self._lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), self._check_s)
                break
            try:
                await conn.fetchval("SELECT 1", timeout=self._timeout_s)
            except Exception as exc:  # any failure means the lock can no longer be trusted
                _log.debug("lease check failed: %r", exc)
                break
        await self._drop()

    async def release(self) -> None:
        """Unlock and close the connection; safe when not held and twice."""
        conn = self._conn
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY, timeout=1.0)
        await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_terminated)
            await _close(conn)


async def _close(conn: asyncpg.Connection) -> None:
    try:
        await asyncio.wait_for(conn.close(), 1.0)
    except Exception:  # a dead connection: drop it without the goodbye
        conn.terminate()


class FileLease:
    """An exclusive ``flock`` on ``path`` (created if absent); the holder is written in."""

    def __init__(self, path: Path, holder: str) -> None:
        self._path = path
        self._holder = holder
        self._fd: int | None = None

    @classmethod
    def beside(cls, database: Path, holder: str) -> FileLease:
        """The lease of an SQLite database file: ``<database>.lock`` next to it."""
        return cls(database.with_name(database.name + ".lock"), holder)

    @property
    def path(self) -> Path:
        """The lock file."""
        return self._path

    @property
    def held(self) -> bool:
        """Whether this process holds the lock."""
        return self._fd is not None

    async def acquire(self) -> None:
        """Lock the file or raise :class:`LeaseHeld` with the holder it names."""
        if self._fd is not None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip()
            os.close(fd)
            raise LeaseHeld(f"{holder or 'another process'} (lock file {self._path})") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._holder.encode() + b"\n", 0)
        self._fd = fd

    async def wait_lost(self) -> None:
        """A flock lasts as long as the process: wait forever (until cancelled)."""
        await asyncio.Event().wait()

    async def release(self) -> None:
        """Unlock and close; safe when not held and twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock
