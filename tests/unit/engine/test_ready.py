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
