"""``tickwheel ui``: serve the web dashboard against a running scheduler.

Builds a :class:`~scheduler.ui.UIConfig` from flags and env vars and serves it until
SIGINT/SIGTERM; registered by ``_main``.
"""

from __future__ import annotations

from pathlib import Path

import click

from scheduler.cli._options import DEFAULT_TARGET
from scheduler.cli._output import err_console
from scheduler.cli._runner import fail, run_coro, wait_for_signal
from scheduler.client import TLSConfig
from scheduler.client._tls import is_pem

DEFAULT_UI_PORT = 8090


@click.command()
@click.option(
    "--target",
    envvar="TICKWHEEL_TARGET",
    default=DEFAULT_TARGET,
    show_default=True,
    help="Scheduler host:port.",
)
@click.option(
    "--api-key",
    envvar="TICKWHEEL_API_KEY",
    help="Credentials of the printed login link: a tenant's API key (that tenant).",
)
@click.option(
    "--admin-token",
    envvar="TICKWHEEL_ADMIN_TOKEN",
    help="Credentials of the printed login link: the platform admin token (every tenant, "
    "with a tenant picker).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    envvar="TICKWHEEL_UI_ALLOWED_HOSTS",
    multiple=True,
    help="A host name browsers use to reach the dashboard besides localhost, 127.0.0.1, "
    "[::1] and --host (repeat it; the env var takes names separated by spaces). Any other "
    "Host header is refused (421): DNS rebinding.",
)
@click.option(
    "--dashboard-secret",
    envvar="TICKWHEEL_DASHBOARD_SECRET",
    help="The scheduler's --dashboard-secret: its calls then carry each browser's "
    "address, so the scheduler throttles failed logins per browser, not per dashboard.",
)
@click.option(
    "--tls-ca",
    envvar="TICKWHEEL_TLS_CA",
    type=click.Path(exists=True, dir_okay=False),
    help="PEM CA that signed the server certificate (turns TLS on).",
)
@click.option("--host", envvar="TICKWHEEL_UI_HOST", default="127.0.0.1", show_default=True)
@click.option(
    "--port",
    envvar="TICKWHEEL_UI_PORT",
    type=int,
    default=DEFAULT_UI_PORT,
    show_default=True,
    help="HTTP port of the dashboard; 0 picks a free one.",
)
def ui(
    target: str,
    api_key: str | None,
    admin_token: str | None,
    allowed_hosts: tuple[str, ...],
    dashboard_secret: str | None,
    tls_ca: str | None,
    host: str,
    port: int,
) -> None:
    """Serve the web dashboard (a client of the scheduler's public API).

    Every browser logs in: with the login link printed at start (given --api-key or
    --admin-token), or with a key or the admin token on /login."""
    from scheduler.ui import UIConfig

    ca = Path(tls_ca).read_bytes() if tls_ca else None
    if ca is not None and not is_pem(ca):
        fail("--tls-ca: not a PEM file (no '-----BEGIN' line)", 2)
    tls = TLSConfig(server_root_ca_cert=ca) if ca is not None else None
    config = UIConfig(
        target=target,
        api_key=api_key,
        admin_token=admin_token,
        tls=tls,
        host=host,
        port=port,
        allowed_hosts=allowed_hosts,
        dashboard_secret=dashboard_secret,
    )
    run_coro(_serve(config))


async def _serve(config: object) -> None:
    from scheduler.ui import UIConfig, start_ui

    assert isinstance(config, UIConfig)
    try:
        running = await start_ui(config)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {config.host}:{config.port}: {exc}") from None
    err_console.print(f"Dashboard: {running.url} (scheduler at {config.target})")
    if running.login_url:
        # Printed, never logged: the link logs a browser in with the given credentials.
        err_console.print(f"Log in (keep this link private): {running.login_url}", soft_wrap=True)
    try:
        await wait_for_signal()
    finally:
        await running.stop()
