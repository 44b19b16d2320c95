"""Tenants and API keys on SQLite (:class:`~scheduler.store.protocol.TenantStore`).

Owns :class:`Tenants`. Calls :class:`~scheduler.store.sqlite._db.Db`, :mod:`.rows`, and
the shared checks of :mod:`scheduler.store._common` / :mod:`scheduler.store._validate`;
inherited by :class:`~scheduler.store.sqlite.SqliteStore`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store import _common, _validate
from scheduler.store.protocol.tenants import MoveState, TenantStore
from scheduler.store.sqlite import rows
from scheduler.store.sqlite._db import Part
from scheduler.types import DEFAULT_SCOPES, ApiKey, Scope, Tenant


def _key(r: sqlite3.Row) -> ApiKey:
    """An ``api_keys`` row (scopes unknown to this version are ignored)."""
    known = {s.value for s in Scope}
    return ApiKey(
        id=uuid.UUID(r["id"]),
        tenant_id=uuid.UUID(r["tenant_id"]),
        name=r["name"],
        created_at=rows.dt(r["created_at"]),
        revoked=bool(r["revoked"]),
        scopes=frozenset(Scope(s) for s in r["scopes"].split(",") if s in known),
        expires_at=rows.opt_dt(r["expires_at"]),
        revoked_at=rows.opt_dt(r["revoked_at"]),
        last_used_at=rows.opt_dt(r["last_used_at"]),
        rotated_from=uuid.UUID(r["rotated_from"]) if r["rotated_from"] else None,
    )


def _scopes(scopes: frozenset[Scope]) -> str:
    return ",".join(sorted(s.value for s in scopes))


class Tenants(Part, TenantStore):
    """The tenant statements, each one transaction."""

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
                if "tenants.name" in str(exc):
                    raise AlreadyExists("tenant", f"named {tenant.name!r}") from exc
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
            try:
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
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists("tenant", f"named {t.name!r}") from exc
            return rows.tenant(c.execute(q["get_tenant"], (str(tenant_id),)).fetchone())

        return await self._db.tx(fn)

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
        await self.get_tenant(tenant_id)
        key_id = uuid.uuid4()
        created = rows.us(datetime.now(UTC))
        q = self._q

        def fn(c: sqlite3.Connection) -> ApiKey:
            c.execute(
                q["insert_scoped_api_key"],
                (
                    str(key_id),
                    str(tenant_id),
                    name,
                    secret_hash,
                    created,
                    _scopes(scopes),
                    rows.opt_us(expires_at),
                    None,
                ),
            )
            return _key(c.execute(q["get_api_key"], (str(key_id),)).fetchone())

        return await self._db.tx(fn)

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a (non-revoked) key hash."""
        q = self._q

        def fn(c: sqlite3.Connection) -> uuid.UUID | None:
            now = rows.us(datetime.now(UTC))
            row = c.execute(q["tenant_for_key_hash"], (secret_hash, now)).fetchone()
            return None if row is None else uuid.UUID(row[0])

        return await self._db.tx(fn)

    # -- API keys: scopes, expiry, revocation, last use, rotation (issue 15) ----------
    async def api_key_for_hash(self, secret_hash: bytes) -> ApiKey | None:
        """The key of a hash, revoked and expired ones too."""
        q = self._q

        def fn(c: sqlite3.Connection) -> ApiKey | None:
            row = c.execute(q["api_key_by_hash"], (secret_hash,)).fetchone()
            return None if row is None else _key(row)

        return await self._db.tx(fn)

    async def get_api_key(self, key_id: uuid.UUID) -> ApiKey:
        """A key by id; NotFound when absent."""
        q = self._q

        def fn(c: sqlite3.Connection) -> ApiKey:
            row = c.execute(q["get_api_key"], (str(key_id),)).fetchone()
            if row is None:
                raise NotFound("api key", str(key_id))
            return _key(row)

        return await self._db.tx(fn)

    async def list_api_keys(self, tenant_id: uuid.UUID) -> list[ApiKey]:
        """Every key of a tenant, oldest first."""
        q = self._q

        def fn(c: sqlite3.Connection) -> list[ApiKey]:
            return [_key(r) for r in c.execute(q["list_api_keys"], (str(tenant_id),))]

        return await self._db.tx(fn)

    async def revoke_api_key(self, key_id: uuid.UUID, at: datetime) -> ApiKey:
        """Mark a key revoked; NotFound when absent."""
        _validate.aware("at", at)
        q = self._q

        def fn(c: sqlite3.Connection) -> ApiKey:
            c.execute(q["revoke_api_key"], (str(key_id), rows.us(at)))
            row = c.execute(q["get_api_key"], (str(key_id),)).fetchone()
            if row is None:
                raise NotFound("api key", str(key_id))
            return _key(row)

        return await self._db.tx(fn)

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
        q = self._q

        def fn(c: sqlite3.Connection) -> tuple[ApiKey, ApiKey]:
            c.execute(q["expire_api_key"], (str(key_id), rows.us(grace_until)))
            row = c.execute(q["get_api_key"], (str(key_id),)).fetchone()
            if row is None:
                raise NotFound("api key", str(key_id))
            c.execute(
                q["insert_scoped_api_key"],
                (
                    str(new_id),
                    row["tenant_id"],
                    row["name"],
                    secret_hash,
                    rows.us(at),
                    row["scopes"],
                    rows.opt_us(expires_at),
                    str(key_id),
                ),
            )
            new = c.execute(q["get_api_key"], (str(new_id),)).fetchone()
            return _key(row), _key(new)

        return await self._db.tx(fn)

    async def touch_api_keys(self, used: Mapping[uuid.UUID, datetime]) -> None:
        """Record last use."""
        if not used:
            return
        q = self._q
        params = [(str(k), rows.us(t)) for k, t in used.items()]

        def fn(c: sqlite3.Connection) -> None:
            c.executemany(q["touch_api_key"], params)

        await self._db.tx(fn)

    async def list_tenants(self, after: uuid.UUID | None, limit: int) -> list[Tenant]:
        """Tenants in id order after ``after``."""
        q = self._q
        start = None if after is None else str(after)

        def fn(c: sqlite3.Connection) -> list[Tenant]:
            return [rows.tenant(r) for r in c.execute(q["list_tenants"], (start, limit))]

        return await self._db.tx(fn)

    async def tenant_moves(self) -> dict[uuid.UUID, MoveState]:
        """None: moving a tenant's home needs PostgreSQL in both regions."""
        return {}
