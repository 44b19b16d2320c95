"""Group commit: many concurrent callers, one batched store call.

Callers ``await batcher.submit(item)``; a single named flusher task takes everything
queued so far (up to ``max_batch``), makes one call to the batch function and hands
each caller its own result. While a flush is in flight, new items pile up for the
next one, so the batch size grows with load and a quiet system still answers at once.
With a ``linger_s`` the flusher waits until the oldest queued item is that old (or a
full batch is queued) before it flushes: in a steady stream the callers come a few at a
time, each flush is a store call (a round trip and a transaction), and a few
milliseconds gather several of them into one; a lone item waits ``linger_s`` at most.

A flush that finds no store (:class:`~scheduler._errors.StoreUnavailable`) is not
answered with the error: its items stay first in line and are flushed again, after
``RETRY_S`` doubling to ``RETRY_MAX_S``, until the store is back or the batcher stops.
A worker's completion that reached the node during a store outage is committed when
the store returns, before the reaper may act on its lease (issue 42: an outage used
to run finished tasks again). A fenced write is safe to repeat: one whose first try
did commit (the answer was lost with the connection) is refused as stale, never
applied twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from scheduler.engine._health import Beat
from scheduler.store import StoreUnavailable

RETRY_S = 0.05
"""The first wait before a flush that found no store is tried again."""
RETRY_MAX_S = 0.25
"""The longest wait between two tries of a flush while the store is away: the held
writes land within this of PostgreSQL answering again (a try that finds no server
costs one refused connect)."""

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("tickwheel.engine")


class OutageRetry:
    """The tries of a write that found no store: wait, then the same write again,
    until it commits or the writer stops (the last try is the one after the stop)."""

    def __init__(self, name: str, beat: Beat | None) -> None:
        self._name = name
        self._beat = beat
        self._wait_s = RETRY_S
        self._stopped = asyncio.Event()
        self.held = 0
        """Items held through the outage right now (0: the last write committed)."""

    def stop(self) -> None:
        """The next failure is final (the writer is stopping)."""
        self._stopped.set()

    def ok(self) -> None:
        """A write committed: the store is back."""
        if self._beat is not None:
            self._beat.ok()
        if self.held:
            log.warning("store back: %d held %s writes committed", self.held, self._name)
        self._wait_s = RETRY_S
        self.held = 0

    async def failed(self, exc: StoreUnavailable, n: int) -> bool:
        """A write of ``n`` items found no store: whether to try it again (after a
        wait) rather than fail it."""
        if self._beat is not None:
            self._beat.failed(exc)
        if self._stopped.is_set():
            return False
        if self.held == 0:
            log.warning(
                "store unavailable (%s): holding %d %s writes, trying again until it is back",
                exc,
                n,
                self._name,
            )
        self.held = n
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._wait_s):
                await self._stopped.wait()
        self._wait_s = min(RETRY_MAX_S, self._wait_s * 2)
        return True


class Batcher(Generic[T, R]):
    """Coalesces ``submit`` calls into calls of ``flush(items) -> results``."""

    def __init__(
        self,
        name: str,
        flush: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        *,
        max_batch: int = 1000,
        beat: Beat | None = None,
        linger_s: float = 0.0,
    ) -> None:
        self._name = name
        self._flush = flush
        self._max_batch = max_batch
        self._linger_s = linger_s
        """How long the oldest queued item may wait for others (0: flush at once)."""
        self._queued = 0
        """Items queued (not yet taken by a flush)."""
        self._full = asyncio.Event()
        """A full batch is queued (or the batcher stops): flush without lingering."""
        self.retry = OutageRetry(name, beat)
        """Waits between the tries of a flush that found no store."""
        self._pending: collections.deque[tuple[Sequence[T], asyncio.Future[list[R]], float]] = (
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
        self.retry.stop()
        task, self._task = self._task, None
        if task is None:
            return
        self._wakeup.set()
        self._full.set()
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
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[R]] = loop.create_future()
        self._pending.append((items, fut, loop.time() if self._linger_s > 0 else 0.0))
        self._queued += len(items)
        if self._queued >= self._max_batch:
            self._full.set()
        self._wakeup.set()
        return await fut

    async def _linger(self) -> None:
        """Wait until the oldest queued item has waited ``linger_s``, a full batch is
        queued or the batcher stops."""
        left = self._pending[0][2] + self._linger_s - asyncio.get_running_loop().time()
        if left <= 0 or self._closed or self._queued >= self._max_batch:
            return
        self._full.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(left):
                await self._full.wait()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                if self._linger_s > 0:
                    await self._linger()
                groups: list[tuple[Sequence[T], asyncio.Future[list[R]], float]] = []
                size = 0
                while self._pending and (
                    not groups or size + len(self._pending[0][0]) <= self._max_batch
                ):
                    group = self._pending.popleft()
                    groups.append(group)
                    size += len(group[0])
                self._queued -= size
                batch = [item for items, _, _ in groups for item in items]
                try:
                    results = await self._flush(batch)
                except asyncio.CancelledError:
                    for _, fut, _ in groups:
                        fut.cancel()
                    raise
                except StoreUnavailable as exc:
                    if await self.retry.failed(exc, len(batch)):
                        self._pending.extendleft(reversed(groups))  # first in line again
                        self._queued += size
                        continue
                    for _, fut, _ in groups:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                except Exception as exc:
                    for _, fut, _ in groups:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                self.retry.ok()
                offset = 0
                for items, fut, _ in groups:
                    n = len(items)
                    if not fut.done():
                        fut.set_result(list(results[offset : offset + n]))
                    offset += n
            if self._closed:
                return
