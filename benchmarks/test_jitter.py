"""The stampede at a whole minute: 1,000,000 tasks asked for 12:00:00, spread late-only.

Builds the tasks the way a submission does (``Admission.new_task``: UUIDv7 ids, the
default jitter rule) and counts their effective due times per second and per
millisecond of the window. Reports the busiest second over the mean per second (the
target is <= 1.25) and the busiest millisecond (whole-second offsets, the previous
rule, put about 8,300 tasks on each of 121 milliseconds). Run with
``pytest benchmarks/test_jitter.py --benchmark-only``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from scheduler.cluster import LocalMembership
from scheduler.engine._admission import Admission
from scheduler.engine._config import EngineConfig
from scheduler.engine._shard_state import ShardState
from scheduler.engine._types import SubmitSpec
from scheduler.jitter import JITTER_WINDOW_S, JitterMode

N = 1_000_000
TENANT = uuid.UUID("0190f0c4-0000-7000-8000-000000000001")
NOON = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _spread() -> tuple[float, int, int]:
    adm = Admission(EngineConfig(), ShardState(LocalMembership(), clustered=False))
    spec = SubmitSpec(type="report", scheduled_at=NOON)
    now = datetime(2026, 12, 3, 11, 0, tzinfo=UTC)
    per_second: Counter[int] = Counter()
    per_ms: Counter[int] = Counter()
    for _ in range(N):
        task = adm.new_task(TENANT, spec, now)
        assert task.jitter_mode is JitterMode.LATE_ONLY
        ms = (task.due_at - NOON) // _MS
        assert 0 <= ms <= JITTER_WINDOW_S * 1000
        per_ms[ms] += 1
        # The one millisecond at exactly +W belongs to the last whole second.
        per_second[min(ms // 1000, JITTER_WINDOW_S - 1)] += 1
    ratio = max(per_second.values()) / (N / JITTER_WINDOW_S)
    return ratio, max(per_ms.values()), len(per_ms)


_MS = datetime(2000, 1, 1, 0, 0, 0, 1000, tzinfo=UTC) - datetime(2000, 1, 1, tzinfo=UTC)


def test_stampede_spread(benchmark: Any) -> None:
    ratio, busiest_ms, distinct_ms = benchmark.pedantic(_spread, rounds=1, iterations=1)
    benchmark.extra_info.update(
        busiest_second_over_mean=round(ratio, 4),
        busiest_millisecond=busiest_ms,
        distinct_milliseconds=distinct_ms,
    )
    print(
        f"\n1,000,000 tasks at 12:00:00: busiest second / mean = {ratio:.4f}, "
        f"busiest millisecond {busiest_ms} tasks, {distinct_ms:,} distinct milliseconds"
    )
    assert ratio <= 1.25
