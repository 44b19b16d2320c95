"""Command definitions. Every flag can also come from a ``TICKWHEEL_*`` env var."""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from scheduler._errors import TickwheelError
from scheduler.cli._output import err_console, print_json, print_task, print_tasks
from scheduler.client import AdminClient, Client, JitterMode, Pool, TaskState, TLSConfig

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_TARGET = "localhost:50051"
DEFAULT_SQLITE = "sqlite:///.tickwheel/tickwheel.db"


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except TickwheelError as exc:
        err_console.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        raise SystemExit(1) from None


def _run_node(coro: Coroutine[Any, Any, None]) -> None:
    """Run a node (``serve``, ``dev``): a busy port or a database another node holds
    is a one-line error and exit code 1, not a traceback."""
    from scheduler.cluster import LeaseHeld
    from scheduler.server import ListenError

    try:
        asyncio.run(coro)
    except (ListenError, LeaseHeld) as exc:
        # click, not rich: the console would wrap the line at 80 columns.
        click.echo(f"error: {exc.args[-1] if isinstance(exc, OSError) else exc}", err=True)
        raise SystemExit(1) from None
    except TickwheelError as exc:
        err_console.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        raise SystemExit(1) from None


def _tune_gc() -> None:
    """Garbage collection for a long-running service (``serve``, ``worker``, ``dev``).

    The hot paths allocate container objects (records, dicts, protos' wrappers) by the
    thousand per batch, and CPython's default first-generation threshold (700) runs a
    collection every few hundred of them, and a full one, over every object alive,
    every hundred or so of those. Everything alive after start-up (modules, classes,
    configuration) is frozen out of those passes, and a collection waits for 50,000 new
    containers (a few MB at most). Measured: the 40,000-task lifecycle benchmark, 4-7%
    more tasks/s (docs/benchmarks.md)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


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


def _tls(kw: dict[str, Any]) -> TLSConfig | None:
    ca, cert, key = kw.pop("tls_ca"), kw.pop("tls_client_cert"), kw.pop("tls_client_key")
    system = kw.pop("tls_system")
    if not (ca or cert or key or system):
        return None
    return TLSConfig(
        server_root_ca_cert=_read(ca), client_cert=_read(cert), client_private_key=_read(key)
    )


async def _with_client(kw: dict[str, Any], fn: Callable[[Client], Awaitable[T]]) -> T:
    tls = _tls(kw)
    client = await Client.connect(kw.pop("target"), api_key=kw.pop("api_key"), tls=tls)
    try:
        return await fn(client)
    finally:
        await client.close()


async def _with_admin(kw: dict[str, Any], fn: Callable[[AdminClient], Awaitable[T]]) -> T:
    tls = _tls(kw)
    admin = await AdminClient.connect(kw.pop("target"), admin_token=kw.pop("admin_token"), tls=tls)
    try:
        return await fn(admin)
    finally:
        await admin.close()


@click.group()
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug).")
def main(verbose: int) -> None:
    """Tickwheel: a multi-tenant distributed task scheduler."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# -- server side ------------------------------------------------------------------------


def _store_url(store: str | None, postgres_dsn: str | None) -> str:
    if store and postgres_dsn:
        raise click.UsageError("give --store or --postgres-dsn, not both")
    return postgres_dsn or store or DEFAULT_SQLITE


async def _wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _kafka_pools(value: str | None) -> frozenset[Pool]:
    if not value:
        return frozenset()
    try:
        return frozenset(Pool(p.strip().lower()) for p in value.split(",") if p.strip())
    except ValueError:
        names = ", ".join(p.value for p in Pool)
        raise click.BadParameter(
            f"{value!r}: pools are {names}", param_hint="--kafka-pools"
        ) from None


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


