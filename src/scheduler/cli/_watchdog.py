"""``tickwheel watchdog``: the dead man's switch as a command (docs/watchdog.md).

Calls ``scheduler.watchdog``; registered by ``_main``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from scheduler.cli._options import metrics_options
from scheduler.cli._runner import run_coro

if TYPE_CHECKING:
    from scheduler.watchdog import Watchdog


async def _run(
    dog: Watchdog, metrics_host: str, metrics_port: int | None, metrics_token: str | None
) -> None:
    """Check forever, serving ``/metrics`` meanwhile when a port is given."""
    if metrics_port is None:
        await dog.run()
        return
    from scheduler.cli._output import err_console
    from scheduler.metrics import MetricsConfig, watchdog_endpoint

    endpoint = watchdog_endpoint(
        dog, MetricsConfig(host=metrics_host, port=metrics_port, token=metrics_token)
    )
    await endpoint.start()
    err_console.print(f"metrics on {endpoint.url}")
    try:
        await dog.run()
    finally:
        await endpoint.stop()


@click.command()
@click.option(
    "--postgres-dsn",
    # The same variable as serve's; TICKWHEEL_WATCHDOG_POSTGRES_DSN, the old name, still
    # works (deprecated) when the new one is not set.
    envvar=["TICKWHEEL_POSTGRES_DSN", "TICKWHEEL_WATCHDOG_POSTGRES_DSN"],
    help="The store's PostgreSQL (a read replica is fine). "
    "TICKWHEEL_WATCHDOG_POSTGRES_DSN is a deprecated alias.",
)
@click.option(
    "--sqlite",
    "sqlite_path",
    type=click.Path(exists=True, dir_okay=False),
    help="The embedded store's SQLite file instead.",
)
@click.option("--check-interval-s", type=float, default=60.0, show_default=True)
@click.option("--webhook-url", envvar="TICKWHEEL_WATCHDOG_WEBHOOK_URL")
@click.option("--webhook-retries", type=int, default=3, show_default=True)
@click.option("--canary/--no-canary", default=True, show_default=True)
@click.option("--canary-stale-s", type=float, default=180.0, show_default=True)
@click.option("--canary-max-lag-s", type=float, default=5.0, show_default=True)
@click.option("--once", is_flag=True, help="Check once; exit 1 when anything alerts (cron use).")
@metrics_options(default_port=None)
def watchdog(
    postgres_dsn: str | None,
    sqlite_path: str | None,
    check_interval_s: float,
    webhook_url: str | None,
    webhook_retries: int,
    canary: bool,
    canary_stale_s: float,
    canary_max_lag_s: float,
    once: bool,
    metrics_port: int | None,
    metrics_host: str,
    metrics_token: str | None,
) -> None:
    """The dead man's switch: alert when an expected job has gone silent."""
    from scheduler.watchdog import Watchdog, WatchdogConfig

    source = click.get_current_context().get_parameter_source("postgres_dsn")
    if sqlite_path and source is click.core.ParameterSource.ENVIRONMENT:
        postgres_dsn = None  # an explicit --sqlite wins over serve's exported DSN
    if bool(postgres_dsn) == bool(sqlite_path):
        raise click.UsageError("give exactly one of --postgres-dsn and --sqlite")
    url = postgres_dsn or f"sqlite:///{sqlite_path}"
    try:
        config = WatchdogConfig(
            database_url=url,
            check_interval_s=check_interval_s,
            webhook_url=webhook_url,
            webhook_retries=webhook_retries,
            canary=canary,
            canary_stale_s=canary_stale_s,
            canary_max_lag_s=canary_max_lag_s,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    dog = Watchdog(config)
    if not once:
        run_coro(_run(dog, metrics_host, metrics_port, metrics_token))
        return

    async def one() -> int:
        try:
            return len(await dog.check_once())
        finally:
            await dog.source.close()

    firing = run_coro(one())
    raise SystemExit(1 if firing else 0)
