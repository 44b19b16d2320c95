"""The Kafka record format shared by the scheduler's outlet and the worker SDK.

One record per dispatched attempt, on the topic ``{prefix}.{pool}``:

- key: the task id (UTF-8), so every attempt of a task lands on one partition;
- value: a serialized ``tickwheel.v1.Assignment`` (language-neutral protobuf);
- headers: ``traceparent`` / ``tracestate`` (W3C, the context captured at submission;
  omitted when the task has none), ``tickwheel-task-id``, ``tickwheel-fencing-token``
  (decimal) and ``tickwheel-tenant``, so brokers' tooling and non-Python consumers can
  route and trace without decoding the value.

A leaf module (aiokafka only): neither end imports the other's side.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from scheduler.types import Pool

HEADER_TRACEPARENT = "traceparent"
HEADER_TRACESTATE = "tracestate"
HEADER_TASK_ID = "tickwheel-task-id"
HEADER_FENCING_TOKEN = "tickwheel-fencing-token"
HEADER_TENANT = "tickwheel-tenant"
DEFAULT_TOPIC_PREFIX = "tickwheel.tasks"

_TOPIC_EXISTS = 36  # Kafka error code TOPIC_ALREADY_EXISTS
_log = logging.getLogger("tickwheel.kafka")


def topic_name(prefix: str, pool: Pool) -> str:
    """The topic carrying ``pool``'s assignments, e.g. ``tickwheel.tasks.critical``."""
    return f"{prefix}.{pool.value}"


def trace_headers(headers: Iterable[tuple[str, bytes | None]]) -> dict[str, str] | None:
    """The W3C trace context carried in record headers (``traceparent`` and
    ``tracestate``, "" when absent), or None without a ``traceparent``."""
    out: dict[str, str] = {HEADER_TRACESTATE: ""}
    for name, value in headers:
        if name in (HEADER_TRACEPARENT, HEADER_TRACESTATE) and value:
            out[name] = value.decode("utf-8", "replace")
    return out if out.get(HEADER_TRACEPARENT) else None


async def ensure_topics(
    bootstrap_servers: str,
    topics: Sequence[str],
    *,
    partitions: int,
    replication_factor: int,
    timeout_s: float,
    client_id: str,
) -> None:
    """Create missing topics (existing ones are left as they are).

    Best effort: a cluster that forbids topic creation (ACLs, managed Kafka) logs a
    warning and the operator creates the topics; delivery then works the same.
    """
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        client_id=client_id,
        request_timeout_ms=int(timeout_s * 1000),
    )
    try:
        await admin.start()
        resp = await admin.create_topics(
            [NewTopic(t, partitions, replication_factor) for t in topics],
            timeout_ms=int(timeout_s * 1000),
        )
        for topic, code, *rest in resp.topic_errors:
            if code not in (0, _TOPIC_EXISTS):
                _log.warning("kafka: could not create topic %s: error %s %s", topic, code, rest)
    except Exception as exc:  # logged: the topics may exist already or be made by hand
        _log.warning("kafka: topic creation failed (%s); assuming %s exist", exc, list(topics))
    finally:
        await admin.close()
