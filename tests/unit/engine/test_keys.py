"""The engine's concurrency-key gate (``engine/_keys.py``): held tasks wait in due
order and go back one per slot freed here, or up to their key's limit at a re-check."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scheduler.engine._keys import KeyGate
from scheduler.types import Held, Pool, Preloaded, TaskKey

T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
TENANT = uuid.uuid4()


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def task(due_s: float, type_: str = "work") -> Preloaded:
    due = T0 + timedelta(seconds=due_s)
    return Preloaded(TaskKey(uuid.uuid4(), due), due, TENANT, 0, Pool.STANDARD, type_)


def test_held_tasks_wait_in_due_order_and_one_goes_per_slot_freed_here() -> None:
    clock = Clock()
    gate = KeyGate(0.5, clock)
    running = task(0)
    gate.dispatched(running.key.id, TENANT, "work", "acme")
    late, early, middle = task(3), task(1), task(2)
    for p in (late, early, middle, early):  # early twice: a reload found it again
        gate.hold(p, Held("acme", 2))
    assert len(gate) == 3
    assert gate.keys_waiting == 1
    assert gate.release() == []  # nothing freed, no re-check due yet
    assert gate.freed(running.key.id) is True
    assert gate.freed(running.key.id) is False  # once
    assert gate.release() == [early]
    assert gate.release() == []
    clock.t += 0.5  # the re-check: up to the key's limit
    assert gate.release() == [middle, late]
    assert gate.keys_waiting == 0
    assert gate.recheck_in() is None


def test_a_slot_freed_for_a_key_nobody_waits_for_wakes_nothing() -> None:
    gate = KeyGate(0.5, Clock())
    a = task(0)
    gate.dispatched(a.key.id, TENANT, "work", "acme")
    gate.hold(task(1), Held("globex", 1))
    assert gate.freed(a.key.id) is False
    assert gate.freed(uuid.uuid4()) is False  # not a keyed task of this node
    gate.dispatched(a.key.id, TENANT, "work", "acme")
    gate.forget(a.key.id)
    assert gate.freed(a.key.id) is False


def test_keys_are_per_tenant_type_and_key_and_recheck_is_bounded() -> None:
    clock = Clock()
    gate = KeyGate(0.25, clock)
    x, y = task(0, "work"), task(0, "other")
    gate.hold(x, Held("acme", 1))
    gate.hold(y, Held("acme", 1))
    assert gate.keys_waiting == 2
    assert gate.recheck_in() == 0.25
    clock.t += 0.1
    left = gate.recheck_in()
    assert left is not None
    assert abs(left - 0.15) < 1e-9
    clock.t += 0.15
    assert sorted(p.type for p in gate.release()) == ["other", "work"]
