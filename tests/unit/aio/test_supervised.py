"""``supervised``: a background loop that dies is started again, never left dead."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scheduler import _aio
from scheduler._aio import supervised

log = logging.getLogger("test")


async def test_a_loop_that_dies_is_started_again_until_it_returns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_aio, "RESTART_S", 0.001)
    runs: list[int] = []
    restarts: list[str] = []

    async def loop() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise RuntimeError(f"death {len(runs)}")

    with caplog.at_level(logging.ERROR, logger="test"):
        await asyncio.wait_for(supervised("dispatcher", loop, log, restarts.extend), 10)
    assert runs == [0, 1, 2]
    assert restarts == ["dispatcher", "dispatcher"]
    deaths = [r for r in caplog.records if "the dispatcher loop died" in r.getMessage()]
    assert len(deaths) == 2
    assert all(r.exc_info is not None for r in deaths)  # the traceback is kept


async def test_cancelling_a_supervised_loop_ends_it() -> None:
    started = asyncio.Event()

    async def loop() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(supervised("loop", loop, log))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_wait_before_a_restart_doubles_up_to_its_ceiling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(_aio.asyncio, "sleep", sleep)
    deaths = 0

    async def loop() -> None:
        nonlocal deaths
        deaths += 1
        if deaths <= 8:
            raise RuntimeError("again")

    await supervised("loop", loop, log)
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
