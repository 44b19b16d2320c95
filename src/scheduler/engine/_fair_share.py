"""Fair share: each tenant's weight (from its tier) and quotas, as the dispatcher uses them.

Owns the per-tenant weights and limits of tenants with waiting work, refreshed every
``tenant_refresh_s`` so changes made through the admin API reach every node. Calls only
the store. Read by the ready queues (weights, for deficit round robin) and the
dispatcher (limits, for the quota gate).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from scheduler._errors import NotFound
from scheduler.engine._config import EngineConfig
from scheduler.quota import TenantLimits
from scheduler.store import Store
from scheduler.types import Tenant


class FairShare:
    """Tenant weights and limits, looked up once per tenant per refresh."""

    def __init__(self, store: Store, config: EngineConfig) -> None:
        self._store = store
        self._config = config
        self._weights: dict[uuid.UUID, int] = {}
        self._limits: dict[uuid.UUID, TenantLimits] = {}
        self._fresh_until = 0.0

    def weight(self, tenant_id: uuid.UUID) -> int:
        """The tenant's share weight (1 until it is learnt)."""
        return self._weights.get(tenant_id, 1)

    def limits(self, tenant_id: uuid.UUID) -> TenantLimits:
        """The tenant's quota limits (learn them first)."""
        return self._limits[tenant_id]

    async def learn(self, tenants: Iterable[uuid.UUID]) -> None:
        """Weights and quotas of ``tenants`` that are not known (or are stale)."""
        if time.monotonic() > self._fresh_until:
            self._weights.clear()
            self._limits.clear()
            self._fresh_until = time.monotonic() + self._config.tenant_refresh_s
        for tenant_id in set(tenants) - self._limits.keys():
            try:
                tenant = await self._store.get_tenant(tenant_id)
            except NotFound:
                tenant = Tenant(id=tenant_id, name="?")
            self._weights[tenant_id] = self._config.tier_weight(tenant.tier)
            self._limits[tenant_id] = TenantLimits(
                rate_limit_rps=tenant.rate_limit_rps,
                max_concurrent=tenant.max_concurrent_workers,
            )
