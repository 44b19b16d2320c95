"""The tenant protocol: tenants and their API keys.

Owns :class:`TenantStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.tenants`` and
``scheduler.store.sqlite.tenants``; called by the engine and the gRPC auth layer through
``Store``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias

from scheduler.types import (
    DEFAULT_SCOPES,
    ApiKey,
    Scope,
    Tenant,
)

MoveState: TypeAlias = Literal["frozen", "gone", "arrived"]
"""Where a home move left a tenant in this region (migration 0012): ``frozen`` while a
move hands it over (to or from here: not served), ``gone`` once it has moved to
another region (not served: its calls go to its new home), ``arrived`` once it has
moved here (served; its API keys may name the region they were made in)."""


class TenantStore(Protocol):
    """Tenants and API keys."""

    async def create_tenant(self, tenant: Tenant) -> Tenant: ...

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant: ...

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant: ...

    async def create_api_key(
        self,
        tenant_id: uuid.UUID,
        name: str,
        secret_hash: bytes,
        *,
        scopes: frozenset[Scope] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
    ) -> ApiKey: ...

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None:
        """The tenant of a key hash that is neither revoked nor expired."""
        ...

    # -- API keys: scopes, expiry, revocation, last use, rotation (issue 15) ----------
    async def api_key_for_hash(self, secret_hash: bytes) -> ApiKey | None:
        """The key of a hash, revoked and expired ones too (the caller decides)."""
        ...

    async def get_api_key(self, key_id: uuid.UUID) -> ApiKey:
        """A key by id; NotFound when absent."""
        ...

    async def list_api_keys(self, tenant_id: uuid.UUID) -> list[ApiKey]:
        """Every key of a tenant, oldest first (revoked and expired ones too)."""
        ...

    async def revoke_api_key(self, key_id: uuid.UUID, at: datetime) -> ApiKey:
        """Mark a key revoked (``revoked_at`` keeps the first revocation); NotFound."""
        ...

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
        """In one transaction: a new key with the old one's tenant, name and scopes, and
        the old key's expiry moved to ``grace_until`` (never later than it was).
        Returns (old, new); NotFound when the old key is absent."""
        ...

    async def touch_api_keys(self, used: Mapping[uuid.UUID, datetime]) -> None:
        """Record last use (a later time only ever replaces an earlier one)."""
        ...

    async def list_tenants(self, after: uuid.UUID | None, limit: int) -> list[Tenant]:
        """Tenants in id order, those after ``after``, at most ``limit``."""
        ...

    # -- moving a tenant's home (issue 16) -----------------------------------------------
    async def tenant_moves(self) -> dict[uuid.UUID, MoveState]:
        """Every tenant a home move touched in this region, and where it left it (see
        :data:`MoveState`). Empty on a store without moves (SQLite: a move needs
        PostgreSQL in both regions)."""
        ...
