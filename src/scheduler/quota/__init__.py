"""Tenant quotas: dispatch rate and in-flight cap, per tenant, across every node.

``await open_quota(QuotaConfig(redis_url=...))`` gives a :class:`RedisQuota` (state shared
by every scheduler node, one Lua call per dispatch tick, local-share fallback while Redis
is away); ``QuotaConfig(redis_url=None)`` a :class:`LocalQuota` for a single node. Both
implement :class:`QuotaGate`; the algorithm and its bound are in ``_protocol``.
"""

from __future__ import annotations

from scheduler.quota._config import QuotaConfig
from scheduler.quota._local import LocalQuota
from scheduler.quota._open import open_quota
from scheduler.quota._protocol import QuotaGate, TenantLimits
from scheduler.quota._redis import RedisQuota

__all__ = [
    "LocalQuota",
    "QuotaConfig",
    "QuotaGate",
    "RedisQuota",
    "TenantLimits",
    "open_quota",
]
