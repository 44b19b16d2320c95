"""Kafka mode for workers: consume assignments from a consumer group.

The scheduler produces each dispatched attempt to ``{topic_prefix}.{pool}`` (see
``scheduler._kafka_wire`` for the record format). A Kafka-mode worker:

- connects its gRPC stream with a SYSTEM-tier tenant's API key and ``slots=0``, so
  the stream pushes nothing; it carries the acks, heartbeats, checkpoints and
  outcomes, each fenced by the record's token;
- fetches at most as many records as it has free slots, feeds them into the same
  handler machinery as stream assignments, and commits the group's offsets once the
  fetched records were acked (or skipped).

Delivery is at-least-once, the commit exactly-once: a record redelivered after a
crash or a rebalance names a token the store has moved past (or a task already
RUNNING), so its ack is rejected and the handler never runs twice for one token; a
task whose record was lost returns after its lease and is produced again, token + 1.

A record whose type this worker has no handler for is skipped (logged, offset
committed): the task stays DISPATCHED until its lease lapses and is then produced
again. Every member of one group must therefore register the same task types; give
workers with other types their own pool. (Releasing it at once would spin it
between topic and store as fast as the broker allows.)

Drain: the consumer stops fetching and leaves its group at once (its partitions move
to the other members), before the running tasks' grace period begins.

Owns the consumer, its group membership and its offsets. May call: aiokafka,
``scheduler._kafka_wire`` and the three callables it is given (free slots, wait for
a stream, deliver records to the handler runner). Called by: the
:class:`~scheduler.worker.Worker` facade (start, stop), the drain (stop) and the slots
(``slot_freed``, when a handler ends).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer

from scheduler._aio import cancel_and_wait
from scheduler._kafka_wire import DEFAULT_TOPIC_PREFIX, ensure_topics, topic_name
from scheduler.types import Pool

_log = logging.getLogger("tickwheel.worker.kafka")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class KafkaSource:
    """Where a Kafka-mode worker takes its assignments from."""

    bootstrap_servers: str
    pools: frozenset[Pool]
    group_id: str = "tickwheel-workers"
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    client_id: str = "tickwheel-worker"
    session_timeout_s: float = 30.0
    """The group's failure detector: a member that vanishes without leaving (kill -9)
    keeps its partitions this long (their tasks' leases cover the gap)."""
    heartbeat_interval_s: float = 3.0
    create_topics: bool = True
    """Create missing topics before subscribing (as the scheduler does)."""
    partitions: int = 6
    replication_factor: int = 1
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ValueError("KafkaSource.bootstrap_servers is required")
        if not self.pools:
            raise ValueError("KafkaSource.pools must name at least one pool")
        if not self.group_id:
            raise ValueError("KafkaSource.group_id is required")
        if not 0 < self.heartbeat_interval_s < self.session_timeout_s:
            raise ValueError("KafkaSource needs 0 < heartbeat_interval_s < session_timeout_s")
        if self.request_timeout_s <= 0:
            raise ValueError("KafkaSource.request_timeout_s must be positive")

    @property
    def topics(self) -> list[str]:
        """The topics of :attr:`pools`."""
        return sorted(topic_name(self.topic_prefix, p) for p in self.pools)


Deliver = Callable[[Sequence[Any]], Awaitable[None]]
"""Hand fetched records to the worker; returns once each was acked or skipped."""


class KafkaFeed:
    """The consumer loop of one worker (one group member)."""

    def __init__(
        self,
        source: KafkaSource,
        *,
        worker_id: str,
        free_slots: Callable[[], int],
        ready: Callable[[], Awaitable[object]],
        deliver: Deliver,
    ) -> None:
        self.source = source
        self._worker_id = worker_id
        self._free_slots = free_slots
        self._ready = ready
        self._deliver = deliver
        self.slot_freed = asyncio.Event()
        self.joined = asyncio.Event()
        """Set once the consumer has its first partition assignment."""
        self._task: asyncio.Task[None] | None = None
        self._consumer: Any = None

    def start(self) -> None:
        """Start consuming in the background (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(
                self._run(), name=f"tickwheel-worker-{self._worker_id}-kafka"
            )

    async def stop(self) -> None:
        """Stop fetching and leave the group now. Safe twice and before start."""
        task, self._task = self._task, None
        await cancel_and_wait([task])

    def consumer_options(self) -> dict[str, Any]:
        """Keyword arguments of the ``AIOKafkaConsumer``."""
        s = self.source
        return {
            "bootstrap_servers": s.bootstrap_servers,
            "group_id": s.group_id,
            "client_id": f"{s.client_id}-{self._worker_id}",
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": int(s.session_timeout_s * 1000),
            "heartbeat_interval_ms": int(s.heartbeat_interval_s * 1000),
            "request_timeout_ms": int(max(s.request_timeout_s, s.session_timeout_s + 5) * 1000),
        }

    async def _run(self) -> None:
        backoff = 0.5
        while True:
            try:
                await self._consume()
            except Exception as exc:  # broker unreachable, group error: try again
                _log.warning("worker %s: kafka consumer failed: %s", self._worker_id, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    async def _consume(self) -> None:
        s = self.source
        if s.create_topics:
            await ensure_topics(
                s.bootstrap_servers,
                s.topics,
                partitions=s.partitions,
                replication_factor=s.replication_factor,
                timeout_s=s.request_timeout_s,
                client_id=f"{s.client_id}-admin",
            )
        consumer = AIOKafkaConsumer(*s.topics, **self.consumer_options())
        try:
            await consumer.start()
            _log.info("worker %s consuming %s as group %s", self._worker_id, s.topics, s.group_id)
            while True:
                await self._ready()
                free = self._free_slots()
                if free <= 0:
                    self.slot_freed.clear()
                    await self.slot_freed.wait()
                    continue
                batch = await consumer.getmany(timeout_ms=500, max_records=free)
                if consumer.assignment():
                    self.joined.set()
                records = [r for recs in batch.values() for r in recs]
                if not records:
                    continue
                await self._deliver(records)
                try:
                    async with asyncio.timeout(s.request_timeout_s):
                        await consumer.commit()
                except Exception as exc:  # a rebalance: the records come again, fenced
                    _log.info("worker %s: offset commit failed: %s", self._worker_id, exc)
        finally:
            # Leaves the group at once (LeaveGroup): partitions move to the others now,
            # not after the session timeout.
            await consumer.stop()
            _log.info("worker %s left consumer group %s", self._worker_id, s.group_id)
