"""Pure-Python hierarchical timing wheel: the reference twin of ``_wheel_c``.

Same API, same semantics, same placement rule as the Cython accelerator, so the two
can be tested against one oracle. It is used when the extension is unavailable or
``TICKWHEEL_NO_EXTENSIONS=1`` is set. See ``docs/wheel.md`` for the design.

Placement (both implementations): ``cur`` is the last tick the wheel has processed.
A timer due at tick ``t > cur`` sits at the level ``L`` of the highest ``bits``-wide
digit in which ``t`` and ``cur`` differ, in slot ``digit_L(t)``; when ``L`` would be
``>= levels`` it goes to the overflow heap. Consequences the code relies on: every
timer at level ``L`` is due before every timer at level ``L + 1``; at level ``L`` only
slots after ``digit_L(cur)`` are occupied; a level-0 slot holds exactly one tick.
"""

from __future__ import annotations

import heapq
import sys
from array import array
from operator import index as _index
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["MAX_DUE_MS", "MAX_TICK_MS", "TimingWheel"]

#: Largest accepted ``due_ms`` / ``now_ms`` (keeps every tick computation in 63 bits).
MAX_DUE_MS = (1 << 62) - 1
#: Largest accepted ``tick_ms``.
MAX_TICK_MS = 1 << 31
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_THIRTY_DAYS_MS = 30 * 24 * 3600 * 1000
_READY = -1
_OVERFLOW = -2


def _as_int(value: object, what: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not bool")
    try:
        return _index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None


def _key(value: object) -> int:
    key = _as_int(value, "key")
    if not _I64_MIN <= key <= _I64_MAX:
        raise ValueError(f"key {key} is outside the signed 64-bit range")
    return key


def _ms(value: object, what: str) -> int:
    ms = _as_int(value, what)
    if not 0 <= ms <= MAX_DUE_MS:
        raise ValueError(f"{what} must be in [0, {MAX_DUE_MS}], got {ms}")
    return ms


def _buffer(obj: object, what: str) -> memoryview:
    try:
        view = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{what} must be a buffer of signed 64-bit ints (array('q'), memoryview), "
            f"not {type(obj).__name__}"
        ) from None
    if view.ndim != 1 or view.itemsize != 8 or view.format.lstrip("@=<>!") not in ("q", "l"):
        raise TypeError(
            f"{what} must be a 1-D buffer of signed 64-bit ints, got format "
            f"{view.format!r} with {view.ndim} dimension(s)"
        )
    return view


def default_levels(tick_ms: int, slots_per_level: int) -> int:
    """Fewest levels whose span covers at least 30 days at ``tick_ms``."""
    levels = 1
    while slots_per_level**levels * tick_ms < _THIRTY_DAYS_MS:
        levels += 1
    return levels


def check_config(
    tick_ms: object, slots_per_level: object, levels: object | None
) -> tuple[int, int, int]:
    """Validate constructor options; return ``(tick_ms, bits, levels)``."""
    tick = _as_int(tick_ms, "tick_ms")
    if not 1 <= tick <= MAX_TICK_MS:
        raise ValueError(f"tick_ms must be in [1, {MAX_TICK_MS}], got {tick}")
    slots = _as_int(slots_per_level, "slots_per_level")
    if not 2 <= slots <= 65536 or slots & (slots - 1):
        raise ValueError(f"slots_per_level must be a power of two in [2, 65536], got {slots}")
    bits = slots.bit_length() - 1
    nlevels = default_levels(tick, slots) if levels is None else _as_int(levels, "levels")
    if not nlevels >= 1 or bits * nlevels > 62:
        raise ValueError(
            f"levels must be >= 1 with slots_per_level**levels <= 2**62, got {nlevels}"
        )
    return tick, bits, nlevels