@main.command()
@click.option("--listen", envvar="TICKWHEEL_LISTEN", default="127.0.0.1:50051", show_default=True)
@click.option("--store", envvar="TICKWHEEL_STORE", help=f"Store URL (default {DEFAULT_SQLITE}).")
@click.option(
    "--postgres-dsn", envvar="TICKWHEEL_POSTGRES_DSN", help="PostgreSQL DSN (production store)."
)
@click.option(
    "--admin-token", envvar="TICKWHEEL_ADMIN_TOKEN", help="Enables AdminService with this token."
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
@click.option(
    "--lookahead-s", envvar="TICKWHEEL_LOOKAHEAD_S", type=float, default=3600.0, show_default=True
)
@click.option(
    "--lease-ttl-s", envvar="TICKWHEEL_LEASE_TTL_S", type=float, default=30.0, show_default=True
)
@click.option(
    "--heartbeat-interval-s",
    envvar="TICKWHEEL_HEARTBEAT_INTERVAL_S",
    type=float,
    help="Heartbeat interval suggested to workers (default: a third of the lease).",
)
@click.option(
    "--preload-interval-s",
    envvar="TICKWHEEL_PRELOAD_INTERVAL_S",
    type=float,
    default=1.0,
    show_default=True,
    help="How often the pre-loader and the lease reaper run.",
)
@click.option(
    "--retry-base-s",
    envvar="TICKWHEEL_RETRY_BASE_S",
    type=float,
    default=1.0,
    show_default=True,
    help="First retry backoff (doubles per attempt).",
)
@click.option(
    "--canary-interval-s",
    envvar="TICKWHEEL_CANARY_INTERVAL_S",
    type=float,
    default=60.0,
    show_default=True,
    help="Schedule a canary task this often (0: off); see docs/watchdog.md.",
)
@kafka_options
@cluster_options
@click.option(
    "--reuse-port",
    envvar="TICKWHEEL_REUSE_PORT",
    is_flag=True,
    help="Share the listening port with other processes (SO_REUSEPORT); off: a port "
    "in use is an error.",
)
def serve(
    listen: str,
    store: str | None,
    postgres_dsn: str | None,
    admin_token: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    lookahead_s: float,
    lease_ttl_s: float,
    heartbeat_interval_s: float | None,
    preload_interval_s: float,
    retry_base_s: float,
    canary_interval_s: float,
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
) -> None:
    """Run a scheduler node until SIGINT/SIGTERM.

    Without --etcd the node takes an exclusive lease on its database first (a
    PostgreSQL advisory lock, or a lock file beside an SQLite file): a second node on
    the same database is refused. To run several nodes, give each --etcd."""
    from scheduler.engine import EngineConfig
    from scheduler.server import ServerConfig

    url = _store_url(store, postgres_dsn)
    try:
        engine_config = EngineConfig(
            lookahead_s=lookahead_s,
            lease_ttl_s=lease_ttl_s,
            heartbeat_interval_s=heartbeat_interval_s or lease_ttl_s / 3,
            preload_interval_s=preload_interval_s,
            retry_base_s=retry_base_s,
            canary_interval_s=canary_interval_s,
            shard_count=shard_count,
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
            )
        from scheduler.quota import QuotaConfig

        quota_config = QuotaConfig(
            redis_url=redis_url, node_share=node_share, key_prefix=cluster_name
        )
        server_config = ServerConfig(
            listen=listen,
            admin_token=admin_token,
            tls_cert_path=tls_cert,
            tls_key_path=tls_key,
            tls_client_ca_path=tls_client_ca,
            reuse_port=reuse_port,
        )
        kafka_config = None
        if kafka_bootstrap:
            from scheduler.kafka import KafkaConfig

            kafka_config = KafkaConfig(
                bootstrap_servers=kafka_bootstrap,
                pools=_kafka_pools(kafka_pools) or frozenset(Pool),
                topic_prefix=kafka_topic_prefix,
            )
        from scheduler.node import NodeConfig

        node_config = NodeConfig(
            store_url=url,
            node_id=node,
            store_actor=node,
            engine=engine_config,
            server=server_config,
            cluster=cluster_config,
            quota=quota_config,
            kafka=kafka_config,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    _tune_gc()
    _run_node(_serve(node_config))


async def _serve(node_config: Any) -> None:
    from scheduler.node import Node

    node = Node(node_config)
    try:
        await node.start()
        # The recovered wheel entries live as long as the process: keep them out of the
        # collector's full passes (1M tracked objects cost a ~0.7 s stop-the-world pause).
        gc.freeze()
        if node.outlet_names:
            err_console.print(f"kafka dispatch: {', '.join(node.outlet_names)}")
        url = node_config.store_url
        err_console.print(f"tickwheel serving on port {node.port} (store: {url.split('@')[-1]})")
        await _wait_for_signal()
        err_console.print("stopping...")
    finally:
        await node.stop()


@main.command()
@click.option("--listen", default="127.0.0.1:50051", show_default=True)
@click.option("--db", default=".tickwheel/dev.db", show_default=True, help="SQLite file.")
@click.option(
    "--demo", is_flag=True, help="Run a demo worker and a 20,000-task workload, then exit."
)
@click.option("--demo-tasks", default=20_000, show_default=True, hidden=True)
@click.option("--reuse-port", is_flag=True, help="Share the listening port with other processes.")
def dev(listen: str, db: str, demo: bool, demo_tasks: int, reuse_port: bool) -> None:
    """Run Tickwheel embedded (SQLite, no other service) on localhost.

    The SQLite file is locked (DB.lock beside it): a second dev or serve on the same
    file is refused."""
    from scheduler.cli._dev import run_dev

    _tune_gc()
    _run_node(
        run_dev(listen=listen, db=db, demo=demo, demo_tasks=demo_tasks, reuse_port=reuse_port)
    )


@main.command()
@click.option("--postgres-dsn", envvar="TICKWHEEL_POSTGRES_DSN", required=True)
def migrate(postgres_dsn: str) -> None:
    """Apply pending PostgreSQL migrations."""
    from scheduler.store import migrate as do_migrate

    applied = _run(do_migrate(postgres_dsn))
    click.echo(f"applied migrations: {applied}" if applied else "schema is up to date")


# -- client side ------------------------------------------------------------------------


def _when(at: str | None, in_s: float | None) -> datetime | None:
    if at and in_s is not None:
        raise click.UsageError("give --at or --in, not both")
    if in_s is not None:
        return datetime.now(UTC) + timedelta(seconds=in_s)
    if at:
        when = datetime.fromisoformat(at)
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    return None


@main.command()
@click.argument("task_type")
@click.option("--payload", default="{}", help="JSON object.")
@click.option("--at", help="ISO time to run (UTC if no offset).")
@click.option("--in", "in_s", type=float, help="Run in this many seconds.")
@click.option("--idempotency-key")
@click.option("--pool", type=click.Choice([p.value for p in Pool]), default=Pool.STANDARD.value)
@click.option("--strict", is_flag=True, help="Strict timing (no jitter).")
@click.option("--jitter", type=click.Choice([j.value for j in JitterMode]))
@click.option("--max-retries", type=int)
@click.option("--timeout-s", type=float, default=0.0)
@client_options
@api_key_option
@json_option
def submit(
    task_type: str,
    payload: str,
    at: str | None,
    in_s: float | None,
    idempotency_key: str | None,
    pool: str,
    strict: bool,
    jitter: str | None,
    max_retries: int | None,
    timeout_s: float,
    as_json: bool,
    **kw: Any,
) -> None:
    """Submit one task."""
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    if not isinstance(data, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--payload")
    when = _when(at, in_s)
    task = _run(
        _with_client(
            kw,
            lambda c: c.submit(
                task_type,
                data,
                scheduled_at=when,
                idempotency_key=idempotency_key,
                pool=Pool(pool),
                strict_timing=strict,
                jitter_mode=JitterMode(jitter) if jitter else None,
                max_retries=max_retries,
                timeout_s=timeout_s,
            ),
        )
    )
    print_json(task) if as_json else print_task(task)


@main.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def get(task_id: str, as_json: bool, **kw: Any) -> None:
    """Show one task."""
    task = _run(_with_client(kw, lambda c: c.get(task_id)))
    print_json(task) if as_json else print_task(task)


@main.command()
@click.argument("task_id")
@client_options
@api_key_option
@json_option
def cancel(task_id: str, as_json: bool, **kw: Any) -> None:
    """Cancel a task."""
    task = _run(_with_client(kw, lambda c: c.cancel(task_id)))
    print_json(task) if as_json else print_task(task)


@main.command()
@click.argument("task_id")
@click.option("--at", help="ISO time to run again (default now).")
@client_options
@api_key_option
@json_option
def redrive(task_id: str, at: str | None, as_json: bool, **kw: Any) -> None:
    """Move a DEAD_LETTER task back to SCHEDULED."""
    when = _when(at, None)
    task = _run(_with_client(kw, lambda c: c.redrive(task_id, scheduled_at=when)))
    print_json(task) if as_json else print_task(task)


@main.command(name="list")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in TaskState], case_sensitive=False),
)
@click.option("--type", "task_type")
@click.option("--limit", type=int, default=100, show_default=True)
@client_options
@api_key_option
@json_option
def list_(
    states: tuple[str, ...], task_type: str | None, limit: int, as_json: bool, **kw: Any
) -> None:
    """List tasks."""

    async def fetch(c: Client) -> list[Any]:
        out = []
        async for t in c.list(
            states=[TaskState(s.upper()) for s in states],
            type=task_type,
            page_size=min(limit, 1000),
        ):
            out.append(t)
            if len(out) >= limit:
                break
        return out

    tasks = _run(_with_client(kw, fetch))
    print_json(tasks) if as_json else print_tasks(tasks)


