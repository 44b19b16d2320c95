"""serve's heap trimmer (issue 41): glibc's malloc_trim, called in a thread, on a timer."""

from __future__ import annotations

import asyncio
import sys

import pytest

from scheduler.cli import _runner


def test_malloc_trim_is_found_on_glibc_and_answers() -> None:
    trim = _runner._malloc_trim()
    if sys.platform == "linux":  # this project's servers and CI run on glibc Linux
        assert trim is not None
        assert trim() in (0, 1)  # 1: memory was given back, 0: there was none to give


def test_return_memory_trims_on_its_timer_until_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    third = asyncio.Event()

    def trim() -> None:
        calls.append(1)
        if len(calls) == 3:
            loop.call_soon_threadsafe(third.set)  # the trim runs in a thread

    monkeypatch.setattr(_runner, "_malloc_trim", lambda: trim)

    async def run() -> None:
        nonlocal loop
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(_runner.return_memory(0.01))
        await third.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    loop: asyncio.AbstractEventLoop
    asyncio.run(asyncio.wait_for(run(), 10))
    assert len(calls) >= 3


def test_return_memory_does_nothing_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runner, "_malloc_trim", lambda: None)
    asyncio.run(asyncio.wait_for(_runner.return_memory(0.01), 5))  # returns at once
