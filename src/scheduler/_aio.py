"""asyncio helpers shared by the engine and the worker SDK."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any

SLICE = 200
"""Items a long synchronous loop on the event loop handles between two yields (a submit
of 10,000 tasks decodes, admits, records and answers in slices of this many)."""


async def slices(n: int, size: int = SLICE) -> AsyncIterator[range]:
    """``range(n)`` in consecutive ranges of ``size``, yielding to the event loop before
    each but the first: a loop over thousands of items (a submit of 10,000 tasks) must
    not hold the loop, and the dispatch and completion rounds waiting on it, for tens
    of milliseconds."""
    for start in range(0, n, size):
        if start:
            await asyncio.sleep(0)
        yield range(start, min(n, start + size))


AGAIN_S = 0.5
"""How often :func:`cancel_and_wait` cancels a task again while it still runs."""


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel ``tasks`` (None entries are skipped) and wait until every one has ended,
    cancelling those still running again every :data:`AGAIN_S`; then raise the first
    exception one of them ended with (CancelledError aside), as awaiting each would.

    One cancel and an await are not enough on Python 3.11: a library can lose the
    cancel (redis-py's call and its timeout turn it into a TimeoutError, which a loop
    that outlives an outage catches), and the loop then waits for its next event for
    ever (seen in CI: ``RedisQuota.close()`` and ``Engine.stop()`` each hung 300 s).
    Cancelling again ends it at its next await.
    """
    todo = [t for t in tasks if t is not None]
    pending = {t for t in todo if not t.done()}
    for t in pending:
        t.cancel()
    while pending:
        _, pending = await asyncio.wait(pending, timeout=AGAIN_S)
        for t in pending:
            t.cancel()
    for t in todo:
        exc = None if t.cancelled() else t.exception()
        if exc is not None:
            raise exc


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
        """Cancel every running task and wait for them (their failures were logged)."""
        with contextlib.suppress(Exception):
            await cancel_and_wait(list(self._tasks))
