"""``tickwheel worker``: load handlers, run a worker until a signal, drain it.

The drain itself is ``_drain.run_until_drained``; calls the worker SDK; registered by
``_main``.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from scheduler.cli._options import (
    api_key_option,
    client_options,
    directory_options,
    kafka_options,
    load_directory,
    metrics_options,
    parse_kafka_pools,
)
from scheduler.cli._output import note
from scheduler.cli._runner import run_coro, tls_config, tune_gc
from scheduler.client import Pool

if TYPE_CHECKING:
    from scheduler.worker import ClusterWorker, DrainReport, Worker


def _import(target: str, spec: str, hint: str, expected: str) -> Any:
    module_name, colon, attr = target.partition(":")
    if not colon or not module_name or not attr:
        raise click.BadParameter(f"{spec!r}: expected {expected}", param_hint=hint)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise click.BadParameter(f"{spec!r}: {exc}", param_hint=hint) from None


def _load_app(spec: str) -> dict[str, Any]:
    """The handlers of every task function registered on a ``scheduler.client.App``."""
    from scheduler.client import App

    app = _import(spec, spec, "--app", "module:app")
    if not isinstance(app, App):
        raise click.BadParameter(
            f"{spec!r}: is a {type(app).__name__}, not a scheduler.client.App", param_hint="--app"
        )
    if not app.tasks:
        raise click.BadParameter(f"{spec!r}: the App has no task registered", param_hint="--app")
    return app.handlers()


def _load_handler(spec: str) -> tuple[str, Callable[..., Any]]:
    name, sep, target = spec.partition("=")
    if not sep or not name:
        raise click.BadParameter(f"{spec!r}: expected NAME=module:function", param_hint="--type")
    return name, _import(target, spec, "--type", "NAME=module:function")


async def _run_with_metrics(
    w: Worker | ClusterWorker,
    grace_s: float,
    metrics_host: str,
    metrics_port: int | None,
    metrics_token: str | None = None,
) -> DrainReport:
    """Run ``w`` until drained, serving its ``/metrics`` meanwhile when a port is given."""
    from scheduler.cli._drain import run_until_drained

    if metrics_port is None:
        return await run_until_drained(w, grace_s)
    from scheduler.metrics import MetricsConfig, worker_endpoint

    endpoint = worker_endpoint(
        w, MetricsConfig(host=metrics_host, port=metrics_port, token=metrics_token)
    )
    try:
        await endpoint.start()
    except OSError as exc:
        raise click.UsageError(f"--metrics-port: cannot listen: {exc}") from None
    note(f"metrics on {endpoint.url}")
    try:
        return await run_until_drained(w, grace_s)
    finally:
        await endpoint.stop()


@click.command()
@click.option("--type", "types", multiple=True, help="NAME=module:function (repeatable).")
@click.option(
    "--app",
    "app_spec",
    help="module:app - run every task function registered with @app.task on this "
    "scheduler.client.App (beside any --type).",
)
@click.option("--slots", type=int, default=10, show_default=True)
@click.option(
    "--pools",
    "pools_spec",
    envvar="TICKWHEEL_WORKER_POOLS",
    show_envvar=True,
    metavar="POOL,...",
    help="Run only tasks of these pools (critical, standard, bulk; default: all). A "
    "worker of critical only is capacity no bulk task can ever hold.",
)
@click.option(
    "--one-node",
    is_flag=True,
    help="Stream to --target only: run that node's shards' tasks only. Without it the "
    "worker learns every live node of the cluster from --target (any node, or a load "
    "balancer) and streams to each, sharing --slots by demand. Kafka mode "
    "(--kafka-bootstrap) always streams to --target only.",
)
@click.option(
    "--all-nodes",
    is_flag=True,
    hidden=True,
    help="Accepted for compatibility: streaming to every node is the default.",
)
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
@metrics_options(default_port=None)
@client_options
@api_key_option
@directory_options
def worker(
    types: tuple[str, ...],
    app_spec: str | None,
    slots: int,
    pools_spec: str | None,
    one_node: bool,
    all_nodes: bool,
    worker_id: str | None,
    grace_s: float,
    start_on_delivery: bool,
    kafka_bootstrap: str | None,
    kafka_pools: str | None,
    kafka_topic_prefix: str,
    kafka_group: str,
    metrics_port: int | None,
    metrics_host: str,
    metrics_token: str | None,
    regions: str | None,
    regions_file: str | None,
    **kw: Any,
) -> None:
    """Run handlers until SIGINT/SIGTERM, then drain: stop taking work, let running
    tasks finish or checkpoint within --grace-s, release the rest (a second signal
    releases them at once). Exit code 0 when nothing was left to lease expiry.

    Cluster reach is the default: --target (any node, or a load balancer) is a seed;
    the worker learns the live nodes from it and keeps a stream to each, so it runs
    the tasks of every node's shards (docs/cluster.md, "How workers reach shards"). A
    single node is streamed to alone, as before. --one-node streams to --target only.
    Kafka mode (--kafka-bootstrap) takes its tasks from the consumer group and streams
    to --target only.

    With --regions or --regions-file the worker connects to the endpoints of the region
    its API key names (in order, the next when one is unreachable) instead of
    --target; a node of another region sends it home (docs/regions.md). Those endpoints
    are then the seeds of the region's cluster."""
    from scheduler.cli._drain import summary
    from scheduler.worker import ClusterWorker, KafkaSource, Worker

    # A worker's own lines (connected, reconnecting, draining: INFO; a failed attempt:
    # WARNING with its traceback) show without -v; -v adds everyone's INFO lines.
    worker_log = logging.getLogger("tickwheel.worker")
    if worker_log.getEffectiveLevel() > logging.INFO:
        worker_log.setLevel(logging.INFO)
    if not types and not app_spec:
        raise click.UsageError("give the handlers: --type NAME=module:function or --app module:app")
    handlers = _load_app(app_spec) if app_spec else {}
    handlers.update(_load_handler(t) for t in types)
    tls = tls_config(kw)
    pools = sorted(parse_kafka_pools(pools_spec, "--pools"), key=list(Pool).index)
    source = None
    if kafka_bootstrap and start_on_delivery:
        raise click.UsageError("--start-on-delivery applies to the stream, not to Kafka mode")
    if kafka_bootstrap:
        try:
            source = KafkaSource(
                bootstrap_servers=kafka_bootstrap,
                pools=parse_kafka_pools(kafka_pools) or frozenset(Pool),
                topic_prefix=kafka_topic_prefix,
                group_id=kafka_group,
            )
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    directory = load_directory(regions, regions_file)
    if one_node and all_nodes:
        raise click.UsageError("--one-node and --all-nodes contradict each other")
    w: Worker | ClusterWorker
    if one_node or source is not None:
        # Kafka mode: the consumer group spreads the tasks; the stream to --target
        # carries only the fenced writes.
        w = Worker(
            kw["target"],
            regions=directory if len(directory) else None,
            api_key=kw["api_key"],
            handlers=handlers,
            slots=slots,
            pools=pools,
            worker_id=worker_id,
            tls=tls,
            kafka=source,
            start_on_delivery=start_on_delivery,
        )
    else:
        w = ClusterWorker(
            kw["target"],
            api_key=kw["api_key"],
            handlers=handlers,
            slots=slots,
            pools=pools,
            worker_id=worker_id,
            tls=tls,
            regions=directory if len(directory) else None,
            start_on_delivery=start_on_delivery,
        )
    tune_gc()
    # uvloop where installed (TICKWHEEL_EVENT_LOOP): a task's handler task and its
    # callbacks cost the worker up to 4 µs less CPU a task (docs/benchmarks.md).
    report = run_coro(
        _run_with_metrics(w, grace_s, metrics_host, metrics_port, metrics_token), loop="uvloop"
    )
    note(summary(report))
    code = 0 if report.clean else 1
    if w.busy_handler_threads:
        # Released sync handlers still run in threads the interpreter would join.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)
