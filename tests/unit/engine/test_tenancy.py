"""Tenancy (tenants, API keys, the auth cache) and fair share (weights, quotas), each
built alone over a fake store. Their clocks are ``time.monotonic``; a fake stands in
for the module's ``time`` so the cache windows are stepped, not waited for.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler import InvalidArgument, Unauthenticated
from scheduler._errors import FailedPrecondition, NotFound
from scheduler.engine import EngineConfig, _fair_share, _tenancy
from scheduler.engine._fair_share import FairShare
from scheduler.engine._tenancy import Tenancy
from scheduler.limits import MAX_NAME_CHARS
from scheduler.quota import TenantLimits
from scheduler.types import ApiKey, Tenant


class FakeClock:
    """Stands in for a module's ``time``."""

    def __init__(self) -> None:
        self.t = 100.0

    def monotonic(self) -> float:
        return self.t


class FakeStore:
    """Tenants and key digests in dicts; counts the reads the caches should save."""

    def __init__(self) -> None:
        self.tenants: dict[uuid.UUID, Tenant] = {}
        self.keys: dict[bytes, uuid.UUID] = {}
        self.key_rows: dict[bytes, ApiKey] = {}
        self.touches: list[dict[uuid.UUID, Any]] = []
        self.key_reads = 0
        self.tenant_reads: list[uuid.UUID] = []

    async def create_tenant(self, tenant: Tenant) -> Tenant:
        self.tenants[tenant.id] = tenant
        return tenant

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        self.tenant_reads.append(tenant_id)
        try:
            return self.tenants[tenant_id]
        except KeyError:
            raise NotFound("tenant", str(tenant_id)) from None

    async def update_tenant(self, tenant_id: uuid.UUID, changes: dict[str, Any]) -> Tenant:
        raise AssertionError("not used")

    async def create_api_key(
        self, tenant_id: uuid.UUID, name: str, secret_hash: bytes, **kw: Any
    ) -> ApiKey:
        key = ApiKey(id=uuid.uuid4(), tenant_id=tenant_id, name=name, **kw)
        self.keys[secret_hash] = tenant_id
        self.key_rows[secret_hash] = key
        return key

    async def api_key_for_hash(self, secret_hash: bytes) -> ApiKey | None:
        self.key_reads += 1
        tenant_id = self.keys.get(secret_hash)
        if tenant_id is None:
            return None
        return self.key_rows.get(secret_hash) or ApiKey(
            id=uuid.uuid5(uuid.NAMESPACE_OID, secret_hash.hex()), tenant_id=tenant_id, name="k"
        )

    async def touch_api_keys(self, used: dict[uuid.UUID, Any]) -> None:
        self.touches.append(dict(used))


# -- tenancy -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": ""}, "tenant.name"),
        ({"name": "x" * (MAX_NAME_CHARS + 1)}, "tenant.name"),
        ({"name": "acme", "tier": "GOLD"}, "tenant.tier"),
        ({"name": "acme", "rate_limit_rps": -1}, "tenant"),
        ({"name": "acme", "max_concurrent_workers": -1}, "tenant"),
    ],
)
async def test_tenant_validation_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    store = FakeStore()
    with pytest.raises(InvalidArgument) as info:
        await Tenancy(store, EngineConfig()).create_tenant(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert store.tenants == {}


async def test_a_new_tenant_gets_the_default_quotas_for_zero() -> None:
    store = FakeStore()
    tenant = await Tenancy(store, EngineConfig()).create_tenant(  # type: ignore[arg-type]
        name="acme", tier="ENTERPRISE", rate_limit_rps=0, max_concurrent_workers=7
    )
    defaults = Tenant(id=tenant.id, name="acme")
    assert store.tenants == {tenant.id: tenant}
    assert tenant.tier == "ENTERPRISE"
    assert tenant.rate_limit_rps == defaults.rate_limit_rps
    assert tenant.max_concurrent_workers == 7
    assert tenant.home_region == defaults.home_region


async def test_an_api_key_is_stored_as_its_sha256_only_and_finds_its_tenant() -> None:
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig())  # type: ignore[arg-type]
    tenant_id = uuid.uuid4()
    key, secret = await tenancy.create_api_key(tenant_id, "ci")
    assert key.tenant_id == tenant_id
    assert list(store.keys) == [hashlib.sha256(secret.encode()).digest()]
    assert secret.encode() not in store.keys
    assert (await tenancy.authenticate(secret)).tenant_id == tenant_id
    # Two keys never share a secret.
    _, other = await tenancy.create_api_key(tenant_id, "ci-2")
    assert other != secret
    assert len(store.keys) == 2


