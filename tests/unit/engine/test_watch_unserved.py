"""The watch's overdue tasks no worker takes (ListWorkers' ``unserved``): the store's
overdue groups less those some open session of the node would be dispatched, by the
dispatcher's rule (tenant or shared, type, pool; an outlet's pool serves every type).
Real sessions in a real registry; the store answers the groups given."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from scheduler.engine import EngineConfig, WorkerHello
from scheduler.engine._registry import Sessions
from scheduler.engine._watch import Watch
from scheduler.types import OverdueGroup, Pool
from tests.unit.engine.test_sessions import FakeCompleter, FakeOutlet

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
A, B, C = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)


class OverdueStore:
    """Answers :meth:`overdue` with fixed groups (those of the asked tenant)."""

    def __init__(self, groups: list[OverdueGroup]) -> None:
        self.groups = groups
        self.asked: list[tuple[uuid.UUID | None, datetime]] = []

    async def overdue(self, tenant_id: uuid.UUID | None, now: datetime) -> list[OverdueGroup]:
        self.asked.append((tenant_id, now))
        return [g for g in self.groups if tenant_id in (None, g.tenant_id)]


def _group(tenant: uuid.UUID, type_: str, pool: Pool = Pool.STANDARD) -> OverdueGroup:
    return OverdueGroup(tenant, type_, pool, 3, NOW - timedelta(minutes=2))


def _world(groups: list[OverdueGroup]) -> tuple[Sessions, Watch, OverdueStore]:
    store = OverdueStore(groups)
    config = EngineConfig()
    sessions = Sessions(
        store,  # type: ignore[arg-type]
        config,
        FakeCompleter(),  # type: ignore[arg-type]
        lambda: None,
        lambda outlet, batch: None,
    )
    watch = Watch(store, sessions, config, lambda: NOW)  # type: ignore[arg-type]
    return sessions, watch, store


def _hello(tenant: uuid.UUID, *types: str, pools: frozenset[Pool] = frozenset(Pool)) -> WorkerHello:
    return WorkerHello(
        worker_id=f"w-{tenant.int}-{'-'.join(types)}",
        tenant_id=tenant,
        task_types=frozenset(types),
        pools=pools,
        slots=2,
    )


async def test_with_no_session_every_overdue_group_is_unserved() -> None:
    groups = [_group(A, "email"), _group(B, "sms")]
    _, watch, store = _world(groups)
    assert await watch.unserved(None) == groups
    assert await watch.unserved(A) == [groups[0]]
    assert store.asked == [(None, NOW), (A, NOW)]
    # Cached as the counts are (every browser's overview polls it): no new read.
    assert await watch.unserved(A) == [groups[0]]
    assert len(store.asked) == 2


async def test_a_tenants_worker_serves_its_types_and_pools_only() -> None:
    email, sms, bulk_email, b_email = (
        _group(A, "email"),
        _group(A, "sms"),
        _group(A, "email", Pool.BULK),
        _group(B, "email"),
    )
    sessions, watch, _ = _world([email, sms, bulk_email, b_email])
    sessions.open(_hello(A, "email", pools=frozenset({Pool.STANDARD})), shared=False)
    # A's worker takes A's STANDARD email; not sms, not BULK, not B's email.
    assert await watch.unserved(None) == [sms, bulk_email, b_email]


async def test_a_shared_worker_serves_every_tenant_and_a_draining_one_none() -> None:
    a_email, b_email = _group(A, "email"), _group(B, "email")
    sessions, watch, _ = _world([a_email, b_email])
    shared = sessions.open(_hello(C, "email"), shared=True)
    assert await watch.unserved(None) == []
    shared.draining = True
    assert await watch.unserved(None) == [a_email, b_email]


async def test_an_outlets_pool_is_served_for_every_type() -> None:
    bulk, standard = _group(A, "anything", Pool.BULK), _group(A, "anything")
    sessions, watch, _ = _world([bulk, standard])
    sessions.open_outlet(FakeOutlet(pool=Pool.BULK))  # type: ignore[arg-type]
    assert await watch.unserved(A) == [standard]
