"""The index mirror built alone over the in-memory time index (no Redis).

Its writes run in the background; each test lets them finish by awaiting the
``tickwheel-*`` tasks the background group spawned (no sleeps).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._aio import Background
from scheduler.engine import EngineConfig
from scheduler.engine._index_mirror import IndexMirror
from scheduler.engine._stats import EngineStats
from scheduler.engine._timeline import to_ms
from scheduler.index import IndexUnavailable, MemoryTimeIndex
from scheduler.types import Pool, Preloaded, TaskKey

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANT = uuid.UUID(int=7)


class CountingIndex(MemoryTimeIndex):
    """The memory index; records every ``remove_many`` and fails the shards it is told."""

    def __init__(self, failing: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.failing = failing
        self.remove_calls: list[dict[int, set[uuid.UUID]]] = []

    def _fail(self, shard: int) -> None:
        if shard in self.failing:
            raise IndexUnavailable(shard, "test outage")

    async def add(self, shard: int, items: Sequence[Preloaded]) -> None:
        self._fail(shard)
        await super().add(shard, items)

    async def pop_due(self, shard: int, now_ms: int, limit: int) -> list[Preloaded]:
        self._fail(shard)
        return await super().pop_due(shard, now_ms, limit)

    async def replace(self, shard: int, items: Sequence[Preloaded]) -> None:
        self._fail(shard)
        await super().replace(shard, items)

    async def remove_many(self, removals: Mapping[int, Sequence[uuid.UUID]]) -> int:
        self.remove_calls.append({s: set(ids) for s, ids in removals.items()})
        return await super().remove_many(removals)


def preloaded(at_ms: int, shard: int = 1) -> Preloaded:
    due = T0 + timedelta(milliseconds=at_ms)
    return Preloaded(
        key=TaskKey(uuid.uuid4(), due),
        due_at=due,
        tenant_id=TENANT,
        shard_id=shard,
        pool=Pool.STANDARD,
        type="t",
    )


async def settle() -> None:
    """Let every background write the mirror spawned run to its end."""
    while tasks := [
        t for t in asyncio.all_tasks() if t.get_name().startswith("tickwheel-") and not t.done()
    ]:
        await asyncio.gather(*tasks)


def mirror(
    index: MemoryTimeIndex | None, config: EngineConfig | None = None
) -> tuple[IndexMirror, EngineStats, list[int]]:
    stats = EngineStats()
    wakes: list[int] = []
    m = IndexMirror(
        index,
        config or EngineConfig(index_flush_ms=1),
        stats,
        Background(logging.getLogger("test")),
        lambda: wakes.append(1),
    )
    return m, stats, wakes


async def seeded(*shards: int, failing: frozenset[int] = frozenset()) -> CountingIndex:
    index = CountingIndex()
    for shard in shards:
        await index.replace(shard, [])
    index.failing = failing
    return index


async def test_without_an_index_every_call_is_a_no_op() -> None:
    m, _, _ = mirror(None)
    assert not m.enabled
    m.add([preloaded(0)])
    m.remove([preloaded(0).key], [1])
    m.rebuild({1: [preloaded(0)]})
    assert m.rebuilding == set()
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("tickwheel-")] == []


async def test_add_mirrors_tasks_into_their_shards_index() -> None:
    index = await seeded(1, 2)
    m, _, _ = mirror(index)
    a, b, c = preloaded(20, shard=1), preloaded(10, shard=1), preloaded(5, shard=2)
    m.add([a, b, c])
    await settle()
    assert await index.load(1) == [b, a]
    assert await index.load(2) == [c]


async def test_removals_gather_and_are_flushed_in_one_call() -> None:
    index = await seeded(1, 2)
    m, _, _ = mirror(index)
    a, b, c = preloaded(0, shard=1), preloaded(1, shard=1), preloaded(2, shard=2)
    m.add([a, b, c])
    await settle()
    # Two dispatch rounds' removals, before the flush interval has run out.
    m.remove([a.key], [1])
    m.remove([b.key, c.key], [1, 2])
    assert index.remove_calls == []  # not sent inline: they wait index_flush_ms
    await settle()
    assert index.remove_calls == [{1: {a.key.id, b.key.id}, 2: {c.key.id}}]
    assert await index.count(1) == 0
    assert await index.count(2) == 0
    # The next removal starts a new flush.
    m.add([a])
    await settle()
    m.remove([a.key], [1])
    await settle()
    assert len(index.remove_calls) == 2


async def test_a_later_add_undoes_a_removal_still_waiting() -> None:
    index = await seeded(1)
    m, _, _ = mirror(index)
    a, b = preloaded(0), preloaded(1)
    m.add([a, b])
    await settle()
    m.remove([a.key, b.key], [1, 1])
    m.add([a])  # released and PRELOADED again before the flush
    await settle()
    assert index.remove_calls == [{1: {b.key.id}}]
    assert await index.load(1) == [a]


async def test_spill_keeps_tasks_in_the_index_and_marks_the_shard() -> None:
    index = await seeded(1, 2)
    m, stats, wakes = mirror(index)
    back: list[Preloaded] = []
    a, b = preloaded(0, shard=1), preloaded(1, shard=2)
    m.spill([a, b], back.extend)
    await settle()
    assert back == []
    assert m.spilled == {1, 2}
    assert stats.spilled == 2
    assert await index.load(1) == [a]
    assert await index.load(2) == [b]
    assert wakes  # the dispatcher looks at the index now


async def test_spill_falls_back_to_the_wheel_when_the_index_fails() -> None:
    index = await seeded(1, 2, failing=frozenset({2}))
    m, stats, wakes = mirror(index)
    back: list[Preloaded] = []
    ok, failed = preloaded(0, shard=1), preloaded(1, shard=2)
    m.spill([ok, failed], back.extend)
    await settle()
    assert back == [failed]
    assert m.spilled == {1}
    assert stats.spilled == 1
    # A shard whose index was never seeded (flushed) cannot take them either.
    m.spill([preloaded(2, shard=3)], back.extend)
    await settle()
    assert [p.shard_id for p in back] == [2, 3]
    assert m.spilled == {1}
    assert wakes


async def test_pop_due_returns_due_spilled_tasks_and_forgets_empty_shards() -> None:
    index = await seeded(1)
    m, _, _ = mirror(index)
    early, late = preloaded(10), preloaded(100)
    m.spill([early, late], lambda _items: None)
    await settle()
    assert await m.pop_due(to_ms(T0) + 50) == ([early], [])
    assert m.spilled == {1}
    assert await m.pop_due(to_ms(T0) + 500) == ([late], [])
    assert m.spilled == {1}  # popped its last task in this call: looked at next time
    assert await m.pop_due(to_ms(T0) + 500) == ([], [])
    assert m.spilled == set()


async def test_pop_due_reports_a_failing_shard_and_stops_looking_at_it() -> None:
    index = await seeded(1, 2)
    m, _, _ = mirror(index)
    a, b = preloaded(0, shard=1), preloaded(0, shard=2)
    m.spill([a, b], lambda _items: None)
    await settle()
    index.failing = frozenset({2})
    assert await m.pop_due(to_ms(T0) + 10) == ([a], [2])
    assert 2 not in m.spilled


async def test_rebuild_marks_shards_rebuilding_until_it_is_done() -> None:
    index = CountingIndex()
    m, _, _ = mirror(index)
    a, b = preloaded(0, shard=1), preloaded(0, shard=2)
    m.rebuild({1: [a], 2: [b]})
    assert m.rebuilding == {1, 2}
    await settle()
    assert m.rebuilding == set()
    assert await index.load(1) == [a]
    assert await index.load(2) == [b]


async def test_a_failed_rebuild_still_ends_the_rebuilding_mark() -> None:
    index = CountingIndex(failing=frozenset({1}))
    m, _, _ = mirror(index)
    m.rebuild({1: [preloaded(0, shard=1)], 2: []})
    assert m.rebuilding == {1, 2}
    await settle()
    assert m.rebuilding == set()


async def test_the_index_round_finds_lost_shards_once_and_counts_their_rebuild(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = await seeded(1, 2, 3)
    m, stats, _ = mirror(index)
    assert await m.find_lost([1, 2, 3]) == []
    index.flush()
    await index.replace(3, [])
    with caplog.at_level(logging.WARNING, logger="tickwheel.engine"):
        assert await m.find_lost([1, 2, 3]) == [1, 2]
    assert any("lost for 2 owned shards" in r.getMessage() for r in caplog.records)
    assert m.rebuilding == {1, 2}
    # Being rebuilt: not reported again (nor spilled into).
    assert await m.find_lost([1, 2, 3]) == []
    m.rebuild({1: [preloaded(5, shard=1)], 2: []})
    await settle()
    assert m.rebuilding == set()
    assert stats.index_rebuilds == 2
    assert await m.find_lost([1, 2, 3]) == []
    assert [p.due_at for p in await index.load(1)] == [preloaded(5, shard=1).due_at]


async def test_the_index_round_skips_an_index_that_does_not_answer() -> None:
    index = await seeded(1)
    m, _, _ = mirror(index)
    index.down = True
    assert await m.find_lost([1, 2]) == []
    index.down = False
    assert await m.find_lost([1, 2]) == [2]
    m.rebuild_failed([2])
    assert m.rebuilding == set()
