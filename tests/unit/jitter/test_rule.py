"""The jitter rule: never before the asked time unless symmetric; round instants spread."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.cluster import LocalMembership
from scheduler.engine._admission import Admission
from scheduler.engine._config import EngineConfig
from scheduler.engine._shard_state import ShardState
from scheduler.engine._types import SubmitSpec
from scheduler.jitter import (
    JITTER_WINDOW_S,
    JitterMode,
    effective_mode,
    is_round_instant,
    jitter_offset_ms,
)

TENANT = uuid.UUID(int=7)
NOW = datetime(2026, 12, 3, 11, 59, 13, 417_000, tzinfo=UTC)


def _admission() -> Admission:
    return Admission(EngineConfig(), ShardState(LocalMembership(), clustered=False))


def busiest_second_ratio(n: int, seed: int = 1) -> float:
    """Late-only tasks all asked for the same whole minute: the busiest second of their
    effective times over the mean per second of the window they spread over."""
    rng = random.Random(seed)
    per_second: Counter[int] = Counter()
    for _ in range(n):
        task = uuid.UUID(int=rng.getrandbits(128))
        ms = jitter_offset_ms(TENANT, task, JitterMode.LATE_ONLY)
        assert 0 <= ms <= JITTER_WINDOW_S * 1000
        # The one millisecond at exactly +W belongs to the last whole second.
        per_second[min(ms // 1000, JITTER_WINDOW_S - 1)] += 1
    return max(per_second.values()) / (n / JITTER_WINDOW_S)


def test_round_instants() -> None:
    assert is_round_instant(datetime(2026, 1, 1, 0, 0, tzinfo=UTC))
    assert is_round_instant(datetime(2026, 1, 1, 12, 30, tzinfo=UTC))
    assert not is_round_instant(datetime(2026, 1, 1, 12, 30, 1, tzinfo=UTC))
    assert not is_round_instant(datetime(2026, 1, 1, 12, 30, 0, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    ("requested", "strict", "at", "expected"),
    [
        (None, False, NOW, JitterMode.NONE),
        (None, False, NOW.replace(second=0, microsecond=0), JitterMode.LATE_ONLY),
        (None, True, NOW.replace(second=0, microsecond=0), JitterMode.NONE),
        (JitterMode.SYMMETRIC, False, NOW, JitterMode.SYMMETRIC),
        (JitterMode.SYMMETRIC, True, NOW, JitterMode.NONE),
        (JitterMode.LATE_ONLY, False, NOW, JitterMode.LATE_ONLY),
        (JitterMode.NONE, False, NOW.replace(second=0, microsecond=0), JitterMode.NONE),
    ],
)
def test_effective_mode(
    requested: JitterMode | None, strict: bool, at: datetime, expected: JitterMode
) -> None:
    assert effective_mode(requested, strict, at) is expected


def test_a_delay_is_never_due_early_by_default() -> None:
    """Fails on the old rule (symmetric ±120 s for every task not strict)."""
    adm = _admission()
    for delay_s in (0, 5, 30, 600):
        at = NOW + timedelta(seconds=delay_s)
        for _ in range(200):
            task = adm.new_task(TENANT, SubmitSpec(type="t", scheduled_at=at), NOW)
            assert task.due_at == at, (delay_s, task.due_at - at)
            assert task.jitter_mode is JitterMode.NONE


def test_a_task_without_a_time_is_due_now() -> None:
    task = _admission().new_task(TENANT, SubmitSpec(type="t"), NOW)
    assert task.due_at == task.scheduled_at == NOW


def test_a_round_instant_is_spread_late_only_within_the_window() -> None:
    adm = _admission()
    at = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    dues = [adm.new_task(TENANT, SubmitSpec(type="t", scheduled_at=at), NOW) for _ in range(2000)]
    offsets = [(t.due_at - at).total_seconds() for t in dues]
    assert min(offsets) >= 0
    assert max(offsets) <= JITTER_WINDOW_S
    assert max(offsets) > JITTER_WINDOW_S * 0.9  # spread over the whole window
    assert all(t.jitter_mode is JitterMode.LATE_ONLY for t in dues)


def test_symmetric_only_when_asked() -> None:
    adm = _admission()
    spec = SubmitSpec(type="t", scheduled_at=NOW, jitter_mode=JitterMode.SYMMETRIC)
    offsets = [(adm.new_task(TENANT, spec, NOW).due_at - NOW).total_seconds() for _ in range(500)]
    assert min(offsets) < 0 < max(offsets)
    assert min(offsets) >= -JITTER_WINDOW_S
    assert max(offsets) <= JITTER_WINDOW_S


def test_offsets_are_deterministic_and_in_milliseconds() -> None:
    task = uuid.UUID(int=123456789)
    a = jitter_offset_ms(TENANT, task, JitterMode.LATE_ONLY)
    assert a == jitter_offset_ms(TENANT, task, JitterMode.LATE_ONLY)
    rng = random.Random(3)
    offsets = {
        jitter_offset_ms(TENANT, uuid.UUID(int=rng.getrandbits(128)), JitterMode.LATE_ONLY)
        for _ in range(5000)
    }
    assert any(o % 1000 for o in offsets)  # not whole seconds only


def test_one_million_tasks_at_a_whole_minute_spread_evenly() -> None:
    """The stampede smoothing: busiest second <= 1.25x the mean over the window."""
    ratio = busiest_second_ratio(1_000_000)
    assert ratio <= 1.25, ratio
