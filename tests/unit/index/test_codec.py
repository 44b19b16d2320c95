"""The index's stored form of a PRELOADED task keeps its rate limit key (issue 43)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from scheduler.index._codec import Decoder, encode
from scheduler.types import Pool, Preloaded, TaskKey

AT = datetime(2026, 12, 6, 6, 0, 0, 123456, tzinfo=UTC)


def test_a_task_round_trips_with_and_without_a_rate_limit_key() -> None:
    tenant = uuid.uuid4()
    for key in ("", "partner|api~é"):
        p = Preloaded(TaskKey(uuid.uuid4(), AT), AT, tenant, 7, Pool.BULK, "a|type", key)
        d = Decoder(7)
        assert d.build(d.split(encode(p))) == p
        assert d.many([encode(p).encode()]) == [p]
