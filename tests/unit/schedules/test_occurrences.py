"""Cron occurrences: seconds, time zones, daylight-saving transitions, validation."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler import InvalidArgument
from scheduler.engine._schedules import jitter_of, next_after, occurrence_key, occurrences_after
from scheduler.types import OverlapPolicy, Pool, Schedule


def sched(
    cron: str = "", tz: str = "UTC", interval_s: float = 0.0, jitter_s: float = 0
) -> Schedule:
    return Schedule(
        id=uuid.UUID(int=7),
        tenant_id=uuid.UUID(int=1),
        name="s",
        cron_expr=cron,
        interval_s=interval_s,
        timezone=tz,
        task_type="t",
        payload={},
        pool=Pool.STANDARD,
        overlap_policy=OverlapPolicy.SKIP,
        jitter_s=jitter_s,
    )


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)


def test_seconds_field_first() -> None:
    got = occurrences_after(sched("*/10 * * * * *"), utc(2026, 1, 1), utc(2026, 1, 1, 0, 0, 30), 10)
    assert got == [utc(2026, 1, 1, 0, 0, s) for s in (10, 20, 30)]


def test_interval() -> None:
    got = occurrences_after(sched(interval_s=90), utc(2026, 1, 1), utc(2026, 1, 1, 0, 5), 10)
    assert got == [utc(2026, 1, 1) + timedelta(seconds=90 * i) for i in (1, 2, 3)]


def test_spring_forward_missing_time_runs_once_after_the_gap() -> None:
    # New York, 2026-03-08 02:00 EST -> 03:00 EDT: 02:30 does not exist that night.
    s = sched("30 2 * * *", "America/New_York")
    got = occurrences_after(s, utc(2026, 3, 6, 12), utc(2026, 3, 10, 12), 10)
    assert got == [
        utc(2026, 3, 7, 7, 30),  # 02:30 EST
        utc(2026, 3, 8, 7, 0),  # 03:00 EDT, once
        utc(2026, 3, 9, 6, 30),  # 02:30 EDT
        utc(2026, 3, 10, 6, 30),
    ]


def test_fall_back_repeated_hour_runs_a_pinned_job_once() -> None:
    # New York, 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice.
    s = sched("30 1 * * *", "America/New_York")
    got = occurrences_after(s, utc(2026, 10, 31, 12), utc(2026, 11, 2, 12), 10)
    assert got == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_fall_back_wildcard_hour_runs_by_elapsed_time() -> None:
    s = sched("*/30 * * * *", "America/New_York")
    got = occurrences_after(s, utc(2026, 11, 1, 5, 0), utc(2026, 11, 1, 7, 0), 10)
    # 01:30 EDT, 01:00 EST, 01:30 EST, 02:00 EST: every 30 real minutes.
    assert got == [
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 6),
        utc(2026, 11, 1, 6, 30),
        utc(2026, 11, 1, 7),
    ]


def test_next_after_and_keys() -> None:
    s = sched("0 9 * * 1", "Europe/Paris")  # Mondays 09:00 Paris
    assert next_after(s, utc(2026, 7, 1)) == utc(2026, 7, 6, 7)
    assert occurrence_key(s.id, utc(2026, 7, 6, 7)) == f"sched:{s.id}:2026-07-06T07:00:00+00:00"


def test_jitter_is_late_only_bounded_and_deterministic() -> None:
    s = sched("* * * * *", jitter_s=30)
    offsets = [jitter_of(s, utc(2026, 1, 1, 0, m)) for m in range(60)]
    assert all(timedelta(0) <= o <= timedelta(seconds=30) for o in offsets)
    assert len(set(offsets)) > 10
    assert offsets == [jitter_of(s, utc(2026, 1, 1, 0, m)) for m in range(60)]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"cron": "bad cron"}, "schedule.cron"),
        ({"cron": "* * *"}, "schedule.cron"),
        ({"cron": "* * * * *", "interval_s": 5}, "schedule.cron"),
        ({}, "schedule.cron"),
        ({"interval_s": 0.5}, "schedule.interval_s"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "schedule.timezone"),
        ({"cron": "* * * * *", "jitter_s": -1}, "schedule.jitter_s"),
        ({"cron": "* * * * *", "name": ""}, "schedule.name"),
    ],
)
def test_invalid_schedules_name_the_field(kw: dict[str, object], field: str) -> None:
    """The schedules part alone (no store call is reached: validation comes first)."""
    from scheduler.cluster import LocalMembership
    from scheduler.engine import EngineConfig
    from scheduler.engine._admission import Admission
    from scheduler.engine._schedules import Schedules, ScheduleSpec
    from scheduler.engine._shard_state import ShardState

    config = EngineConfig()
    admission = Admission(config, ShardState(LocalMembership(), clustered=False))
    schedules = Schedules(
        None,  # type: ignore[arg-type]
        config,
        lambda: utc(2026, 1, 1),
        admission,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
    )
    args: dict[str, object] = {"name": "s", "task_type": "t", **kw}
    with pytest.raises(InvalidArgument) as err:
        schedules.validate(ScheduleSpec(**args))  # type: ignore[arg-type]
    assert err.value.field == field


def test_default_jitter_is_a_tenth_of_the_period_within_the_window() -> None:
    from scheduler.engine._schedules import default_jitter_s

    assert default_jitter_s(3600, 120) == 120
    assert default_jitter_s(60, 120) == 6
    assert default_jitter_s(1, 120) == 0.1
    assert default_jitter_s(0.001, 120) == 0.0  # below a millisecond: none
    assert default_jitter_s(86400, 0) == 0  # a server without jitter
