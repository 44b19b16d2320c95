"""Group commit: many concurrent callers, one batched store call.

Callers ``await batcher.submit(item)``; a single named flusher task takes everything
queued so far (up to ``max_batch``), makes one call to the batch function and hands
each caller its own result. While a flush is in flight, new items pile up for the
next one, so the batch size grows with load and a quiet system still answers at once.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("tickwheel.engine")


class Batcher(Generic[T, R]):
    """Coalesces ``submit`` calls into calls of ``flush(items) -> results``."""

    def __init__(
        self,
        name: str,
        flush: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        *,
        max_batch: int = 1000,
    ) -> None:
        self._name = name
        self._flush = flush
        self._max_batch = max_batch
        self._pending: collections.deque[tuple[Sequence[T], asyncio.Future[list[R]]]] = (
            collections.deque()
        )
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        """Start the flusher; idempotent."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"tickwheel-batcher-{self._name}")

    async def stop(self) -> None:
        """Flush what is queued, then stop; safe twice or before start."""
        self._closed = True
        task, self._task = self._task, None
        if task is None:
            return
        self._wakeup.set()
        await task

    async def submit(self, item: T) -> R:
        """Queue one item and wait for its result."""
        return (await self.submit_many([item]))[0]

    async def submit_many(self, items: Sequence[T]) -> list[R]:
        """Queue several items and wait for their results, in order.

        One future per call, not per item: a call's items ride in one flush (a call
        larger than ``max_batch`` is flushed alone).
        """
        if self._closed or self._task is None:
            raise RuntimeError(f"batcher {self._name} is not running")
        if not items:
            return []
        fut: asyncio.Future[list[R]] = asyncio.get_running_loop().create_future()
        self._pending.append((items, fut))
        self._wakeup.set()
        return await fut

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                groups: list[tuple[Sequence[T], asyncio.Future[list[R]]]] = []
                size = 0
                while self._pending and (
                    not groups or size + len(self._pending[0][0]) <= self._max_batch
                ):
                    group = self._pending.popleft()
                    groups.append(group)
                    size += len(group[0])
                batch = [item for items, _ in groups for item in items]
                try:
                    results = await self._flush(batch)
                except asyncio.CancelledError:
                    for _, fut in groups:
                        fut.cancel()
                    raise
                except Exception as exc:
                    for _, fut in groups:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                offset = 0
                for items, fut in groups:
                    n = len(items)
                    if not fut.done():
                        fut.set_result(list(results[offset : offset + n]))
                    offset += n
            if self._closed:
                return
