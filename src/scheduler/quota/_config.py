"""Quota configuration: one frozen dataclass, units in the field names."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QuotaConfig:
    """Where quota state lives and how a node behaves when it cannot reach it."""

    redis_url: str | None
    """``redis://...`` for limits shared by every scheduler node; None for in-process
    limits (a single node / embedded mode)."""
    key_prefix: str = "tickwheel"
    """Prefix (and Redis Cluster hash tag) of every quota key."""
    node_share: float = 1.0
    """This node's share of each limit while Redis is unreachable: set it to
    1 / (expected node count) so the cluster total never exceeds a limit meanwhile."""
    redis_timeout_s: float = 0.2
    """Socket, connect and per-call timeout of every Redis call."""
    retry_after_s: float = 1.0
    """After a Redis failure, serve locally this long before trying Redis again."""
    node_lease_ttl_s: float = 15.0
    """A node's in-flight counts stop counting this long after its last contact with
    Redis (so a dead node's counts cannot leak); it renews every third of it."""

    def __post_init__(self) -> None:
        if not self.key_prefix:
            raise ValueError("key_prefix must not be empty")
        if not 0.0 < self.node_share <= 1.0:
            raise ValueError("node_share must be in (0, 1]")
        if self.redis_timeout_s <= 0:
            raise ValueError("redis_timeout_s must be positive")
        if self.retry_after_s < 0:
            raise ValueError("retry_after_s must be >= 0")
        if self.node_lease_ttl_s <= 0:
            raise ValueError("node_lease_ttl_s must be positive")
