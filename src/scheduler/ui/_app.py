"""The dashboard's aiohttp application: routes, middlewares and how it is served.

Owns :class:`UIConfig`, :func:`create_app` (the routes of every page, the session and
CSRF middleware, the security headers, the error pages), the login and logout handlers,
and :func:`start_ui` (serve on a port, falling back to a free one when asked). Called
by the ``ui`` and ``dev`` commands; talks to the scheduler only through ``_api``.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path

import aiohttp_jinja2
import jinja2
from aiohttp import web

from scheduler.client import TLSConfig
from scheduler.ui import _format as fmt
from scheduler.ui import _orchestration, _overview, _tasks
from scheduler.ui._api import Api, ApiError, Credentials, parse_tenant
from scheduler.ui._sessions import COOKIE, Sessions
from scheduler.ui._web import API_KEY, CTX_KEY, Ctx, ctx_of, error_page, render

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HERE = Path(__file__).parent
SESSIONS_KEY: web.AppKey[Sessions] = web.AppKey("tickwheel_sessions", Sessions)
OPEN_PATHS = ("/login", "/static/")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


@dataclasses.dataclass(frozen=True, slots=True)
class UIConfig:
    """Where the scheduler is, what a browser acts with by default, where to listen."""

    target: str
    api_key: str | None = None
    admin_token: str | None = None
    tls: TLSConfig | None = None
    host: str = "127.0.0.1"
    port: int = 8090
    port_fallback: bool = False
    """Take a free port when ``port`` is in use (``tickwheel dev``); else an error."""


def _set_cookie(response: web.StreamResponse, request: web.Request, session_id: str) -> None:
    response.set_cookie(
        COOKIE,
        session_id,
        httponly=True,
        samesite="Strict",
        secure=request.secure,
        path="/",
    )


def _secure(headers: MutableMapping[str, str], path: str) -> None:
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "no-referrer")
    headers.setdefault("X-Frame-Options", "DENY")
    if not path.startswith("/static/"):
        headers.setdefault("Cache-Control", "no-store")


@web.middleware
async def security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        _secure(exc.headers, request.path)
        raise
    _secure(response.headers, request.path)
    return response


def see_other(location: str) -> web.Response:
    """A 303 response (returned, not raised, so cookies can go with it)."""
    return web.Response(status=303, headers={"Location": location})


@web.middleware
async def sessions_and_csrf(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every request gets a session (a new one, with the start-up credentials, for a
    browser without one); every POST needs its CSRF token; API errors become pages."""
    if request.path.startswith("/static/"):
        return await handler(request)
    sessions = request.app[SESSIONS_KEY]
    session = sessions.get(request.cookies.get(COOKIE))
    fresh = session is None
    if session is None:
        session = sessions.new()
    try:
        tenant = parse_tenant(request.query.get("tenant"))
    except ValueError:
        tenant = None
        request[CTX_KEY] = Ctx(request, request.app[API_KEY], session, None)
        response: web.StreamResponse = await error_page(
            request, 400, "Bad request", "tenant: must be a tenant id (UUID) or 'all'"
        )
        return _finish(response, request, session.id, fresh)
    request[CTX_KEY] = Ctx(request, request.app[API_KEY], session, tenant)
    try:
        if request.method == "POST":
            form = await request.post()
            token = form.get("csrf")
            if not session.csrf_ok(token if isinstance(token, str) else None):
                response = await error_page(
                    request,
                    403,
                    "Forbidden",
                    "The form's CSRF token is missing or stale: reload the page and try again.",
                )
                return _finish(response, request, session.id, fresh)
        if session.creds.empty and not request.path.startswith(OPEN_PATHS):
            if request.path.startswith("/api/"):
                response = web.json_response({"error": "log in first"}, status=401)
            else:
                response = see_other("/login")
            return _finish(response, request, session.id, fresh)
        try:
            response = await handler(request)
        except ApiError as exc:
            response = await _api_error(request, exc)
    except web.HTTPException as exc:
        if isinstance(exc, web.HTTPRedirection):
            response = see_other(exc.headers.get("Location", "/"))
        elif exc.status >= 400 and not request.path.startswith("/api/"):
            response = await error_page(request, exc.status, exc.reason, exc.text or exc.reason)
        else:
            response = web.json_response({"error": exc.text or exc.reason}, status=exc.status)
    return _finish(response, request, session.id, fresh)


def _finish(
    response: web.StreamResponse, request: web.Request, session_id: str, fresh: bool
) -> web.StreamResponse:
    if fresh:
        _set_cookie(response, request, session_id)
    return response


