"""Unit tests of the timing wheel contract, run against both implementations."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
from array import array

import psutil
import pytest

import _wheel
from _wheel._wheel_py import MAX_DUE_MS
from _wheel._wheel_py import TimingWheel as PyTimingWheel

DAY_MS = 24 * 3600 * 1000


def test_extension_loaded_in_a_normal_build() -> None:
    if _wheel.NO_EXTENSIONS:
        pytest.skip("TICKWHEEL_NO_EXTENSIONS is set")
    assert _wheel.IMPLEMENTATION == "c", _wheel.EXTENSION_ERROR
    assert _wheel.EXTENSION_ERROR is None
    assert type(_wheel.TimingWheel()).__module__ == "_wheel._wheel_c"


def test_env_switch_forces_pure_python() -> None:
    code = "import _wheel, scheduler.wheel as w; print(_wheel.IMPLEMENTATION, w.IMPLEMENTATION)"
    env = {**os.environ, "TICKWHEEL_NO_EXTENSIONS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["python", "python"]


def test_public_module_exports() -> None:
    import scheduler.wheel

    assert set(scheduler.wheel.__all__) == {"IMPLEMENTATION", "TaskTable", "TimingWheel"}
    assert scheduler.wheel.TimingWheel is _wheel.TimingWheel
    assert scheduler.wheel.TaskTable is _wheel.TaskTable


def test_defaults_cover_thirty_days(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    assert wheel.tick_ms == 1
    assert wheel.slots_per_level == 256
    assert wheel.levels == 4
    assert wheel.horizon_ms >= 30 * DAY_MS
    coarse = wheel_cls(tick_ms=10, slots_per_level=64)
    assert coarse.horizon_ms >= 30 * DAY_MS


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"tick_ms": 0}, ValueError),
        ({"tick_ms": 1.5}, TypeError),
        ({"slots_per_level": 100}, ValueError),
        ({"slots_per_level": 1}, ValueError),
        ({"levels": 0}, ValueError),
        ({"slots_per_level": 256, "levels": 8}, ValueError),
        ({"start_ms": -1}, ValueError),
    ],
)
def test_bad_config(wheel_cls: type[PyTimingWheel], kwargs: dict[str, object], exc: type) -> None:
    with pytest.raises(exc):
        wheel_cls(**kwargs)  # type: ignore[arg-type]


def test_fires_at_due_never_before(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    wheel.add(1, 10)
    wheel.add(2, 300)
    wheel.add(3, 70_000)
    assert list(wheel.advance(9)) == []
    assert list(wheel.advance(10)) == [1]
    assert list(wheel.advance(299)) == []
    assert wheel.next_due_ms() == 300
    assert list(wheel.advance(300)) == [2]
    assert list(wheel.advance(69_999)) == []
    assert list(wheel.advance(70_000)) == [3]
    assert wheel.next_due_ms() is None
    assert len(wheel) == 0


def test_order_is_due_then_insertion(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    wheel.add(5, 2_000_000)  # level 2, cascades down
    wheel.add(1, 1_000)
    wheel.add(4, 2_000_000)
    wheel.add(2, 500)
    wheel.add(3, 1_000)
    out = wheel.advance(3_000_000)
    assert isinstance(out, array)
    assert out.typecode == "q"
    assert list(out) == [2, 1, 3, 5, 4]


def test_past_due_fires_at_next_advance(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls(start_ms=1_000)
    wheel.add(1, 1_000)
    wheel.add(2, 3)
    wheel.add(3, 500)
    assert wheel.next_due_ms() == 3
    # Even an advance that does not move time fires them, in due order.
    assert list(wheel.advance(1_000)) == [2, 3, 1]


def test_beyond_horizon_goes_to_overflow_and_fires_on_time(
    wheel_cls: type[PyTimingWheel],
) -> None:
    wheel = wheel_cls(slots_per_level=4, levels=2)  # 16 ms horizon
    dues = {10: 5, 11: 17, 12: 100, 13: 1_000_000, 14: 40 * DAY_MS}
    for key, due in dues.items():
        wheel.add(key, due)
    for key, due in sorted(dues.items(), key=lambda kv: kv[1]):
        assert wheel.next_due_ms() == due
        assert list(wheel.advance(due - 1)) == []
        assert list(wheel.advance(due)) == [key]
    assert len(wheel) == 0


def test_coarse_tick_never_early(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls(tick_ms=10)
    wheel.add(1, 15)
    wheel.add(2, 11)
    assert list(wheel.advance(15)) == []  # tick 2 starts at 20
    assert list(wheel.advance(20)) == [2, 1]


def test_long_jump_is_not_per_tick(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    wheel.add(1, 10 * 365 * DAY_MS)
    assert list(wheel.advance(10 * 365 * DAY_MS - 1)) == []  # would take hours tick by tick
    assert list(wheel.advance(10 * 365 * DAY_MS)) == [1]


def test_duplicate_key_is_an_error(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    wheel.add(1, 10)
    with pytest.raises(ValueError, match="already scheduled"):
        wheel.add(1, 20)
    assert wheel.next_due_ms() == 10
    with pytest.raises(ValueError, match="already scheduled"):
        wheel.add_many(array("q", [2, 1]), array("q", [5, 5]))
    assert len(wheel) == 1
    assert 2 not in wheel
    with pytest.raises(ValueError, match="already scheduled"):
        wheel.add_many(array("q", [3, 3]), array("q", [5, 5]))
    assert len(wheel) == 1


def test_cancel_and_reschedule(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    wheel.add(1, 10)
    wheel.add(2, 10)
    wheel.add(3, 40 * DAY_MS)
    assert wheel.cancel(3) is True
    assert wheel.cancel(3) is False
    assert wheel.cancel(99) is False
    wheel.reschedule(1, 10)  # a new insertion: now after 2
    assert list(wheel.advance(10)) == [2, 1]
    with pytest.raises(KeyError):
        wheel.reschedule(1, 20)
    wheel.add(4, 50)
    wheel.reschedule(4, 5)  # into the past: fires at the next advance
    assert wheel.next_due_ms() == 5
    assert list(wheel.advance(10)) == [4]


def test_add_many_and_cancel_many_accept_buffers(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    keys = array("q", range(100))
    dues = array("q", (1_000 - k for k in range(100)))
    wheel.add_many(memoryview(keys), dues)
    assert len(wheel) == 100
    assert wheel.cancel_many(array("q", [0, 1, 1_000])) == 2
    assert list(wheel.advance(1_000)) == list(range(99, 1, -1))


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda w: w.add(1.0, 5), TypeError),
        (lambda w: w.add("1", 5), TypeError),
        (lambda w: w.add(True, 5), TypeError),
        (lambda w: w.add(1, 5.0), TypeError),
        (lambda w: w.add(1, None), TypeError),
        (lambda w: w.add(1, -1), ValueError),
        (lambda w: w.add(1, MAX_DUE_MS + 1), ValueError),
        (lambda w: w.add(1 << 63, 5), ValueError),
        (lambda w: w.add(-(1 << 63) - 1, 5), ValueError),
        (lambda w: w.advance(-5), ValueError),
        (lambda w: w.advance(1 << 64), ValueError),
        (lambda w: w.cancel(1.5), TypeError),
        (lambda w: w.reschedule(1, -3), ValueError),
        (lambda w: w.add_many([1], [2]), TypeError),
        (lambda w: w.add_many(array("d", [1.0]), array("q", [2])), TypeError),
        (lambda w: w.add_many(array("i", [1]), array("q", [2])), TypeError),
        (lambda w: w.add_many(array("q", [1, 2]), array("q", [2])), ValueError),
        (lambda w: w.add_many(array("q", [1]), array("q", [-2])), ValueError),
        (lambda w: w.cancel_many(b"12345678"), TypeError),
    ],
)
def test_bad_input_raises(wheel_cls: type[PyTimingWheel], call: object, exc: type) -> None:
    wheel = wheel_cls()
    with pytest.raises(exc, match=r"\w"):
        call(wheel)  # type: ignore[operator]
    assert len(wheel) == 0


def test_extreme_values(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    wheel.add((1 << 63) - 1, MAX_DUE_MS)
    wheel.add(-(1 << 63), 0)
    assert list(wheel.advance(0)) == [-(1 << 63)]
    assert list(wheel.advance(MAX_DUE_MS)) == [(1 << 63) - 1]


def test_index_like_ints_are_accepted(wheel_cls: type[PyTimingWheel]) -> None:
    class Id:
        def __index__(self) -> int:
            return 7

    wheel = wheel_cls()
    wheel.add(Id(), 3)  # type: ignore[arg-type]
    assert 7 in wheel
    assert "7" not in wheel
    assert 1 << 70 not in wheel


def test_clear_and_memory(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    empty = wheel.memory_bytes()
    wheel.add_many(array("q", range(10_000)), array("q", range(10_000)))
    assert wheel.memory_bytes() > empty
    wheel.clear()
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None
    assert list(wheel.advance(20_000)) == []
    assert wheel.memory_bytes() <= empty * 2
    wheel.add(1, 20_001)
    assert list(wheel.advance(20_001)) == [1]


def test_c_memory_per_timer() -> None:
    if _wheel.IMPLEMENTATION != "c":
        pytest.skip("the C extension is not in use")
    wheel = _wheel.TimingWheel()
    n = 200_000
    wheel.add_many(array("q", range(n)), array("q", (k * 7 % 3_600_000 for k in range(n))))
    assert wheel.memory_bytes() / n <= 64


def test_no_leak_over_add_cancel_loop(wheel_cls: type[PyTimingWheel]) -> None:
    wheel = wheel_cls()
    proc = psutil.Process()
    batch = 5_000
    rounds = 60 if wheel_cls is not PyTimingWheel else 20

    def cycle(base: int) -> None:
        keys = array("q", range(base, base + batch))
        dues = array("q", ((k * 7919) % (40 * DAY_MS) for k in range(base, base + batch)))
        wheel.add_many(keys, dues)
        for k in keys[::2]:
            wheel.cancel(k)
        wheel.cancel_many(keys)
        wheel.advance(base)

    for i in range(5):  # warm up: let allocators reach their steady state
        cycle(i * batch)
    gc.collect()
    before = proc.memory_info().rss
    for i in range(5, rounds):
        cycle(i * batch)
    gc.collect()
    grown = proc.memory_info().rss - before
    assert len(wheel) == 0
    assert grown < 4 * 1024 * 1024, f"RSS grew by {grown} bytes"


def test_many_keys_against_a_set(wheel_cls: type[PyTimingWheel]) -> None:
    # Enough keys for long probe runs in the C key index (grows, shifts back on delete).
    rng = random.Random(7)
    wheel = wheel_cls()
    live: set[int] = set()
    for _ in range(30_000):
        key = rng.randrange(-(1 << 63), 1 << 63) if rng.random() < 0.5 else rng.randrange(5_000)
        if key in live:
            assert wheel.cancel(key)
            live.discard(key)
        else:
            wheel.add(key, rng.randrange(100_000))
            live.add(key)
    assert len(wheel) == len(live)
    assert all(key in wheel for key in live)
    fired = wheel.advance(100_000)
    assert sorted(fired) == sorted(live)
    assert len(wheel) == 0
