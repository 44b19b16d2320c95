"""Options shared by several commands: server target and TLS, credentials, ``--json``,
Kafka mode, the ``/metrics`` endpoint. Every flag can also come from a ``TICKWHEEL_*`` env var.

Used by the command modules; calls nothing but click.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from scheduler.client import Pool

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TARGET = "localhost:50051"
"""Where the client commands connect unless told (``--target``, ``TICKWHEEL_TARGET``)."""
DEFAULT_SQLITE = "sqlite:///.tickwheel/tickwheel.db"
"""The store of ``serve`` without ``--store`` or ``--postgres-dsn``."""


def client_options(fn: F) -> F:
    """--target, credentials and client TLS for commands that call a server."""
    options = [
        click.option(
            "--target",
            envvar="TICKWHEEL_TARGET",
            default=DEFAULT_TARGET,
            show_default=True,
            help="Server host:port.",
        ),
        click.option(
            "--tls-ca",
            envvar="TICKWHEEL_TLS_CA",
            type=click.Path(exists=True, dir_okay=False),
            help="PEM CA that signed the server certificate (turns TLS on).",
        ),
        click.option(
            "--tls-cert",
            "tls_client_cert",
            envvar="TICKWHEEL_TLS_CLIENT_CERT",
            type=click.Path(exists=True, dir_okay=False),
            help="PEM client certificate (mutual TLS).",
        ),
        click.option(
            "--tls-key",
            "tls_client_key",
            envvar="TICKWHEEL_TLS_CLIENT_KEY",
            type=click.Path(exists=True, dir_okay=False),
            help="PEM client key (mutual TLS).",
        ),
        click.option(
            "--tls",
            "tls_system",
            is_flag=True,
            envvar="TICKWHEEL_TLS",
            help="TLS with the system roots.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def api_key_option(fn: F) -> F:
    """--api-key (TICKWHEEL_API_KEY)."""
    return click.option(
        "--api-key", envvar="TICKWHEEL_API_KEY", required=True, help="Tenant API key."
    )(fn)


def json_option(fn: F) -> F:
    """--json output."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def wide_option(fn: F) -> F:
    """--wide: plain columns that never cut a value (the default when stdout is piped)."""
    return click.option(
        "--wide", is_flag=True, help="Never cut a column (the default when piped)."
    )(fn)


def parse_kafka_pools(value: str | None, hint: str = "--kafka-pools") -> frozenset[Pool]:
    """``--kafka-pools`` (or the flag ``hint`` names: ``tickwheel worker --pools``) as
    pools (empty when not given); a bad name is a usage error."""
    if not value:
        return frozenset()
    try:
        return frozenset(Pool(p.strip().lower()) for p in value.split(",") if p.strip())
    except ValueError:
        names = ", ".join(p.value for p in Pool)
        raise click.BadParameter(f"{value!r}: pools are {names}", param_hint=hint) from None


def kafka_options(fn: F) -> F:
    """``--kafka-bootstrap``, ``--kafka-pools``, ``--kafka-topic-prefix``."""
    fn = click.option(
        "--kafka-topic-prefix",
        envvar="TICKWHEEL_KAFKA_TOPIC_PREFIX",
        default="tickwheel.tasks",
        show_default=True,
    )(fn)
    fn = click.option(
        "--kafka-pools",
        envvar="TICKWHEEL_KAFKA_POOLS",
        help="Pools dispatched through Kafka, e.g. critical,bulk (docs/kafka.md).",
    )(fn)
    fn = click.option(
        "--kafka-bootstrap",
        envvar="TICKWHEEL_KAFKA_BOOTSTRAP",
        help="Kafka bootstrap servers HOST:PORT[,...]; enables Kafka dispatch mode.",
    )(fn)
    return fn


def admin_token_option(fn: F) -> F:
    """--admin-token (TICKWHEEL_ADMIN_TOKEN)."""
    return click.option("--admin-token", envvar="TICKWHEEL_ADMIN_TOKEN", required=True)(fn)


