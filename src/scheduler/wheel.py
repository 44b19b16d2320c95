"""The timing wheel: an in-memory hierarchical timer set of 64-bit integer keys.

``TimingWheel`` is the Cython accelerator when it is built, its pure-Python twin otherwise
(or when ``TICKWHEEL_NO_EXTENSIONS=1``); ``IMPLEMENTATION`` says which (``"c"`` or
``"python"``). Both keep the same contract:

- ``TimingWheel(*, tick_ms=1, slots_per_level=256, levels=None, start_ms=0)``: ``levels``
  defaults to the fewest that cover 30 days; later timers wait in an overflow heap.
- ``add(key, due_ms)``, ``add_many(keys, dues)`` (int64 buffers, all or nothing): a key
  that is already scheduled raises ``ValueError``; ``reschedule(key, due_ms)`` moves one
  (``KeyError`` if absent) and counts as a new insertion for tie order.
- ``cancel(key) -> bool`` and ``cancel_many(keys) -> int``, O(1) per key.
- ``advance(now_ms) -> array('q')``: the expired keys, ordered by ``(due_ms, insertion)``.
  A timer fires at the first ``advance`` whose tick (``now_ms // tick_ms``) reaches its
  due tick (``ceil(due_ms / tick_ms)``): never early, and exactly at ``due_ms`` when
  ``tick_ms == 1``. A timer added in the past fires at the next ``advance``.
- ``next_due_ms() -> int | None``: the earliest ``due_ms``; ``None`` when empty.
- ``len()``, ``in``, ``clear()``, ``memory_bytes()``.

Keys are signed 64-bit ints; times are ms in ``[0, 2**62)``. Bad input raises
``TypeError`` or ``ValueError``. Not thread-safe: one owner (the dispatcher) drives it.

``TaskTable`` holds what the engine keeps of each task the wheel holds, as one compact
row found by a small int handle (the wheel's key) or by the task's 128-bit id: the id,
``scheduled_at`` and ``due_at`` in epoch µs, a group number and the shard. No Python
object per task, so a million outstanding timers are not a million objects for the
garbage collector to scan. See ``docs/wheel.md``.
"""

from __future__ import annotations

from _wheel import IMPLEMENTATION, TaskTable, TimingWheel

__all__ = ["IMPLEMENTATION", "TaskTable", "TimingWheel"]
