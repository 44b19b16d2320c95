"""Ready queues: pool order and weighted fair share between tenants (pure logic)."""

from __future__ import annotations

import collections
import uuid
from datetime import UTC, datetime, timedelta

from scheduler.engine._ready import ReadyQueues
from scheduler.types import Pool, Preloaded, TaskKey

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def task(tenant: uuid.UUID, pool: Pool = Pool.STANDARD, type_: str = "t", at: int = 0) -> Preloaded:
    tid = uuid.uuid4()
    due = T0 + timedelta(milliseconds=at)
    return Preloaded(
        key=TaskKey(tid, due), due_at=due, tenant_id=tenant, shard_id=0, pool=pool, type=type_
    )


def test_shares_follow_weights_within_ten_percent() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    weights = {a: 4, b: 1, c: 2}
    rq = ReadyQueues(lambda t: weights[t])
    for tenant in (a, b, c):
        rq.extend(task(tenant, at=i) for i in range(5000))
    served = collections.Counter(
        rq.pop(Pool.STANDARD, frozenset({"t"}), None).tenant_id  # type: ignore[union-attr]
        for _ in range(7000)
    )
    total = sum(weights.values())
    for tenant, w in weights.items():
        expected = 7000 * w / total
        assert abs(served[tenant] - expected) <= 0.10 * expected, (served, weights)


def test_one_tenants_million_does_not_starve_another() -> None:
    big, small = uuid.uuid4(), uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(task(big, Pool.BULK, at=i) for i in range(200_000))
    rq.extend(task(small, Pool.BULK, at=200_000 + i) for i in range(100))
    first = [rq.pop(Pool.BULK, frozenset({"t"}), None) for _ in range(200)]
    assert sum(1 for p in first if p is not None and p.tenant_id == small) == 100


def test_head_of_line_critical_goes_first_under_a_200k_bulk_backlog() -> None:
    tenant = uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(task(tenant, Pool.BULK, at=i) for i in range(200_000))
    rq.push(task(tenant, Pool.CRITICAL, at=300_000))
    assert rq.depth(Pool.BULK) == 200_000
    assert rq.depth(Pool.CRITICAL) == 1
    # The engine asks pools in POOL_ORDER for every free slot: critical is first.
    got = rq.pop(Pool.CRITICAL, frozenset({"t"}), tenant)
    assert got is not None
    assert got.pool is Pool.CRITICAL
    assert rq.depth(Pool.CRITICAL) == 0


def test_types_and_tenant_scope_are_respected_and_due_order_kept() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.push(task(a, type_="x", at=5))
    rq.push(task(a, type_="y", at=1))
    rq.push(task(b, type_="y", at=0))
    assert rq.pop(Pool.STANDARD, frozenset({"z"}), None) is None
    first = rq.pop(Pool.STANDARD, frozenset({"x", "y"}), a)
    assert first is not None
    assert (first.tenant_id, first.type) == (a, "y")
    assert rq.pop(Pool.STANDARD, frozenset({"y"}), a) is None
    assert rq.pop(Pool.STANDARD, frozenset({"x"}), b) is None
    assert len(rq) == 2


def test_allow_vetoes_a_tenant_without_losing_its_tasks() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.extend([task(a), task(b)])
    got = rq.pop(Pool.STANDARD, frozenset({"t"}), None, allow=lambda t: t != a)
    assert got is not None
    assert got.tenant_id == b
    assert rq.pop(Pool.STANDARD, frozenset({"t"}), None, allow=lambda t: t != a) is None
    assert len(rq) == 1


def test_remove_drops_a_cancelled_task() -> None:
    a = uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    keep, drop = task(a), task(a)
    rq.extend([keep, drop])
    assert rq.remove(drop.key.id)
    assert not rq.remove(drop.key.id)
    assert rq.pop(Pool.STANDARD, frozenset({"t"}), a) == keep
    assert len(rq) == 0


def test_a_shared_worker_still_gets_a_tenant_whose_own_workers_were_busy() -> None:
    """Tasks a tenant's own (scoped) workers take count against its banked share, but
    never below nothing: a shared worker that comes later still gets its waiting tasks
    (found by the dispatcher's unit tests: it got none for 100 rounds)."""
    a = uuid.uuid4()
    rq = ReadyQueues(lambda t: 1)
    rq.extend(task(a, at=i) for i in range(301))
    for _ in range(300):
        assert rq.pop(Pool.STANDARD, frozenset({"t"}), a) is not None
    assert rq.pop(Pool.STANDARD, frozenset({"t"}), None) is not None


