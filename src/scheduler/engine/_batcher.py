"""Group commit: many concurrent callers, one batched store call.

Callers ``await batcher.submit(item)``; a single named flusher task takes everything
queued so far (up to ``max_batch``), makes one call to the batch function and hands
each caller its own result. While a flush is in flight, new items pile up for the
next one, so the batch size grows with load and a quiet system still answers at once.
"""

from __future__ import annotations

import asyncio
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
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
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
        """Queue several items (they may be split across flushes) and wait for all."""
        if self._closed or self._task is None:
            raise RuntimeError(f"batcher {self._name} is not running")
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures, strict=True))
        self._wakeup.set()
        return list(await asyncio.gather(*futures))

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                try:
                    results = await self._flush([item for item, _ in batch])
                except asyncio.CancelledError:
                    for _, fut in batch:
                        if not fut.done():
                            fut.cancel()
                    raise
                except Exception as exc:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for (_, fut), result in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(result)
            if self._closed:
                return
