"""Prometheus metrics: every metric definition and the ``/metrics`` endpoints.

Re-exports only. ``_catalog`` is the table of every metric (docs/observability.md
shows the same); ``_collectors`` read the engine's, the worker's and the watchdog's
plain counters at scrape time; ``_depth`` polls the store for queue depth and
replication lag; ``_http`` serves a registry with aiohttp on the event loop;
``_endpoint`` puts one process's registry, collectors and server together.

Called by :mod:`scheduler.node` (a node's endpoint) and the CLI (``serve``, ``dev``,
``worker``, ``watchdog``). Calls the engine's, the worker's and the watchdog's public
probes and the store's ``queue_depth``/``replication_lag``.
"""

from scheduler.metrics._catalog import CATALOG, Metric
from scheduler.metrics._collectors import EngineCollector, WatchdogCollector, WorkerCollector
from scheduler.metrics._config import MetricsConfig
from scheduler.metrics._depth import DepthPoller
from scheduler.metrics._endpoint import (
    MetricsEndpoint,
    node_endpoint,
    watchdog_endpoint,
    worker_endpoint,
)
from scheduler.metrics._http import MetricsServer
from scheduler.metrics._labels import OTHER, BoundedLabel

__all__ = [
    "CATALOG",
    "OTHER",
    "BoundedLabel",
    "DepthPoller",
    "EngineCollector",
    "Metric",
    "MetricsConfig",
    "MetricsEndpoint",
    "MetricsServer",
    "WatchdogCollector",
    "WorkerCollector",
    "node_endpoint",
    "watchdog_endpoint",
    "worker_endpoint",
]
