"""What every dashboard request shares: its session, its credentials and tenant, the
call metadata, and how a page is rendered.

Owns :class:`Ctx` (one per request, built by the session middleware in ``_app``),
:func:`render` (a template with the base context: the tenant picker, the CSRF token,
the messages), :func:`url` (a link that keeps the chosen tenant) and the error pages.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp_jinja2
from aiohttp import web

from scheduler._proto.tickwheel.v1 import tickwheel_pb2 as pb
from scheduler.ui._api import (
    ADMIN_TOKEN_HEADER,
    ALL_TENANTS,
    API_KEY_HEADER,
    Api,
    ApiError,
    call_metadata,
)
from scheduler.ui._boundary import client_address
from scheduler.ui._format import visible_controls
from scheduler.ui._sessions import Session

API_KEY: web.AppKey[Api] = web.AppKey("tickwheel_api", Api)
TENANTS_TTL_S = 30.0
MAX_TENANTS_SHOWN = 1000


@dataclasses.dataclass(slots=True)
class Ctx:
    """One request's view of the scheduler."""

    request: web.Request
    api: Api
    session: Session
    tenant: str | None

    @property
    def client(self) -> str:
        """The browser's address (the server throttles failed logins per browser)."""
        return client_address(self.request)

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return call_metadata(self.session.creds, self.tenant) + self.api.on_behalf_of(self.client)

    @property
    def all_tenants(self) -> bool:
        """True when the calls answer for every tenant (the admin token, no tenant)."""
        creds = self.session.creds
        if not creds.admin_token:
            return False
        return self.tenant == ALL_TENANTS or (self.tenant is None and not creds.api_key)

    async def can_write(self) -> bool:
        """Whether the calls may change tasks and schedules (the ``submit`` scope): the
        admin token always may; an API key is asked once per session, by cancelling a
        task that does not exist (PERMISSION_DENIED: read-only; NOT_FOUND: it may)."""
        if not self.session.logged_in or API_KEY_HEADER not in dict(self.metadata):
            return True
        if self.session.key_can_write is None:
            try:
                await self.api.call(
                    self.api.scheduler.CancelTask,
                    pb.CancelTaskRequest(task_id=str(uuid.uuid4())),
                    self.metadata,
                )
            except ApiError as exc:
                if exc.code.name == "PERMISSION_DENIED":
                    self.session.key_can_write = False
                elif exc.not_found:
                    self.session.key_can_write = True
                else:
                    return True  # unknown for now: the server still refuses what it must
            else:
                self.session.key_can_write = True
        return self.session.key_can_write

    def url(self, path: str, params: list[tuple[str, str]] | None = None) -> str:
        """``path`` with ``params`` and the chosen tenant."""
        items = list(params or [])
        if self.tenant and self.session.creds.admin_token:
            items.append(("tenant", self.tenant))
        return path + ("?" + urlencode(items) if items else "")


CTX_KEY: web.RequestKey[Ctx] = web.RequestKey("tickwheel_ui", Ctx)


def ctx_of(request: web.Request) -> Ctx:
    return request[CTX_KEY]


_tenant_cache: dict[str, tuple[float, list[dict[str, str]]]] = {}


async def tenant_choices(ctx: Ctx) -> list[dict[str, str]]:
    """The admin's tenant picker (ListTenants, cached a few seconds per token)."""
    token = ctx.session.creds.admin_token
    if not token:
        return []
    hit = _tenant_cache.get(token)
    now = time.monotonic()
    if hit and now - hit[0] < TENANTS_TTL_S:
        return hit[1]
    out: list[dict[str, str]] = []
    page_token = ""
    try:
        while len(out) < MAX_TENANTS_SHOWN:
            resp = await ctx.api.call(
                ctx.api.admin.ListTenants,
                pb.ListTenantsRequest(page_size=500, page_token=page_token),
                ((ADMIN_TOKEN_HEADER, token), *ctx.api.on_behalf_of(ctx.client)),
            )
            out += [{"id": t.id, "name": t.name} for t in resp.tenants]
            page_token = resp.next_page_token
            if not page_token:
                break
    except ApiError:
        return []
    if len(_tenant_cache) > 100:
        _tenant_cache.clear()
    _tenant_cache[token] = (now, out)
    return out


