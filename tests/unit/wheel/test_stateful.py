"""Hypothesis stateful tests: each wheel against the heap oracle.

Small wheels (2-8 slots, 1-3 levels) make the random time jumps cross several levels
and reach the overflow heap; the default geometry runs too, with jumps of up to 2**40 ms.
"""

from __future__ import annotations

from array import array

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from _wheel._wheel_py import TimingWheel as PyTimingWheel

from .conftest import IMPLEMENTATIONS, load
from .oracle import HeapOracle

KEYS = st.integers(min_value=-3, max_value=40)
# Offsets from "now": in the past, within level 0, across levels, far into the overflow.
OFFSETS = st.one_of(
    st.integers(min_value=-50, max_value=0),
    st.integers(min_value=0, max_value=20),
    st.integers(min_value=0, max_value=5_000),
    st.integers(min_value=0, max_value=1 << 40),
)
JUMPS = st.one_of(
    st.integers(min_value=0, max_value=10),
    st.integers(min_value=0, max_value=3_000),
    st.integers(min_value=0, max_value=1 << 41),
    st.integers(min_value=-20, max_value=0),
)


def machine(cls: type[PyTimingWheel]) -> type[RuleBasedStateMachine]:
    class WheelVsOracle(RuleBasedStateMachine):
        wheel: PyTimingWheel
        oracle: HeapOracle
        now: int

        @initialize(
            tick_ms=st.sampled_from([1, 1, 3, 10]),
            geometry=st.sampled_from([(2, 1), (2, 3), (4, 2), (8, 2), (4, 3), (256, None)]),
            start_ms=st.sampled_from([0, 7, 1_700_000_000_000]),
        )
        def setup(self, tick_ms: int, geometry: tuple[int, int | None], start_ms: int) -> None:
            slots, levels = geometry
            self.wheel = cls(
                tick_ms=tick_ms, slots_per_level=slots, levels=levels, start_ms=start_ms
            )
            self.oracle = HeapOracle(tick_ms=tick_ms, start_ms=start_ms)
            self.now = start_ms

        def due(self, offset: int) -> int:
            return max(0, self.now + offset)

        @rule(key=KEYS, offset=OFFSETS)
        def add(self, key: int, offset: int) -> None:
            due = self.due(offset)
            if key in self.oracle:
                with pytest.raises(ValueError, match="already scheduled"):
                    self.wheel.add(key, due)
            else:
                self.wheel.add(key, due)
                self.oracle.add(key, due)

        @rule(keys=st.lists(KEYS, max_size=12), offsets=st.lists(OFFSETS, min_size=12))
        def add_many(self, keys: list[int], offsets: list[int]) -> None:
            dues = [self.due(o) for o in offsets[: len(keys)]]
            clash = len(set(keys)) != len(keys) or any(k in self.oracle for k in keys)
            if clash:
                before = len(self.wheel)
                with pytest.raises(ValueError, match="already scheduled"):
                    self.wheel.add_many(array("q", keys), array("q", dues))
                assert len(self.wheel) == before
            else:
                self.wheel.add_many(array("q", keys), memoryview(array("q", dues)))
                for key, due in zip(keys, dues, strict=True):
                    self.oracle.add(key, due)

        @rule(key=KEYS)
        def cancel(self, key: int) -> None:
            assert self.wheel.cancel(key) == self.oracle.cancel(key)

        @rule(keys=st.lists(KEYS, max_size=8, unique=True))
        def cancel_many(self, keys: list[int]) -> None:
            expected = sum(self.oracle.cancel(k) for k in keys)
            assert self.wheel.cancel_many(array("q", keys)) == expected

        @rule(key=KEYS, offset=OFFSETS)
        def reschedule(self, key: int, offset: int) -> None:
            due = self.due(offset)
            if key in self.oracle:
                self.wheel.reschedule(key, due)
                self.oracle.reschedule(key, due)
            else:
                with pytest.raises(KeyError):
                    self.wheel.reschedule(key, due)

        @rule(jump=JUMPS)
        def advance(self, jump: int) -> None:
            now = max(0, self.now + jump)
            self.now = max(self.now, now)
            assert list(self.wheel.advance(now)) == self.oracle.advance(now)

        @precondition(lambda self: len(self.oracle) > 0)
        @rule()
        def advance_to_next_due(self) -> None:
            # What the dispatcher does: sleep until next_due_ms(), then advance.
            due = self.wheel.next_due_ms()
            assert due is not None
            now = max(self.now, -(-due // self.wheel.tick_ms) * self.wheel.tick_ms)
            self.now = now
            fired = list(self.wheel.advance(now))
            assert fired == self.oracle.advance(now)
            assert fired

        @rule()
        def clear(self) -> None:
            self.wheel.clear()
            self.oracle.clear()

        @invariant()
        def same_state(self) -> None:
            assert len(self.wheel) == len(self.oracle)
            assert self.wheel.next_due_ms() == self.oracle.next_due_ms()
            for key in (-3, 0, 7, 40):
                assert (key in self.wheel) == (key in self.oracle)

    return WheelVsOracle


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_wheel_matches_heap_oracle(impl: str) -> None:
    run_state_machine_as_test(
        machine(load(impl)),
        settings=settings(
            max_examples=150,
            stateful_step_count=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
