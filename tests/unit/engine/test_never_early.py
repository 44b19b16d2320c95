"""Issue 20: a task is never dispatched or delivered before its due instant.

Due times carry microseconds; the wheel and the delivery heap count whole
milliseconds. A due time truncated to its millisecond (12:00:00.000400 -> .000) met a
"now" truncated the same way (12:00:00.000100 -> .000) and the task went out 0.3 ms
early. Driven by a clock the test moves (no sleeping, no timing assertion)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from scheduler.engine import EngineConfig
from scheduler.engine._delivery import Delivery
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import due_ms, to_ms
from tests.support.clock import FakeClock
from tests.unit.engine.test_parts import (
    T0,
    FakeSession,
    assignment,
    preloaded,
    shard_state,
    timeline,
)

US = timedelta(microseconds=1)
DUE_OFFSETS_US = [1, 400, 999, 1000, 1001, 1499, 250_000_500]


@pytest.mark.parametrize("due_us", DUE_OFFSETS_US)
def test_delivery_waits_for_the_due_instant_to_the_microsecond(due_us: int) -> None:
    clock = FakeClock(T0)
    delivery = Delivery(lambda: to_ms(clock()), EngineStats())
    session = FakeSession()
    due = T0 + due_us * US
    a = dataclasses.replace(assignment(0), due_at=due)
    delivery.hold(session, a)  # type: ignore[arg-type]
    # Every microsecond from a millisecond before the due instant up to it, excluded.
    clock.current = max(T0, due - timedelta(milliseconds=1))
    while clock.current < due:
        delivery.deliver_due(to_ms(clock()))
        assert session.delivered == [], f"delivered at {clock.current} for due {due}"
        clock.current += US
    # At most a millisecond later, it goes.
    while not session.delivered:
        assert clock.current <= due + timedelta(milliseconds=1)
        delivery.deliver_due(to_ms(clock()))
        clock.current += US
    assert session.delivered == [(a,)]


@pytest.mark.parametrize("due_us", DUE_OFFSETS_US)
def test_the_wheel_fires_no_task_before_its_due_instant(due_us: int) -> None:
    tl, _ = timeline(EngineConfig(), shard_state())
    due = T0 + due_us * US
    p = dataclasses.replace(preloaded(0), due_at=due)
    tl.add([p])
    assert tl.next_due_ms() is not None
    assert T0 + timedelta(milliseconds=tl.next_due_ms() - to_ms(T0)) >= due  # type: ignore[operator]
    now = max(T0, due - timedelta(milliseconds=1))
    while now < due:
        assert tl.fire(to_ms(now)) == [], f"fired at {now} for due {due}"
        now += 7 * US
    assert [x.key for x in tl.fire(to_ms(due + timedelta(milliseconds=1)))] == [p.key]


def test_due_ms_rounds_up_and_to_ms_down_exactly() -> None:
    assert to_ms(T0) == due_ms(T0)
    assert due_ms(T0 + US) == to_ms(T0) + 1
    assert to_ms(T0 + 999 * US) == to_ms(T0)
    assert due_ms(T0 + 1000 * US) == to_ms(T0) + 1
    # Whole milliseconds far from the epoch stay exact (no float rounding up a ms).
    for ms in (1, 123, 999, 86_400_123):
        at = T0 + timedelta(milliseconds=ms)
        assert due_ms(at) == to_ms(at) == to_ms(T0) + ms
