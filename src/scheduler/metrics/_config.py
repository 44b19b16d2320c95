"""The settings of a process's ``/metrics`` endpoint."""

from __future__ import annotations

import dataclasses

DEFAULT_TENANT_LABELS = 20
"""Tenants that get their own ``tenant`` label value; the rest count as ``other``."""
DEFAULT_TYPE_LABELS = 50
"""Task types that get their own ``type`` label value; the rest count as ``other``."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MetricsConfig:
    """Where ``/metrics`` listens and how often the store is asked for queue depth."""

    host: str = "127.0.0.1"
    port: int = 0
    """0: pick a free port (read it back from the running endpoint)."""
    depth_interval_s: float = 10.0
    """How often the node reads queue depth and replication lag from the store (one
    grouped scan of the open rows); 0: never (those gauges stay 0)."""
    tenant_labels: int = DEFAULT_TENANT_LABELS
    """The first N tenants that are throttled keep their id as label; later ones are
    ``other`` (a label value, once given, stays: counters stay monotonic)."""
    type_labels: int = DEFAULT_TYPE_LABELS
    """The same rule for task types."""
    token: str | None = None
    """When set, a scrape must send ``Authorization: Bearer <token>`` (401 otherwise):
    the metrics name every tenant's task types. None: open to whoever reaches ``host``
    (loopback by default)."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError("MetricsConfig.port must be 0..65535")
        if self.depth_interval_s < 0:
            raise ValueError("MetricsConfig.depth_interval_s must be >= 0")
        if self.token is not None and len(self.token) < 16:
            raise ValueError("MetricsConfig.token must be at least 16 characters")
        if self.tenant_labels < 0 or self.type_labels < 0:
            raise ValueError("MetricsConfig label limits must be >= 0")
