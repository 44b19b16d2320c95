"""The shard protocol (``protocol/shards.py``): epochs rise per claim, and a dispatch with
a stale epoch is refused."""

from __future__ import annotations

from scheduler.store import Store
from scheduler.types import DispatchRequest, Tenant
from tests.support.stores import NOW, new_task


async def test_dispatch_with_a_stale_epoch_is_refused(store: Store, tenant: Tenant) -> None:
    [a, b] = await store.insert_tasks([new_task(tenant), new_task(tenant)], NOW)
    await store.claim_preload(None, NOW, 10, NOW)
    shard = a.task.shard_id
    assert b.task.shard_id == shard
    first = await store.claim_shards([shard], "node-a", NOW)
    assert first == {shard: 1}
    lease = NOW
    [ok] = await store.mark_dispatched(
        [DispatchRequest(key=a.task.key, worker_id="w", lease_expires_at=lease, epoch=1)], NOW
    )
    assert ok is not None
    # node-b takes the shard over: node-a's epoch 1 is stale from now on.
    assert await store.claim_shards([shard], "node-b", NOW) == {shard: 2}
    [refused] = await store.mark_dispatched(
        [DispatchRequest(key=b.task.key, worker_id="w", lease_expires_at=lease, epoch=1)], NOW
    )
    assert refused is None
    [accepted] = await store.mark_dispatched(
        [DispatchRequest(key=b.task.key, worker_id="w", lease_expires_at=lease, epoch=2)], NOW
    )
    assert accepted is not None
    claims = await store.shard_claims()
    assert [(c.shard_id, c.epoch, c.owner) for c in claims] == [
        (shard, 1, "node-a"),
        (shard, 2, "node-b"),
    ]


async def test_claims_of_many_shards_in_one_call(store: Store) -> None:
    assert await store.claim_shards([5, 3, 3, 9], "n", NOW) == {3: 1, 5: 1, 9: 1}
    assert await store.claim_shards([3], "m", NOW) == {3: 2}
    assert await store.claim_shards([], "m", NOW) == {}
