"""The count cache's policy (SwrCache) on a fake clock: single-flight, stale while
revalidate, the hard max age, the LRU bound, failures; and the Watch key (the filter
with only what changes a count)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from scheduler.engine import EngineConfig
from scheduler.engine._count_cache import SwrCache
from scheduler.engine._watch import Watch
from scheduler.types import Pool, TaskCounts, TaskFilter, TaskOrder, TaskState


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Source:
    """A loader whose loads finish when the test says so; each returns (key, n-th load)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gates: list[asyncio.Event] = []
        self.fail: Exception | None = None

    async def __call__(self, key: str) -> tuple[str, int]:
        self.calls.append(key)
        n = len(self.calls)
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        if self.fail is not None:
            raise self.fail
        return key, n

    def release(self) -> None:
        for g in self.gates:
            g.set()


def cache(src: Source, clock: Clock, *, max_keys: int = 1000) -> SwrCache[str, tuple[str, int]]:
    return SwrCache(src, ttl_s=5.0, max_age_s=60.0, max_keys=max_keys, clock=clock)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_callers_share_one_load() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    waiting = [asyncio.ensure_future(c.get("a")) for _ in range(10)]
    await settle()
    assert src.calls == ["a"]
    src.release()
    assert await asyncio.gather(*waiting) == [("a", 1)] * 10
    assert c.loads == 1


async def test_fresh_value_is_served_without_a_load() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    src.release()
    first = asyncio.ensure_future(c.get("a"))
    await settle()
    src.release()
    assert await first == ("a", 1)
    clock.t += 4.9
    assert await c.get("a") == ("a", 1)
    assert src.calls == ["a"]


async def test_stale_value_is_served_at_once_and_refreshed_once_in_background() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    first = asyncio.ensure_future(c.get("a"))
    await settle()
    src.release()
    await first
    clock.t += 5.0
    # Stale (past the TTL, within the hard max): answered at once, no waiting.
    assert await c.get("a") == ("a", 1)
    assert await c.get("a") == ("a", 1)
    await settle()
    assert src.calls == ["a", "a"]  # one refresh for both
    src.release()
    await settle()
    assert await c.get("a") == ("a", 2)
    assert c.loads == 2


async def test_value_older_than_the_hard_max_waits_for_a_fresh_one() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    first = asyncio.ensure_future(c.get("a"))
    await settle()
    src.release()
    await first
    clock.t += 60.0
    late = asyncio.ensure_future(c.get("a"))
    also = asyncio.ensure_future(c.get("a"))
    await settle()
    assert not late.done()
    assert src.calls == ["a", "a"]
    src.release()
    assert await late == ("a", 2)
    assert await also == ("a", 2)


async def test_age_counts_from_when_the_load_started() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    first = asyncio.ensure_future(c.get("a"))
    await settle()
    clock.t += 4.0  # the load takes 4 s
    src.release()
    await first
    clock.t += 1.0  # 5 s since it started: stale
    assert await c.get("a") == ("a", 1)
    await settle()
    assert len(src.calls) == 2


async def test_keys_are_bounded_least_recently_used_first() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock, max_keys=2)
    for key in ("a", "b"):
        t = asyncio.ensure_future(c.get(key))
        await settle()
        src.release()
        await t
    await c.get("a")  # a is now the most recently used
    t = asyncio.ensure_future(c.get("c"))
    await settle()
    src.release()
    await t
    assert len(c) == 2
    assert await c.get("a") == ("a", 1)  # kept
    b = asyncio.ensure_future(c.get("b"))  # dropped: loaded again
    await settle()
    assert src.calls == ["a", "b", "c", "b"]
    src.release()
    assert await b == ("b", 4)


async def test_a_failed_load_reaches_its_waiters_and_is_not_kept() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    src.fail = RuntimeError("store down")
    waiting = [asyncio.ensure_future(c.get("a")) for _ in range(3)]
    await settle()
    src.release()
    for w in waiting:
        with pytest.raises(RuntimeError, match="store down"):
            await w
    assert len(c) == 0
    src.fail = None
    again = asyncio.ensure_future(c.get("a"))
    await settle()
    src.release()
    assert await again == ("a", 2)


async def test_a_failed_refresh_keeps_the_old_value_until_the_hard_max() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    first = asyncio.ensure_future(c.get("a"))
    await settle()
    src.release()
    await first
    clock.t += 10.0
    src.fail = RuntimeError("blip")
    assert await c.get("a") == ("a", 1)
    await settle()
    src.release()
    await settle()
    assert await c.get("a") == ("a", 1)  # still served (10 s < 60 s), a new refresh runs
    await settle()
    assert len(src.calls) == 3


async def test_a_cancelled_waiter_does_not_cancel_the_shared_load() -> None:
    src, clock = Source(), Clock()
    c = cache(src, clock)
    gone = asyncio.ensure_future(c.get("a"))
    stays = asyncio.ensure_future(c.get("a"))
    await settle()
    gone.cancel()
    await settle()
    src.release()
    assert await stays == ("a", 1)


async def test_ttl_zero_loads_every_time() -> None:
    src, clock = Source(), Clock()
    c: SwrCache[str, tuple[str, int]] = SwrCache(
        src, ttl_s=0, max_age_s=60, max_keys=10, clock=clock
    )
    for n in (1, 2):
        t = asyncio.ensure_future(c.get("a"))
        await settle()
        src.release()
        assert await t == ("a", n)


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        SwrCache(Source(), ttl_s=10, max_age_s=5, max_keys=1)
    with pytest.raises(ValueError, match="max_keys"):
        SwrCache(Source(), ttl_s=1, max_age_s=5, max_keys=0)
    with pytest.raises(ValueError, match="count_cache_ttl_s"):
        EngineConfig(count_cache_ttl_s=61)


class CountingStore:
    def __init__(self) -> None:
        self.asked: list[tuple[uuid.UUID | None, TaskFilter]] = []

    async def count_tasks(self, tenant_id: uuid.UUID | None, flt: TaskFilter) -> TaskCounts:
        self.asked.append((tenant_id, flt))
        return TaskCounts(groups=(), total=len(self.asked), truncated=False)


async def test_watch_keys_by_tenant_and_what_changes_a_count() -> None:
    store = CountingStore()
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    watch = Watch(store, None, EngineConfig(), lambda: now, clock=Clock())  # type: ignore[arg-type]
    tenant = uuid.uuid4()
    one = TaskFilter(statuses=[TaskState.SCHEDULED, TaskState.RETRYING], pools=[Pool.BULK])
    same = TaskFilter(
        statuses=(TaskState.RETRYING, TaskState.SCHEDULED, TaskState.RETRYING),
        pools=(Pool.BULK,),
        order=TaskOrder.CREATED_DESC,
    )
    first = await watch.count_tasks(tenant, one)
    assert first.as_of == now
    assert (await watch.count_tasks(tenant, same)).counts.total == 1
    assert (await watch.count_tasks(None, one)).counts.total == 2  # every tenant: its own
    assert (await watch.count_tasks(tenant, TaskFilter())).counts.total == 3
    assert len(store.asked) == 3
