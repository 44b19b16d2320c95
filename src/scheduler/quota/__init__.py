"""Tenant quotas: dispatch rate and in-flight cap, per tenant, across every node.

``await open_quota(QuotaConfig(redis_url=...))`` gives a :class:`RedisQuota` (state shared
by every scheduler node, one Lua call per dispatch tick, local-share fallback while Redis
is away); ``QuotaConfig(redis_url=None)`` a :class:`LocalQuota` for a single node. Both
implement :class:`QuotaGate`; the algorithm and its bound are in ``_protocol``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scheduler.quota._config import QuotaConfig
from scheduler.quota._local import LocalQuota
from scheduler.quota._protocol import QuotaGate, TenantLimits

if TYPE_CHECKING:
    from scheduler.quota._open import open_quota
    from scheduler.quota._redis import RedisQuota

# The backends that need a network client (etcd, Redis) load on first use, so that
# importing this package (as the engine does) loads neither the client nor grpc.
_LAZY = {
    "open_quota": "scheduler.quota._open",
    "RedisQuota": "scheduler.quota._redis",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "LocalQuota",
    "QuotaConfig",
    "QuotaGate",
    "RedisQuota",
    "TenantLimits",
    "open_quota",
]
