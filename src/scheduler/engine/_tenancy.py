"""Tenants and API keys: creation, quotas, and the authentication cache.

Owns the cache of verified key digests. Calls only the store. Called by the engine
facade, which the gRPC services use to authenticate every call.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Mapping
from typing import Any

from scheduler._errors import InvalidArgument, Unauthenticated
from scheduler.engine._config import EngineConfig
from scheduler.limits import MAX_NAME_CHARS
from scheduler.store import Store
from scheduler.types import ApiKey, Tenant

TIERS = ("STANDARD", "ENTERPRISE", "SYSTEM")
AUTH_CACHE_MAX = 10_000
"""Verified digests remembered at most; the cache starts over past it."""


def hash_secret(secret: str) -> bytes:
    """API keys are stored as SHA-256 digests; a leaked table leaks no key."""
    return hashlib.sha256(secret.encode()).digest()


class Tenancy:
    """Tenants, their keys, and which tenant a key secret belongs to."""

    def __init__(self, store: Store, config: EngineConfig) -> None:
        self._store = store
        self._config = config
        self._auth_cache: dict[bytes, tuple[uuid.UUID, float]] = {}

    async def create_tenant(
        self,
        *,
        name: str,
        tier: str = "STANDARD",
        rate_limit_rps: int = 0,
        max_concurrent_workers: int = 0,
        home_region: str = "",
    ) -> Tenant:
        """Create a tenant; zero quotas mean the defaults."""
        if not name or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument("tenant.name", f"must be 1..{MAX_NAME_CHARS} characters")
        if tier not in TIERS:
            raise InvalidArgument("tenant.tier", "must be STANDARD, ENTERPRISE or SYSTEM")
        if rate_limit_rps < 0 or max_concurrent_workers < 0:
            raise InvalidArgument("tenant", "quotas must not be negative")
        defaults = Tenant(id=uuid.uuid4(), name=name)
        tenant = Tenant(
            id=defaults.id,
            name=name,
            tier=tier,
            rate_limit_rps=rate_limit_rps or defaults.rate_limit_rps,
            max_concurrent_workers=max_concurrent_workers or defaults.max_concurrent_workers,
            home_region=home_region or defaults.home_region,
        )
        return await self._store.create_tenant(tenant)

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """One tenant."""
        return await self._store.get_tenant(tenant_id)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change a tenant's tier or quotas."""
        return await self._store.update_tenant(tenant_id, changes)

    async def create_api_key(self, tenant_id: uuid.UUID, name: str) -> tuple[ApiKey, str]:
        """A new key; the secret is returned once and stored only as a hash."""
        secret = "tw_" + secrets.token_urlsafe(32)
        key = await self._store.create_api_key(tenant_id, name, hash_secret(secret))
        return key, secret

    async def authenticate(self, secret: str) -> uuid.UUID:
        """The tenant of an API key secret; Unauthenticated when unknown."""
        if not secret:
            raise Unauthenticated("missing API key (x-api-key metadata)")
        digest = hash_secret(secret)
        cached = self._auth_cache.get(digest)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            return cached[0]
        tenant_id = await self._store.tenant_for_key_hash(digest)
        if tenant_id is None:
            raise Unauthenticated("unknown or revoked API key")
        if len(self._auth_cache) > AUTH_CACHE_MAX:
            self._auth_cache.clear()
        # A revoked key keeps working for at most auth_cache_s on this node.
        self._auth_cache[digest] = (tenant_id, now + self._config.auth_cache_s)
        return tenant_id
