"""asyncio helpers shared by the engine and the worker SDK."""

from __future__ import annotations

import asyncio


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
