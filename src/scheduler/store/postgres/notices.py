"""Work notices on PostgreSQL: ``NOTIFY`` from the writing transaction, ``LISTEN`` on a
connection of the node's own (see :meth:`scheduler.store.Store.listen_work`).

Owns :data:`WORK_CHANNEL`, :func:`notify_work` (called by the parts that make work for
another node, inside their transaction: ``tasks``, ``writes``, ``upstream``) and
:class:`PgWorkNotices` (opened by ``PostgresStore.listen_work``). Calls asyncpg; imports
only the protocol's :data:`WorkCallback` of the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import asyncpg

from scheduler.store.protocol import MoveCallback, WorkCallback

log = logging.getLogger(__name__)

#: The NOTIFY channel of :meth:`PostgresStore.listen_work`. A payload is ``p:`` (claim
#: SCHEDULED rows) or ``r:`` (re-read PRELOADED rows) and the shard ids, comma-separated;
#: or ``m:`` and ``shard,task id,due µs`` (a debounced task's due time moved).
WORK_CHANNEL = "tickwheel_work"


async def notify_work(conn: Any, shards: set[int], *, reconcile: bool) -> None:
    """Inside the writing transaction: PostgreSQL delivers it at commit, never before and
    never for a rollback, so a listener always finds the rows it is told about."""
    if shards:
        payload = ("r:" if reconcile else "p:") + ",".join(map(str, sorted(shards)))
        await conn.execute("SELECT pg_notify($1, $2)", WORK_CHANNEL, payload)


async def notify_moved(conn: Any, shard: int, task_id: uuid.UUID, due_us: int) -> None:
    """Inside the debouncing transaction: tell the shard's owner the task's new due time
    (it moves its timer; delivered at commit, as :func:`notify_work`)."""
    await conn.execute("SELECT pg_notify($1, $2)", WORK_CHANNEL, f"m:{shard},{task_id},{due_us}")


class PgWorkNotices:
    """One LISTEN connection; ``wait_closed`` returns when it is lost or closed."""

    def __init__(
        self, conn: asyncpg.Connection, on_notice: WorkCallback, on_move: MoveCallback | None
    ) -> None:
        self._conn = conn
        self._on_notice = on_notice
        self._on_move = on_move
        self._closed = asyncio.Event()
        conn.add_termination_listener(lambda _c: self._closed.set())

    def heard(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        kind, _, rest = str(payload).partition(":")
        if kind == "m":
            try:
                shard, task_id, due_us = rest.split(",")
                moved = (int(shard), uuid.UUID(task_id), int(due_us))
            except ValueError:
                log.warning("ignoring a malformed move notice %r", payload)
                return
            if self._on_move is not None:
                self._on_move(*moved)
            return
        try:
            shards = frozenset(int(x) for x in rest.split(",") if x)
        except ValueError:
            log.warning("ignoring a malformed work notice %r", payload)
            return
        self._on_notice(shards, kind == "r")

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._closed.set()
        if not self._conn.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.close(), 5)
