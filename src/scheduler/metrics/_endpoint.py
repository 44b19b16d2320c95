"""One process's metrics endpoint: its own registry, its collectors and the server.

Each endpoint owns a fresh :class:`~prometheus_client.CollectorRegistry` (never the
global default one), so several nodes and workers can run in one process (tests, the
dev command) and each exposes only its own figures.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest

from scheduler.metrics._collectors import EngineCollector, WatchdogCollector, WorkerCollector
from scheduler.metrics._config import MetricsConfig
from scheduler.metrics._depth import DepthPoller
from scheduler.metrics._http import MetricsServer

if TYPE_CHECKING:
    from scheduler.engine import Engine
    from scheduler.store import Store
    from scheduler.watchdog import Watchdog
    from scheduler.worker import ClusterWorker, Worker


class MetricsEndpoint:
    """A registry served at ``/metrics``; ``start``/``stop`` idempotent, ``stop`` safe
    before ``start``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        config: MetricsConfig,
        *,
        depth: DepthPoller | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.registry = registry
        self.config = config
        self.depth = depth
        """The node's store poller (None for a worker or a watchdog)."""
        self._now = now
        self.server = MetricsServer(
            registry, host=config.host, port=config.port, token=config.token
        )

    @property
    def port(self) -> int:
        """The bound port (0 before start)."""
        return self.server.port

    @property
    def url(self) -> str:
        """``http://host:port/metrics``."""
        return self.server.url

    def scrape(self) -> bytes:
        """What a scrape returns now (text exposition format)."""
        return generate_latest(self.registry)

    async def start(self) -> None:
        """Bind the port, then start the store poller."""
        await self.server.start()
        if self.depth is not None and self._now is not None:
            self.depth.start(self._now)

    async def stop(self) -> None:
        """Stop the poller and the server."""
        if self.depth is not None:
            await self.depth.stop()
        await self.server.stop()


def node_endpoint(engine: Engine, store: Store, config: MetricsConfig) -> MetricsEndpoint:
    """The endpoint of a scheduler node."""
    registry = CollectorRegistry(auto_describe=False)
    depth = DepthPoller(store, config.depth_interval_s)
    registry.register(EngineCollector(engine, depth, config))
    return MetricsEndpoint(registry, config, depth=depth, now=engine.now)


def worker_endpoint(worker: Worker | ClusterWorker, config: MetricsConfig) -> MetricsEndpoint:
    """The endpoint of a worker process (a :class:`ClusterWorker`: its member streams
    added up, the slots its total)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(worker, config))
    return MetricsEndpoint(registry, config)


def watchdog_endpoint(watchdog: Watchdog, config: MetricsConfig) -> MetricsEndpoint:
    """The endpoint of ``tickwheel watchdog``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchdogCollector(watchdog))
    return MetricsEndpoint(registry, config)
