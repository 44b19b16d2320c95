"""AdminService: tenants and API keys, behind the operator's admin token."""

from __future__ import annotations

from typing import Any

import grpc

from scheduler._errors import InvalidArgument
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler.engine import Engine
from scheduler.server import _convert as conv
from scheduler.server._auth import check_admin
from scheduler.server._config import ServerConfig
from scheduler.server._status import unary

Context = grpc.aio.ServicerContext[Any, Any]


class AdminService(pbg.AdminServiceServicer):
    """gRPC adapter over the engine's tenant and key management."""

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self._engine = engine
        self._token = config.admin_token

    @unary
    async def CreateTenant(
        self, request: pb.CreateTenantRequest, context: Context
    ) -> pb.CreateTenantResponse:
        """Create a tenant."""
        check_admin(self._token, context)
        if not request.HasField("tenant"):
            raise InvalidArgument("tenant", "required")
        t = request.tenant
        name = conv.name_from_proto(t.name, "tenant.name")
        tier = conv.tier_from_proto(t.tier, "tenant.tier") if t.tier else "STANDARD"
        if len(t.home_region) > 64:
            raise InvalidArgument("tenant.home_region", "longer than 64 characters")
        tenant = await self._engine.create_tenant(
            name=name,
            tier=tier,
            rate_limit_rps=t.rate_limit_rps,
            max_concurrent_workers=t.max_concurrent_workers,
            home_region=t.home_region,
        )
        return pb.CreateTenantResponse(tenant=conv.tenant_to_proto(tenant))

    @unary
    async def GetTenant(
        self, request: pb.GetTenantRequest, context: Context
    ) -> pb.GetTenantResponse:
        """Read a tenant."""
        check_admin(self._token, context)
        tenant_id = conv.parse_uuid(request.tenant_id, "tenant_id")
        tenant = await self._engine.get_tenant(tenant_id)
        return pb.GetTenantResponse(tenant=conv.tenant_to_proto(tenant))

    @unary
    async def UpdateTenant(
        self, request: pb.UpdateTenantRequest, context: Context
    ) -> pb.UpdateTenantResponse:
        """Change a tenant's tier or quotas (zero/empty fields are unchanged)."""
        check_admin(self._token, context)
        tenant_id = conv.parse_uuid(request.tenant_id, "tenant_id")
        changes: dict[str, Any] = {}
        if request.tier:
            changes["tier"] = conv.tier_from_proto(request.tier, "tier")
        if request.rate_limit_rps:
            changes["rate_limit_rps"] = request.rate_limit_rps
        if request.max_concurrent_workers:
            changes["max_concurrent_workers"] = request.max_concurrent_workers
        tenant = (
            await self._engine.update_tenant(tenant_id, changes)
            if changes
            else await self._engine.get_tenant(tenant_id)
        )
        return pb.UpdateTenantResponse(tenant=conv.tenant_to_proto(tenant))

    @unary
    async def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context: Context
    ) -> pb.CreateApiKeyResponse:
        """Create an API key; the secret is returned once."""
        check_admin(self._token, context)
        tenant_id = conv.parse_uuid(request.tenant_id, "tenant_id")
        name = conv.name_from_proto(request.name, "name")
        key, secret = await self._engine.create_api_key(tenant_id, name)
        return pb.CreateApiKeyResponse(key_id=str(key.id), secret=secret)
