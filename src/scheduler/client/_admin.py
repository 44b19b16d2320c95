"""The operator's client: tenants and API keys (AdminService)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import datetime

import grpc

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.client import _convert as conv
from scheduler.client._base import (
    ADMIN_TOKEN_HEADER,
    API_KEY_HEADER,
    REGION_HEADER,
    _Base,
    check_header_value,
)
from scheduler.client._channel import check_reachable, open_channel
from scheduler.client._tls import TLSConfig
from scheduler.client._types import ApiKeyInfo, ApiKeySecret, RotatedApiKey, TenantInfo
from scheduler.types import Scope


class AdminClient(_Base):
    """An operator's connection for tenants and API keys. Create with :meth:`connect`.

    With ``admin_token`` (the platform admin token) it may manage every tenant; with
    ``api_key`` instead (a key with the ``admin`` scope) only that key's tenant's keys
    (docs/keys.md)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        *,
        admin_token: str | None = None,
        api_key: str | None = None,
        rpc_timeout_s: float = 30.0,
        region: str | None = None,
    ) -> None:
        metadata: tuple[tuple[str, str], ...] = (
            ((API_KEY_HEADER, api_key),)
            if api_key is not None and admin_token is None
            else ((ADMIN_TOKEN_HEADER, admin_token or ""),)
        )
        if region:
            # The admin token's calls go to this region (docs/regions.md).
            metadata = (*metadata, (REGION_HEADER, region))
        super().__init__(channel, metadata, rpc_timeout_s)
        self._admin = pbg.AdminServiceStub(channel)  # type: ignore[no-untyped-call]

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        admin_token: str | None = None,
        api_key: str | None = None,
        tls: TLSConfig | None = None,
        rpc_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        region: str | None = None,
    ) -> AdminClient:
        """Open a channel to ``target`` and check the server answers. ``region``: with
        the admin token, the region the calls are for (``x-tickwheel-region``; the node
        forwards them there; default: the node's own)."""
        check_header_value("admin token", admin_token)
        check_header_value("API key", api_key)
        channel = open_channel(target, tls)
        try:
            await check_reachable(channel, target, connect_timeout_s)
        except BaseException:
            await channel.close(None)
            raise
        return cls(
            channel,
            admin_token=admin_token,
            api_key=api_key,
            rpc_timeout_s=rpc_timeout_s,
            region=region,
        )

    async def create_tenant(
        self,
        name: str,
        *,
        tier: str = "STANDARD",
        rate_limit_rps: int = 0,
        max_concurrent_workers: int = 0,
        home_region: str = "",
    ) -> TenantInfo:
        """Create a tenant (zero quotas mean the server defaults)."""
        req = pb.CreateTenantRequest(
            tenant=pb.Tenant(
                name=name,
                tier=tier,
                rate_limit_rps=rate_limit_rps,
                max_concurrent_workers=max_concurrent_workers,
                home_region=home_region,
            )
        )
        resp = await self._rpc(self._admin.CreateTenant, req)
        return conv.tenant_from_proto(resp.tenant)

    async def get_tenant(self, tenant_id: uuid.UUID | str) -> TenantInfo:
        """Read a tenant."""
        resp = await self._rpc(self._admin.GetTenant, pb.GetTenantRequest(tenant_id=str(tenant_id)))
        return conv.tenant_from_proto(resp.tenant)

    async def update_tenant(
        self,
        tenant_id: uuid.UUID | str,
        *,
        tier: str | None = None,
        rate_limit_rps: int | None = None,
        max_concurrent_workers: int | None = None,
    ) -> TenantInfo:
        """Change a tenant's tier or quotas (None: unchanged)."""
        req = pb.UpdateTenantRequest(
            tenant_id=str(tenant_id),
            tier=tier or "",
            rate_limit_rps=rate_limit_rps or 0,
            max_concurrent_workers=max_concurrent_workers or 0,
        )
        resp = await self._rpc(self._admin.UpdateTenant, req)
        return conv.tenant_from_proto(resp.tenant)

    # -- concurrency keys (issue 43; docs/flow-control.md) -------------------------------
    async def set_concurrency_limit(
        self, tenant_id: uuid.UUID | str, type: str, limit: int | None
    ) -> int:
        """At most ``limit`` tasks of one concurrency key of ``type`` run at once,
        cluster-wide (1..100,000; None: back to the default, 1). Returns the limit."""
        req = pb.SetConcurrencyLimitRequest(tenant_id=str(tenant_id), type=type, limit=limit or 0)
        resp = await self._rpc(self._admin.SetConcurrencyLimit, req)
        return int(resp.limit.limit)

    async def concurrency_limits(self, tenant_id: uuid.UUID | str) -> dict[str, int]:
        """The concurrency limits set for a tenant, by task type (a type not listed: 1)."""
        req = pb.ListConcurrencyLimitsRequest(tenant_id=str(tenant_id))
        resp = await self._rpc(self._admin.ListConcurrencyLimits, req)
        return {c.type: int(c.limit) for c in resp.limits}

    # -- API keys and tenants (issue 15, issue 19) ----------------------------------------
    async def create_api_key(
        self,
        tenant_id: uuid.UUID | str,
        name: str,
        *,
        scopes: Iterable[Scope | str] | None = None,
        expires_at: datetime | None = None,
    ) -> ApiKeySecret:
        """Create an API key for a tenant; the secret is returned only now.

        ``scopes`` None: submit, read and work (everything but admin). ``expires_at``
        None: the key never expires."""
        req = pb.CreateApiKeyRequest(
            tenant_id=str(tenant_id), name=name, scopes=[str(s) for s in scopes or ()]
        )
        if expires_at is not None:
            req.expires_at.CopyFrom(conv.to_timestamp(expires_at))
        resp = await self._rpc(self._admin.CreateApiKey, req)
        return ApiKeySecret(key_id=uuid.UUID(resp.key_id), secret=resp.secret)

    async def list_api_keys(self, tenant_id: uuid.UUID | str) -> list[ApiKeyInfo]:
        """Every key of a tenant, revoked and expired ones too (never a secret)."""
        resp = await self._rpc(
            self._admin.ListApiKeys, pb.ListApiKeysRequest(tenant_id=str(tenant_id))
        )
        return [conv.api_key_from_proto(k) for k in resp.keys]

    async def revoke_api_key(self, key_id: uuid.UUID | str) -> ApiKeyInfo:
        """Revoke a key (new calls fail at once on that server, within seconds on the
        others; open worker streams end within the re-check bound)."""
        resp = await self._rpc(self._admin.RevokeApiKey, pb.RevokeApiKeyRequest(key_id=str(key_id)))
        return conv.api_key_from_proto(resp.key)

    async def rotate_api_key(
        self,
        key_id: uuid.UUID | str,
        *,
        grace_s: int = 0,
        expires_at: datetime | None = None,
    ) -> RotatedApiKey:
        """A new key with the old one's name and scopes; the old one keeps working for
        ``grace_s`` seconds (0: the server's default, an hour) and then expires."""
        req = pb.RotateApiKeyRequest(key_id=str(key_id), grace_s=grace_s)
        if expires_at is not None:
            req.expires_at.CopyFrom(conv.to_timestamp(expires_at))
        resp = await self._rpc(self._admin.RotateApiKey, req)
        return RotatedApiKey(
            old=conv.api_key_from_proto(resp.old_key),
            new=conv.api_key_from_proto(resp.new_key),
            secret=resp.secret,
        )

    async def list_tenants(self, *, page_size: int = 0) -> AsyncIterator[TenantInfo]:
        """Every tenant, in id order (pages fetched as needed; platform admin only)."""
        token = ""
        while True:
            resp = await self._rpc(
                self._admin.ListTenants,
                pb.ListTenantsRequest(page_size=page_size, page_token=token),
            )
            for t in resp.tenants:
                yield conv.tenant_from_proto(t)
            token = resp.next_page_token
            if not token:
                return