def metrics_options(*, default_port: int | None) -> Callable[[F], F]:
    """``--metrics-port``, ``--metrics-host`` and ``--metrics-token``
    (``TICKWHEEL_METRICS_PORT`` / ``_HOST`` / ``_TOKEN``): where ``/metrics`` listens and
    what a scrape must present. ``default_port`` None: off unless a port is given; 0
    picks a free port (printed)."""

    def decorate(fn: F) -> F:
        fn = click.option(
            "--metrics-token",
            envvar="TICKWHEEL_METRICS_TOKEN",
            help="Require Authorization: Bearer TOKEN on /metrics (at least 16 characters); "
            "without it /metrics is open to whoever reaches --metrics-host.",
        )(fn)
        fn = click.option(
            "--metrics-host",
            envvar="TICKWHEEL_METRICS_HOST",
            default="127.0.0.1",
            show_default=True,
            help="Interface of the /metrics HTTP endpoint (0.0.0.0: every interface).",
        )(fn)
        fn = click.option(
            "--metrics-port",
            envvar="TICKWHEEL_METRICS_PORT",
            type=click.IntRange(0, 65535),
            default=default_port,
            show_default=default_port is not None,
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: a free port, "
            "printed)" + ("." if default_port is not None else "; off unless given."),
        )(fn)
        return fn

    return decorate


def depth_interval_option(fn: F) -> F:
    """``--metrics-depth-interval-s``: how often a node reads queue depth for /metrics."""
    return click.option(
        "--metrics-depth-interval-s",
        envvar="TICKWHEEL_METRICS_DEPTH_INTERVAL_S",
        type=click.FloatRange(min=0),
        default=10.0,
        show_default=True,
        help="How often /metrics reads the queue depth from the store (0: never).",
    )(fn)


def directory_options(fn: F) -> F:
    """--regions and --regions-file: the region directory (docs/regions.md)."""
    fn = click.option(
        "--regions-file",
        envvar="TICKWHEEL_REGIONS_FILE",
        type=click.Path(dir_okay=False),
        help='The region directory as a JSON file: {"regions": {NAME: {"endpoints": '
        '["HOST:PORT", ...]}}} (docs/regions.md).',
    )(fn)
    fn = click.option(
        "--regions",
        envvar="TICKWHEEL_REGIONS",
        help="The region directory inline: NAME=HOST:PORT|HOST:PORT,NAME=HOST:PORT "
        "(each region's endpoints in the order to try them).",
    )(fn)
    return fn


def region_options(fn: F) -> F:
    """--region (this node's) and the directory flags, for ``serve`` and ``dev``."""
    from scheduler.regions import DEFAULT_REGION

    fn = directory_options(fn)
    fn = click.option(
        "--region",
        envvar="TICKWHEEL_REGION",
        default=DEFAULT_REGION,
        show_default=True,
        help="The region this node serves: new tenants' home, and calls of other "
        "regions' tenants are routed to theirs (docs/regions.md).",
    )(fn)
    return fn


def load_directory(regions: str | None, regions_file: str | None) -> Any:
    """The :class:`~scheduler.regions.RegionDirectory` of --regions or --regions-file
    (empty without either); a usage error naming the flag when it does not parse."""
    from scheduler._errors import InvalidArgument
    from scheduler.regions import RegionDirectory

    if regions and regions_file:
        raise click.UsageError("give --regions or --regions-file, not both")
    try:
        if regions_file:
            return RegionDirectory.load(regions_file)
        return RegionDirectory.parse(regions or "")
    except InvalidArgument as exc:
        flag = "--regions-file" if regions_file else "--regions"
        raise click.UsageError(f"{flag}: {exc.problem}") from None
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"--regions-file: not UTF-8 text ({exc.reason})") from None
