"""The dashboard's aiohttp application: routes, middlewares and how it is served.

Owns :class:`UIConfig`, :func:`create_app` (the routes of every page, the session and
CSRF middleware, the security headers, the error pages), the login and logout handlers,
and :func:`start_ui` (serve on a port, falling back to a free one when asked). Called
by the ``ui`` and ``dev`` commands; talks to the scheduler only through ``_api``.
"""

from __future__ import annotations

import dataclasses
import errno
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path

import aiohttp_jinja2
import jinja2
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage

from scheduler.client import TLSConfig
from scheduler.ui import _format as fmt
from scheduler.ui import _orchestration, _overview, _tasks
from scheduler.ui._api import Api, ApiError, Credentials, parse_tenant
from scheduler.ui._boundary import (
    LoginThrottle,
    allowed_hosts,
    client_address,
    host_refusal,
    origin_refusal,
)
from scheduler.ui._sessions import COOKIE, PRE_LOGIN_COOKIE, Sessions, SessionsFull
from scheduler.ui._web import (
    API_KEY,
    CTX_KEY,
    Ctx,
    ctx_of,
    error_page,
    one_tenant,
    render,
    tenant_problem,
)

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HERE = Path(__file__).parent
SESSIONS_KEY: web.AppKey[Sessions] = web.AppKey("tickwheel_sessions", Sessions)
HOSTS_KEY: web.AppKey[frozenset[str]] = web.AppKey("tickwheel_hosts", frozenset)
THROTTLE_KEY: web.AppKey[LoginThrottle] = web.AppKey("tickwheel_login_throttle", LoginThrottle)
LINK_KEY: web.AppKey[tuple[str, Credentials] | None] = web.AppKey("tickwheel_login_link")
OPEN_PATHS = ("/login", "/static/")
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


class _MalformedRequestsInOneLine(logging.Filter):
    """aiohttp logs a request it cannot parse (an over-long URL, a bad header) as an
    error with a traceback; it is the client's mistake, answered 400: one info line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, BadHttpMessage):
            record.msg, record.args = "refused a malformed request: %s", (exc.message[:200],)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


_MALFORMED = _MalformedRequestsInOneLine()


@dataclasses.dataclass(frozen=True, slots=True)
class UIConfig:
    """Where the scheduler is, what the login link logs in with, where to listen and
    which host names to answer."""

    target: str
    api_key: str | None = None
    """With ``admin_token``: the credentials of the login link. A browser that has not
    logged in (with the link or the form) acts with nothing."""
    admin_token: str | None = None
    tls: TLSConfig | None = None
    host: str = "127.0.0.1"
    port: int = 8090
    port_fallback: bool = False
    """Take a free port when ``port`` is in use (``tickwheel dev``); else an error."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names answered besides localhost, 127.0.0.1, [::1] and ``host`` (the name a
    reverse proxy or a remote browser uses); any other ``Host`` gets a 421."""
    dashboard_secret: str | None = None
    """The scheduler's ``ServerConfig.dashboard_secret``: with it, calls carry the
    browser's address and the scheduler throttles failed logins per browser."""
    login_token: str | None = None
    """The secret of the login link (``/login#token=…``); None: a random one per start
    when credentials are given, no link without them."""

    def __post_init__(self) -> None:
        if self.login_token is not None and len(self.login_token) < 16:
            raise ValueError("UIConfig.login_token must be at least 16 characters")


