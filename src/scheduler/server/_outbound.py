"""What one worker stream writes next: Results, notices and pushed assignments, in order.

Owns :class:`Outbound`, the queue between a stream's producers (the session's events,
the Results of the worker's writes, the end of the stream) and the gRPC write loop.
Pushed assignments that wait in it behind an unfinished write are merged into one
``Assignments`` message: gRPC writes one message at a time, so while one is on its
way, every batch the session delivers joins the next one. Used by the worker service
(``scheduler.server._worker``).

Why: delivery pushes what is due at each tick, and a steady stream of distinct due
times makes a push of one or two tasks per tick. Written one message each, the pushes
(and the ack and Result each one causes) cost more per task the faster they come, and
fell behind at 5,000 fires/s (docs/benchmarks.md, "Pushes merged while a write is on
its way"). Merged, a push waits for nothing it would not have waited for anyway: the
write ahead of it.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Generic, TypeVar

from scheduler.types import Assignment

MAX_MERGED = 1000
"""Most assignments one merged push holds (a bound on the message's size)."""

T = TypeVar("T")


class Pushes(list[Assignment]):
    """Assignments merged into one push, in the order they were delivered."""

    __slots__ = ()


class Outbound(Generic[T]):
    """A FIFO of outbound items where consecutive pushes waiting merge (up to
    :data:`MAX_MERGED` assignments a message). Anything else put between two pushes
    (a cancel notice, a Result) keeps them apart, so the order the worker sees is the
    order things happened: a cancel notice still follows the push of its task."""

    __slots__ = ("_items", "_ready")

    def __init__(self) -> None:
        self._items: collections.deque[T | Pushes] = collections.deque()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> None:
        """Queue ``item`` (never merged with anything)."""
        self._items.append(item)
        self._ready.set()

    def push(self, assignments: Sequence[Assignment]) -> None:
        """Queue ``assignments`` for the worker, joining the push that waits last in the
        queue if nothing was queued after it and it has room."""
        items = self._items
        last = items[-1] if items else None
        if type(last) is Pushes and len(last) + len(assignments) <= MAX_MERGED:
            last.extend(assignments)
            return
        items.append(Pushes(assignments))
        self._ready.set()

    async def get(self) -> T | Pushes:
        """The next item, waiting for one."""
        items = self._items
        while not items:
            self._ready.clear()
            await self._ready.wait()
        return items.popleft()