async def test_the_auth_cache_answers_without_the_store_until_auth_cache_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_tenancy, "time", clock)
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(auth_cache_s=5.0))  # type: ignore[arg-type]
    tenant_id = uuid.uuid4()
    _, secret = await tenancy.create_api_key(tenant_id, "ci")
    assert (await tenancy.authenticate(secret)).tenant_id == tenant_id
    assert store.key_reads == 1
    store.keys.clear()  # revoked: this node trusts its cache for a while yet
    clock.t += 4.9
    assert (await tenancy.authenticate(secret)).tenant_id == tenant_id
    assert store.key_reads == 1
    clock.t += 0.2
    with pytest.raises(Unauthenticated):
        await tenancy.authenticate(secret)
    assert store.key_reads == 2


async def test_an_unknown_or_missing_key_is_unauthenticated() -> None:
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig())  # type: ignore[arg-type]
    with pytest.raises(Unauthenticated):
        await tenancy.authenticate("tw_nobody")
    with pytest.raises(Unauthenticated):
        await tenancy.authenticate("")
    assert store.key_reads == 1  # an empty secret is refused before the store
    # A refusal is not cached: the key works as soon as it exists.
    tenant_id = uuid.uuid4()
    store.keys[hashlib.sha256(b"tw_nobody").digest()] = tenant_id
    assert (await tenancy.authenticate("tw_nobody")).tenant_id == tenant_id


# -- fair share --------------------------------------------------------------------------
async def test_fair_share_weights_follow_the_tier_and_limits_the_quotas() -> None:
    config = EngineConfig(tier_weights=(("STANDARD", 2), ("ENTERPRISE", 5), ("SYSTEM", 9)))
    store = FakeStore()
    std, ent, sys_, gone = (uuid.uuid4() for _ in range(4))
    store.tenants[std] = Tenant(id=std, name="s", rate_limit_rps=10, max_concurrent_workers=3)
    store.tenants[ent] = Tenant(id=ent, name="e", tier="ENTERPRISE")
    store.tenants[sys_] = Tenant(id=sys_, name="y", tier="SYSTEM")
    share = FairShare(store, config)  # type: ignore[arg-type]
    assert share.weight(std) == 1  # not learnt yet
    await share.learn([std, ent, sys_, gone])
    assert [share.weight(t) for t in (std, ent, sys_)] == [
        config.tier_weight("STANDARD"),
        config.tier_weight("ENTERPRISE"),
        config.tier_weight("SYSTEM"),
    ]
    assert [share.weight(t) for t in (std, ent, sys_)] == [2, 5, 9]
    assert share.limits(std) == TenantLimits(rate_limit_rps=10, max_concurrent=3)
    # A tenant the store no longer has gets the defaults of a STANDARD tenant.
    defaults = Tenant(id=gone, name="?")
    assert share.weight(gone) == 2
    assert share.limits(gone) == TenantLimits(
        rate_limit_rps=defaults.rate_limit_rps, max_concurrent=defaults.max_concurrent_workers
    )


async def test_fair_share_asks_the_store_once_per_tenant_until_the_refresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_fair_share, "time", clock)
    store = FakeStore()
    tenant = uuid.uuid4()
    store.tenants[tenant] = Tenant(id=tenant, name="a")
    share = FairShare(store, EngineConfig(tenant_refresh_s=10.0))  # type: ignore[arg-type]
    await share.learn([tenant])
    await share.learn([tenant, tenant])
    assert store.tenant_reads == [tenant]
    store.tenants[tenant] = Tenant(id=tenant, name="a", tier="ENTERPRISE")  # admin API
    clock.t += 9.0
    await share.learn([tenant])
    assert share.weight(tenant) == 1
    clock.t += 2.0
    await share.learn([tenant])
    assert store.tenant_reads == [tenant, tenant]
    assert share.weight(tenant) == EngineConfig().tier_weight("ENTERPRISE")


async def test_fair_share_with_no_refresh_window_reads_every_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_fair_share, "time", clock)
    store = FakeStore()
    tenant = uuid.uuid4()
    store.tenants[tenant] = Tenant(id=tenant, name="a")
    share = FairShare(store, EngineConfig(tenant_refresh_s=0))  # type: ignore[arg-type]
    await share.learn([tenant])
    store.tenants[tenant] = Tenant(id=tenant, name="a", tier="SYSTEM", rate_limit_rps=3)
    clock.t += 0.001
    await share.learn([tenant])
    assert store.tenant_reads == [tenant, tenant]
    assert share.weight(tenant) == EngineConfig().tier_weight("SYSTEM")
    assert share.limits(tenant).rate_limit_rps == 3


