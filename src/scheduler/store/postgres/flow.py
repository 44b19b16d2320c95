"""Flow control rules on PostgreSQL (:class:`~scheduler.store.protocol.FlowStore`):
the ``rate_limits`` and ``dispatch_pauses`` tables of migration 0019.

Owns :class:`Flow`; inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from scheduler.store.postgres._db import SYSTEM, Part
from scheduler.store.protocol.flow import FlowStore
from scheduler.types import ALL_TENANTS, DispatchPause, Pool, RateLimitRule


def _rule(r: asyncpg.Record) -> RateLimitRule:
    return RateLimitRule(
        tenant_id=r["tenant_id"],
        key=r["key"],
        rate=float(r["rate"]),
        burst=int(r["burst"]),
        updated_at=r["updated_at"],
    )


def _pause(r: asyncpg.Record) -> DispatchPause:
    return DispatchPause(
        tenant_id=r["tenant_id"],
        task_type=r["task_type"],
        pool=Pool(r["pool"]) if r["pool"] else None,
        paused_at=r["paused_at"],
    )


class Flow(Part, FlowStore):
    """Rate limits and pauses, one statement each."""

    async def set_rate_limit(
        self, tenant_id: uuid.UUID, key: str, rate: float, burst: int, now: datetime
    ) -> RateLimitRule:
        """See :meth:`FlowStore.set_rate_limit`."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(
                "INSERT INTO rate_limits (tenant_id, key, rate, burst, updated_at)"
                " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, key) DO UPDATE"
                " SET rate = $3, burst = $4, updated_at = $5 RETURNING *",
                tenant_id,
                key,
                rate,
                burst,
                now,
            )
        assert row is not None
        return _rule(row)

    async def delete_rate_limit(self, tenant_id: uuid.UUID, key: str) -> bool:
        """See :meth:`FlowStore.delete_rate_limit`."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(
                "DELETE FROM rate_limits WHERE tenant_id = $1 AND key = $2 RETURNING key",
                tenant_id,
                key,
            )
        return row is not None

    async def list_rate_limits(self, tenant_id: uuid.UUID | None = None) -> list[RateLimitRule]:
        """See :meth:`FlowStore.list_rate_limits`."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(
                "SELECT * FROM rate_limits WHERE $1::uuid IS NULL OR tenant_id = $1"
                " ORDER BY tenant_id, key",
                tenant_id,
            )
        return [_rule(r) for r in found]

    async def pause_dispatch(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None, now: datetime
    ) -> DispatchPause:
        """See :meth:`FlowStore.pause_dispatch`."""
        p = pool.value if pool is not None else ""
        async with self._db.conn(SYSTEM) as conn:
            await conn.execute(
                "INSERT INTO dispatch_pauses (tenant_id, task_type, pool, paused_at)"
                " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                tenant_id,
                task_type,
                p,
                now,
            )
            row = await conn.fetchrow(
                "SELECT * FROM dispatch_pauses WHERE tenant_id = $1 AND task_type = $2"
                " AND pool = $3",
                tenant_id,
                task_type,
                p,
            )
        assert row is not None
        return _pause(row)

    async def resume_dispatch(
        self, tenant_id: uuid.UUID, task_type: str, pool: Pool | None
    ) -> bool:
        """See :meth:`FlowStore.resume_dispatch`."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(
                "DELETE FROM dispatch_pauses WHERE tenant_id = $1 AND task_type = $2"
                " AND pool = $3 RETURNING tenant_id",
                tenant_id,
                task_type,
                pool.value if pool is not None else "",
            )
        return row is not None

    async def list_dispatch_pauses(self, tenant_id: uuid.UUID | None = None) -> list[DispatchPause]:
        """See :meth:`FlowStore.list_dispatch_pauses`."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(
                "SELECT * FROM dispatch_pauses"
                " WHERE $1::uuid IS NULL OR tenant_id = $1 OR tenant_id = $2"
                " ORDER BY tenant_id, task_type, pool",
                tenant_id,
                ALL_TENANTS,
            )
        return [_pause(r) for r in found]
