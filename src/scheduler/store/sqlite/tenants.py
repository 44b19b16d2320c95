"""Tenants and API keys on SQLite (:class:`~scheduler.store.protocol.TenantStore`).

Owns :class:`Tenants`. Calls :class:`~scheduler.store.sqlite._db.Db`, :mod:`.rows`, and
the shared checks of :mod:`scheduler.store._common` / :mod:`scheduler.store._validate`;
called by the facade :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store import _common, _validate
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Db
from scheduler.types import ApiKey, Tenant


class Tenants:
    """The tenant statements, each one transaction."""

    def __init__(self, db: Db, q: Mapping[str, str]) -> None:
        self._db = db
        self._q = q

    async def create_tenant(self, tenant: Tenant) -> Tenant:
        """Insert a tenant."""
        _common.check_tenant(tenant)
        created = tenant.created_at or datetime.now(UTC)
        q = self._q

        def fn(c: sqlite3.Connection) -> Tenant:
            try:
                c.execute(
                    q["insert_tenant"],
                    (
                        str(tenant.id),
                        tenant.name,
                        tenant.tier,
                        tenant.rate_limit_rps,
                        tenant.max_concurrent_workers,
                        tenant.home_region,
                        rows.us(created),
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists("tenant", str(tenant.id)) from exc
            return rows.tenant(c.execute(q["get_tenant"], (str(tenant.id),)).fetchone())

        return await self._db.tx(fn)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """A tenant by id; NotFound when absent."""
        q = self._q

        def fn(c: sqlite3.Connection) -> Tenant:
            row = c.execute(q["get_tenant"], (str(tenant_id),)).fetchone()
            if row is None:
                raise NotFound("tenant", str(tenant_id))
            return rows.tenant(row)

        return await self._db.tx(fn)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change name, tier, quotas or home region."""
        t = _common.tenant_changes(await self.get_tenant(tenant_id), changes)
        q = self._q

        def fn(c: sqlite3.Connection) -> Tenant:
            c.execute(
                q["update_tenant"],
                (
                    t.name,
                    t.tier,
                    t.rate_limit_rps,
                    t.max_concurrent_workers,
                    t.home_region,
                    str(tenant_id),
                ),
            )
            return rows.tenant(c.execute(q["get_tenant"], (str(tenant_id),)).fetchone())

        return await self._db.tx(fn)

    async def create_api_key(self, tenant_id: uuid.UUID, name: str, secret_hash: bytes) -> ApiKey:
        """Store an API key's hash for a tenant."""
        _validate.text("name", name, 128)
        await self.get_tenant(tenant_id)
        key = ApiKey(id=uuid.uuid4(), tenant_id=tenant_id, name=name, created_at=datetime.now(UTC))
        assert key.created_at is not None
        created = rows.us(key.created_at)
        q = self._q

        def fn(c: sqlite3.Connection) -> None:
            c.execute(
                q["insert_api_key"], (str(key.id), str(tenant_id), name, secret_hash, created)
            )

        await self._db.tx(fn)
        return ApiKey(id=key.id, tenant_id=tenant_id, name=name, created_at=rows.dt(created))

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a (non-revoked) key hash."""
        q = self._q

        def fn(c: sqlite3.Connection) -> uuid.UUID | None:
            row = c.execute(q["tenant_for_key_hash"], (secret_hash,)).fetchone()
            return None if row is None else uuid.UUID(row[0])

        return await self._db.tx(fn)