# -- API keys: last use, expiry, local revocation (issue 15) --------------------------------
async def test_last_use_is_written_at_most_once_a_minute_per_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_tenancy, "time", clock)
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(auth_cache_s=5.0))  # type: ignore[arg-type]
    tenant_id = uuid.uuid4()
    key, secret = await tenancy.create_api_key(tenant_id, "ci")
    for _ in range(100):
        await tenancy.authenticate(secret)
        clock.t += 0.5  # 50 s of calls, every half second
    assert [list(t) for t in store.touches] == [[key.id]]
    clock.t += _tenancy.KEY_TOUCH_INTERVAL_S
    await tenancy.authenticate(secret)
    assert len(store.touches) == 2


async def test_an_expired_key_is_refused_even_from_the_cache() -> None:
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(auth_cache_s=3600.0))  # type: ignore[arg-type]
    soon = datetime.now(UTC) + timedelta(milliseconds=50)
    _, secret = await tenancy.create_api_key(uuid.uuid4(), "ci", expires_at=soon)
    assert (await tenancy.authenticate(secret)).expires_at == soon
    await asyncio.sleep(0.06)
    with pytest.raises(Unauthenticated, match="expired"):
        await tenancy.authenticate(secret)
    assert store.key_reads == 1  # the cached answer, checked against the clock


async def test_a_revocation_on_this_node_empties_its_cache_at_once() -> None:
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(auth_cache_s=3600.0))  # type: ignore[arg-type]
    key, secret = await tenancy.create_api_key(uuid.uuid4(), "ci")
    await tenancy.authenticate(secret)
    assert tenancy.knows(secret)

    async def revoke(key_id: uuid.UUID, at: Any) -> ApiKey:
        (digest,) = [d for d, k in store.key_rows.items() if k.id == key_id]
        store.key_rows[digest] = ApiKey(
            id=key.id, tenant_id=key.tenant_id, name=key.name, revoked=True, revoked_at=at
        )
        return store.key_rows[digest]

    store.revoke_api_key = revoke  # type: ignore[attr-defined]
    await tenancy.revoke_api_key(key.id)
    assert not tenancy.knows(secret)
    with pytest.raises(Unauthenticated, match="revoked"):
        await tenancy.authenticate(secret)


# -- home regions ------------------------------------------------------------------------
async def test_a_new_tenant_lives_in_the_creating_region_and_its_keys_name_it() -> None:
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(region="eu"))  # type: ignore[arg-type]
    tenant = await tenancy.create_tenant(name="acme")
    assert tenant.home_region == "eu"
    _, secret = await tenancy.create_api_key(tenant.id, "k")
    assert secret.startswith("tw_eu.")
    assert (await tenancy.authenticate(secret)).tenant_id == tenant.id
    with pytest.raises(InvalidArgument) as info:
        await tenancy.create_tenant(name="x", home_region="Not_A_Region")
    assert info.value.field == "tenant.home_region"


async def test_home_region_is_cached_forgettable_and_local_reads_as_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_tenancy, "time", clock)
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(region="us", home_cache_s=1.0))  # type: ignore[arg-type]
    moved, legacy = uuid.uuid4(), uuid.uuid4()
    store.tenants[moved] = Tenant(id=moved, name="m", home_region="us")
    store.tenants[legacy] = Tenant(id=legacy, name="l")  # home "local": made before regions
    assert await tenancy.home_region(legacy) == "us"
    assert await tenancy.home_region(moved) == "us"
    store.tenants[moved] = Tenant(id=moved, name="m", home_region="eu")
    reads = len(store.tenant_reads)
    assert await tenancy.home_region(moved) == "us"  # cached
    assert len(store.tenant_reads) == reads
    tenancy.forget_home(moved)
    assert await tenancy.home_region(moved) == "eu"
    store.tenants[moved] = Tenant(id=moved, name="m", home_region="ap")
    clock.t += 1.5  # past the cache
    assert await tenancy.home_region(moved) == "ap"


async def test_writes_of_another_regions_tenant_are_refused() -> None:
    store = FakeStore()
    tenancy = Tenancy(store, EngineConfig(region="us"))  # type: ignore[arg-type]
    ours, theirs = uuid.uuid4(), uuid.uuid4()
    store.tenants[ours] = Tenant(id=ours, name="o", home_region="us")
    store.tenants[theirs] = Tenant(id=theirs, name="t", home_region="eu")
    await tenancy.check_home(ours)
    await tenancy.check_home(uuid.uuid4())  # unknown: its writes fail on their own
    with pytest.raises(FailedPrecondition, match="lives in region 'eu', not in this region 'us'"):
        await tenancy.check_home(theirs)
