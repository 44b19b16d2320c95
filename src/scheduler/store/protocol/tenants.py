"""The tenant protocol: tenants and their API keys.

Owns :class:`TenantStore` (part of :class:`~scheduler.store.Store`). Imports only value
types; implemented by ``scheduler.store.postgres.tenants`` and
``scheduler.store.sqlite.tenants``; called by the engine and the gRPC auth layer through
``Store``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from scheduler.types import (
    ApiKey,
    Tenant,
)


class TenantStore(Protocol):
    """Tenants and API keys."""

    async def create_tenant(self, tenant: Tenant) -> Tenant: ...

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant: ...

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant: ...

    async def create_api_key(
        self, tenant_id: uuid.UUID, name: str, secret_hash: bytes
    ) -> ApiKey: ...

    async def tenant_for_key_hash(self, secret_hash: bytes) -> uuid.UUID | None: ...
