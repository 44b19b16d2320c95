"""Concurrency limits on SQLite (:class:`~scheduler.store.protocol.ConcurrencyStore`).

Owns :class:`Concurrency`: ``set_concurrency_limit`` and ``concurrency_limits`` on the
``concurrency_limits`` table; the limit is enforced in
:meth:`.dispatch.Dispatch.mark_dispatched` (one writer: its transaction counts and
dispatches alone). Calls :class:`~scheduler.store.sqlite._db.Db`; inherited by
:class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime

from scheduler._errors import NotFound
from scheduler.store import _validate
from scheduler.store.protocol.concurrency import ConcurrencyStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import ConcurrencyLimit


class Concurrency(Part, ConcurrencyStore):
    """The limit of each (tenant, type)'s concurrency keys."""

    async def set_concurrency_limit(
        self, tenant_id: uuid.UUID, type: str, limit: int | None, now: datetime
    ) -> None:
        """Upsert (or delete, for None) the row of (tenant, type)."""
        n = rows.us(_validate.aware("now", now))
        _validate.text("type", type, _validate.TYPE_MAX_CHARS)
        if limit is not None:
            _validate.concurrency_limit("limit", limit)
        q = self._q

        def fn(c: sqlite3.Connection) -> None:
            if c.execute(q["known_tenant"], (str(tenant_id),)).fetchone() is None:
                raise NotFound("tenant", str(tenant_id))
            if limit is None:
                c.execute(q["clear_concurrency_limit"], (str(tenant_id), type))
            else:
                c.execute(q["set_concurrency_limit"], (str(tenant_id), type, limit, n))

        await self._db.tx(fn)

    async def concurrency_limits(self, tenant_id: uuid.UUID | None) -> list[ConcurrencyLimit]:
        """Every row (of one tenant, or all)."""
        q = self._q
        tid = None if tenant_id is None else str(tenant_id)

        def fn(c: sqlite3.Connection) -> list[ConcurrencyLimit]:
            found = c.execute(q["concurrency_limits"], (tid, tid)).fetchall()
            return [ConcurrencyLimit(uuid.UUID(r[0]), r[1], r[2]) for r in found]

        return await self._db.tx(fn)
