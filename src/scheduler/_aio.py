"""asyncio helpers shared by the engine and the worker SDK."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
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


RESTART_S = 0.1
"""A supervised loop that died starts again after this, doubling per death in a row."""
RESTART_MAX_S = 5.0
"""The longest wait before a supervised loop starts again."""
HEALTHY_RUN_S = 60.0
"""A loop that ran this long before it died starts again after :data:`RESTART_S`."""


async def supervised(
    name: str,
    run: Callable[[], Coroutine[Any, Any, None]],
    log: logging.Logger,
    on_restart: Callable[[list[str]], object] | None = None,
) -> None:
    """Run the loop ``run()`` until it returns; start it again whenever it raises.

    A background loop that dies on an exception nobody expected (a store error in a
    call outside its own ``try``) must not leave the node up with the loop gone: that
    was the silent stall of issue 42, a dispatcher dead while the node kept its shards.
    Each death is logged with its traceback and counted (``on_restart([name])``, a
    ``Counter.update``); the wait
    before the next start doubles from :data:`RESTART_S` to :data:`RESTART_MAX_S`
    while the deaths come quickly. Cancellation ends it.
    """
    delay = RESTART_S
    while True:
        started = time.monotonic()
        try:
            await run()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            if time.monotonic() - started >= HEALTHY_RUN_S:
                delay = RESTART_S
            log.exception("engine: the %s loop died; starting it again in %.1f s", name, delay)
            if on_restart is not None:
                on_restart([name])
        await asyncio.sleep(delay)
        delay = min(RESTART_MAX_S, delay * 2)


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
