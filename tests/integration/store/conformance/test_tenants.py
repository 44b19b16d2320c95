"""The tenant protocol (``protocol/tenants.py``): tenants, their home moves, and API keys
(scopes, expiry, revocation, rotation, last use; issue 15), the tenant list."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scheduler._errors import AlreadyExists, InvalidArgument, NotFound
from scheduler.store import Store
from scheduler.types import DEFAULT_SCOPES, Scope, Tenant


async def _tenant(store: Store, name: str = "acme") -> Tenant:
    return await store.create_tenant(Tenant(id=uuid.uuid4(), name=name))


async def test_a_key_keeps_its_scopes_and_expiry(store: Store) -> None:
    tenant = await _tenant(store)
    plain = await store.create_api_key(tenant.id, "plain", b"h-plain")
    assert plain.scopes == DEFAULT_SCOPES
    assert plain.expires_at is None
    assert plain.last_used_at is None
    assert not plain.revoked
    later = datetime.now(UTC) + timedelta(days=1)
    scoped = await store.create_api_key(
        tenant.id, "ops", b"h-ops", scopes=frozenset({Scope.ADMIN, Scope.READ}), expires_at=later
    )
    found = await store.api_key_for_hash(b"h-ops")
    assert found == scoped
    assert found.scopes == {Scope.ADMIN, Scope.READ}
    assert found.expires_at == later
    assert await store.api_key_for_hash(b"nope") is None
    assert [k.id for k in await store.list_api_keys(tenant.id)] == [plain.id, scoped.id]
    assert await store.get_api_key(scoped.id) == scoped
    with pytest.raises(NotFound):
        await store.get_api_key(uuid.uuid4())


async def test_an_expired_key_finds_no_tenant(store: Store) -> None:
    tenant = await _tenant(store)
    await store.create_api_key(
        tenant.id, "soon", b"h-soon", expires_at=datetime.now(UTC) + timedelta(milliseconds=1)
    )
    await asyncio.sleep(0.01)
    assert await store.tenant_for_key_hash(b"h-soon") is None
    key = await store.api_key_for_hash(b"h-soon")
    assert key is not None
    assert not key.usable_at(datetime.now(UTC))


async def test_revoke_sets_both_columns_and_keeps_the_first_time(store: Store) -> None:
    tenant = await _tenant(store)
    key = await store.create_api_key(tenant.id, "k", b"h-k")
    first = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    revoked = await store.revoke_api_key(key.id, first)
    assert revoked.revoked
    assert revoked.revoked_at == first
    again = await store.revoke_api_key(key.id, first + timedelta(hours=1))
    assert again.revoked_at == first
    assert await store.tenant_for_key_hash(b"h-k") is None
    with pytest.raises(NotFound):
        await store.revoke_api_key(uuid.uuid4(), first)


async def test_rotation_copies_name_and_scopes_and_moves_the_expiry_earlier(
    store: Store,
) -> None:
    tenant = await _tenant(store)
    now = datetime.now(UTC).replace(microsecond=0)
    old = await store.create_api_key(
        tenant.id,
        "deploy",
        b"h-old",
        scopes=frozenset({Scope.WORK}),
        expires_at=now + timedelta(days=10),
    )
    new_id = uuid.uuid4()
    before, new = await store.rotate_api_key(
        old.id, new_id, b"h-new", at=now, grace_until=now + timedelta(hours=1), expires_at=None
    )
    assert before.expires_at == now + timedelta(hours=1)
    assert (new.id, new.name, new.scopes, new.tenant_id) == (
        new_id,
        "deploy",
        frozenset({Scope.WORK}),
        tenant.id,
    )
    assert new.rotated_from == old.id
    assert new.expires_at is None
    # A grace later than the key's own expiry never extends it.
    again, third = await store.rotate_api_key(
        new_id,
        uuid.uuid4(),
        b"h-3",
        at=now,
        grace_until=now + timedelta(days=99),
        expires_at=now + timedelta(days=1),
    )
    assert again.expires_at == now + timedelta(days=99)  # it had none: the grace is it
    again2, _ = await store.rotate_api_key(
        third.id,
        uuid.uuid4(),
        b"h-4",
        at=now,
        grace_until=now + timedelta(days=5),
        expires_at=None,
    )
    assert again2.expires_at == now + timedelta(days=1)
    with pytest.raises(NotFound):
        await store.rotate_api_key(
            uuid.uuid4(), uuid.uuid4(), b"h-5", at=now, grace_until=now, expires_at=None
        )


async def test_touch_records_the_latest_use_only(store: Store) -> None:
    tenant = await _tenant(store)
    key = await store.create_api_key(tenant.id, "k", b"h-t")
    t1 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    await store.touch_api_keys({key.id: t1})
    await store.touch_api_keys({key.id: t1 - timedelta(minutes=5)})
    assert (await store.get_api_key(key.id)).last_used_at == t1
    await store.touch_api_keys({key.id: t1 + timedelta(minutes=2)})
    assert (await store.get_api_key(key.id)).last_used_at == t1 + timedelta(minutes=2)
    await store.touch_api_keys({})


async def test_tenants_are_listed_in_id_order_a_page_at_a_time(store: Store) -> None:
    made = sorted([(await _tenant(store, f"t{i}")).id for i in range(5)])
    first = await store.list_tenants(None, 2)
    assert [t.id for t in first] == made[:2]
    rest = await store.list_tenants(first[-1].id, 10)
    assert [t.id for t in rest] == made[2:]


async def test_tenants_and_their_moves(store: Store, tenant: Tenant) -> None:
    assert (await store.get_tenant(tenant.id)).name == "acme"
    upd = await store.update_tenant(tenant.id, {"rate_limit_rps": 5})
    assert upd.rate_limit_rps == 5
    assert (await store.get_tenant(tenant.id)).rate_limit_rps == 5
    with pytest.raises(InvalidArgument):
        await store.update_tenant(tenant.id, {"id": uuid.uuid4()})
    with pytest.raises(NotFound):
        await store.get_tenant(uuid.uuid4())
    with pytest.raises(AlreadyExists):
        await store.create_tenant(tenant)
    assert await store.tenant_moves() == {}  # no home move touched this store


async def test_a_tenant_name_is_taken_once(store: Store, tenant: Tenant) -> None:
    """Issue 40: `tenants create acme` twice made two tenants named acme."""
    with pytest.raises(AlreadyExists, match=r"^tenant named 'acme' already exists$"):
        await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
    other = await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme2"))
    with pytest.raises(AlreadyExists, match=r"^tenant named 'acme' already exists$"):
        await store.update_tenant(other.id, {"name": "acme"})
    assert (await store.get_tenant(other.id)).name == "acme2"
    # The same id under a new name is still told by its id.
    with pytest.raises(AlreadyExists, match=str(tenant.id)):
        await store.create_tenant(Tenant(id=tenant.id, name="fresh"))
    assert sorted(t.name for t in await store.list_tenants(None, 10)) == ["acme", "acme2"]