def _set_cookie(
    response: web.StreamResponse, request: web.Request, value: str, name: str = COOKIE
) -> None:
    response.set_cookie(
        name,
        value,
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
async def boundary(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer only the allowed host names (a DNS-rebinding page sends its own) and only
    state-changing requests of the dashboard's own pages (CSRF, login CSRF)."""
    refusal = host_refusal(request, request.app[HOSTS_KEY])
    if refusal is not None:
        return web.Response(status=421, text=f"421 Misdirected Request: {refusal}\n")
    refusal = origin_refusal(request)
    if refusal is not None:
        return web.Response(status=403, text=f"403 Forbidden: {refusal}\n")
    return await handler(request)


def _nonce(value: str | None) -> str | None:
    """A pre-login cookie value as the dashboard makes them, else None."""
    if value and 32 <= len(value) <= 64 and value.replace("-", "").replace("_", "").isalnum():
        return value
    return None


@web.middleware
async def sessions_and_csrf(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A logged-in browser gets its session; any other a transient one with no
    credentials (only /login answers it); every POST needs its CSRF token; API errors
    become pages."""
    if request.path.startswith("/static/"):
        return await handler(request)
    sessions = request.app[SESSIONS_KEY]
    session = sessions.get(request.cookies.get(COOKIE))
    new_nonce: str | None = None
    if session is None:
        nonce = _nonce(request.cookies.get(PRE_LOGIN_COOKIE))
        if nonce is None:
            nonce = new_nonce = secrets.token_urlsafe(32)
        session = sessions.anonymous(nonce)
    try:
        tenant = parse_tenant(request.query.get("tenant"))
    except ValueError:
        tenant = None
        request[CTX_KEY] = Ctx(request, request.app[API_KEY], session, None)
        response: web.StreamResponse = await error_page(
            request, 400, "Bad request", "tenant: must be a tenant id (UUID) or 'all'"
        )
        return _finish(response, request, new_nonce)
    ctx = request[CTX_KEY] = Ctx(request, request.app[API_KEY], session, tenant)
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
                return _finish(response, request, new_nonce)
        if not session.logged_in and not request.path.startswith(OPEN_PATHS):
            if request.path.startswith("/api/"):
                response = web.json_response({"error": "log in first"}, status=401)
            else:
                response = see_other("/login")
            return _finish(response, request, new_nonce)
        try:
            problem = await tenant_problem(ctx)
            if problem is not None:
                response = await _bad_request(request, problem)
            else:
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
    return _finish(response, request, new_nonce)


async def _bad_request(request: web.Request, detail: str) -> web.StreamResponse:
    if request.path.startswith("/api/"):
        return web.json_response({"error": detail}, status=400)
    return await error_page(request, 400, "Bad request", detail)


def _finish(
    response: web.StreamResponse, request: web.Request, new_nonce: str | None
) -> web.StreamResponse:
    if new_nonce is not None:
        _set_cookie(response, request, new_nonce, PRE_LOGIN_COOKIE)
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


async def _refused(request: web.Request, status: int, error: str) -> web.Response:
    return await render(request, "login.html", {"title": "Log in", "error": error}, status=status)


async def login(request: web.Request) -> web.StreamResponse:
    """The login link's token, or an API key / the admin token the scheduler accepts:
    a new session. Failures count per browser (:class:`LoginThrottle`); a scheduler
    that throttles, is out of reach or errs is an error, never a login."""
    ctx = ctx_of(request)
    throttle = request.app[THROTTLE_KEY]
    client = client_address(request)
    left = throttle.retry_after(client)
    if left is not None:
        return await _refused(
            request,
            429,
            f"Too many failed logins from this browser: try again in {max(1, round(left))} s.",
        )
    form = await request.post()
    link_token = str(form.get("link_token", "")).strip()
    if link_token:
        link = request.app[LINK_KEY]
        if link is None or not hmac.compare_digest(link_token.encode(), link[0].encode()):
            throttle.failed(client)
            return await _refused(
                request,
                401,
                "This login link is not valid: open the link the dashboard printed when it "
                "started last.",
            )
        creds = link[1]
    else:
        api_key = str(form.get("api_key", "")).strip() or None
        admin_token = str(form.get("admin_token", "")).strip() or None
        creds = Credentials(api_key=api_key, admin_token=admin_token)
        if creds.empty:
            return await _refused(request, 401, "give an API key or the admin token")
        refusal = await ctx.api.check_credentials(creds, client)
        if refusal is not None:
            if refusal.wrong_credentials:
                throttle.failed(client)
            return await _refused(request, refusal.status, refusal.message)
    sessions = request.app[SESSIONS_KEY]
    sessions.drop(ctx.session.id)
    try:
        session = sessions.new(creds)
    except SessionsFull as exc:
        return await _refused(request, 503, str(exc))
    response = see_other("/")
    _set_cookie(response, request, session.id)
    response.del_cookie(PRE_LOGIN_COOKIE, path="/")
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    ctx = ctx_of(request)
    request.app[SESSIONS_KEY].drop(ctx.session.id)
    response = see_other("/login")
    response.del_cookie(COOKIE, path="/")
    return response


# -- the app -------------------------------------------------------------------------


def login_path(app: web.Application) -> str | None:
    """The path of ``app``'s login link (``/login#token=…``: a fragment never reaches a
    server log or a ``Referer``), or None when it was started without credentials."""
    link = app[LINK_KEY]
    return None if link is None else f"/login#token={link[0]}"


def create_app(config: UIConfig, api: Api | None = None) -> web.Application:
    """The dashboard for ``config`` (``api``: an existing one, else a new channel)."""
    app = web.Application(middlewares=[security_headers, boundary, sessions_and_csrf])
    logging.getLogger("aiohttp.server").addFilter(_MALFORMED)  # once: the same filter
    owned = api is None
    app[API_KEY] = api or Api(config.target, config.tls, dashboard_secret=config.dashboard_secret)
    app[SESSIONS_KEY] = Sessions()
    app[HOSTS_KEY] = allowed_hosts(config.host, config.allowed_hosts)
    app[THROTTLE_KEY] = LoginThrottle()
    creds = Credentials(config.api_key, config.admin_token)
    app[LINK_KEY] = (
        None if creds.empty else (config.login_token or secrets.token_urlsafe(24), creds)
    )
    env = aiohttp_jinja2.setup(
        app,
        loader=jinja2.FileSystemLoader(str(HERE / "templates")),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
    )
    env.globals["state_names"] = fmt.STATES
    env.filters["shown"] = fmt.visible_controls
    env.filters["relative"] = fmt.relative
    env.filters["utc_title"] = fmt.utc_title
    if owned:

        async def close(app: web.Application) -> None:
            await app[API_KEY].close()

        app.on_cleanup.append(close)
    r = app.router
    r.add_get("/", _overview.overview)
    r.add_get("/api/overview", _overview.overview_json)
    r.add_get("/forecast", _overview.forecast)
    r.add_get("/api/forecast", _overview.forecast_json)
    r.add_get("/tasks", one_tenant(_tasks.tasks))
    r.add_get("/api/tasks", one_tenant(_tasks.tasks_json))
    r.add_get("/tasks/{task_id}", one_tenant(_tasks.task_detail))
    r.add_get("/api/tasks/{task_id}", one_tenant(_tasks.task_json))
    r.add_post("/tasks/{task_id}/cancel", _tasks.cancel)
    r.add_post("/tasks/{task_id}/redrive", _tasks.redrive)
    r.add_post("/bulk/plan", _tasks.bulk_plan)
    r.add_get("/bulk/confirm/{key}", _tasks.bulk_confirm)
    r.add_post("/bulk/run", _tasks.bulk_run)
    r.add_get("/bulk/result/{key}", _tasks.bulk_result)
    r.add_get("/schedules", one_tenant(_orchestration.schedules))
    r.add_get("/api/schedules", one_tenant(_orchestration.schedules_json))
    r.add_post("/schedules/{schedule_id}/pause", _orchestration.pause)
    r.add_post("/schedules/{schedule_id}/resume", _orchestration.resume)
    r.add_get("/workflows", one_tenant(_orchestration.workflows))
    r.add_get("/workflows/{workflow_id}", one_tenant(_orchestration.workflow))
    r.add_get("/api/workflows/{workflow_id}", one_tenant(_orchestration.workflow_json))
    r.add_get("/expectations", one_tenant(_orchestration.expectations))
    r.add_get("/api/expectations", one_tenant(_orchestration.expectations_json))
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
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    @property
    def login_url(self) -> str | None:
        """The login link to print (None: started without credentials, log in by form)."""
        path = login_path(self.runner.app)
        return None if path is None else self.url.rstrip("/") + path

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
