"""Flow control rules on SQLite (:class:`~scheduler.store.protocol.FlowStore`): the
``rate_limits`` and ``dispatch_pauses`` tables (PostgreSQL migration 0019's twins).

Owns :class:`Flow`; inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import datetime

from scheduler.store.protocol.flow import FlowStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import ALL_TENANTS, DispatchPause, Pool, RateLimitRule


def _rule(r: sqlite3.Row) -> RateLimitRule:
    return RateLimitRule(
        tenant_id=uuid.UUID(r["tenant_id"]),
        key=r["key"],
        rate=float(r["rate"]),
        burst=int(r["burst"]),
        updated_at=rows.dt(r["updated_at"]),
    )


def _pause(r: sqlite3.Row) -> DispatchPause:
    return DispatchPause(
        tenant_id=uuid.UUID(r["tenant_id"]),
        task_type=r["task_type"],
        pool=Pool(r["pool"]) if r["pool"] else None,
        paused_at=rows.dt(r["paused_at"]),
    )


class Flow(Part, FlowStore):
    """Rate limits and pauses, one transaction each."""

    async def set_rate_limit(
        self, tenant_id: uuid.UUID, key: str, rate: float, burst: int, now: datetime
    ) -> RateLimitRule:
        """See :meth:`FlowStore.set_rate_limit`."""

        def fn(c: sqlite3.Connection) -> RateLimitRule:
            row = c.execute(
                "INSERT INTO rate_limits (tenant_id, key, rate, burst, updated_at)"
                " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (tenant_id, key) DO UPDATE"
                " SET rate = ?3, burst = ?4, updated_at = ?5 RETURNING *",
                (str(tenant_id), key, rate, burst, rows.us(now)),
            ).fetchone()
            return _rule(row)

        return await self._db.tx(fn)

    async def delete_rate_limit(self, tenant_id: uuid.UUID, key: str) -> bool:
        """See :meth:`FlowStore.delete_rate_limit`."""

        def fn(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "DELETE FROM rate_limits WHERE tenant_id = ? AND key = ?", (str(tenant_id), key)
            )
            return cur.rowcount > 0

        return await self._db.tx(fn)

    async def list_rate_limits(self, tenant_id: uuid.UUID | None = None) -> list[RateLimitRule]:
        """See :meth:`FlowStore.list_rate_limits`."""
        t = None if tenant_id is None else str(tenant_id)

        def fn(c: sqlite3.Connection) -> list[RateLimitRule]:
            found = c.execute(
                "SELECT * FROM rate_limits WHERE ?1 IS NULL OR tenant_id = ?1"
                " ORDER BY tenant_id, key",
                (t,),
            ).fetchall()
            return [_rule(r) for r in found]

        return await self._db.tx(fn)

    async def pause_dispatch(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None, now: datetime
    ) -> DispatchPause:
        """See :meth:`FlowStore.pause_dispatch`."""
        args = (str(tenant_id), task_type, pool.value if pool is not None else "")

        def fn(c: sqlite3.Connection) -> DispatchPause:
            c.execute(
                "INSERT INTO dispatch_pauses (tenant_id, task_type, pool, paused_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*args, rows.us(now)),
            )
            row = c.execute(
                "SELECT * FROM dispatch_pauses WHERE tenant_id = ? AND task_type = ? AND pool = ?",
                args,
            ).fetchone()
            return _pause(row)

        return await self._db.tx(fn)

    async def resume_dispatch(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None
    ) -> bool:
        """See :meth:`FlowStore.resume_dispatch`."""
        args = (str(tenant_id), task_type, pool.value if pool is not None else "")

        def fn(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "DELETE FROM dispatch_pauses WHERE tenant_id = ? AND task_type = ? AND pool = ?",
                args,
            )
            return cur.rowcount > 0

        return await self._db.tx(fn)

    async def list_dispatch_pauses(self, tenant_id: uuid.UUID | None = None) -> list[DispatchPause]:
        """See :meth:`FlowStore.list_dispatch_pauses`."""
        t = None if tenant_id is None else str(tenant_id)

        def fn(c: sqlite3.Connection) -> list[DispatchPause]:
            found = c.execute(
                "SELECT * FROM dispatch_pauses WHERE ?1 IS NULL OR tenant_id = ?1"
                " OR tenant_id = ?2 ORDER BY tenant_id, task_type, pool",
                (t, str(ALL_TENANTS)),
            ).fetchall()
            return [_pause(r) for r in found]

        return await self._db.tx(fn)
