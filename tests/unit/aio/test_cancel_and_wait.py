"""cancel_and_wait: a stop that ends its loops even when a library lost a cancel."""

from __future__ import annotations

import asyncio

import pytest

from scheduler import _aio
from scheduler._aio import cancel_and_wait


async def test_a_loop_whose_first_cancel_came_out_as_a_timeout_still_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What redis-py did under a stalling server on Python 3.11 (CI hung 300 s): the
    # cancel comes out of the call as a TimeoutError, the loop takes it for an outage
    # and waits for its next event, which never comes.
    monkeypatch.setattr(_aio, "AGAIN_S", 0.01)
    in_call, outages = asyncio.Event(), []
    never = asyncio.Event()

    async def loop() -> None:
        while True:
            try:
                in_call.set()
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    raise TimeoutError from None
            except TimeoutError:
                outages.append(1)
            await never.wait()

    task = asyncio.create_task(loop())
    await in_call.wait()
    await asyncio.wait_for(cancel_and_wait([task, None]), 5)
    assert task.cancelled()
    assert outages == [1]


async def test_the_first_failure_is_raised_once_every_task_has_ended() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    async def runs() -> None:
        await asyncio.sleep(60)

    failed, running = asyncio.create_task(fails()), asyncio.create_task(runs())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="boom"):
        await cancel_and_wait([failed, running])
    assert running.cancelled()


async def test_nothing_to_wait_for() -> None:
    await cancel_and_wait([None])
    await cancel_and_wait([])
