"""``FailureThrottle``: the one rule of the server's authentication throttle and the
dashboard's login throttle (``scheduler/_throttle.py``). A fake clock; no waiting."""

from __future__ import annotations

from scheduler._throttle import FailureThrottle


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_caller_is_blocked_after_limit_failures_in_the_window_and_alone() -> None:
    clock = Clock()
    t = FailureThrottle(3, 60.0, 30.0, max_callers=100, clock=clock)
    t.failed("a")
    t.failed("a")
    assert t.retry_after("a") is None
    t.failed("a")
    assert t.retry_after("a") == 30.0
    assert t.retry_after("b") is None
    clock.t += 30.0
    assert t.retry_after("a") is None


def test_failures_older_than_the_window_do_not_count() -> None:
    clock = Clock()
    t = FailureThrottle(2, 10.0, 30.0, max_callers=100, clock=clock)
    t.failed("a")
    clock.t += 11.0
    t.failed("a")
    assert t.retry_after("a") is None


def test_the_tables_stay_bounded_and_keep_the_newest() -> None:
    clock = Clock()
    t = FailureThrottle(1, 60.0, 60.0, max_callers=3, clock=clock)
    for i in range(5):
        clock.t += 1
        t.failed(f"c{i}")
    assert t.retry_after("c0") is None  # the oldest blocks went
    assert t.retry_after("c4") is not None
