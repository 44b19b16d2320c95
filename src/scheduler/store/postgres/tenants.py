"""Tenants and API keys on PostgreSQL (:class:`~scheduler.store.protocol.TenantStore`).

Owns :class:`Tenants`, including the cache of tenant ids known to exist that
``check_tenants`` consults before an insert (the ``tasks`` part calls it on the store).
Calls :class:`~scheduler.store.postgres._db.Db`, :mod:`.rows` and the shared checks;
inherited by :class:`~scheduler.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import asyncpg

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store import _common, _validate
from scheduler.store._config import StoreConfig
from scheduler.store.postgres import rows
from scheduler.store.postgres._db import SYSTEM, Db, Part, scope_of_all
from scheduler.store.protocol.tenants import MoveState, TenantStore
from scheduler.types import DEFAULT_SCOPES, ApiKey, Scope, Tenant


def _key(row: asyncpg.Record) -> ApiKey:
    """An ``api_keys`` row (scopes unknown to this version are ignored)."""
    known = {s.value for s in Scope}
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        created_at=row["created_at"],
        revoked=row["revoked"],
        scopes=frozenset(Scope(s) for s in row["scopes"] if s in known),
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
        rotated_from=row["rotated_from"],
    )


def _scopes(scopes: frozenset[Scope]) -> list[str]:
    return sorted(s.value for s in scopes)


NAME_INDEX = "tenants_name_key"
"""The unique index on tenant names (migration 0016): a second ``acme`` is AlreadyExists."""


class Tenants(Part, TenantStore):
    """The tenant statements."""

    def __init__(self, db: Db, q: Mapping[str, str], config: StoreConfig) -> None:
        super().__init__(db, q, config)
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
                if exc.constraint_name == NAME_INDEX:
                    raise AlreadyExists("tenant", f"named {tenant.name!r}") from exc
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
            try:
                row = await conn.fetchrow(
                    self._q["update_tenant"],
                    tenant_id,
                    t.name,
                    t.tier,
                    t.rate_limit_rps,
                    t.max_concurrent_workers,
                    t.home_region,
                )
            except asyncpg.UniqueViolationError as exc:
                raise AlreadyExists("tenant", f"named {t.name!r}") from exc
        if row is None:
            raise NotFound("tenant", str(tenant_id))
        return rows.tenant(row)

    async def create_api_key(
        self,
        tenant_id: uuid.UUID,
        name: str,
        secret_hash: bytes,
        *,
        scopes: frozenset[Scope] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
    ) -> ApiKey:
        """Store an API key's hash for a tenant, with its scopes and expiry."""
        _validate.text("name", name, 128)
        if expires_at is not None:
            _validate.aware("expires_at", expires_at)
        await self.check_tenants({tenant_id})
        async with self._db.conn(tenant_id) as conn:
            row = await conn.fetchrow(
                self._q["insert_scoped_api_key"],
                uuid.uuid4(),
                tenant_id,
                name,
                secret_hash,
                datetime.now(UTC),
                _scopes(scopes),
                expires_at,
                None,
            )
        assert row is not None
        return _key(row)

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

    # -- API keys: scopes, expiry, revocation, last use, rotation (issue 15) ----------
    async def api_key_for_hash(self, secret_hash: bytes) -> ApiKey | None:
        """The key of a hash, revoked and expired ones too."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(self._q["api_key_by_hash"], secret_hash)
        return None if row is None else _key(row)

    async def get_api_key(self, key_id: uuid.UUID) -> ApiKey:
        """A key by id; NotFound when absent."""
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(self._q["get_api_key"], key_id)
        if row is None:
            raise NotFound("api key", str(key_id))
        return _key(row)

    async def list_api_keys(self, tenant_id: uuid.UUID) -> list[ApiKey]:
        """Every key of a tenant, oldest first."""
        async with self._db.conn(tenant_id) as conn:
            found = await conn.fetch(self._q["list_api_keys"], tenant_id)
        return [_key(r) for r in found]

    async def revoke_api_key(self, key_id: uuid.UUID, at: datetime) -> ApiKey:
        """Mark a key revoked; NotFound when absent."""
        _validate.aware("at", at)
        async with self._db.conn(SYSTEM) as conn:
            row = await conn.fetchrow(self._q["revoke_api_key"], key_id, at)
        if row is None:
            raise NotFound("api key", str(key_id))
        return _key(row)

    async def rotate_api_key(
        self,
        key_id: uuid.UUID,
        new_id: uuid.UUID,
        secret_hash: bytes,
        *,
        at: datetime,
        grace_until: datetime,
        expires_at: datetime | None,
    ) -> tuple[ApiKey, ApiKey]:
        """A new key like the old one, and the old one's grace expiry, in one transaction."""
        _validate.aware("at", at)
        _validate.aware("grace_until", grace_until)
        async with self._db.conn(SYSTEM, tx=True) as conn:
            old = await conn.fetchrow(self._q["expire_api_key"], key_id, grace_until)
            if old is None:
                raise NotFound("api key", str(key_id))
            new = await conn.fetchrow(
                self._q["insert_scoped_api_key"],
                new_id,
                old["tenant_id"],
                old["name"],
                secret_hash,
                at,
                list(old["scopes"]),
                expires_at,
                key_id,
            )
        assert new is not None
        return _key(old), _key(new)

    async def touch_api_keys(self, used: Mapping[uuid.UUID, datetime]) -> None:
        """Record last use, one statement for every key."""
        if not used:
            return
        ids = list(used)
        async with self._db.conn(SYSTEM) as conn:
            await conn.execute(self._q["touch_api_keys"], ids, [used[i] for i in ids])

    async def list_tenants(self, after: uuid.UUID | None, limit: int) -> list[Tenant]:
        """Tenants in id order after ``after``."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["list_tenants"], after, limit)
        return [rows.tenant(r) for r in found]

    async def tenant_moves(self) -> dict[uuid.UUID, MoveState]:
        """Every tenant a home move touched here (migration 0012)."""
        async with self._db.conn(SYSTEM) as conn:
            found = await conn.fetch(self._q["tenant_moves"])
        return {r["tenant_id"]: r["state"] for r in found}
