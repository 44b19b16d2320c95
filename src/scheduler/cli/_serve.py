"""``tickwheel serve``, ``dev`` and ``migrate``: run a node, or prepare its database.

Builds a :class:`~scheduler.node.NodeConfig` from flags and env vars and runs the
:class:`~scheduler.node.Node` (the composition root); ``dev`` runs ``_dev.run_dev``.
Registered by ``_main``.
"""

from __future__ import annotations

import gc
import os
import re
import socket
from typing import Any, TypedDict

import click

from scheduler.cli._limits import server_limit_options
from scheduler.cli._options import (
    DEFAULT_SQLITE,
    depth_interval_option,
    kafka_options,
    load_directory,
    metrics_options,
    parse_kafka_pools,
    region_options,
)
from scheduler.cli._output import note
from scheduler.cli._pools import pool_options
from scheduler.cli._runner import flag_words, run_coro, run_node, tune_gc, wait_for_signal
from scheduler.cli._witness_options import witness_config, witness_options
from scheduler.client import Pool


def _store_url(store: str | None, postgres_dsn: str | None) -> str:
    if store and postgres_dsn:
        raise click.UsageError("give --store or --postgres-dsn, not both")
    return postgres_dsn or store or DEFAULT_SQLITE


def cluster_options(fn: Any) -> Any:
    """Scale-out flags of ``serve``: etcd shard ownership, Redis quotas and index."""
    fn = click.option(
        "--etcd-lease-ttl-s",
        envvar="TICKWHEEL_ETCD_LEASE_TTL_S",
        type=float,
        default=5.0,
        show_default=True,
        help="etcd lease of this node; shards move this long after it dies.",
    )(fn)
    fn = click.option(
        "--node-share",
        envvar="TICKWHEEL_NODE_SHARE",
        type=float,
        default=1.0,
        show_default=True,
        help="This node's share of each tenant quota while Redis is unreachable "
        "(1 / the number of nodes).",
    )(fn)
    fn = click.option(
        "--redis-url",
        envvar="TICKWHEEL_REDIS_URL",
        help="Redis for cluster-wide tenant quotas and the shard time index.",
    )(fn)
    fn = click.option(
        "--shard-count",
        envvar="TICKWHEEL_SHARD_COUNT",
        type=int,
        default=256,
        show_default=True,
        help="Fixed for the life of a cluster.",
    )(fn)
    fn = click.option(
        "--node-id",
        envvar="TICKWHEEL_NODE_ID",
        help="This node's id in the cluster (default: host-pid).",
    )(fn)
    fn = click.option(
        "--etcd",
        envvar="TICKWHEEL_ETCD",
        help="etcd endpoints HOST:PORT[,...]: share the shards with other nodes.",
    )(fn)
    fn = click.option(
        "--cluster-name",
        envvar="TICKWHEEL_CLUSTER_NAME",
        default="tickwheel",
        show_default=True,
        callback=_check_cluster_name,
        help="Root of this cluster's etcd and Redis keys, so clusters can share both.",
    )(fn)
    return fn


