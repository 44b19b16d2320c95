"""Tenants and API keys on PostgreSQL (:class:`~scheduler.store.protocol.TenantStore`).

Owns :class:`Tenants`, including the cache of tenant ids known to exist that
``check_tenants`` consults before an insert (the ``tasks`` part calls it). Calls
:class:`~scheduler.store.postgres._db.Db`, :mod:`.rows` and the shared checks; called by
the facade :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import asyncpg

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store import _common, _validate
from scheduler.store.postgres import rows
from scheduler.store.postgres._db import SYSTEM, Db, scope_of_all
from scheduler.types import ApiKey, Tenant


class Tenants:
    """The tenant statements."""

    def __init__(self, db: Db, q: Mapping[str, str]) -> None:
        self._db = db
        self._q = q
        self._known: set[uuid.UUID] = set()

    async def create_tenant(self, tenant: Tenant) -> Tenant:
        """Insert a tenant."""
        _common.check_tenant(tenant)
        created = tenant.created_at or datetime.now(UTC)
        async with self._db.conn(SYSTEM) as conn:
            try:
                row = await conn.fetchrow(
                    self._q["insert_tenant"],
                    tenant.id,
                    tenant.name,
                    tenant.tier,
                    tenant.rate_limit_rps,
                    tenant.max_concurrent_workers,
                    tenant.home_region,
                    created,
                )
            except asyncpg.UniqueViolationError as exc:
                raise AlreadyExists("tenant", str(tenant.id)) from exc
        assert row is not None
        self._known.add(tenant.id)
        return rows.tenant(row)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """A tenant by id; NotFound when absent."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(self._q["get_tenant"], tenant_id)
        if row is None:
            raise NotFound("tenant", str(tenant_id))
        return rows.tenant(row)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change name, tier, quotas or home region."""
        t = _common.tenant_changes(await self.get_tenant(tenant_id), changes)
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(
                self._q["update_tenant"],
                tenant_id,
                t.name,
                t.tier,
                t.rate_limit_rps,
                t.max_concurrent_workers,
                t.home_region,
            )
        if row is None:
            raise NotFound("tenant", str(tenant_id))
        return rows.tenant(row)

    async def create_api_key(self, tenant_id: uuid.UUID, name: str, secret_hash: bytes) -> ApiKey:
        """Store an API key's hash for a tenant."""
        _validate.text("name", name, 128)
        await self.check_tenants({tenant_id})
        async with self._db.conn(tenant_id) as conn:
            row = await conn.fetchrow(
                self._q["insert_api_key"],
                uuid.uuid4(),
                tenant_id,
                name,
                secret_hash,
                datetime.now(UTC),
            )
        assert row is not None
        return ApiKey(
            id=row["id"],
            tenant_id=row["tenant_id"],
            name=row["name"],
            created_at=row["created_at"],
            revoked=row["revoked"],
        )

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a (non-revoked) key hash."""
        # The caller is not known yet: the key says whose it is.
        async with self._db.conn(SYSTEM) as conn:
            value: uuid.UUID | None = await conn.fetchval(
                self._q["tenant_for_key_hash"], secret_hash
            )
        return value

    async def check_tenants(self, ids: set[uuid.UUID]) -> None:
        """NotFound unless every tenant of ``ids`` exists (known ones cost no query)."""
        unknown = ids - self._known
        if not unknown:
            return
        async with self._db.conn(scope_of_all(unknown)) as conn:
            found_rows = await conn.fetch(self._q["known_tenants"], list(unknown))
        found = {r[0] for r in found_rows}
        self._known |= found
        missing = unknown - found
        if missing:
            raise NotFound("tenant", str(sorted(missing)[0]))
