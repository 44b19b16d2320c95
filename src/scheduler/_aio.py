"""asyncio helpers shared by the engine and the worker SDK."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any


async def wait_event(event: asyncio.Event, timeout_s: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` passes (None: no limit); whether it
    was set.

    ``asyncio.wait_for(event.wait(), t)`` on Python 3.11 can swallow a cancellation that
    arrives just as the event is set (CPython gh-86296): a loop built on it then never
    ends and ``Engine.stop()`` waits for ever. ``asyncio.timeout`` has no such race.
    """
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


class Background:
    """Named fire-and-forget tasks whose failures are logged, cancelled together.

    For the engine's off-the-hot-path work (index mirroring, background loads): a
    failure is logged with what it was, never lost silently, and :meth:`cancel_all`
    ends every task still running (safe twice).
    """

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``coro`` as task ``tickwheel-<what>``."""

        async def run() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                self._log.exception("background %s failed", what)

        task = asyncio.create_task(run(), name=f"tickwheel-{what}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel_all(self) -> None:
        """Cancel every running task and wait for them."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
