"""``wait_event``: a bounded wait on an event that never swallows a cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from scheduler._aio import wait_event


async def _ends_when_cancelled(wait: Callable[[asyncio.Event, float], Awaitable[object]]) -> bool:
    """A loop like the engine's: cancel it in the very turn its event is set."""
    event = asyncio.Event()

    async def loop() -> None:
        while True:
            event.clear()
            await wait(event, 10.0)

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    event.set()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=1.0)
    if not done:
        task.cancel()
        await asyncio.wait([task], timeout=1.0)
    return bool(done) and task.cancelled()


async def test_a_cancel_racing_the_event_ends_the_loop() -> None:
    # With ``asyncio.wait_for(event.wait(), 10)`` instead, this loop survives the cancel
    # on Python 3.11 (measured: it is still running a second later).
    assert await _ends_when_cancelled(wait_event)


async def test_it_reports_set_or_timed_out() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 0.01) is True
    assert await wait_event(event, None) is True


@pytest.mark.parametrize("timeout_s", [0.0, -1.0])
async def test_a_zero_or_past_timeout_returns_at_once(timeout_s: float) -> None:
    assert await wait_event(asyncio.Event(), timeout_s) is False
