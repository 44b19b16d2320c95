"""SQLite-only store behaviour: a file made by an older version is upgraded in place
(an SQLite file made before key scopes existed, issue 15)."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler._errors import AlreadyExists
from scheduler.store import open_store
from scheduler.types import DEFAULT_SCOPES, Tenant


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
