"""Configuration of the scheduler's Kafka dispatch mode."""

from __future__ import annotations

import dataclasses

from scheduler._kafka_wire import DEFAULT_TOPIC_PREFIX
from scheduler.types import Pool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KafkaConfig:
    """Which pools the scheduler dispatches through Kafka, and how.

    Assignments of a pool in ``pools`` are produced to ``{topic_prefix}.{pool}``
    instead of being pushed on worker streams. ``capacity_per_pool`` bounds the tasks
    outstanding through one topic (published, not yet completed, failed or released):
    the broker is a pipe, not a buffer for the whole backlog.
    """

    bootstrap_servers: str
    pools: frozenset[Pool] = frozenset({Pool.CRITICAL, Pool.STANDARD, Pool.BULK})
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    capacity_per_pool: int = 1000
    client_id: str = "tickwheel-scheduler"
    idempotent: bool = True
    """Idempotent producer (no duplicates from producer retries). Leave on for a
    real cluster; only a broker without InitProducerId support needs it off."""
    create_topics: bool = True
    """Create missing topics on start (needs the broker's permission)."""
    partitions: int = 6
    """Partitions of topics created on start (the most consumers a group can use)."""
    replication_factor: int = 1
    request_timeout_s: float = 30.0
    """Bound on each broker call, a publish included."""

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ValueError("KafkaConfig.bootstrap_servers is required")
        if not self.pools:
            raise ValueError("KafkaConfig.pools must name at least one pool")
        if not self.topic_prefix or any(c.isspace() for c in self.topic_prefix):
            raise ValueError("KafkaConfig.topic_prefix must be non-empty, without spaces")
        if self.capacity_per_pool < 1:
            raise ValueError("KafkaConfig.capacity_per_pool must be >= 1")
        if self.partitions < 1 or self.replication_factor < 1:
            raise ValueError("KafkaConfig partitions and replication_factor must be >= 1")
        if self.request_timeout_s <= 0:
            raise ValueError("KafkaConfig.request_timeout_s must be positive")