async def _api_error(request: web.Request, exc: ApiError) -> web.StreamResponse:
    if request.path.startswith("/api/"):
        status = 401 if exc.unauthenticated else 404 if exc.not_found else 502
        return web.json_response({"error": str(exc)}, status=status)
    if exc.unauthenticated:
        return await error_page(
            request, 401, "Not logged in", f"The scheduler refused the credentials: {exc.details}"
        )
    if exc.code.name == "PERMISSION_DENIED":
        return await error_page(request, 403, "Permission denied", exc.details)
    if exc.not_found:
        return await error_page(request, 404, "Not found", exc.details)
    if exc.code.name == "UNAVAILABLE":
        return await error_page(request, 503, "Scheduler unreachable", exc.details)
    return await error_page(request, 502, "The scheduler answered an error", str(exc))


# -- login ---------------------------------------------------------------------------


async def login_form(request: web.Request) -> web.Response:
    return await render(request, "login.html", {"title": "Log in", "error": None})


async def login(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    form = await request.post()
    api_key = str(form.get("api_key", "")).strip() or None
    admin_token = str(form.get("admin_token", "")).strip() or None
    creds = Credentials(api_key=api_key, admin_token=admin_token)
    problem = "give an API key or the admin token" if creds.empty else None
    if problem is None:
        problem = await ctx.api.check_credentials(creds)
    if problem is not None:
        return await render(
            request, "login.html", {"title": "Log in", "error": problem}, status=401
        )
    sessions = request.app[SESSIONS_KEY]
    sessions.drop(ctx.session.id)
    session = sessions.new(creds, logged_in=True)
    response = see_other("/")
    _set_cookie(response, request, session.id)
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    request.app[SESSIONS_KEY].drop(ctx.session.id)
    response = see_other("/login" if request.app[SESSIONS_KEY].default.empty else "/")
    response.del_cookie(COOKIE, path="/")
    return response


# -- the app -------------------------------------------------------------------------


def create_app(config: UIConfig, api: Api | None = None) -> web.Application:
    """The dashboard for ``config`` (``api``: an existing one, else a new channel)."""
    app = web.Application(middlewares=[security_headers, sessions_and_csrf])
    owned = api is None
    app[API_KEY] = api or Api(config.target, config.tls)
    app[SESSIONS_KEY] = Sessions(Credentials(config.api_key, config.admin_token))
    env = aiohttp_jinja2.setup(
        app,
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
    )
    env.globals["state_names"] = fmt.STATES
    if owned:

        async def close(app: web.Application) -> None:
            await app[API_KEY].close()

        app.on_cleanup.append(close)
    r = app.router
    r.add_get("/", _overview.overview)
    r.add_get("/api/overview", _overview.overview_json)
    r.add_get("/forecast", _overview.forecast)
    r.add_get("/api/forecast", _overview.forecast_json)
    r.add_get("/tasks", _tasks.tasks)
    r.add_get("/api/tasks", _tasks.tasks_json)
    r.add_get("/tasks/{task_id}", _tasks.task_detail)
    r.add_get("/api/tasks/{task_id}", _tasks.task_json)
    r.add_post("/tasks/{task_id}/cancel", _tasks.cancel)
    r.add_post("/tasks/{task_id}/redrive", _tasks.redrive)
    r.add_post("/bulk/plan", _tasks.bulk_plan)
    r.add_get("/bulk/confirm/{key}", _tasks.bulk_confirm)
    r.add_post("/bulk/run", _tasks.bulk_run)
    r.add_get("/bulk/result/{key}", _tasks.bulk_result)
    r.add_get("/schedules", _orchestration.schedules)
    r.add_get("/api/schedules", _orchestration.schedules_json)
    r.add_post("/schedules/{schedule_id}/pause", _orchestration.pause)
    r.add_post("/schedules/{schedule_id}/resume", _orchestration.resume)
    r.add_get("/workflows", _orchestration.workflows)
    r.add_get("/workflows/{workflow_id}", _orchestration.workflow)
    r.add_get("/api/workflows/{workflow_id}", _orchestration.workflow_json)
    r.add_get("/expectations", _orchestration.expectations)
    r.add_get("/api/expectations", _orchestration.expectations_json)
    r.add_get("/login", login_form)
    r.add_post("/login", login)
    r.add_post("/logout", logout)
    r.add_static("/static/", HERE / "static")
    return app


@dataclasses.dataclass(slots=True)
class RunningUI:
    """A served dashboard: its address, and how to stop it."""

    runner: web.AppRunner
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_ui(config: UIConfig) -> RunningUI:
    """Serve the dashboard on ``config.host:config.port`` (a free port when that one is
    taken and ``port_fallback`` is set); answer where it listens."""
    runner = web.AppRunner(create_app(config), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, config.host, config.port)
        try:
            await site.start()
        except OSError as exc:
            if not (config.port_fallback and exc.errno == errno.EADDRINUSE):
                raise
            log.info("port %s in use; the dashboard takes a free one", config.port)
            site = web.TCPSite(runner, config.host, 0)
            await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    port = sockets[0].getsockname()[1] if sockets else config.port
    return RunningUI(runner=runner, host=config.host, port=port)