class TimingWheel:
    """Hierarchical timing wheel of integer keys (pure-Python implementation).

    See the package docstring of :mod:`scheduler.wheel` for the full contract.
    """

    __slots__ = (
        "_bitmaps",
        "_bits",
        "_cur",
        "_heap",
        "_index",
        "_levels",
        "_mask",
        "_ready",
        "_seq",
        "_slots",
        "_stale",
        "_tick",
        "_total_bits",
    )

    def __init__(
        self,
        *,
        tick_ms: int = 1,
        slots_per_level: int = 256,
        levels: int | None = None,
        start_ms: int = 0,
    ) -> None:
        self._tick, self._bits, self._levels = check_config(tick_ms, slots_per_level, levels)
        self._mask = (1 << self._bits) - 1
        self._total_bits = self._bits * self._levels
        self._cur = _ms(start_ms, "start_ms") // self._tick
        self._seq = 0
        # key -> [due_ms, seq, level, slot]; level is _READY, _OVERFLOW or 0..levels-1.
        self._index: dict[int, list[int]] = {}
        # Each slot is a dict key -> node: insertion-ordered with O(1) removal.
        self._slots: list[list[dict[int, list[int]]]] = [
            [{} for _ in range(1 << self._bits)] for _ in range(self._levels)
        ]
        self._bitmaps = [0] * self._levels
        self._ready: dict[int, list[int]] = {}
        # Overflow: (due_ms, seq, key), cancelled entries removed lazily.
        self._heap: list[tuple[int, int, int]] = []
        self._stale = 0

    # -- properties -----------------------------------------------------------------

    @property
    def tick_ms(self) -> int:
        """Length of one tick in milliseconds."""
        return self._tick

    @property
    def slots_per_level(self) -> int:
        """Slots in each level."""
        return 1 << self._bits

    @property
    def levels(self) -> int:
        """Number of wheel levels (timers beyond them go to the overflow heap)."""
        return self._levels

    @property
    def horizon_ms(self) -> int:
        """Span the levels cover, in ms (``tick_ms * slots_per_level ** levels``)."""
        return self._tick << self._total_bits

    @property
    def now_ms(self) -> int:
        """Start of the last processed tick, in ms."""
        return self._cur * self._tick

    # -- container protocol ---------------------------------------------------------

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        try:
            return _key(key) in self._index
        except (TypeError, ValueError):
            return False

    def __repr__(self) -> str:
        return (
            f"<TimingWheel python tick_ms={self._tick} slots_per_level={1 << self._bits} "
            f"levels={self._levels} now_ms={self.now_ms} len={len(self._index)}>"
        )

    # -- mutation -------------------------------------------------------------------

    def add(self, key: int, due_ms: int) -> None:
        """Schedule ``key`` at ``due_ms``; ``ValueError`` if ``key`` is already scheduled."""
        k = _key(key)
        due = _ms(due_ms, "due_ms")
        if k in self._index:
            raise ValueError(f"key {k} is already scheduled (use reschedule() to move it)")
        self._insert(k, due)

    def add_many(self, keys: Buffer, dues: Buffer) -> None:
        """Schedule ``keys[i]`` at ``dues[i]``: all or nothing."""
        kv = _buffer(keys, "keys")
        dv = _buffer(dues, "dues")
        if len(kv) != len(dv):
            raise ValueError(f"keys and dues differ in length ({len(kv)} != {len(dv)})")
        dlist = dv.tolist()
        for due in dlist:
            if not 0 <= due <= MAX_DUE_MS:
                raise ValueError(f"due_ms must be in [0, {MAX_DUE_MS}], got {due}")
        done: list[int] = []
        index = self._index
        for k, due in zip(kv.tolist(), dlist, strict=True):
            if k in index:
                for j in done:
                    self.cancel(j)
                raise ValueError(f"key {k} is already scheduled (add_many rolled back)")
            self._insert(k, due)
            done.append(k)

    def cancel(self, key: int) -> bool:
        """Unschedule ``key``; return whether it was scheduled."""
        k = _key(key)
        node = self._index.pop(k, None)
        if node is None:
            return False
        self._unlink(k, node)
        return True

    def cancel_many(self, keys: Buffer) -> int:
        """Cancel every key in a buffer of signed 64-bit ints; return how many were scheduled."""
        n = 0
        for k in _buffer(keys, "keys").tolist():
            node = self._index.pop(k, None)
            if node is not None:
                self._unlink(k, node)
                n += 1
        return n

    def reschedule(self, key: int, due_ms: int) -> None:
        """Move ``key`` to ``due_ms`` (a new insertion for tie order); ``KeyError`` if absent."""
        k = _key(key)
        due = _ms(due_ms, "due_ms")
        node = self._index.pop(k, None)
        if node is None:
            raise KeyError(k)
        self._unlink(k, node)
        self._insert(k, due)

    def clear(self) -> None:
        """Drop every timer (the current time is kept)."""
        self._index.clear()
        for level in self._slots:
            for slot in level:
                slot.clear()
        self._bitmaps = [0] * self._levels
        self._ready.clear()
        self._heap.clear()
        self._stale = 0

    # -- time -----------------------------------------------------------------------

    def advance(self, now_ms: int) -> array[int]:
        """Move time to ``now_ms``; return the expired keys as ``array('q')``.

        Order is ``(due_ms, insertion sequence)``. Timers added in the past fire here
        whatever ``now_ms`` is; time never moves backwards (an earlier ``now_ms`` only
        fires those).
        """
        now = _ms(now_ms, "now_ms") // self._tick
        out: list[int] = []
        if self._ready:
            out.extend(self._drain(self._ready))
        mask = self._mask
        level0 = self._slots[0]
        while True:
            t = self._next_event_tick()
            if t is None or t > now:
                break
            self._move_to(t)
            slot = level0[t & mask]
            if slot:
                self._bitmaps[0] &= ~(1 << (t & mask))
                out.extend(self._drain(slot))
        if now > self._cur:
            self._move_to(now)
        return array("q", out)

    def next_due_ms(self) -> int | None:
        """Earliest ``due_ms`` among scheduled timers, or ``None`` when empty."""
        if not self._index:
            return None
        if self._ready:
            return min(node[0] for node in self._ready.values())
        for level in range(self._levels):
            slot = self._first_slot(level)
            if slot is not None:
                return min(node[0] for node in self._slots[level][slot].values())
        self._clean_heap_top()
        return self._heap[0][0]

    def memory_bytes(self) -> int:
        """Approximate bytes held by the structure (CPython object sizes)."""
        size = sys.getsizeof(self._index) + sys.getsizeof(self._ready) + sys.getsizeof(self._heap)
        size += sum(sys.getsizeof(n) + 4 * 32 for n in self._index.values())
        size += len(self._heap) * (sys.getsizeof((0, 0, 0)) + 3 * 32)
        for level in self._slots:
            size += sys.getsizeof(level) + sum(sys.getsizeof(slot) for slot in level)
        return size

    # -- internals ------------------------------------------------------------------

    def _insert(self, key: int, due: int) -> None:
        tick = -(-due // self._tick)
        seq = self._seq
        self._seq = seq + 1
        node = [due, seq, _READY, 0]
        self._index[key] = node
        if tick <= self._cur:
            self._ready[key] = node
        else:
            self._place(key, node, tick)

    def _place(self, key: int, node: list[int], tick: int) -> None:
        x = tick ^ self._cur
        level = (x.bit_length() - 1) // self._bits if x else 0
        if level >= self._levels:
            node[2] = _OVERFLOW
            heapq.heappush(self._heap, (node[0], node[1], key))
            return
        slot = (tick >> (self._bits * level)) & self._mask
        node[2] = level
        node[3] = slot
        self._slots[level][slot][key] = node
        self._bitmaps[level] |= 1 << slot

    def _unlink(self, key: int, node: list[int]) -> None:
        level = node[2]
        if level == _READY:
            del self._ready[key]
        elif level == _OVERFLOW:
            self._stale += 1
            if self._stale > 64 and self._stale * 2 > len(self._heap):
                self._heap = [e for e in self._heap if self._live(e)]
                heapq.heapify(self._heap)
                self._stale = 0
        else:
            slot = self._slots[level][node[3]]
            del slot[key]
            if not slot:
                self._bitmaps[level] &= ~(1 << node[3])

    def _live(self, entry: tuple[int, int, int]) -> bool:
        node = self._index.get(entry[2])
        return node is not None and node[2] == _OVERFLOW and node[1] == entry[1]

    def _clean_heap_top(self) -> None:
        heap = self._heap
        while heap and not self._live(heap[0]):
            heapq.heappop(heap)
            self._stale -= 1

    def _drain(self, slot: dict[int, list[int]]) -> list[int]:
        items = list(slot.items())
        slot.clear()
        index = self._index
        for k, _ in items:
            del index[k]
        # Within one slot the order is already (due, seq) at tick_ms=1; sort anyway when
        # it is not (coarser ticks, the ready list).
        if any(items[i][1][:2] > items[i + 1][1][:2] for i in range(len(items) - 1)):
            items.sort(key=lambda kv: (kv[1][0], kv[1][1]))
        return [k for k, _ in items]

    def _first_slot(self, level: int) -> int | None:
        """First occupied slot after the current digit at ``level``."""
        digit = (self._cur >> (self._bits * level)) & self._mask
        higher = self._bitmaps[level] >> (digit + 1)
        if not higher:
            return None
        return digit + 1 + (higher & -higher).bit_length() - 1

    def _next_event_tick(self) -> int | None:
        """Earliest tick at which the wheel has work: a level-0 slot or a cascade."""
        bits = self._bits
        for level in range(self._levels):
            slot = self._first_slot(level)
            if slot is not None:
                above = bits * (level + 1)
                return ((self._cur >> above) << above) | (slot << (bits * level))
        self._clean_heap_top()
        if self._heap:
            return -(-self._heap[0][0] // self._tick)
        return None

    def _move_to(self, tick: int) -> None:
        """Set the current tick; nothing may be due strictly between the old one and it."""
        x = self._cur ^ tick
        self._cur = tick
        if not x:
            return
        level = (x.bit_length() - 1) // self._bits
        if level >= self._levels:
            top = tick >> self._total_bits
            heap = self._heap
            while heap:
                due, seq, key = heap[0]
                if (-(-due // self._tick)) >> self._total_bits != top:
                    break
                heapq.heappop(heap)
                node = self._index.get(key)
                if node is None or node[2] != _OVERFLOW or node[1] != seq:
                    self._stale -= 1
                    continue
                self._place(key, node, -(-due // self._tick))
            return
        digit = (tick >> (self._bits * level)) & self._mask
        slot = self._slots[level][digit]
        if not slot:
            return
        items = list(slot.items())
        slot.clear()
        self._bitmaps[level] &= ~(1 << digit)
        for k, node in items:
            self._place(k, node, -(-node[0] // self._tick))
