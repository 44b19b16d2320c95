"""API keys in the store, on both backends: scopes, expiry, revocation, rotation, last
use, the tenant list; and an SQLite file made before key scopes existed (issue 15)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scheduler._errors import AlreadyExists, NotFound
from scheduler.store import Store, open_store
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


async def test_an_sqlite_file_from_before_key_scopes_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE tenants (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, tier TEXT NOT NULL DEFAULT 'STANDARD',
            rate_limit_rps INTEGER NOT NULL DEFAULT 1000,
            max_concurrent_workers INTEGER NOT NULL DEFAULT 200,
            home_region TEXT NOT NULL DEFAULT 'local', created_at INTEGER NOT NULL);
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),
            name TEXT NOT NULL, secret_hash BLOB NOT NULL UNIQUE,
            created_at INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
        """
    )
    tenant_id, key_id = uuid.uuid4(), uuid.uuid4()
    conn.execute(
        "INSERT INTO tenants (id, name, created_at) VALUES (?, 'old', 0)", (str(tenant_id),)
    )
    conn.execute(
        "INSERT INTO api_keys (id, tenant_id, name, secret_hash, created_at)"
        " VALUES (?, ?, 'k', ?, 0)",
        (str(key_id), str(tenant_id), b"h-old"),
    )
    conn.commit()
    conn.close()
    store = await open_store(f"sqlite:///{path}")
    try:
        key = await store.api_key_for_hash(b"h-old")
        assert key is not None
        assert key.id == key_id
        assert key.scopes == DEFAULT_SCOPES
        assert key.expires_at is None
        assert await store.tenant_for_key_hash(b"h-old") == tenant_id
        await store.revoke_api_key(key_id, datetime.now(UTC))
        assert await store.tenant_for_key_hash(b"h-old") is None
    finally:
        await store.close()


async def test_an_sqlite_file_with_duplicate_tenant_names_is_upgraded(tmp_path: Path) -> None:
    """Issue 40: names are unique now; of an older file's duplicates the oldest keeps
    its name and each other one gets -<the first 8 characters of its id>."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE tenants (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, tier TEXT NOT NULL DEFAULT 'STANDARD',
            rate_limit_rps INTEGER NOT NULL DEFAULT 1000,
            max_concurrent_workers INTEGER NOT NULL DEFAULT 200,
            home_region TEXT NOT NULL DEFAULT 'local', created_at INTEGER NOT NULL);
        """
    )
    ids = [uuid.uuid4() for _ in range(4)]
    for n, (tenant_id, name) in enumerate(zip(ids, ["acme", "acme", "solo", "acme"], strict=True)):
        conn.execute(
            "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)",
            (str(tenant_id), name, [5, 7, 1, 3][n]),
        )
    conn.commit()
    conn.close()
    store = await open_store(f"sqlite:///{path}")
    try:
        names = {t.id: t.name for t in await store.list_tenants(None, 10)}
        assert (
            names
            == {
                ids[3]: "acme",  # the oldest (created_at 3)
                ids[0]: f"acme-{str(ids[0])[:8]}",
                ids[1]: f"acme-{str(ids[1])[:8]}",
                ids[2]: "solo",
            }
        )
        with pytest.raises(AlreadyExists, match="named 'acme'"):
            await store.create_tenant(Tenant(id=uuid.uuid4(), name="acme"))
    finally:
        await store.close()