def _load_handler(spec: str) -> tuple[str, Callable[..., Any]]:
    name, sep, target = spec.partition("=")
    module_name, colon, attr = target.partition(":")
    if not sep or not colon or not name or not module_name or not attr:
        raise click.BadParameter(f"{spec!r}: expected NAME=module:function", param_hint="--type")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"{spec!r}: {exc}", param_hint="--type") from None
    return name, fn


@main.command()
@click.option(
    "--type", "types", multiple=True, required=True, help="NAME=module:function (repeatable)."
)
@click.option("--slots", type=int, default=10, show_default=True)
@click.option("--worker-id")
@click.option(
    "--grace-s", type=float, default=30.0, show_default=True, help="Drain grace on SIGTERM."
)
@click.option(
    "--start-on-delivery",
    is_flag=True,
    help="Start each task as it arrives, without an ack (dispatch commits RUNNING): one "
    "write and two messages less per task; a push lost in flight costs an attempt and "
    "waits for its lease.",
)
@kafka_options
@click.option(
    "--kafka-group",
    envvar="TICKWHEEL_KAFKA_GROUP",
    default="tickwheel-workers",
    show_default=True,
    help="Consumer group (Kafka mode; needs a SYSTEM tenant's API key).",
)
@client_options
@api_key_option
def worker(
    types: tuple[str, ...],
    slots: int,
    worker_id: str | None,
    grace_s: float,
    start_on_delivery: bool,
    kafka_bootstrap: str | None,
    kafka_pools: str | None,
    kafka_topic_prefix: str,
    kafka_group: str,
    **kw: Any,
) -> None:
    """Run handlers until SIGINT/SIGTERM, then drain: stop taking work, let running
    tasks finish or checkpoint within --grace-s, release the rest (a second signal
    releases them at once). Exit code 0 when nothing was left to lease expiry."""
    from scheduler.cli._worker import run_until_drained, summary
    from scheduler.worker import KafkaSource, Worker

    handlers = dict(_load_handler(t) for t in types)
    tls = _tls(kw)
    source = None
    if kafka_bootstrap and start_on_delivery:
        raise click.UsageError("--start-on-delivery applies to the stream, not to Kafka mode")
    if kafka_bootstrap:
        try:
            source = KafkaSource(
                bootstrap_servers=kafka_bootstrap,
                pools=_kafka_pools(kafka_pools) or frozenset(Pool),
                topic_prefix=kafka_topic_prefix,
                group_id=kafka_group,
            )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    w = Worker(
        kw["target"],
        api_key=kw["api_key"],
        handlers=handlers,
        slots=slots,
        worker_id=worker_id,
        tls=tls,
        kafka=source,
        start_on_delivery=start_on_delivery,
    )
    _tune_gc()
    report = _run(run_until_drained(w, grace_s))
    err_console.print(summary(report))
    code = 0 if report.clean else 1
    if w.busy_handler_threads:
        # Released sync handlers still run in threads the interpreter would join.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


