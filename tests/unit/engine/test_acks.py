"""The ack queue alone, on a fake flush: acks wait their linger and are written in one
call, a completion takes a queued ack, and no write of a task overtakes its ack. No
server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import pytest

from scheduler.engine._acks import AckQueue
from scheduler.types import FencedWrite, Outcome, TaskKey

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Flush:
    """Records each store call; answers ``outcomes[id]`` (default OK); may be held."""

    def __init__(self) -> None:
        self.calls: list[list[uuid.UUID]] = []
        self.outcomes: dict[uuid.UUID, Outcome] = {}
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, writes: Sequence[FencedWrite]) -> list[Outcome]:
        self.calls.append([w.key.id for w in writes])
        await self.gate.wait()
        return [self.outcomes.get(w.key.id, Outcome.OK) for w in writes]


def w(token: int = 1) -> FencedWrite:
    return FencedWrite(key=TaskKey(uuid.uuid4(), T0), token=token)


@pytest.fixture
def flush() -> Flush:
    return Flush()


async def queue(flush: Flush, linger_s: float, max_batch: int = 1000) -> AckQueue:
    q = AckQueue(flush, max_batch=max_batch, linger_s=linger_s)
    q.start()
    return q


@pytest.fixture
async def lingering(flush: Flush) -> AsyncIterator[AckQueue]:
    q = await queue(flush, linger_s=60.0)
    yield q
    await q.stop()


async def test_acks_wait_their_linger_and_go_in_one_call(flush: Flush) -> None:
    q = await queue(flush, linger_s=0.05)
    a, b = w(), w()
    fa, fb = q.submit([a], T0), q.submit([b], T0)
    await asyncio.sleep(0.01)
    assert flush.calls == []  # still lingering
    assert await fa == [Outcome.OK]
    assert await fb == [Outcome.OK]
    assert flush.calls == [[a.key.id, b.key.id]]
    await q.stop()


async def test_without_a_linger_an_ack_is_written_at_once(flush: Flush) -> None:
    q = await queue(flush, linger_s=0.0)
    a = w()
    assert await asyncio.wait_for(q.submit([a], T0), 1) == [Outcome.OK]
    assert flush.calls == [[a.key.id]]
    await q.stop()


async def test_a_completion_takes_a_queued_ack(flush: Flush, lingering: AckQueue) -> None:
    a, b = w(), w()
    fut = lingering.submit([a, b], T0)
    taken = lingering.take(a.key.id, a.token)
    assert taken is not None
    assert taken.at == T0
    assert lingering.take(a.key.id, a.token) is None  # once
    assert lingering.take(b.key.id, b.token + 1) is None  # another token: not this ack
    lingering.settle(taken, Outcome.OK)
    assert not fut.done()  # b is still queued
    await lingering.written([b.key.id], hurry=True)
    assert await fut == [Outcome.OK, Outcome.OK]
    assert flush.calls == [[b.key.id]]  # a was never written on its own
    assert lingering.folded == 1


async def test_a_refused_fold_answers_the_ack_with_the_refusal(
    flush: Flush, lingering: AckQueue
) -> None:
    a = w()
    fut = lingering.submit([a], T0)
    taken = lingering.take(a.key.id, a.token)
    assert taken is not None
    lingering.settle(taken, Outcome.STALE)
    assert await fut == [Outcome.STALE]
    assert lingering.folded == 0
    assert flush.calls == []


async def test_an_ack_put_back_is_written_alone_once(flush: Flush, lingering: AckQueue) -> None:
    a, b = w(), w()
    fa = lingering.submit([a], T0)
    taken = lingering.take(a.key.id, a.token)
    assert taken is not None
    lingering.put_back([taken])  # its completion was not written
    assert await asyncio.wait_for(fa, 1) == [Outcome.OK]
    assert flush.calls == [[a.key.id]]
    # Taken, passed over by a flush meanwhile, then put back: written once too.
    fb = lingering.submit([b], T0)
    taken = lingering.take(b.key.id, b.token)
    assert taken is not None
    await lingering.written([b.key.id], hurry=True)  # nothing queued of b: at once
    c = w()
    fc = lingering.submit([c], T0)
    await lingering.written([c.key.id], hurry=True)  # this flush passes b over
    assert await fc == [Outcome.OK]
    lingering.put_back([taken])
    assert await asyncio.wait_for(fb, 1) == [Outcome.OK]
    assert flush.calls == [[a.key.id], [c.key.id], [b.key.id]]


async def test_written_waits_for_an_ack_in_flight(flush: Flush, lingering: AckQueue) -> None:
    a = w()
    flush.gate.clear()
    fut = lingering.submit([a], T0)
    await lingering.written([uuid.uuid4()], hurry=True)  # nothing of that task: at once
    hurried = asyncio.create_task(lingering.written([a.key.id], hurry=True))
    for _ in range(100):
        if flush.calls:
            break
        await asyncio.sleep(0)
    assert flush.calls == [[a.key.id]]
    assert lingering.take(a.key.id, a.token) is None  # being written: not taken
    waiting = asyncio.create_task(lingering.written([a.key.id]))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    assert not hurried.done()
    flush.gate.set()
    await asyncio.wait_for(asyncio.gather(waiting, hurried), 1)
    assert await fut == [Outcome.OK]


async def test_stop_writes_what_is_queued(flush: Flush) -> None:
    q = await queue(flush, linger_s=60.0)
    a = w()
    fut = q.submit([a], T0)
    await asyncio.wait_for(q.stop(), 1)
    assert await fut == [Outcome.OK]
    await q.stop()  # twice is fine
    with pytest.raises(RuntimeError):
        q.submit([w()], T0)


async def test_over_twenty_batches_queued_the_oldest_go_at_once(flush: Flush) -> None:
    q = await queue(flush, linger_s=60.0, max_batch=2)
    writes = [w() for _ in range(41)]
    futs = [q.submit([x], T0) for x in writes]
    await asyncio.wait_for(asyncio.gather(*futs), 1)
    assert sum(len(c) for c in flush.calls) == 41
    assert all(len(c) <= 2 for c in flush.calls)
    await q.stop()


async def test_written_also_waits_for_an_ack_whose_write_began_while_it_waited() -> None:
    """A completion of tasks a and b waits for a's ack in flight; meanwhile the flusher
    starts writing b's queued ack. ``written`` must wait for that too: returning while
    b's ack is in flight let the completion (no ack left to take) overtake it, and
    the store refused it (seen in benchmarks/test_worker_handler.py: 16-84 tasks of
    20,000 re-run after their lease expired)."""
    gates = [asyncio.Event(), asyncio.Event()]
    calls: list[list[uuid.UUID]] = []

    async def flush(writes: Sequence[FencedWrite]) -> list[Outcome]:
        calls.append([x.key.id for x in writes])
        await gates[len(calls) - 1].wait()
        return [Outcome.OK] * len(writes)

    q = await queue(flush, linger_s=60.0)  # type: ignore[arg-type]
    a, b = w(), w()
    fa = q.submit([a], T0)
    hurried_a = asyncio.create_task(q.written([a.key.id], hurry=True))
    for _ in range(100):
        if calls:
            break
        await asyncio.sleep(0)
    assert calls == [[a.key.id]]  # a's ack in flight, held
    fb = q.submit([b], T0)
    completion = asyncio.create_task(q.written([a.key.id, b.key.id]))  # as complete() does
    hurried_b = asyncio.create_task(q.written([b.key.id], hurry=True))  # b goes next
    await asyncio.sleep(0)
    gates[0].set()
    for _ in range(100):
        if len(calls) == 2:
            break
        await asyncio.sleep(0)
    assert calls == [[a.key.id], [b.key.id]]  # b's ack in flight now, held
    await asyncio.sleep(0.01)
    assert not completion.done(), "returned while b's ack was still being written"
    assert q.take(b.key.id, b.token) is None
    gates[1].set()
    await asyncio.wait_for(asyncio.gather(completion, hurried_a, hurried_b), 1)
    assert await fa == [Outcome.OK]
    assert await fb == [Outcome.OK]
    await q.stop()