def _drain(rq: ReadyQueues, tenant: uuid.UUID | None = None) -> list[Preloaded]:
    out = []
    while (p := rq.pop(Pool.STANDARD, None, tenant)) is not None:
        out.append(p)
    return out


def test_tasks_that_arrive_late_still_go_out_in_due_order() -> None:
    """Issue 17: tasks found late (a takeover's store check, a reconcile, a release)
    are older than what already waits; they go out first, not at the back."""
    a = uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(task(a, at=49_000 + i) for i in range(100))  # fired from the wheel
    rq.extend(task(a, at=22_000 + i) for i in range(71))  # found late, 27 s older
    rq.push(task(a, at=30_000))  # a released task
    rq.extend(task(a, at=60_000 - i) for i in range(10))  # descending, for good measure
    got = [p.due_at for p in _drain(rq, a)]
    assert len(got) == 182
    assert got == sorted(got)


def test_due_order_holds_across_types_and_inside_each_tenant_under_fair_share() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    weights = {a: 3, b: 1}
    rq = ReadyQueues(lambda t: weights[t])
    for tenant in (a, b):
        rq.extend(task(tenant, type_="x", at=10_000 + i) for i in range(400))
        rq.extend(task(tenant, type_="y", at=5_000 + 2 * i) for i in range(400))
        rq.extend(task(tenant, type_="x", at=i) for i in range(200))  # late and oldest
    served = [p for p in (rq.pop(Pool.STANDARD, None, None) for _ in range(800)) if p]
    counts = collections.Counter(p.tenant_id for p in served)
    assert abs(counts[a] - 600) <= 60, counts
    assert abs(counts[b] - 200) <= 20, counts
    for tenant in (a, b):
        dues = [p.due_at for p in served if p.tenant_id == tenant]
        assert dues == sorted(dues)
    rest = _drain(rq)
    for tenant in (a, b):
        dues = [p.due_at for p in served + rest if p.tenant_id == tenant]
        assert dues == sorted(dues)
        assert len(dues) == 1000


def test_a_task_given_back_goes_out_first_again() -> None:
    a = uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.extend(task(a, at=i) for i in range(5))
    first = rq.pop(Pool.STANDARD, None, a)
    assert first is not None
    rq.push(first)  # a failed dispatch commit puts it back
    assert rq.pop(Pool.STANDARD, None, a) == first


def test_a_task_already_waiting_is_not_queued_twice() -> None:
    """A reconcile reads tasks that already wait here (they are PRELOADED until their
    dispatch commits): they must not go out twice."""
    a = uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    tasks = [task(a, at=i) for i in range(3)]
    rq.extend(tasks)
    rq.extend(tasks)
    assert len(rq) == 3
    assert _drain(rq, a) == tasks
    rq.push(tasks[0])  # gone out and back (a release): welcome again
    assert len(rq) == 1


def test_remove_and_remove_where_keep_due_order() -> None:
    a = uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    late = [task(a, at=100 - i) for i in range(50)]  # out of order
    rq.extend(task(a, at=200 + i) for i in range(50))
    rq.extend(late)
    assert rq.remove(late[10].key.id)
    assert rq.remove_where(lambda p: p.due_at.microsecond // 1000 % 7 == 0) > 0
    got = _drain(rq, a)
    dues = [p.due_at for p in got]
    assert dues == sorted(dues)
    assert late[10] not in got
    assert len(rq) == 0


def test_waiting_for_counts_what_a_worker_could_take() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    rq = ReadyQueues(lambda _t: 1)
    rq.extend([task(a, type_="x"), task(a, type_="x"), task(a, type_="y"), task(b, type_="x")])
    rq.extend([task(a, Pool.BULK, type_="x")])
    std = [Pool.STANDARD]
    assert rq.waiting_for(std, frozenset({"x"}), a) == (2, 0)
    assert rq.waiting_for(std, frozenset({"x", "y"}), a) == (3, 0)
    assert rq.waiting_for([Pool.STANDARD, Pool.BULK], frozenset({"x"}), a) == (3, 0)
    assert rq.waiting_for(std, frozenset({"x"}), None) == (3, 0)  # a shared worker: any tenant
    assert rq.waiting_for(std, frozenset({"z"}), a) == (0, 0)
    assert rq.waiting_for(std, None, b) == (1, 0)
    rq.paused = frozenset({a})  # a home move froze a: its tasks are not on offer
    assert rq.waiting_for(std, frozenset({"x"}), None) == (1, 0)
