"""Concurrency limits on PostgreSQL (:class:`~scheduler.store.protocol.ConcurrencyStore`).

Owns :class:`Concurrency`: ``set_concurrency_limit`` and ``concurrency_limits`` on the
``concurrency_limits`` table (migration 0018); the limit is enforced in
:meth:`.dispatch.Dispatch.mark_dispatched`. Calls
:class:`~scheduler.store.postgres._db.Db`; inherited by
:class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from scheduler._errors import NotFound
from scheduler.store import _validate
from scheduler.store.postgres._db import SYSTEM, Part
from scheduler.store.protocol.concurrency import ConcurrencyStore
from scheduler.types import ConcurrencyLimit


class Concurrency(Part, ConcurrencyStore):
    """The limit of each (tenant, type)'s concurrency keys."""

    async def set_concurrency_limit(
        self, tenant_id: uuid.UUID, type: str, limit: int | None, now: datetime
    ) -> None:
        """Upsert (or delete, for None) the row of (tenant, type)."""
        _validate.aware("now", now)
        _validate.text("type", type, _validate.TYPE_MAX_CHARS)
        if limit is not None:
            _validate.concurrency_limit("limit", limit)
        async with self._db.conn(SYSTEM, tx=True) as conn:
            if await conn.fetchval(self._q["known_tenants"], [tenant_id]) is None:
                raise NotFound("tenant", str(tenant_id))
            if limit is None:
                await conn.execute(self._q["clear_concurrency_limit"], tenant_id, type)
            else:
                await conn.execute(self._q["set_concurrency_limit"], tenant_id, type, limit, now)

    async def concurrency_limits(self, tenant_id: uuid.UUID | None) -> list[ConcurrencyLimit]:
        """Every row (of one tenant, or all)."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["concurrency_limits"], tenant_id)
        return [ConcurrencyLimit(r[0], r[1], r[2]) for r in found]