def _check_cluster_name(_ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", value):
        raise click.BadParameter(
            "must be 1-64 letters, digits, '.', '_' or '-'", param_hint="--cluster-name"
        )
    return value


def timing_options(fn: Any) -> Any:
    """The lease and heartbeat durations of ``serve`` and ``dev`` (same flags and env vars)."""
    options = [
        click.option(
            "--lookahead-s",
            envvar="TICKWHEEL_LOOKAHEAD_S",
            type=float,
            default=3600.0,
            show_default=True,
        ),
        click.option(
            "--lease-ttl-s",
            envvar="TICKWHEEL_LEASE_TTL_S",
            type=float,
            default=30.0,
            show_default=True,
        ),
        click.option(
            "--heartbeat-interval-s",
            envvar="TICKWHEEL_HEARTBEAT_INTERVAL_S",
            type=float,
            help="Heartbeat interval suggested to workers (default: a third of the lease).",
        ),
        click.option(
            "--preload-interval-s",
            envvar="TICKWHEEL_PRELOAD_INTERVAL_S",
            type=float,
            default=1.0,
            show_default=True,
            help="How often the pre-loader and the lease reaper run.",
        ),
        click.option(
            "--retry-base-s",
            envvar="TICKWHEEL_RETRY_BASE_S",
            type=float,
            default=1.0,
            show_default=True,
            help="First retry backoff (doubles per attempt).",
        ),
        click.option(
            "--count-cache-s",
            envvar="TICKWHEEL_COUNT_CACHE_S",
            type=float,
            default=5.0,
            show_default=True,
            help="CountTasks answers from a cache this many seconds fresh (stale up to 60 s "
            "while a refresh runs); 0: exact count on every call.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


class Timing(TypedDict):
    """The EngineConfig fields that :func:`timing_options` set."""

    lookahead_s: float
    lease_ttl_s: float
    heartbeat_interval_s: float
    preload_interval_s: float
    retry_base_s: float
    count_cache_ttl_s: float
    count_cache_max_age_s: float


def engine_timing(
    lookahead_s: float,
    lease_ttl_s: float,
    heartbeat_interval_s: float | None,
    preload_interval_s: float,
    retry_base_s: float,
    count_cache_s: float,
) -> Timing:
    """The EngineConfig fields of :func:`timing_options`."""
    return {
        "lookahead_s": lookahead_s,
        "lease_ttl_s": lease_ttl_s,
        "heartbeat_interval_s": heartbeat_interval_s or lease_ttl_s / 3,
        "preload_interval_s": preload_interval_s,
        "retry_base_s": retry_base_s,
        "count_cache_ttl_s": count_cache_s,
        "count_cache_max_age_s": max(60.0, count_cache_s),
    }


def _check_admin_token(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    if value is not None and len(value) < MIN_ADMIN_TOKEN_CHARS:
        raise click.BadParameter(
            f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters (got {len(value)}); make one "
            "with: python -c 'import secrets; print(secrets.token_urlsafe(24))'",
            param_hint="--admin-token",
        )
    return value


def check_listen_flag(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """``--listen`` must be HOST:PORT (a bracketed IPv6 host is fine), port 0-65535."""
    _host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(
            f"{value!r}: expected HOST:PORT, e.g. 127.0.0.1:50051, 0.0.0.0:50051 or [::]:50051 "
            "(port 0 picks a free one)",
            param_hint="--listen",
        )
    return value


MIN_ADMIN_TOKEN_CHARS = 16
"""The rule of ``ServerConfig.admin_token``, said before the server is built."""


@click.command()
@click.option(
    "--listen",
    envvar="TICKWHEEL_LISTEN",
    default="127.0.0.1:50051",
    show_default=True,
    callback=check_listen_flag,
    help="HOST:PORT to serve on; a port in use is an error.",
)
@click.option(
    "--advertise",
    envvar="TICKWHEEL_ADVERTISE",
    default=None,
    help="HOST:PORT workers dial to reach this node (WorkerService.Members); "
    "default the --listen address, so give it when listening on 0.0.0.0, [::] or port 0.",
)
@click.option("--store", envvar="TICKWHEEL_STORE", help=f"Store URL (default {DEFAULT_SQLITE}).")
@click.option(
    "--postgres-dsn", envvar="TICKWHEEL_POSTGRES_DSN", help="PostgreSQL DSN (production store)."
)
@click.option(
    "--admin-token",
    envvar="TICKWHEEL_ADMIN_TOKEN",
    callback=_check_admin_token,
    help=f"Enables AdminService with this token (at least {MIN_ADMIN_TOKEN_CHARS} characters).",
)
@click.option(
    "--dashboard-secret",
    envvar="TICKWHEEL_DASHBOARD_SECRET",
    help="Shared with `tickwheel ui --dashboard-secret` (at least 16 characters): the "
    "dashboard's calls then name each browser's address, and failed logins are throttled "
    "per browser instead of locking out every dashboard user.",
)
@click.option(
    "--tls-cert", envvar="TICKWHEEL_TLS_CERT", type=click.Path(exists=True, dir_okay=False)
)
@click.option("--tls-key", envvar="TICKWHEEL_TLS_KEY", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--tls-client-ca",
    envvar="TICKWHEEL_TLS_CLIENT_CA",
    type=click.Path(exists=True, dir_okay=False),
    help="Require client certificates signed by this CA (mTLS).",
)
@timing_options
@pool_options
@click.option(
    "--canary-interval-s",
    envvar="TICKWHEEL_CANARY_INTERVAL_S",
    type=float,
    default=60.0,
    show_default=True,
    help="Schedule a canary task this often (0: off); see docs/watchdog.md.",
)
@click.option(
    "--ack-linger-ms",
    envvar="TICKWHEEL_ACK_LINGER_MS",
    type=click.IntRange(0, 1000),
    default=500,
    show_default=True,
    help="How long an ack waits for its task's completion before it is written alone "
    "(a short task's ack is then written by its completion's statement; 0: acks are "
    "answered once written, as before).",
)
@click.option(
    "--push-ahead-ms",
    envvar="TICKWHEEL_PUSH_AHEAD_MS",
    type=click.IntRange(0, 1000),
    default=20,
    show_default=True,
    help="Push a task up to this long (and at least two thirds of it) before its due "
    "time to a worker that holds it until then (Hello.early_ms: both SDKs do), so its "
    "ack happens before the due instant; 0: every push at the due instant.",
)
@click.option(
    "--row-level-security/--no-row-level-security",
    envvar="TICKWHEEL_ROW_LEVEL_SECURITY",
    default=True,
    show_default=True,
    help="PostgreSQL: scope every query to its tenant for the row-level security "
    "policies (docs/security.md); off: isolation rests on the queries alone.",
)
@kafka_options
@cluster_options
@region_options
@click.option(
    "--reuse-port",
    envvar="TICKWHEEL_REUSE_PORT",
    is_flag=True,
    help="Share the listening port with other processes (SO_REUSEPORT); off: a port "
    "in use is an error.",
)
@metrics_options(default_port=None)
@depth_interval_option
@server_limit_options
@click.option(
    "--standby",
    envvar="TICKWHEEL_STANDBY",
    is_flag=True,
    help="A DR node on the region's PostgreSQL standby: hold the port, answer every RPC "
    "UNAVAILABLE (NOT_SERVING) until `tickwheel dr promote`, then serve "
    "(docs/regions.md, Disaster recovery).",
)
@witness_options
def serve(
    listen: str,
    advertise: str | None,
    store: str | None,
    postgres_dsn: str | None,
    admin_token: str | None,
    dashboard_secret: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    lookahead_s: float,
    lease_ttl_s: float,
    heartbeat_interval_s: float | None,
    preload_interval_s: float,
    retry_base_s: float,
    count_cache_s: float,
    pools_config: dict[str, Any],
    canary_interval_s: float,
    ack_linger_ms: int,
    push_ahead_ms: int,
    row_level_security: bool,
    kafka_bootstrap: str | None,
    kafka_pools: str | None,
    kafka_topic_prefix: str,
    etcd: str | None,
    cluster_name: str,
    node_id: str | None,
    shard_count: int,
    redis_url: str | None,
    node_share: float,
    etcd_lease_ttl_s: float,
    reuse_port: bool,
    metrics_port: int | None,
    metrics_host: str,
    metrics_token: str | None,
    metrics_depth_interval_s: float,
    limits: dict[str, Any],
    region: str,
    regions: str | None,
    regions_file: str | None,
    standby: bool,
    witness_etcd: str | None,
    witness_site: str,
    witness_lease_ttl_s: float,
    witness_margin_s: float,
) -> None:
    """Run a scheduler node until SIGINT/SIGTERM.

    Without --etcd the node takes an exclusive lease on its database first (a
    PostgreSQL advisory lock, or a lock file beside an SQLite file): a second node on
    the same database is refused. To run several nodes, give each --etcd."""
    from scheduler.engine import EngineConfig
    from scheduler.server import ServerConfig

    url = _store_url(store, postgres_dsn)
    directory = load_directory(regions, regions_file)
    try:
        engine_config = EngineConfig(
            **engine_timing(
                lookahead_s,
                lease_ttl_s,
                heartbeat_interval_s,
                preload_interval_s,
                retry_base_s,
                count_cache_s,
            ),
            **pools_config,
            canary_interval_s=canary_interval_s,
            ack_linger_ms=ack_linger_ms,
            push_ahead_ms=push_ahead_ms,
            shard_count=shard_count,
            region=region,
        )
        node = node_id or f"{socket.gethostname()}-{os.getpid()}"
        cluster_config = None
        if etcd:
            from scheduler.cluster import ClusterConfig

            cluster_config = ClusterConfig(
                etcd_endpoints=tuple(e.strip() for e in etcd.split(",") if e.strip()),
                prefix=f"/{cluster_name}",
                node_id=node,
                lease_ttl_s=etcd_lease_ttl_s,
                shard_count=shard_count,
                advertise=advertise or listen,
            )
        from scheduler.quota import QuotaConfig

        quota_config = QuotaConfig(
            redis_url=redis_url, node_share=node_share, key_prefix=cluster_name
        )
        server_config = ServerConfig(
            listen=listen,
            advertise=advertise or listen,
            admin_token=admin_token,
            dashboard_secret=dashboard_secret,
            tls_cert_path=tls_cert,
            tls_key_path=tls_key,
            tls_client_ca_path=tls_client_ca,
            reuse_port=reuse_port,
            region=region,
            regions=directory,
            **limits,
        )
        kafka_config = None
        if kafka_bootstrap:
            from scheduler.kafka import KafkaConfig

            kafka_config = KafkaConfig(
                bootstrap_servers=kafka_bootstrap,
                pools=parse_kafka_pools(kafka_pools) or frozenset(Pool),
                topic_prefix=kafka_topic_prefix,
            )
        from scheduler.node import NodeConfig

        metrics_config = None
        if metrics_port is not None:
            from scheduler.metrics import MetricsConfig

            metrics_config = MetricsConfig(
                host=metrics_host,
                port=metrics_port,
                token=metrics_token,
                depth_interval_s=metrics_depth_interval_s,
            )
        node_config = NodeConfig(
            metrics=metrics_config,
            store_url=url,
            node_id=node,
            store_actor=node,
            store_row_level_security=row_level_security,
            engine=engine_config,
            server=server_config,
            cluster=cluster_config,
            quota=quota_config,
            kafka=kafka_config,
            standby=standby,
            witness=witness_config(
                witness_etcd, region, witness_site, witness_lease_ttl_s, witness_margin_s
            ),
        )
    except ValueError as exc:
        raise click.UsageError(flag_words(str(exc))) from None
    tune_gc()
    if standby:
        note(f"standby node on {listen}: refusing every call until the database is promoted")
    run_node(_serve(node_config))


async def _serve(node_config: Any) -> None:
    from scheduler.node import Node

    node = Node(node_config)
    try:
        await node.start()
        # The recovered wheel entries live as long as the process: keep them out of the
        # collector's full passes (1M tracked objects cost a ~0.7 s stop-the-world pause).
        gc.freeze()
        if node.outlet_names:
            note(f"kafka dispatch: {', '.join(node.outlet_names)}")
        url = node_config.store_url
        where = f"region {node_config.server.region}, " if len(node_config.server.regions) else ""
        note(f"tickwheel serving on port {node.port} ({where}store: {url.split('@')[-1]})")
        if node.metrics_url:
            note(f"metrics on {node.metrics_url}")
        await wait_for_signal()
        note("stopping...")
    finally:
        await node.stop()


@click.command()
@click.option(
    "--listen",
    envvar="TICKWHEEL_LISTEN",
    default="127.0.0.1:50051",
    show_default=True,
    callback=check_listen_flag,
    help="HOST:PORT to serve on; a port in use is an error.",
)
@click.option("--db", default=".tickwheel/dev.db", show_default=True, help="SQLite file.")
@click.option(
    "--demo",
    is_flag=True,
    help=(
        "Run demo workers and a 20,000-task stampede, then exit (with the dashboard "
        "on: the stampede 40 s out, and the node stays up after it until Ctrl-C)."
    ),
)
@click.option("--demo-tasks", default=20_000, show_default=True, hidden=True)
@click.option("--reuse-port", is_flag=True, help="Share the listening port with other processes.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the connect facts (target, api_key, admin_token, tenant_id, database, "
    "ui_url, ui_login_url) as one JSON object on stdout instead of the banner.",
)
@click.option(
    "--credentials-file",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write the connect facts as JSON to this file (mode 0600).",
)
@click.option(
    "--ui-port",
    envvar="TICKWHEEL_UI_PORT",
    type=int,
    default=8090,
    show_default=True,
    help="Port of the web dashboard (a free one when this one is taken).",
)
@click.option("--no-ui", is_flag=True, help="Do not start the web dashboard.")
@timing_options
@pool_options
@metrics_options(default_port=0)
@click.option("--no-metrics", is_flag=True, help="Do not serve /metrics.")
@depth_interval_option
@server_limit_options
@region_options
def dev(
    listen: str,
    db: str,
    demo: bool,
    demo_tasks: int,
    reuse_port: bool,
    as_json: bool,
    credentials_file: str | None,
    ui_port: int,
    no_ui: bool,
    lookahead_s: float,
    lease_ttl_s: float,
    heartbeat_interval_s: float | None,
    preload_interval_s: float,
    retry_base_s: float,
    count_cache_s: float,
    pools_config: dict[str, Any],
    metrics_port: int,
    metrics_host: str,
    metrics_token: str | None,
    no_metrics: bool,
    metrics_depth_interval_s: float,
    limits: dict[str, Any],
    region: str,
    regions: str | None,
    regions_file: str | None,
) -> None:
    """Run Tickwheel embedded (SQLite, no other service) on localhost.

    The tenant "dev", its API key and the admin token are kept in DB.credentials.json
    beside the database (mode 0600) and reused when dev restarts on the same file. The
    SQLite file is locked (DB.lock beside it): a second dev or serve on the same file is
    refused. The web dashboard listens on 127.0.0.1:--ui-port; the banner prints its
    login link, which logs a browser in with the dev API key and the admin token."""
    from scheduler.cli._dev import run_dev
    from scheduler.metrics import MetricsConfig
    from scheduler.regions import REGION_NAME

    directory = load_directory(regions, regions_file)
    if not REGION_NAME.match(region):
        raise click.UsageError(f"--region: {region!r} is not a region name")
    if len(directory) and region not in directory:
        known = ", ".join(directory.names)
        raise click.UsageError(
            f"--region {region!r} is not in the region directory (known: {known}): "
            "list this node's own region too"
        )

    timing = engine_timing(
        lookahead_s,
        lease_ttl_s,
        heartbeat_interval_s,
        preload_interval_s,
        retry_base_s,
        count_cache_s,
    )
    tune_gc()
    run_node(
        run_dev(
            listen=listen,
            db=db,
            demo=demo,
            demo_tasks=demo_tasks,
            reuse_port=reuse_port,
            as_json=as_json,
            credentials_file=credentials_file,
            timing={**timing, **pools_config},
            limits=limits,
            metrics=None
            if no_metrics
            else MetricsConfig(
                host=metrics_host,
                port=metrics_port,
                token=metrics_token,
                depth_interval_s=metrics_depth_interval_s,
            ),
            ui_port=None if no_ui else ui_port,
            region=region,
            regions=directory,
        )
    )


@click.command()
@click.option("--postgres-dsn", envvar="TICKWHEEL_POSTGRES_DSN", required=True)
def migrate(postgres_dsn: str) -> None:
    """Apply pending PostgreSQL migrations."""
    from scheduler.store import migrate as do_migrate

    applied = run_coro(do_migrate(postgres_dsn))
    click.echo(f"applied migrations: {applied}" if applied else "schema is up to date")
