"""Issue 20: a task is never delivered to a worker before its due instant.

Due times carry microseconds; the delivery heap counted whole milliseconds. A due
time truncated to its millisecond (12:00:00.000400 -> .000) met a "now" truncated the
same way (12:00:00.000100 -> .000) and the task was pushed 0.3 ms early. The wheel
fires ahead of time by design (commit ahead, deliver on time); delivery is the gate,
and it now compares due and now in microseconds. Driven by a clock the test moves
(no sleeping, no timing assertion)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from scheduler.engine._delivery import Delivery
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import to_ms, to_us
from tests.support.clock import FakeClock
from tests.unit.engine.test_parts import T0, FakeSession, assignment

US = timedelta(microseconds=1)


@pytest.mark.parametrize("due_us", [0, 1, 400, 999, 1000, 1001, 1499, 250_000_500])
def test_delivery_waits_for_the_due_instant_to_the_microsecond(due_us: int) -> None:
    clock = FakeClock(T0)
    stats = EngineStats()
    delivery = Delivery(lambda: to_us(clock()), stats)
    session = FakeSession()
    due = T0 + due_us * US
    a = dataclasses.replace(assignment(0), due_at=due)
    delivery.hold(session, a)  # type: ignore[arg-type]
    # Every microsecond from a millisecond before the due instant up to it, excluded.
    clock.current = max(T0, due - timedelta(milliseconds=1))
    while clock.current < due:
        delivery.deliver_due(to_us(clock()))
        assert session.delivered == [], f"delivered at {clock.current} for due {due}"
        clock.current += US
    # At the due instant itself (a frozen clock at "now" delivers a task due now).
    delivery.deliver_due(to_us(clock()))
    assert session.delivered == [(a,)]
    assert list(stats.lateness_ms) == [0.0]


def test_to_ms_and_to_us_are_exact_far_from_the_epoch() -> None:
    # A float timestamp (1.7e9 s) rounds below a microsecond; integers do not.
    for us in (0, 1, 123_000, 999_999, 86_400_123_456):
        at = T0 + us * US
        assert to_us(at) == to_us(T0) + us
        assert to_ms(at) == to_ms(T0) + us // 1000


def test_a_session_that_holds_early_pushes_is_pushed_within_its_early_window() -> None:
    """A stream whose worker holds early pushes (``Hello.early_ms``) is pushed by
    ``early_us`` less a third of it before the due instant (20 ms: by 13.334 ms before),
    to the microsecond, and never more than ``early_us`` before it; another stream's
    copy of the same due time still waits for the instant itself. The worker's side
    (no handler before the due instant) is tested end to end in
    tests/integration/transport/test_worker_timing.py."""
    clock = FakeClock(T0)
    stats = EngineStats()
    delivery = Delivery(lambda: to_us(clock()), stats)
    early, plain = FakeSession(early_us=20_000), FakeSession()
    due = T0 + timedelta(seconds=1, microseconds=377)
    a, b = (dataclasses.replace(assignment(i), due_at=due) for i in (0, 1))
    delivery.hold(early, a)  # type: ignore[arg-type]
    delivery.hold(plain, b)  # type: ignore[arg-type]
    latest = due - timedelta(microseconds=20_000 - 6_666)
    clock.current = due - timedelta(microseconds=20_001)
    while clock.current < latest:
        delivery.deliver_due(to_us(clock()))
        assert early.delivered == [], f"pushed at {due - clock.current} before due"
        clock.current += 7 * US
    clock.current = latest
    delivery.deliver_due(to_us(clock()))
    assert early.delivered == [(a,)]
    assert plain.delivered == []
    clock.current = due - US
    delivery.deliver_due(to_us(clock()))
    assert plain.delivered == []
    clock.current = due
    delivery.deliver_due(to_us(clock()))
    assert plain.delivered == [(b,)]
    # The lateness recorded is each push's against its own latest instant: on time.
    assert list(stats.lateness_ms) == [0.0, 0.0]


def test_one_wake_up_pushes_every_task_whose_early_window_has_opened() -> None:
    """A flat stream to an early-holding session: the push made at the first task's
    latest instant takes along every later task whose earliest instant (``early_us``
    before its due time) has come, in one batch, and none whose window has not opened:
    one wake-up for many due instants, never a push more than ``early_us`` ahead."""
    clock = FakeClock(T0)
    delivery = Delivery(lambda: to_us(clock()), EngineStats())
    early = FakeSession(early_us=20_000)
    # A task due every 120 microseconds (8,333 a second) from T0 + 1 s.
    dues = [T0 + timedelta(seconds=1, microseconds=120 * i) for i in range(200)]
    tasks = [dataclasses.replace(assignment(i), due_at=d) for i, d in enumerate(dues)]
    for t in tasks:
        delivery.hold(early, t)  # type: ignore[arg-type]
    first_latest = dues[0] - timedelta(microseconds=20_000 - 6_666)
    clock.current = first_latest
    delivery.deliver_due(to_us(clock()))
    (batch,) = early.delivered
    # Every task due within early_us of now: 20 ms - 13.334 ms = 6.666 ms of dues.
    assert list(batch) == [t for t in tasks if t.due_at - clock.current <= 20_000 * US]
    assert len(batch) == 56
    # The next push waits for the next task's latest instant, not its earliest.
    nxt = tasks[len(batch)]
    clock.current = nxt.due_at - timedelta(microseconds=20_000 - 6_666) - US
    delivery.deliver_due(to_us(clock()))
    assert len(early.delivered) == 1
    clock.current += US
    delivery.deliver_due(to_us(clock()))
    assert early.delivered[1][0] == nxt
