"""The batcher and the ack queue hold a write that found no store and try it again
until the store is back (``engine/_batcher.py``): an outage loses no worker write."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from scheduler._errors import StoreError
from scheduler.engine import _batcher
from scheduler.engine._acks import AckQueue
from scheduler.engine._batcher import Batcher
from scheduler.engine._health import Beat
from scheduler.store import StoreUnavailable
from scheduler.types import FencedWrite, Outcome, TaskKey
from tests.support.waiting import eventually

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def answer(value: bool) -> bool:
    return value


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_batcher, "RETRY_S", 0.001)
    monkeypatch.setattr(_batcher, "RETRY_MAX_S", 0.002)


class Store:
    """Fails the first ``outage`` calls with StoreUnavailable, then answers."""

    def __init__(self, outage: int, error: Exception | None = None) -> None:
        self.outage = outage
        self.error = error or StoreUnavailable("PostgreSQL: ConnectionRefusedError")
        self.calls: list[list[int]] = []

    async def flush(self, items: Sequence[int]) -> list[int]:
        self.calls.append(list(items))
        if len(self.calls) <= self.outage:
            raise self.error
        return [i * 10 for i in items]


async def test_a_flush_that_found_no_store_is_tried_again_until_it_commits() -> None:
    store, beat = Store(outage=3), Beat("store")
    batcher = Batcher("complete", store.flush, beat=beat)
    batcher.start()
    try:
        assert await asyncio.wait_for(batcher.submit_many([1, 2]), 10) == [10, 20]
    finally:
        await batcher.stop()
    assert store.calls == [[1, 2]] * 4  # the same write, whole, until it landed
    assert not beat.failing
    assert beat.recovered_at > float("-inf")
    assert batcher.retry.held == 0


async def test_other_store_errors_still_fail_their_callers_at_once() -> None:
    store = Store(outage=1, error=StoreError("PostgreSQL: CheckViolationError"))
    batcher = Batcher("complete", store.flush)
    batcher.start()
    try:
        with pytest.raises(StoreError, match="CheckViolation"):
            await batcher.submit(1)
        assert await batcher.submit(2) == 20
    finally:
        await batcher.stop()


async def test_a_stop_during_an_outage_fails_the_held_writes_after_one_last_try() -> None:
    store = Store(outage=10**6)
    batcher = Batcher("complete", store.flush)
    batcher.start()
    pending = asyncio.ensure_future(batcher.submit(1))
    await eventually(lambda: answer(len(store.calls) >= 2), timeout_s=10)
    await batcher.stop()
    with pytest.raises(StoreUnavailable):
        await pending


async def test_an_ack_write_that_found_no_store_stays_in_flight_until_it_lands() -> None:
    calls: list[int] = []

    async def flush(writes: Sequence[FencedWrite]) -> list[Outcome]:
        calls.append(len(writes))
        if len(calls) <= 2:
            raise StoreUnavailable("PostgreSQL: CannotConnectNowError")
        return [Outcome.OK for _ in writes]

    beat = Beat("store")
    acks = AckQueue(flush, max_batch=100, linger_s=0.0, beat=beat)
    acks.start()
    key = TaskKey(uuid.uuid4(), T0)
    try:
        fut = acks.submit([FencedWrite(key=key, token=1)], T0)
        await asyncio.wait_for(acks.written([key.id], hurry=True), 10)
        assert await fut == [Outcome.OK]
    finally:
        await acks.stop()
    assert calls == [1, 1, 1]
    assert not beat.failing


async def test_a_linger_gathers_the_callers_of_a_few_milliseconds_into_one_flush() -> None:
    """In a steady stream completions come a few at a time: with a linger, those that
    arrive within it of the oldest go in one store call, and a lone one waits the
    linger at most."""
    store = Store(outage=0)
    batcher = Batcher("complete", store.flush, linger_s=0.05)
    batcher.start()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        first = asyncio.ensure_future(batcher.submit_many([1]))
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(batcher.submit_many([2, 3]))
        assert await asyncio.wait_for(asyncio.gather(first, second), 10) == [[10], [20, 30]]
        assert store.calls == [[1, 2, 3]]  # one store call for both callers
        assert loop.time() - started >= 0.05
        started = loop.time()
        assert await asyncio.wait_for(batcher.submit(4), 10) == 40  # a lone one
        assert 0.05 <= loop.time() - started < 5
    finally:
        await batcher.stop()


async def test_a_full_batch_and_a_stop_do_not_wait_for_the_linger() -> None:
    store = Store(outage=0)
    batcher = Batcher("complete", store.flush, max_batch=3, linger_s=3600.0)
    batcher.start()
    assert await asyncio.wait_for(batcher.submit_many([1, 2, 3]), 10) == [10, 20, 30]
    lone = asyncio.ensure_future(batcher.submit(4))
    await asyncio.sleep(0.01)
    assert not lone.done()  # lingering
    await asyncio.wait_for(batcher.stop(), 10)
    assert await lone == 40
    assert store.calls == [[1, 2, 3], [4]]
