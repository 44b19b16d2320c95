"""Tenants and API keys: creation, quotas, the authentication cache and each tenant's
home region.

Owns the cache of verified key digests and the cache of tenants' home regions
(:meth:`Tenancy.home_region`, the one place a node reads where a tenant lives). Calls
only the store. Reached as ``Engine.tenancy`` (the one door for tenants and keys): the
gRPC services authenticate every call through it and the admin API calls it directly.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler._errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    StoreError,
    TenantMoving,
    Unauthenticated,
)
from scheduler.engine._config import EngineConfig
from scheduler.limits import (
    DEFAULT_ROTATION_GRACE_S,
    MAX_NAME_CHARS,
    MAX_PAGE_SIZE,
    MAX_ROTATION_GRACE_S,
)
from scheduler.regions import DEFAULT_REGION, check_region_name, key_secret
from scheduler.store import Store
from scheduler.store.protocol.tenants import MoveState
from scheduler.types import DEFAULT_SCOPES, ApiKey, Scope, Tenant

TIERS = ("STANDARD", "ENTERPRISE", "SYSTEM")
AUTH_CACHE_MAX = 10_000
"""Verified digests remembered at most; the cache starts over past it."""
KEY_TOUCH_INTERVAL_S = 60.0
"""A key's ``last_used_at`` is written at most this often per node (not once per call)."""

_log = logging.getLogger("tickwheel.tenancy")


def hash_secret(secret: str) -> bytes:
    """API keys are stored as SHA-256 digests; a leaked table leaks no key."""
    return hashlib.sha256(secret.encode()).digest()


