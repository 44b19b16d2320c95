"""Cluster membership configuration: one frozen dataclass, units in the field names."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """How a scheduler node joins the cluster and holds its shards in etcd."""

    etcd_endpoints: tuple[str, ...]
    """``host:port`` of each etcd member; the node moves to the next one on failure."""
    node_id: str
    """This node's unique, stable name (it is also its rendezvous-hash identity)."""
    prefix: str = "/tickwheel"
    """Root of every key this cluster writes (``{prefix}/nodes/…``, ``{prefix}/shards/…``)."""
    lease_ttl_s: float = 5.0
    """TTL of the node's etcd lease, whole seconds (etcd grants whole seconds). The node's
    registration and every shard it owns are attached to it."""
    safety_margin_s: float = 1.0
    """The node stops trusting its shards this long BEFORE the lease can run out."""
    shard_count: int = 256
    """Fixed for the life of a cluster: every task's shard is ``hash mod shard_count``."""
    rebalance_interval_s: float = 0.25
    """How often the node re-reads the live nodes and shard owners and moves shards."""
    keepalive_interval_s: float | None = None
    """How often the lease is refreshed; default a third of ``lease_ttl_s``."""
    etcd_timeout_s: float = 1.0
    """Deadline of every etcd call."""
    advertise: str = ""
    """``host:port`` workers dial to reach this node, stored as the value of its
    ``{prefix}/nodes/{id}`` key (empty: the server fills in its listen address)."""

    def __post_init__(self) -> None:
        if not self.etcd_endpoints:
            raise ValueError("etcd_endpoints must not be empty")
        for ep in self.etcd_endpoints:
            host, sep, port = ep.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"etcd endpoint {ep!r} is not host:port")
        if not self.node_id or "/" in self.node_id:
            raise ValueError("node_id must be non-empty and contain no '/'")
        if not self.prefix.startswith("/") or self.prefix.endswith("/"):
            raise ValueError("prefix must start with '/' and not end with '/'")
        if self.lease_ttl_s < 2 or not float(self.lease_ttl_s).is_integer():
            raise ValueError("lease_ttl_s must be a whole number of seconds >= 2")
        if not 0 < self.safety_margin_s < self.lease_ttl_s:
            raise ValueError("safety_margin_s must be in (0, lease_ttl_s)")
        if not 1 <= self.shard_count <= 65_536:
            raise ValueError("shard_count must be in [1, 65536]")
        if self.rebalance_interval_s <= 0:
            raise ValueError("rebalance_interval_s must be positive")
        if self.etcd_timeout_s <= 0:
            raise ValueError("etcd_timeout_s must be positive")
        if self.keepalive_interval_s is not None and not (
            0 < self.keepalive_interval_s < self.lease_ttl_s - self.safety_margin_s
        ):
            raise ValueError("keepalive_interval_s must be in (0, lease_ttl_s - safety_margin_s)")

    @property
    def keepalive_every_s(self) -> float:
        """The effective keep-alive period."""
        if self.keepalive_interval_s is not None:
            return self.keepalive_interval_s
        return self.lease_ttl_s / 3

    @property
    def trust_window_s(self) -> float:
        """How long after sending a keep-alive that succeeded the node trusts its shards."""
        return self.lease_ttl_s - self.safety_margin_s
