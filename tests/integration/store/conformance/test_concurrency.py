"""The concurrency-key protocol (``protocol/concurrency.py``) and its enforcement in
``mark_dispatched`` (issue 43): at most the type's limit of a key's tasks are DISPATCHED
or RUNNING at once, whatever path frees a slot, on both backends."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import pytest

from scheduler._errors import InvalidArgument, NotFound
from scheduler.states import TaskState
from scheduler.store import Store
from scheduler.types import (
    Assignment,
    Completion,
    ConcurrencyLimit,
    DispatchRequest,
    Failure,
    FencedWrite,
    Held,
    Release,
    TaskKey,
    Tenant,
)
from tests.support.stores import LEASE, NOW, new_task

S = TaskState
HORIZON = NOW + timedelta(minutes=60)


async def _preloaded(store: Store, tenant: Tenant, n: int, **kw: object) -> list[TaskKey]:
    """``n`` PRELOADED tasks due one second apart (in due order)."""
    tasks = [
        new_task(tenant, NOW + timedelta(seconds=i), initial_state=S.PRELOADED, **kw)
        for i in range(n)
    ]
    return [r.task.key for r in await store.insert_tasks(tasks, NOW)]


async def _dispatch(
    store: Store, keys: list[TaskKey], worker: str = "w1", lease: datetime = LEASE
) -> list[Assignment | Held | None]:
    return await store.mark_dispatched(
        [DispatchRequest(key=k, worker_id=worker, lease_expires_at=lease) for k in keys], NOW
    )


def _taken(answers: list[Assignment | Held | None]) -> list[Assignment]:
    return [a for a in answers if isinstance(a, Assignment)]


async def test_limits_are_set_listed_and_cleared(store: Store, tenant: Tenant) -> None:
    assert await store.concurrency_limits(tenant.id) == []
    await store.set_concurrency_limit(tenant.id, "email.send", 2, NOW)
    await store.set_concurrency_limit(tenant.id, "sms.send", 5, NOW)
    await store.set_concurrency_limit(tenant.id, "sms.send", 7, NOW)
    assert await store.concurrency_limits(tenant.id) == [
        ConcurrencyLimit(tenant.id, "email.send", 2),
        ConcurrencyLimit(tenant.id, "sms.send", 7),
    ]
    assert len(await store.concurrency_limits(None)) == 2
    await store.set_concurrency_limit(tenant.id, "sms.send", None, NOW)
    assert await store.concurrency_limits(tenant.id) == [
        ConcurrencyLimit(tenant.id, "email.send", 2)
    ]


async def test_bad_limits_and_keys_name_their_field(store: Store, tenant: Tenant) -> None:
    for bad in (0, -1, 100_001, True, 2.0):
        with pytest.raises(InvalidArgument, match="limit"):
            await store.set_concurrency_limit(tenant.id, "email.send", bad, NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="type"):
        await store.set_concurrency_limit(tenant.id, "", 2, NOW)
    with pytest.raises(NotFound):
        await store.set_concurrency_limit(uuid.uuid4(), "email.send", 2, NOW)
    for key in ("", "k" * 129, "a\x00b"):
        with pytest.raises(InvalidArgument, match=r"tasks\[0\]\.concurrency_key"):
            await store.insert_tasks([new_task(tenant, concurrency_key=key)], NOW)
    [ok] = await store.insert_tasks([new_task(tenant, concurrency_key="k" * 128)], NOW)
    assert ok.task.concurrency_key == "k" * 128


async def test_a_key_runs_at_most_its_limit_and_the_rest_are_held(
    store: Store, tenant: Tenant
) -> None:
    await store.set_concurrency_limit(tenant.id, "email.send", 2, NOW)
    keyed = await _preloaded(store, tenant, 5, concurrency_key="acme")
    other = await _preloaded(store, tenant, 1, concurrency_key="globex")
    plain = await _preloaded(store, tenant, 1)
    answers = await _dispatch(store, [*keyed, *other, *plain])
    # The first two of the key, in request (due) order; the others held, not lost.
    assert [type(a) for a in answers[:5]] == [Assignment, Assignment, Held, Held, Held]
    assert all(a == Held("acme", 2) for a in answers[2:5])
    assert isinstance(answers[5], Assignment)
    assert answers[5].concurrency_key == "globex"
    assert isinstance(answers[6], Assignment)
    assert answers[6].concurrency_key is None
    assert [a.concurrency_key for a in _taken(answers[:2])] == ["acme", "acme"]
    for k in keyed[2:]:
        row = await store.get_task(tenant.id, k.id)
        assert (row.status, row.fencing_token, row.concurrency_key) == (S.PRELOADED, 1, "acme")
    # Asked again while both slots are taken: still held (no slot is ever taken twice).
    assert await _dispatch(store, keyed[2:]) == [Held("acme", 2)] * 3


async def test_a_type_without_a_limit_runs_one_task_per_key(store: Store, tenant: Tenant) -> None:
    keys = await _preloaded(store, tenant, 3, concurrency_key="k1")
    answers = await _dispatch(store, keys)
    assert [type(a) for a in answers] == [Assignment, Held, Held]
    assert answers[1] == Held("k1", 1)
    # The limit is per (tenant, type): another type's tasks of the same key run.
    [other] = await _preloaded(store, tenant, 1, concurrency_key="k1", type="sms.send")
    assert isinstance((await _dispatch(store, [other]))[0], Assignment)


async def test_one_batch_counts_each_key_of_each_type_apart(store: Store, tenant: Tenant) -> None:
    """One dispatch of interleaved tasks: the same key name under two types is two keys,
    each with its type's limit and its own count; a key already running counts its
    running task; the unkeyed task goes out."""
    await store.set_concurrency_limit(tenant.id, "sms.send", 2, NOW)
    [running] = await _preloaded(store, tenant, 1, concurrency_key="k1")
    assert isinstance((await _dispatch(store, [running]))[0], Assignment)
    email = await _preloaded(store, tenant, 2, concurrency_key="k1")
    sms = await _preloaded(store, tenant, 3, concurrency_key="k1", type="sms.send")
    other = await _preloaded(store, tenant, 2, concurrency_key="k2")
    [plain] = await _preloaded(store, tenant, 1)
    batch = [sms[0], email[0], other[0], sms[1], plain, email[1], other[1], sms[2]]
    answers = await _dispatch(store, batch)
    assert [type(a).__name__ for a in answers] == [
        "Assignment",  # sms k1: 1 of 2
        "Held",  # email k1: its running task takes the one slot
        "Assignment",  # email k2
        "Assignment",  # sms k1: 2 of 2
        "Assignment",  # no key
        "Held",
        "Held",  # email k2: taken by other[0]
        "Held",  # sms k1: both taken
    ]
    assert answers[1] == answers[5] == Held("k1", 1)
    assert answers[6] == Held("k2", 1)
    assert answers[7] == Held("k1", 2)


async def test_one_key_name_under_two_types_is_two_keys_in_one_batch(
    store: Store, tenant: Tenant
) -> None:
    email = await _preloaded(store, tenant, 2, concurrency_key="k1")
    sms = await _preloaded(store, tenant, 2, concurrency_key="k1", type="sms.send")
    answers = await _dispatch(store, [email[0], sms[0], email[1], sms[1]])
    assert [type(a) for a in answers] == [Assignment, Assignment, Held, Held]


async def test_every_way_out_of_running_frees_exactly_one_slot(
    store: Store, tenant: Tenant
) -> None:
    """Completion, failure (to RETRYING), release and lease expiry each give back the
    slot of their task, once: a held task takes it, and the next is held again."""
    await store.set_concurrency_limit(tenant.id, "email.send", 1, NOW)
    keys = await _preloaded(store, tenant, 6, concurrency_key="acme")
    [first, *_rest] = await _dispatch(store, keys)
    assert isinstance(first, Assignment)

    async def next_one(i: int, lease: datetime = LEASE) -> Assignment:
        a, b = await _dispatch(store, keys[i : i + 2], lease=lease)
        assert isinstance(a, Assignment)
        assert b == Held("acme", 1)
        return a

    async def ack(a: Assignment) -> None:
        await store.ack([FencedWrite(key=a.key, token=a.fencing_token)], LEASE, NOW)

    assert await _dispatch(store, keys[1:2]) == [Held("acme", 1)]  # DISPATCHED holds it
    await ack(first)
    assert await _dispatch(store, keys[1:2]) == [Held("acme", 1)]  # RUNNING holds it
    await store.complete([Completion(key=first.key, token=first.fencing_token)], NOW)
    second = await next_one(1)
    await ack(second)
    await store.fail([Failure(key=second.key, token=second.fencing_token, error="x")], NOW)
    assert (await store.get_task(tenant.id, second.key.id)).status is S.RETRYING
    third = await next_one(2)
    await store.release([Release(key=third.key, token=third.fencing_token)], NOW)
    assert (await store.get_task(tenant.id, third.key.id)).status is S.PRELOADED
    fourth = await next_one(3)
    await ack(fourth)
    # A dead worker's task: its slot comes back when its lease ends, not before.
    assert await _dispatch(store, keys[4:5]) == [Held("acme", 1)]
    reclaimed = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
    assert fourth.key in reclaimed.retrying
    fifth = await next_one(4, LEASE + timedelta(minutes=5))
    # The reclaim of a lease already reclaimed frees nothing more.
    again = await store.reclaim_expired(None, LEASE + timedelta(seconds=1), 100)
    assert fourth.key not in again.retrying
    assert await _dispatch(store, keys[5:6]) == [Held("acme", 1)]
    assert (await store.get_task(tenant.id, fifth.key.id)).status is S.DISPATCHED


async def test_concurrent_dispatchers_never_share_the_last_slot(
    store: Store, tenant: Tenant
) -> None:
    """Many dispatch calls at once (several connections on PostgreSQL), each asking for
    every task of the key in its own order: together they take exactly the limit."""
    await store.set_concurrency_limit(tenant.id, "email.send", 3, NOW)
    keys = await _preloaded(store, tenant, 40, concurrency_key="acme")
    calls = [_dispatch(store, keys[i:] + keys[:i], worker=f"w{i}") for i in range(0, 40, 4)]
    answers = await asyncio.gather(*calls)
    taken = [a for batch in answers for a in _taken(batch)]
    assert len(taken) == 3
    assert len({a.key.id for a in taken}) == 3
    rows = [await store.get_task(tenant.id, k.id) for k in keys]
    assert sorted(r.id for r in rows if r.status is S.DISPATCHED) == sorted(a.key.id for a in taken)
    assert sum(r.status is S.PRELOADED for r in rows) == 37