class Tenancy:
    """Tenants, their keys, and which tenant a key secret belongs to."""

    def __init__(self, store: Store, config: EngineConfig) -> None:
        self._store = store
        self._config = config
        self._auth_cache: dict[bytes, tuple[ApiKey, float]] = {}
        self._touched: dict[uuid.UUID, float] = {}
        self._homes: dict[uuid.UUID, tuple[str, float]] = {}
        self.moves: dict[uuid.UUID, MoveState] = {}
        """Tenants this node does not serve because of a home move (frozen or gone), as
        last read from the store (:meth:`read_moves`); empty almost always."""
        self.arrived: frozenset[uuid.UUID] = frozenset()
        """Tenants whose home moved here."""
        self._unknown_keys: dict[bytes, float] = {}

    @property
    def region(self) -> str:
        """This node's region (``EngineConfig.region``)."""
        return self._config.region

    async def read_moves(self) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
        """Re-read the tenants a move has frozen or taken away; returns (newly not
        served, newly served again)."""
        rows = await self._store.tenant_moves()
        moves: dict[uuid.UUID, MoveState] = {
            t: state for t, state in rows.items() if state != "arrived"
        }
        before = self.moves
        self.moves = moves
        self.arrived = frozenset(t for t, state in rows.items() if state == "arrived")
        stopped = {t for t, state in moves.items() if before.get(t) != state}
        resumed = set(before) - set(moves)
        for tenant_id in stopped | resumed:
            self.forget_home(tenant_id)  # its home changed, or is about to
        return stopped, resumed

    async def moved_key_home(self, secret: str) -> str | None:
        """For a key that names another region: this region when its tenant's home
        moved here (or is moving, either way: this region answers), the tenant's new
        home when it moved on from here; None when no move here concerns it (the key's
        region is its home). Costs nothing unless a move touched this region."""
        if not self.moves and not self.arrived:
            return None
        digest = hash_secret(secret)
        now = time.monotonic()
        cached = self._auth_cache.get(digest)
        if cached is not None:
            tenant_id = cached[0].tenant_id
        elif self._unknown_keys.get(digest, 0.0) > now:
            return None
        else:
            key = await self._store.api_key_for_hash(digest)
            if key is None:
                if len(self._unknown_keys) > AUTH_CACHE_MAX:
                    self._unknown_keys.clear()
                self._unknown_keys[digest] = now + self._config.auth_cache_s
                return None
            tenant_id = key.tenant_id
        state = self.moves.get(tenant_id)
        if state == "gone":
            return await self.home_region(tenant_id)
        if state == "frozen" or tenant_id in self.arrived:
            return self._config.region
        return None

    def served(self, tenant_id: uuid.UUID) -> bool:
        """Whether this node serves ``tenant_id`` now (no move freezes it or took it)."""
        return tenant_id not in self.moves

    def check_served(self, tenant_id: uuid.UUID) -> None:
        """TenantMoving (UNAVAILABLE, retried by the SDKs) for a tenant a move freezes
        here. A departed one passes: its home region (the router's look-up) is the new
        one now, so its calls are forwarded there and its writes refused here."""
        if self.moves.get(tenant_id) == "frozen":
            raise TenantMoving(str(tenant_id))

    async def create_tenant(
        self,
        *,
        name: str,
        tier: str = "STANDARD",
        rate_limit_rps: int = 0,
        max_concurrent_workers: int = 0,
        home_region: str = "",
    ) -> Tenant:
        """Create a tenant; zero quotas mean the defaults, no ``home_region`` means this
        node's region. Whether another region is a known one is the transport's check
        (it knows the directory, and forwards such a call there)."""
        if not name or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument("tenant.name", f"must be 1..{MAX_NAME_CHARS} characters")
        if tier not in TIERS:
            raise InvalidArgument("tenant.tier", "must be STANDARD, ENTERPRISE or SYSTEM")
        if rate_limit_rps < 0 or max_concurrent_workers < 0:
            raise InvalidArgument("tenant", "quotas must not be negative")
        defaults = Tenant(id=uuid.uuid4(), name=name)
        tenant = Tenant(
            id=defaults.id,
            name=name,
            tier=tier,
            rate_limit_rps=rate_limit_rps or defaults.rate_limit_rps,
            max_concurrent_workers=max_concurrent_workers or defaults.max_concurrent_workers,
            home_region=check_region_name(home_region, "tenant.home_region")
            if home_region
            else self._config.region,
        )
        created = await self._store.create_tenant(tenant)
        self._homes.pop(created.id, None)
        return created

    async def get_tenant(self, tenant_id: uuid.UUID) -> Tenant:
        """One tenant."""
        return await self._store.get_tenant(tenant_id)

    async def update_tenant(self, tenant_id: uuid.UUID, changes: Mapping[str, Any]) -> Tenant:
        """Change a tenant's tier or quotas."""
        updated = await self._store.update_tenant(tenant_id, changes)
        self.forget_home(tenant_id)
        return updated

    # -- home regions ------------------------------------------------------------------
    async def home_region(self, tenant_id: uuid.UUID) -> str:
        """The region where ``tenant_id``'s rows live and run, cached for
        ``home_cache_s`` (NotFound for an unknown tenant).

        The one place a node reads a tenant's home: the router forwards a call whose
        tenant's home is another region, and :meth:`check_home` refuses its writes. A
        stored home of ``local`` (the schema's default, so every tenant made before
        regions) reads as this node's region: such a tenant belongs to the region that
        holds its rows (as ``tw_<token>`` keys belong to the region that issued them)."""
        now = time.monotonic()
        cached = self._homes.get(tenant_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        home = (await self._store.get_tenant(tenant_id)).home_region
        if home == DEFAULT_REGION:
            home = self._config.region
        if len(self._homes) > AUTH_CACHE_MAX:
            self._homes.clear()
        self._homes[tenant_id] = (home, now + self._config.home_cache_s)
        return home

    def forget_home(self, tenant_id: uuid.UUID) -> None:
        """Drop the cached home of ``tenant_id`` (after its home changed here)."""
        self._homes.pop(tenant_id, None)

    async def check_home(self, tenant_id: uuid.UUID) -> None:
        """FailedPrecondition unless this node's region is ``tenant_id``'s home: a region
        never writes another region's tenant's rows (the router sends such calls home
        first; this is the check under it). An unknown tenant passes (its writes fail
        on their own)."""
        try:
            home = await self.home_region(tenant_id)
        except NotFound:
            return
        if home != self._config.region:
            raise FailedPrecondition(
                "tenant",
                f"tenant {tenant_id} lives in region {home!r}, not in this region "
                f"{self._config.region!r}: its rows are written only at home",
            )

    async def create_api_key(
        self,
        tenant_id: uuid.UUID,
        name: str,
        *,
        scopes: frozenset[Scope] = DEFAULT_SCOPES,
        expires_at: datetime | None = None,
    ) -> tuple[ApiKey, str]:
        """A new key; the secret is returned once and stored only as a hash.

        No scopes given means :data:`~scheduler.types.DEFAULT_SCOPES` (submit, read,
        work); ``expires_at`` None means it never expires."""
        if not name or len(name) > MAX_NAME_CHARS:
            raise InvalidArgument("name", f"must be 1..{MAX_NAME_CHARS} characters")
        if expires_at is not None and expires_at <= datetime.now(UTC):
            raise InvalidArgument("expires_at", "must be in the future")
        secret = _new_secret(self._config.region)
        key = await self._store.create_api_key(
            tenant_id,
            name,
            hash_secret(secret),
            scopes=scopes or DEFAULT_SCOPES,
            expires_at=expires_at,
        )
        return key, secret

    async def get_api_key(self, key_id: uuid.UUID) -> ApiKey:
        """One key (never its secret); NotFound."""
        return await self._store.get_api_key(key_id)

    async def list_api_keys(self, tenant_id: uuid.UUID) -> list[ApiKey]:
        """Every key of a tenant (NotFound for an unknown tenant)."""
        await self._store.get_tenant(tenant_id)
        return await self._store.list_api_keys(tenant_id)

    async def revoke_api_key(self, key_id: uuid.UUID) -> ApiKey:
        """Revoke a key: on this node it stops working at once (the cache forgets it);
        other nodes stop trusting it within ``auth_cache_s``."""
        key = await self._store.revoke_api_key(key_id, datetime.now(UTC))
        self._forget(key_id)
        return key

    async def rotate_api_key(
        self,
        key_id: uuid.UUID,
        *,
        grace_s: float = 0,
        expires_at: datetime | None = None,
    ) -> tuple[ApiKey, ApiKey, str]:
        """A new key with the old one's name and scopes; the old one keeps working for
        ``grace_s`` (0: :data:`~scheduler.limits.DEFAULT_ROTATION_GRACE_S`) and then
        expires. Returns (old, new, the new secret)."""
        if grace_s < 0 or grace_s > MAX_ROTATION_GRACE_S:
            raise InvalidArgument("grace_s", f"must be 0..{MAX_ROTATION_GRACE_S} seconds")
        now = datetime.now(UTC)
        if expires_at is not None and expires_at <= now:
            raise InvalidArgument("expires_at", "must be in the future")
        current = await self._store.get_api_key(key_id)
        if not current.usable_at(now):
            state = "revoked" if current.revoked else "expired"
            raise InvalidArgument("key_id", f"the key is {state}: create a new one instead")
        secret = _new_secret(self._config.region)
        grace_until = now + timedelta(seconds=grace_s or DEFAULT_ROTATION_GRACE_S)
        old, new = await self._store.rotate_api_key(
            key_id,
            uuid.uuid4(),
            hash_secret(secret),
            at=now,
            grace_until=grace_until,
            expires_at=expires_at,
        )
        self._forget(key_id)
        return old, new, secret

    async def list_tenants(self, after: uuid.UUID | None, limit: int) -> list[Tenant]:
        """Tenants in id order after ``after`` (a page of at most ``limit``)."""
        if limit < 1 or limit > MAX_PAGE_SIZE:
            raise InvalidArgument("page_size", f"must be 1..{MAX_PAGE_SIZE}")
        return await self._store.list_tenants(after, limit)

    def knows(self, secret: str) -> bool:
        """Whether this node has verified ``secret`` lately (its answer is cached, or
        was and is being re-checked): the auth throttle lets such keys through."""
        return hash_secret(secret) in self._auth_cache

    async def authenticate(self, secret: str) -> ApiKey:
        """The key of an API key secret; Unauthenticated when unknown, revoked or
        expired. Expiry is checked on every call; a revocation on another node is seen
        within ``auth_cache_s``."""
        if not secret:
            raise Unauthenticated("missing API key (x-api-key metadata)")
        digest = hash_secret(secret)
        cached = self._auth_cache.get(digest)
        now = time.monotonic()
        if cached is not None and cached[1] > now:
            key = cached[0]
        else:
            found = await self._store.api_key_for_hash(digest)
            if found is None:
                self._auth_cache.pop(digest, None)
                raise Unauthenticated("unknown API key")
            key = found
            if len(self._auth_cache) > AUTH_CACHE_MAX:
                self._auth_cache.clear()
            # A revoked key keeps working for at most auth_cache_s on other nodes.
            self._auth_cache[digest] = (key, now + self._config.auth_cache_s)
        wall = datetime.now(UTC)
        if key.revoked:
            raise Unauthenticated(f"API key {key.id} is revoked")
        if key.expires_at is not None and wall >= key.expires_at:
            raise Unauthenticated(f"API key {key.id} expired at {key.expires_at.isoformat()}")
        await self._touch(key.id, now, wall)
        return key

    async def _touch(self, key_id: uuid.UUID, now: float, wall: datetime) -> None:
        last = self._touched.get(key_id)
        if last is not None and now - last < KEY_TOUCH_INTERVAL_S:
            return
        if len(self._touched) > AUTH_CACHE_MAX:
            self._touched.clear()
        self._touched[key_id] = now
        try:
            await self._store.touch_api_keys({key_id: wall})
        except StoreError as exc:  # last use is advisory: never fail a call for it
            _log.warning("could not record the last use of API key %s: %s", key_id, exc)

    def _forget(self, key_id: uuid.UUID) -> None:
        for digest in [d for d, (k, _) in self._auth_cache.items() if k.id == key_id]:
            del self._auth_cache[digest]


def _new_secret(region: str) -> str:
    """A new key secret naming ``region``: ``tw_<region>.<token>`` (docs/regions.md)."""
    return key_secret(region, secrets.token_urlsafe(32))
