"""AdminService: tenants and API keys, behind the operator's admin token or, for its
own tenant's keys, a tenant's API key with the ``admin`` scope (docs/keys.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import grpc

from scheduler._errors import FailedPrecondition, InvalidArgument, NotFound, UnknownRegion
from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler._proto.tickwheel.v1 import tickwheel_pb2_grpc as pbg
from scheduler._wellknown import timestamp
from scheduler.engine import Engine
from scheduler.limits import DEFAULT_PAGE_SIZE, MAX_CONCURRENCY_LIMIT, MAX_PAGE_SIZE
from scheduler.regions import check_region_name
from scheduler.server import _convert as conv
from scheduler.server._auth import Gatekeeper
from scheduler.server._config import ServerConfig
from scheduler.server._status import unary
from scheduler.types import ApiKey, Scope

Context = grpc.aio.ServicerContext[Any, Any]


class AdminService(pbg.AdminServiceServicer):
    """gRPC adapter over the engine's tenant and key management."""

    def __init__(
        self, engine: Engine, config: ServerConfig, gate: Gatekeeper | None = None
    ) -> None:
        self._engine = engine
        self._gate = gate or Gatekeeper(engine, config)
        self._config = config

    def _check_home(self, home: str) -> None:
        """A new tenant's home must be a region of the directory, and this one: the
        router forwarded a CreateTenant for another region there (so a tenant row is
        written only at home)."""
        config = self._config
        check_region_name(home, "tenant.home_region")
        if home == config.region:
            return
        if home not in config.regions:
            known = ", ".join(config.regions.names or (config.region,))
            raise UnknownRegion("tenant.home_region", home, known)
        raise FailedPrecondition(
            "tenant.home_region",
            f"a tenant of region {home!r} is created in that region, not in {config.region!r}",
        )

    @unary
    async def CreateTenant(
        self, request: pb.CreateTenantRequest, context: Context
    ) -> pb.CreateTenantResponse:
        """Create a tenant (platform admin token only)."""
        self._gate.platform_admin(context)
        if not request.HasField("tenant"):
            raise InvalidArgument("tenant", "required")
        t = request.tenant
        name = conv.name_from_proto(t.name, "tenant.name")
        tier = conv.tier_from_proto(t.tier, "tenant.tier") if t.tier else "STANDARD"
        if t.home_region:
            self._check_home(t.home_region)
        tenant = await self._engine.tenancy.create_tenant(
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
        """Read a tenant (the admin token, or an admin key of that tenant)."""
        tenant_id = await self._gate.admin_for(context, request.tenant_id)
        tenant = await self._engine.tenancy.get_tenant(tenant_id)
        return pb.GetTenantResponse(tenant=conv.tenant_to_proto(tenant))

    @unary
    async def UpdateTenant(
        self, request: pb.UpdateTenantRequest, context: Context
    ) -> pb.UpdateTenantResponse:
        """Change a tenant's tier or quotas (zero/empty fields are unchanged; platform
        admin token only)."""
        self._gate.platform_admin(context)
        tenant_id = conv.parse_uuid(request.tenant_id, "tenant_id")
        changes: dict[str, Any] = {}
        if request.tier:
            changes["tier"] = conv.tier_from_proto(request.tier, "tier")
        if request.rate_limit_rps:
            changes["rate_limit_rps"] = request.rate_limit_rps
        if request.max_concurrent_workers:
            changes["max_concurrent_workers"] = request.max_concurrent_workers
        tenant = (
            await self._engine.tenancy.update_tenant(tenant_id, changes)
            if changes
            else await self._engine.tenancy.get_tenant(tenant_id)
        )
        return pb.UpdateTenantResponse(tenant=conv.tenant_to_proto(tenant))

    @unary
    async def CreateApiKey(
        self, request: pb.CreateApiKeyRequest, context: Context
    ) -> pb.CreateApiKeyResponse:
        """Create an API key; the secret is returned once."""
        tenant_id = await self._gate.admin_for(context, request.tenant_id)
        name = conv.name_from_proto(request.name, "name")
        scopes = scopes_from_proto(request.scopes, "scopes")
        expires_at = (
            conv.to_datetime(request.expires_at, "expires_at")
            if request.HasField("expires_at")
            else None
        )
        key, secret = await self._engine.tenancy.create_api_key(
            tenant_id, name, scopes=scopes, expires_at=expires_at
        )
        return pb.CreateApiKeyResponse(key_id=str(key.id), secret=secret)

    # -- Concurrency keys (docs/flow-control.md) ------------------------------------------
    @unary
    async def SetConcurrencyLimit(
        self, request: pb.SetConcurrencyLimitRequest, context: Context
    ) -> pb.SetConcurrencyLimitResponse:
        """Set (0: clear) how many tasks of one concurrency key of a type run at once."""
        tenant_id = await self._gate.admin_for(context, request.tenant_id)
        typ = conv.task_type_from_proto(request.type, "type")
        if request.limit > MAX_CONCURRENCY_LIMIT:
            raise InvalidArgument("limit", f"must be in 1..{MAX_CONCURRENCY_LIMIT} (0: clear)")
        limit = request.limit or None
        store = self._engine.store
        await store.set_concurrency_limit(tenant_id, typ, limit, self._engine.now())
        return pb.SetConcurrencyLimitResponse(
            limit=pb.ConcurrencyLimit(tenant_id=str(tenant_id), type=typ, limit=limit or 1)
        )

    @unary
    async def ListConcurrencyLimits(
        self, request: pb.ListConcurrencyLimitsRequest, context: Context
    ) -> pb.ListConcurrencyLimitsResponse:
        """The concurrency limits set for a tenant's types."""
        tenant_id = await self._gate.admin_for(context, request.tenant_id)
        found = await self._engine.store.concurrency_limits(tenant_id)
        return pb.ListConcurrencyLimitsResponse(
            limits=[
                pb.ConcurrencyLimit(tenant_id=str(c.tenant_id), type=c.type, limit=c.limit)
                for c in found
            ]
        )

    # -- API keys ------------------------------------------------------------------------
    @unary
    async def ListApiKeys(
        self, request: pb.ListApiKeysRequest, context: Context
    ) -> pb.ListApiKeysResponse:
        """Every key of a tenant; never a secret."""
        tenant_id = await self._gate.admin_for(context, request.tenant_id)
        keys = await self._engine.tenancy.list_api_keys(tenant_id)
        return pb.ListApiKeysResponse(keys=[api_key_to_proto(k) for k in keys])

    @unary
    async def RevokeApiKey(
        self, request: pb.RevokeApiKeyRequest, context: Context
    ) -> pb.RevokeApiKeyResponse:
        """Revoke a key (at once on this node; see the proto for the bounds)."""
        admin_of = await self._gate.tenant_admin(context)
        key_id = conv.parse_uuid(request.key_id, "key_id")
        await self._own_key(admin_of, key_id)
        key = await self._engine.tenancy.revoke_api_key(key_id)
        return pb.RevokeApiKeyResponse(key=api_key_to_proto(key))

    @unary
    async def RotateApiKey(
        self, request: pb.RotateApiKeyRequest, context: Context
    ) -> pb.RotateApiKeyResponse:
        """A new key like the old one; the old one expires after the grace."""
        admin_of = await self._gate.tenant_admin(context)
        key_id = conv.parse_uuid(request.key_id, "key_id")
        await self._own_key(admin_of, key_id)
        expires_at = (
            conv.to_datetime(request.expires_at, "expires_at")
            if request.HasField("expires_at")
            else None
        )
        old, new, secret = await self._engine.tenancy.rotate_api_key(
            key_id, grace_s=request.grace_s, expires_at=expires_at
        )
        return pb.RotateApiKeyResponse(
            old_key=api_key_to_proto(old), new_key=api_key_to_proto(new), secret=secret
        )

    @unary
    async def ListTenants(
        self, request: pb.ListTenantsRequest, context: Context
    ) -> pb.ListTenantsResponse:
        """A page of tenants in id order (platform admin token only)."""
        self._gate.platform_admin(context)
        size = request.page_size or DEFAULT_PAGE_SIZE
        if size > MAX_PAGE_SIZE:
            raise InvalidArgument("page_size", f"must be at most {MAX_PAGE_SIZE}")
        after = conv.parse_uuid(request.page_token, "page_token") if request.page_token else None
        tenants = await self._engine.tenancy.list_tenants(after, size + 1)
        more = len(tenants) > size
        tenants = tenants[:size]
        return pb.ListTenantsResponse(
            tenants=[conv.tenant_to_proto(t) for t in tenants],
            next_page_token=str(tenants[-1].id) if more else "",
        )

    async def _own_key(self, admin_of: uuid.UUID | None, key_id: uuid.UUID) -> None:
        """NotFound for a key of another tenant (as for one that does not exist)."""
        if admin_of is None:
            return
        key = await self._engine.tenancy.get_api_key(key_id)
        if key.tenant_id != admin_of:
            raise NotFound("api key", str(key_id))


def scopes_from_proto(values: Any, field: str) -> frozenset[Scope]:
    """Scope names; empty means the defaults (the engine fills them)."""
    out: set[Scope] = set()
    known = {s.value: s for s in Scope}
    for i, value in enumerate(values):
        scope = known.get(value)
        if scope is None:
            names = ", ".join(s.value for s in Scope)
            raise InvalidArgument(f"{field}[{i}]", f"{value[:32]!r} is not a scope ({names})")
        out.add(scope)
    return frozenset(out)


def _ts(value: datetime | None, msg: Any) -> None:
    if value is not None:
        msg.CopyFrom(timestamp(value))


def api_key_to_proto(key: ApiKey) -> pb.ApiKey:
    """The proto view of a key (never its secret)."""
    msg = pb.ApiKey(
        id=str(key.id),
        tenant_id=str(key.tenant_id),
        name=key.name,
        scopes=sorted(s.value for s in key.scopes),
        revoked=key.revoked,
        rotated_from=str(key.rotated_from) if key.rotated_from else "",
    )
    _ts(key.created_at, msg.created_at)
    _ts(key.expires_at, msg.expires_at)
    _ts(key.revoked_at, msg.revoked_at)
    _ts(key.last_used_at, msg.last_used_at)
    return msg