# -- admin ----------------------------------------------------------------------------


def admin_token_option(fn: F) -> F:
    """--admin-token (TICKWHEEL_ADMIN_TOKEN)."""
    return click.option("--admin-token", envvar="TICKWHEEL_ADMIN_TOKEN", required=True)(fn)


@main.group()
def tenants() -> None:
    """Manage tenants (admin)."""


@tenants.command(name="create")
@click.argument("name")
@click.option("--tier", type=click.Choice(["STANDARD", "ENTERPRISE", "SYSTEM"]), default="STANDARD")
@click.option("--rate-limit-rps", type=int, default=0)
@click.option("--max-concurrent-workers", type=int, default=0)
@client_options
@admin_token_option
@json_option
def tenants_create(
    name: str, tier: str, rate_limit_rps: int, max_concurrent_workers: int, as_json: bool, **kw: Any
) -> None:
    """Create a tenant."""
    t = _run(
        _with_admin(
            kw,
            lambda a: a.create_tenant(
                name,
                tier=tier,
                rate_limit_rps=rate_limit_rps,
                max_concurrent_workers=max_concurrent_workers,
            ),
        )
    )
    if as_json:
        print_json(t)
    else:
        click.echo(f"tenant {t.id} ({t.name}, {t.tier})")


@main.group()
def keys() -> None:
    """Manage API keys (admin)."""


