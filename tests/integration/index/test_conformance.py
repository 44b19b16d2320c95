"""One suite, every TimeIndex: MemoryTimeIndex and RedisTimeIndex behave the same."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.index import MAX_POP, IndexLost, IndexUnavailable
from scheduler.types import Pool, Preloaded, TaskKey
from tests.integration.index.conftest import Backend

SHARD = 7
BASE = datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
TENANT = uuid.uuid4()


def task(
    offset_ms: int,
    *,
    shard: int = SHARD,
    type_: str = "email",
    pool: Pool = Pool.STANDARD,
) -> Preloaded:
    due = BASE + timedelta(milliseconds=offset_ms, microseconds=offset_ms % 997)
    return Preloaded(
        key=TaskKey(uuid.uuid4(), BASE - timedelta(microseconds=offset_ms * 3 + 1)),
        due_at=due,
        tenant_id=TENANT,
        shard_id=shard,
        pool=pool,
        type=type_,
    )


def ms(ts: datetime) -> int:
    return int((ts - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1))


async def test_replace_then_load_round_trips_exactly_in_due_order(backend: Backend) -> None:
    items = [
        task(300, type_="a|b|c", pool=Pool.CRITICAL),
        task(100, pool=Pool.BULK),
        task(200, type_="ünïcode"),
    ]
    await backend.index.replace(SHARD, items)
    loaded = await backend.index.load(SHARD)
    assert loaded == sorted(items, key=lambda p: p.due_at)
    assert loaded[0].key.scheduled_at == items[1].key.scheduled_at  # microseconds kept
    assert await backend.index.count(SHARD) == 3
    assert await backend.index.next_due_ms(SHARD) == ms(items[1].due_at)


async def test_an_unseeded_shard_is_lost_not_empty(backend: Backend) -> None:
    idx = backend.index
    with pytest.raises(IndexLost) as info:
        await idx.load(SHARD)
    assert info.value.retryable
    assert info.value.shard == SHARD
    with pytest.raises(IndexLost):
        await idx.add(SHARD, [task(1)])
    with pytest.raises(IndexLost):
        await idx.pop_due(SHARD, ms(BASE) + 10, 10)
    assert await idx.count(SHARD) == 0
    assert await idx.next_due_ms(SHARD) is None
    await idx.replace(SHARD, [])
    assert await idx.load(SHARD) == []
    assert await idx.pop_due(SHARD, ms(BASE) + 10, 10) == []


async def test_pop_due_takes_only_due_earliest_first_up_to_limit(backend: Backend) -> None:
    idx = backend.index
    items = [task(i * 10) for i in range(10)]
    await idx.replace(SHARD, items[::-1])
    now = ms(items[5].due_at)
    first = await idx.pop_due(SHARD, now, 4)
    assert first == items[:4]
    second = await idx.pop_due(SHARD, now, 100)
    assert second == items[4:6]
    assert await idx.pop_due(SHARD, now, 100) == []
    assert await idx.count(SHARD) == 4
    assert await idx.load(SHARD) == items[6:]


async def test_adding_a_task_again_moves_it(backend: Backend) -> None:
    idx = backend.index
    t = task(50)
    await idx.replace(SHARD, [t])
    later = Preloaded(
        key=t.key,
        due_at=t.due_at + timedelta(seconds=5),
        tenant_id=t.tenant_id,
        shard_id=SHARD,
        pool=t.pool,
        type=t.type,
    )
    await idx.add(SHARD, [later])
    assert await idx.count(SHARD) == 1
    assert await idx.pop_due(SHARD, ms(t.due_at) + 1, 10) == []
    assert await idx.load(SHARD) == [later]


async def test_remove_many_spans_shards_in_one_call(backend: Backend) -> None:
    idx = backend.index
    a = [task(i) for i in range(4)]
    b = [task(i, shard=SHARD + 1) for i in range(3)]
    await idx.replace(SHARD, a)
    await idx.replace(SHARD + 1, b)
    removed = await idx.remove_many(
        {SHARD: [a[0].key.id, uuid.uuid4()], SHARD + 1: [b[1].key.id, b[2].key.id], 99: []}
    )
    assert removed == 3
    assert await idx.load(SHARD) == a[1:]
    assert await idx.load(SHARD + 1) == b[:1]
    assert await idx.remove_many({}) == 0


async def test_add_many_spans_shards_and_names_the_lost(backend: Backend) -> None:
    idx = backend.index
    a = [task(i) for i in range(3)]
    b = [task(i, shard=SHARD + 1) for i in range(2)]
    await idx.replace(SHARD, a[:1])
    await idx.replace(SHARD + 1, [])
    lost = task(1, shard=SHARD + 2)  # never seeded
    assert await idx.add_many({SHARD: a[1:], SHARD + 1: b, SHARD + 2: [lost], 99: []}) == {
        SHARD + 2
    }
    assert await idx.load(SHARD) == a
    assert await idx.load(SHARD + 1) == b
    with pytest.raises(IndexLost):
        await idx.load(SHARD + 2)
    assert await idx.add_many({}) == frozenset()
    with pytest.raises(ValueError, match="shard"):
        await idx.add_many({SHARD: b})


async def test_remove_and_clear(backend: Backend) -> None:
    idx = backend.index
    items = [task(i) for i in range(5)]
    await idx.replace(SHARD, items)
    assert await idx.remove(SHARD, [items[0].key.id, items[1].key.id, uuid.uuid4()]) == 2
    assert await idx.remove(SHARD, []) == 0
    assert await idx.load(SHARD) == items[2:]
    await idx.clear(SHARD)
    assert await idx.count(SHARD) == 0
    with pytest.raises(IndexLost):
        await idx.load(SHARD)


async def test_shards_are_independent(backend: Backend) -> None:
    idx = backend.index
    a, b = task(1, shard=1), task(1, shard=2)
    await idx.replace(1, [a])
    await idx.replace(2, [b])
    assert await idx.pop_due(1, ms(a.due_at), 10) == [a]
    assert await idx.load(2) == [b]
    with pytest.raises(ValueError, match="shard"):
        await idx.add(1, [b])
    with pytest.raises(ValueError, match="limit"):
        await idx.pop_due(1, 0, 0)
    with pytest.raises(ValueError, match="limit"):
        await idx.pop_due(1, 0, MAX_POP + 1)


async def test_concurrent_pops_never_hand_out_a_task_twice(backend: Backend) -> None:
    idx = backend.index
    items = [task(i) for i in range(500)]
    await idx.replace(SHARD, items)
    now = ms(items[-1].due_at) + 1
    batches = await asyncio.gather(*(idx.pop_due(SHARD, now, 37) for _ in range(20)))
    popped = [p.key.id for batch in batches for p in batch]
    assert len(popped) == len(set(popped)) == 500


async def test_large_replace_and_add_go_in_chunks(backend: Backend) -> None:
    idx = backend.index
    items = [task(i) for i in range(2500)]
    await idx.replace(SHARD, items[:1200])
    await idx.add(SHARD, items[1200:])
    assert await idx.count(SHARD) == 2500
    assert await idx.load(SHARD) == sorted(items, key=lambda p: (ms(p.due_at), p.key.id.hex))
    assert await idx.remove(SHARD, [p.key.id for p in items]) == 2500


async def test_a_flush_midway_is_a_typed_loss_and_a_replace_recovers(backend: Backend) -> None:
    idx = backend.index
    items = [task(i) for i in range(20)]
    await idx.replace(SHARD, items)
    assert len(await idx.pop_due(SHARD, ms(items[4].due_at), 100)) == 5
    await backend.flush()
    for call in (
        idx.load(SHARD),
        idx.pop_due(SHARD, ms(items[-1].due_at), 100),
        idx.add(SHARD, [task(99)]),
    ):
        with pytest.raises(IndexUnavailable):
            await call
    assert await idx.count(SHARD) == 0
    # What the engine does: rebuild from PostgreSQL (here: the items still PRELOADED).
    await idx.replace(SHARD, items[5:])
    assert await idx.pop_due(SHARD, ms(items[-1].due_at), 100) == items[5:]


async def test_lost_names_the_shards_that_are_not_seeded(backend: Backend) -> None:
    """The owner's index round: one call says which of its shards lost their index."""
    idx = backend.index
    await idx.replace(1, [task(100, shard=1)])
    await idx.replace(2, [])
    assert await idx.lost([1, 2, 3]) == frozenset({3})
    assert await idx.lost([]) == frozenset()
    await backend.flush()
    assert await idx.lost([1, 2, 3]) == frozenset({1, 2, 3})
    await idx.replace(2, [task(5, shard=2)])
    assert await idx.lost([1, 2]) == frozenset({1})
