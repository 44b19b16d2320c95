"""The Kafka outlet: the engine's broker hook for one pool.

The engine commits each dispatch first (token + 1, DISPATCHED, lease) and calls
:meth:`KafkaOutlet.publish` at the due tick. A publish returns only once the broker
has every record (``acks="all"``, idempotent producer), so a returned publish is
durable; one that fails or times out costs a lease expiry, after which the engine
dispatches the task again with a higher token. Duplicate records are harmless: the
worker's ack and completion are fenced by the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from scheduler._kafka_wire import (
    HEADER_FENCING_TOKEN,
    HEADER_TASK_ID,
    HEADER_TENANT,
    HEADER_TRACEPARENT,
    HEADER_TRACESTATE,
    ensure_topics,
    topic_name,
)
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.kafka._config import KafkaConfig
from scheduler.server._convert import assignment_to_proto
from scheduler.types import Assignment, Pool

_log = logging.getLogger("tickwheel.kafka")
_tracer = trace.get_tracer("tickwheel.kafka")
_W3C = TraceContextTextMapPropagator()

Header = tuple[str, bytes]


def record_headers(msg: pb.Assignment) -> list[Header]:
    """The record headers of one assignment (trace headers only when it has some)."""
    headers: list[Header] = []
    if msg.trace_context.traceparent:
        headers.append((HEADER_TRACEPARENT, msg.trace_context.traceparent.encode()))
        if msg.trace_context.tracestate:
            headers.append((HEADER_TRACESTATE, msg.trace_context.tracestate.encode()))
    headers += [
        (HEADER_TASK_ID, msg.task_id.encode()),
        (HEADER_FENCING_TOKEN, str(msg.fencing_token).encode()),
        (HEADER_TENANT, msg.tenant_id.encode()),
    ]
    return headers


class KafkaOutlet:
    """Produces one pool's assignments to its topic (implements ``engine.Outlet``).

    ``start()`` before handing it to a started engine; ``stop()`` after the engine
    stopped. Both are safe to call twice, and ``stop()`` before ``start()``.
    """

    def __init__(self, config: KafkaConfig, pool: Pool) -> None:
        self._config = config
        self._pool = pool
        self._topic = topic_name(config.topic_prefix, pool)
        self._producer: Any = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        """The topic (used in leases and logs)."""
        return self._topic

    @property
    def pool(self) -> Pool:
        """The pool this outlet carries."""
        return self._pool

    @property
    def capacity(self) -> int:
        """Most tasks outstanding through this topic."""
        return self._config.capacity_per_pool

    def producer_options(self) -> dict[str, Any]:
        """Keyword arguments of the ``AIOKafkaProducer`` (durable, idempotent)."""
        return {
            "bootstrap_servers": self._config.bootstrap_servers,
            "client_id": f"{self._config.client_id}-{self._pool.value}",
            "acks": "all",
            "enable_idempotence": self._config.idempotent,
            "request_timeout_ms": int(self._config.request_timeout_s * 1000),
            "linger_ms": 0,
        }

    async def start(self) -> None:
        """Create the topic if missing, then connect the producer."""
        async with self._lock:
            if self._producer is not None:
                return
            if self._config.create_topics:
                await ensure_topics(
                    self._config.bootstrap_servers,
                    [self._topic],
                    partitions=self._config.partitions,
                    replication_factor=self._config.replication_factor,
                    timeout_s=self._config.request_timeout_s,
                    client_id=f"{self._config.client_id}-admin",
                )
            producer = AIOKafkaProducer(**self.producer_options())
            try:
                await producer.start()
            except BaseException:
                await producer.stop()
                raise
            self._producer = producer
            _log.info("kafka outlet for pool %s -> %s", self._pool.value, self._topic)

    async def stop(self) -> None:
        """Flush and close the producer."""
        async with self._lock:
            producer, self._producer = self._producer, None
            if producer is not None:
                await producer.stop()

    async def publish(self, assignments: Sequence[Assignment]) -> None:
        """Produce one record per assignment; returns once the broker has them all."""
        producer = self._producer
        if producer is None:
            raise RuntimeError(f"kafka outlet {self._topic} is not started")
        async with asyncio.timeout(self._config.request_timeout_s):
            sent = []
            for a in assignments:
                msg = assignment_to_proto(a)
                self._trace_dispatch(msg)
                sent.append(
                    await producer.send(
                        self._topic,
                        value=msg.SerializeToString(),
                        key=msg.task_id.encode(),
                        headers=record_headers(msg),
                    )
                )
            await asyncio.gather(*sent)

    def _trace_dispatch(self, msg: pb.Assignment) -> None:
        """A PRODUCER span per traced record; its context rides in the value
        (``dispatch_trace_context``), so the worker's span is its child."""
        if not msg.trace_context.traceparent:
            return
        carrier = {HEADER_TRACEPARENT: msg.trace_context.traceparent}
        if msg.trace_context.tracestate:
            carrier[HEADER_TRACESTATE] = msg.trace_context.tracestate
        parent = _W3C.extract(carrier)
        if not trace.get_current_span(parent).get_span_context().is_valid:
            return
        span = _tracer.start_span(
            f"tickwheel.dispatch {msg.type}",
            context=parent,
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.destination.name": self._topic,
                "tickwheel.task_id": msg.task_id,
                "tickwheel.task_type": msg.type,
                "tickwheel.attempt": msg.attempt,
                "tickwheel.fencing_token": msg.fencing_token,
            },
        )
        try:
            if span.is_recording():
                out: dict[str, str] = {}
                _W3C.inject(out, context=trace.set_span_in_context(span))
                msg.dispatch_trace_context.traceparent = out.get(HEADER_TRACEPARENT, "")
                msg.dispatch_trace_context.tracestate = out.get(HEADER_TRACESTATE, "")
        finally:
            span.end()


async def open_outlets(config: KafkaConfig) -> list[KafkaOutlet]:
    """Started outlets, one per configured pool (stopped again if one fails)."""
    outlets = [KafkaOutlet(config, pool) for pool in sorted(config.pools, key=lambda p: p.value)]
    try:
        for outlet in outlets:
            await outlet.start()
    except BaseException:
        for outlet in outlets:
            await outlet.stop()
        raise
    return outlets