@keys.command(name="create")
@click.argument("tenant_id")
@click.option("--name", default="default", show_default=True)
@client_options
@admin_token_option
@json_option
def keys_create(tenant_id: str, name: str, as_json: bool, **kw: Any) -> None:
    """Create an API key; the secret is printed only once."""
    k = _run(_with_admin(kw, lambda a: a.create_api_key(tenant_id, name)))
    if as_json:
        print_json(k)
    else:
        click.echo(f"key {k.key_id}\nsecret (shown once): {k.secret}")


@main.command()
@click.option("--postgres-dsn", envvar="TICKWHEEL_WATCHDOG_POSTGRES_DSN", help="Read replica ok.")
@click.option("--sqlite", "sqlite_path", help="The embedded store's SQLite file instead.")
@click.option("--check-interval-s", type=float, default=60.0, show_default=True)
@click.option("--webhook-url", envvar="TICKWHEEL_WATCHDOG_WEBHOOK_URL")
@click.option("--webhook-retries", type=int, default=3, show_default=True)
@click.option("--canary/--no-canary", default=True, show_default=True)
@click.option("--canary-stale-s", type=float, default=180.0, show_default=True)
@click.option("--canary-max-lag-s", type=float, default=5.0, show_default=True)
@click.option("--once", is_flag=True, help="Check once; exit 1 when anything alerts (cron use).")
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
) -> None:
    """The dead man's switch: alert when an expected job has gone silent."""
    from scheduler.watchdog import Watchdog, WatchdogConfig

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
        _run(dog.run())
        return

    async def one() -> int:
        try:
            return len(await dog.check_once())
        finally:
            await dog.source.close()

    firing = _run(one())
    raise SystemExit(1 if firing else 0)
