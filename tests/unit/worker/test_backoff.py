"""Issue 40, item 10: a worker pointed at a dead server backs off its log too (the
WARNING for the 1st, 2nd, 4th ... 64th failure in a row, then every 64th), instead of
one WARNING and one INFO line per attempt forever."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scheduler.worker import ReconnectConfig, TaskContext, Worker
from scheduler.worker._backoff import loud_failure
from tests.support.servers import free_port
from tests.support.waiting import eventually


def test_loud_failures_are_powers_of_two_then_every_64th() -> None:
    loud = [n for n in range(1, 300) if loud_failure(n)]
    assert loud == [1, 2, 4, 8, 16, 32, 64, 128, 192, 256]
    assert not loud_failure(0)


async def _handler(ctx: TaskContext) -> dict[str, int]:
    return {}


async def test_a_worker_at_a_dead_server_warns_rarely(caplog: pytest.LogCaptureFixture) -> None:
    worker = Worker(
        f"127.0.0.1:{free_port()}",  # nothing listens there
        api_key="k",
        handlers={"t": _handler},
        reconnect=ReconnectConfig(initial_backoff_s=0.001, max_backoff_s=0.001),
    )

    async def reconnects() -> int:
        return worker.reconnects

    with caplog.at_level(logging.DEBUG, logger="tickwheel.worker"):
        run = asyncio.create_task(worker.run(), name="dead-server-worker")
        try:
            await eventually(reconnects, until=lambda n: n >= 100)
        finally:
            await worker.shutdown(grace_s=1)
            await run
    broke = [r for r in caplog.records if "stream broke" in r.getMessage()]
    attempts = len(broke)
    assert attempts >= 100
    loud = [r for r in broke if r.levelno == logging.WARNING]
    assert len(loud) == sum(1 for n in range(1, attempts + 1) if loud_failure(n))
    assert "failures in a row; the rest are logged at DEBUG" in loud[-1].getMessage()
    reconnecting = [r for r in caplog.records if "reconnecting to" in r.getMessage()]
    assert sum(r.levelno == logging.INFO for r in reconnecting) <= len(loud) + 1