_known_tenants: set[str] = set()


async def tenant_problem(ctx: Ctx) -> str | None:
    """Why the admin's ``?tenant=`` cannot be shown (no such tenant), or None."""
    token = ctx.session.creds.admin_token
    if not token or ctx.tenant in (None, ALL_TENANTS) or ctx.tenant in _known_tenants:
        return None
    try:
        await ctx.api.call(
            ctx.api.admin.GetTenant,
            pb.GetTenantRequest(tenant_id=ctx.tenant),
            ((ADMIN_TOKEN_HEADER, token), *ctx.api.on_behalf_of(ctx.client)),
        )
    except ApiError as exc:
        if exc.not_found:
            return f"tenant: no tenant has the id {ctx.tenant}"
        raise
    if len(_known_tenants) > 1000:
        _known_tenants.clear()
    _known_tenants.add(str(ctx.tenant))
    return None


async def render(
    request: web.Request, template: str, context: dict[str, Any], *, status: int = 200
) -> web.Response:
    """``template`` with the base context every page needs."""
    ctx = ctx_of(request)
    creds = ctx.session.creds
    tenants = await tenant_choices(ctx)
    base = {
        "csrf": ctx.session.csrf,
        "messages": ctx.session.take_messages(),
        "tenant": ctx.tenant,
        "tenants": tenants,
        "tenant_names": {t["id"]: visible_controls(t["name"]) for t in tenants},
        "is_admin": creds.is_admin,
        "has_key": bool(creds.api_key),
        "all_tenants": ctx.all_tenants,
        "can_write": await ctx.can_write(),
        "logged_in": ctx.session.logged_in,
        "url": ctx.url,
        # Never "//host/..." (a protocol-relative URL) in the tenant form's action.
        "path": "/" + request.path.lstrip("/"),
        "target": ctx.api.target,
    }
    response = aiohttp_jinja2.render_template(template, request, {**base, **context})
    response.set_status(status)
    return response


async def error_page(request: web.Request, status: int, title: str, detail: str) -> web.Response:
    return await render(request, "error.html", {"title": title, "detail": detail}, status=status)


async def not_found(request: web.Request, what: str = "This page") -> web.Response:
    return await error_page(request, 404, "Not found", f"{what} does not exist or is not yours.")


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def one_tenant(handler: Handler) -> Handler:
    """A page that shows one tenant's data: for the admin's "all tenants" view (where
    the API answers INVALID_ARGUMENT without ``x-tenant-id``) a tenant picker instead."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        ctx = ctx_of(request)
        if not ctx.all_tenants:
            return await handler(request)
        if request.path.startswith("/api/"):
            return web.json_response(
                {"error": "tenant: this answers for one tenant; add ?tenant=ID"}, status=400
            )
        return await pick_tenant(request)

    return wrapped


async def pick_tenant(request: web.Request) -> web.Response:
    """Every tenant by name, each a link to this page (with its query) for that tenant."""
    ctx = ctx_of(request)
    kept = [(k, v) for k, v in request.query.items() if k != "tenant"]
    path = "/" + request.path.lstrip("/")
    choices = [
        {**t, "href": path + "?" + urlencode([*kept, ("tenant", t["id"])])}
        for t in await tenant_choices(ctx)
    ]
    page = path.strip("/").split("/")[0].capitalize() or "Overview"
    return await render(
        request,
        "pick_tenant.html",
        {"title": f"{page}: pick a tenant", "page": page, "choices": choices},
    )


def redirect(location: str) -> web.HTTPSeeOther:
    """Post/redirect/get: a 303 to ``location``."""
    return web.HTTPSeeOther(location)
