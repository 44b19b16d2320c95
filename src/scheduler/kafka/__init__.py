"""Kafka dispatch mode (scheduler side): per-pool outlets for the engine.

>>> outlets = await open_outlets(KafkaConfig(bootstrap_servers="kafka:9092",
...                                          pools=frozenset({Pool.CRITICAL})))
>>> engine = Engine(store, config, outlets=outlets)

Workers consume with ``scheduler.worker.KafkaSource`` and ack, heartbeat and complete
over gRPC with the record's fencing token (see ``docs/kafka.md``).
"""

from scheduler._kafka_wire import (
    HEADER_FENCING_TOKEN,
    HEADER_TASK_ID,
    HEADER_TENANT,
    HEADER_TRACEPARENT,
    HEADER_TRACESTATE,
    topic_name,
)
from scheduler.kafka._config import KafkaConfig
from scheduler.kafka._outlet import KafkaOutlet, open_outlets, record_headers

__all__ = [
    "HEADER_FENCING_TOKEN",
    "HEADER_TASK_ID",
    "HEADER_TENANT",
    "HEADER_TRACEPARENT",
    "HEADER_TRACESTATE",
    "KafkaConfig",
    "KafkaOutlet",
    "open_outlets",
    "record_headers",
    "topic_name",
]
