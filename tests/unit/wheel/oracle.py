"""The heap oracle the wheels are checked against: obviously right, not fast."""

from __future__ import annotations

import heapq


class HeapOracle:
    """A timer set on a binary heap with lazy cancellation, ordered by ``(due_ms, seq)``."""

    def __init__(self, *, tick_ms: int = 1, start_ms: int = 0) -> None:
        self.tick_ms = tick_ms
        self.cur = start_ms // tick_ms
        self.seq = 0
        self.live: dict[int, tuple[int, int]] = {}
        self.heap: list[tuple[int, int, int]] = []

    def __len__(self) -> int:
        return len(self.live)

    def __contains__(self, key: int) -> bool:
        return key in self.live

    def add(self, key: int, due_ms: int) -> None:
        assert key not in self.live
        self.live[key] = (due_ms, self.seq)
        heapq.heappush(self.heap, (due_ms, self.seq, key))
        self.seq += 1

    def cancel(self, key: int) -> bool:
        return self.live.pop(key, None) is not None

    def reschedule(self, key: int, due_ms: int) -> None:
        del self.live[key]
        self.add(key, due_ms)

    def clear(self) -> None:
        self.live.clear()
        self.heap.clear()

    def advance(self, now_ms: int) -> list[int]:
        self.cur = max(self.cur, now_ms // self.tick_ms)
        fired = []
        while self.heap:
            due, seq, key = self.heap[0]
            if self.live.get(key) != (due, seq):
                heapq.heappop(self.heap)
                continue
            if -(-due // self.tick_ms) > self.cur:
                break
            heapq.heappop(self.heap)
            del self.live[key]
            fired.append(key)
        return fired

    def next_due_ms(self) -> int | None:
        return min((due for due, _ in self.live.values()), default=None)
