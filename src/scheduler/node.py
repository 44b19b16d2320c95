"""The composition root: one scheduler node, wired in one place.

:class:`Node` opens, in order, the store, the quota gate, the shard membership, the
Redis time index, the broker outlets, the engine and the gRPC server, and closes them in
reverse. ``tickwheel serve`` and ``tickwheel dev`` run one; :mod:`scheduler.testing`
starts one for tests. The start order is the safety rule of a node:

1. build everything (nothing is claimed: the store opens, the engine is constructed);
2. **bind the port** (:class:`~scheduler.server.ListenError` when it is in use, and
   the port is exclusive unless ``ServerConfig.reuse_port``);
3. **take the database lease** when there is no etcd (:class:`~scheduler.cluster.
   LeaseHeld` when another node has it: a PostgreSQL advisory lock, or a flock beside
   an SQLite file; an in-memory database needs none);
4. start the engine, which claims the shards (their epochs rise);
5. serve (and, with ``NodeConfig.metrics``, serve ``/metrics``).

A standby node (``NodeConfig.standby``: a region's DR node on its PostgreSQL standby,
docs/regions.md "Disaster recovery") first holds its port with a
:class:`~scheduler.server.NotPromotedServer` (NOT_SERVING, every RPC UNAVAILABLE) and
polls the database until it is promoted and its fence raised (``tickwheel dr
promote``); only then does it open everything as above, and the real server serves on
the holder's gRPC server (``Server(..., held=...)``): one listening socket from the
standby's start on, so no client is refused or reset across the promote.

So a node that cannot serve claims nothing, and a second node on one database without
etcd is refused instead of silently stopping the first one's dispatch. On PostgreSQL
the lease guards the shards for the node's lifetime (``cluster.LeasedMembership``): a
lost lock connection gives them up, sets the health status to NOT_SERVING and takes
them back when the lock is back.

Calls the public APIs of ``store``, ``quota``, ``cluster``, ``index``, ``kafka``,
``engine`` and ``server``; called by ``scheduler.cli`` and ``scheduler.testing``. Reads
no flags and no environment variables.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scheduler.cluster import (
    FileLease,
    LeasedMembership,
    NodeLease,
    PostgresLease,
    ShardMembership,
    holder_name,
)
from scheduler.engine import Engine, EngineConfig
from scheduler.server import Server, ServerConfig
from scheduler.store import Store, open_store

if TYPE_CHECKING:
    from scheduler.cluster import ClusterConfig
    from scheduler.dr import WitnessConfig
    from scheduler.index import TimeIndex
    from scheduler.kafka import KafkaConfig, KafkaOutlet
    from scheduler.metrics import MetricsConfig, MetricsEndpoint
    from scheduler.quota import QuotaConfig, QuotaGate
    from scheduler.server import NotPromotedServer

_log = logging.getLogger("tickwheel.node")

DEFAULT_STORE_URL = "sqlite:///.tickwheel/tickwheel.db"
"""The embedded default: an SQLite file under the working directory."""


def sqlite_path(url: str) -> Path | None:
    """The file of an ``sqlite://`` URL; None for PostgreSQL and in-memory SQLite."""
    if not url.startswith("sqlite://"):
        return None
    rest = url[len("sqlite://") :]
    if rest in (":memory:", "/:memory:") or not rest.removeprefix("/"):
        return None
    return Path(rest.removeprefix("/"))


def is_postgres(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database."""
    return url.startswith(("postgresql://", "postgres://"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """Everything one node is made of; validated on construction."""

    store_url: str = DEFAULT_STORE_URL
    """``postgresql://…``, ``sqlite:///path.db`` or ``sqlite://:memory:``."""
    node_id: str = "local"
    """This node's id (audit actor, shard claims, the lease holder's name)."""
    store_actor: str | None = None
    """The audit ``actor`` of the scheduler's own moves (default: the store's)."""
    store_row_level_security: bool = True
    """PostgreSQL: scope every store call for row-level security
    (:attr:`StoreConfig.row_level_security`, docs/security.md)."""
    engine: EngineConfig = dataclasses.field(default_factory=EngineConfig)
    """The engine's settings."""
    server: ServerConfig = dataclasses.field(default_factory=ServerConfig)
    """Where and how the gRPC server listens."""
    cluster: ClusterConfig | None = None
    """etcd membership; None: the node is alone and takes the database lease."""
    quota: QuotaConfig | None = None
    """Tenant quotas (and, with a ``redis_url``, the Redis time index); None: in-process."""
    kafka: KafkaConfig | None = None
    """Kafka dispatch mode for some pools; None: worker streams only."""
    metrics: MetricsConfig | None = None
    """Serve Prometheus metrics at ``/metrics`` on this HTTP port; None: off."""
    lease_check_interval_s: float = 1.0
    """How often the PostgreSQL lease connection is checked."""
    lease_retry_interval_s: float = 1.0
    """How often a node that lost its lease tries to take it back."""
    standby: bool = False
    """A DR node on a PostgreSQL standby: refuse every RPC (UNAVAILABLE) until the
    database is promoted and its fencing generation raised, then start."""
    standby_poll_interval_s: float = 0.5
    """How often a standby node polls ``pg_is_in_recovery()`` and the generation."""
    witness: WitnessConfig | None = None
    """The region lease of a witnessed etcd cluster (``scheduler.dr``, docs/regions.md
    "Automatic failover"): the node dispatches only while it holds it, besides the
    database lease. Needs PostgreSQL and no ``cluster``."""

    def __post_init__(self) -> None:
        if not (is_postgres(self.store_url) or self.store_url.startswith("sqlite://")):
            raise ValueError(f"unsupported store URL {self.store_url!r}")
        if not self.node_id:
            raise ValueError("NodeConfig.node_id must not be empty")
        if self.lease_check_interval_s <= 0 or self.lease_retry_interval_s <= 0:
            raise ValueError("NodeConfig lease intervals must be positive")
        if self.cluster is not None and not is_postgres(self.store_url):
            raise ValueError("a cluster (etcd) needs a PostgreSQL store")
        if self.standby and not is_postgres(self.store_url):
            raise ValueError("a standby node needs a PostgreSQL store")
        if self.witness is not None and (
            self.cluster is not None or not is_postgres(self.store_url)
        ):
            raise ValueError("a witness (region lease) needs PostgreSQL and no etcd cluster")
        if self.standby_poll_interval_s <= 0:
            raise ValueError("NodeConfig.standby_poll_interval_s must be positive")
        if self.engine.region != self.server.region:
            # One region per node: the engine's (new tenants' home, the writes it
            # admits) is the server's (where calls are routed from).
            raise ValueError(
                f"NodeConfig: the engine's region {self.engine.region!r} and the "
                f"server's {self.server.region!r} differ"
            )


class Node:
    """One running node. ``start``/``stop`` are idempotent; ``stop`` is safe before
    ``start`` and twice; a failed ``start`` closes what it opened and re-raises."""

    def __init__(
        self,
        config: NodeConfig | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``clock`` is the engine's (tests pass a fake one, as to :class:`Engine`)."""
        self.config = config or NodeConfig()
        self._clock = clock
        self._store: Store | None = None
        self._quota: QuotaGate | None = None
        self._index: TimeIndex | None = None
        self._outlets: list[KafkaOutlet] = []
        self._membership: ShardMembership | None = None
        self._file_lease: FileLease | None = None
        self._lease: NodeLease | None = None
        self._engine: Engine | None = None
        self._server: Server | None = None
        self._metrics: MetricsEndpoint | None = None
        self._placeholder: NotPromotedServer | None = None
        self._lock = asyncio.Lock()
        self._started = False
        self._lease_serving = True
        self._engine_serving = True

    # -- what a caller reads once started -----------------------------------------
    @property
    def engine(self) -> Engine:
        """The node's engine (after :meth:`start`)."""
        if self._engine is None:
            raise RuntimeError("the node is not started")
        return self._engine

    @property
    def server(self) -> Server:
        """The node's gRPC server (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the node is not started")
        return self._server

    @property
    def store(self) -> Store:
        """The node's store (after :meth:`start`)."""
        if self._store is None:
            raise RuntimeError("the node is not started")
        return self._store

    @property
    def membership(self) -> ShardMembership:
        """The shard membership the engine runs with (after :meth:`start`)."""
        return self.engine.membership

    @property
    def lease(self) -> NodeLease | None:
        """The database lease this node holds (None with etcd or in-memory SQLite)."""
        return self._lease

    @property
    def outlets(self) -> list[KafkaOutlet]:
        """The broker outlets the node dispatches through (Kafka mode)."""
        return list(self._outlets)

    @property
    def outlet_names(self) -> list[str]:
        """The names of :attr:`outlets`."""
        return [o.name for o in self._outlets]

    @property
    def metrics(self) -> MetricsEndpoint | None:
        """The ``/metrics`` endpoint (None when ``NodeConfig.metrics`` is None)."""
        return self._metrics

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port/metrics`` once started with metrics on."""
        return self._metrics.url if self._metrics is not None else None

    @property
    def port(self) -> int:
        """The bound port (0 before start)."""
        return self._server.port if self._server is not None else 0

    @property
    def target(self) -> str:
        """``host:port`` for clients on this machine."""
        host = self.config.server.listen.rpartition(":")[0].strip("[]")
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        """Open everything in order (see the module docstring); idempotent."""
        async with self._lock:
            if self._started:
                return
            self._started = True
            try:
                await self._open()
            except BaseException:
                await self._close(grace_s=0)
                self._started = False
                raise

    async def stop(self, grace_s: float | None = None) -> None:
        """Close everything in reverse order; safe before start and twice."""
        async with self._lock:
            if not self._started:
                return
            await self._close(grace_s)
            self._started = False

    async def __aenter__(self) -> Node:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _wait_promoted(self) -> ServerConfig:
        """Hold the port, refusing every RPC, until the standby database is promoted
        and fenced; the server config to serve with (on the port held)."""
        from scheduler.server import NotPromotedServer
        from scheduler.store.postgres.dr import fence_state

        cfg = self.config
        region = f"region {cfg.server.region}'s" if cfg.server.region else "this region's"
        holder = NotPromotedServer(
            cfg.server, f"{region} standby: not promoted (tickwheel dr promote)"
        )
        self._placeholder = holder
        port = await holder.start()
        _log.warning("standby node on port %d: waiting for the database's promote", port)
        seen = 0
        while True:
            state = await fence_state(cfg.store_url)
            if state is not None:
                recovering, generation = state
                if recovering:
                    seen = max(seen, generation)
                elif generation > seen:
                    _log.warning("standby node: promoted, generation %d", generation)
                    break
            await asyncio.sleep(cfg.standby_poll_interval_s)
        # The real server serves on the holder's server (_open): the port never closes.
        host = cfg.server.listen.rpartition(":")[0]
        return dataclasses.replace(cfg.server, listen=f"{host}:{port}")

    async def _open(self) -> None:
        cfg = self.config
        server_config = await self._wait_promoted() if cfg.standby else cfg.server
        url = cfg.store_url
        db_file = sqlite_path(url)
        if db_file is not None:
            db_file.parent.mkdir(parents=True, exist_ok=True)
        opts: dict[str, Any] = {} if cfg.store_actor is None else {"actor": cfg.store_actor}
        # A server's first tasks must not pay the pool's cold connections (PostgreSQL).
        opts["warm_up"] = True
        if not cfg.store_row_level_security:
            opts["row_level_security"] = False
        self._store = await open_store(url, **opts)
        if cfg.quota is not None:
            from scheduler.quota import open_quota

            self._quota = await open_quota(cfg.quota)
        self._membership = self._make_membership()
        if cfg.quota is not None and cfg.quota.redis_url:
            from scheduler.index import RedisTimeIndex

            self._index = RedisTimeIndex.from_url(
                cfg.quota.redis_url, key_prefix=cfg.quota.key_prefix
            )
        if cfg.kafka is not None:
            from scheduler.kafka import open_outlets

            self._outlets = list(await open_outlets(cfg.kafka))
        self._engine = Engine(
            self._store,
            cfg.engine,
            clock=self._clock,
            node_id=cfg.node_id,
            outlets=self._outlets,
            quota=self._quota,
            membership=self._membership,
            index=self._index,
        )
        self._engine.health.on_serving = self._on_engine_health
        self._server = Server(self._engine, server_config, held=self._placeholder)
        port = self._server.bind()
        await self._take_lease(port, db_file)
        await self._engine.start()
        await self._server.start()
        self._placeholder = None  # a promoted standby's: the real server's now
        if cfg.metrics is not None:
            from scheduler.metrics import node_endpoint

            self._metrics = node_endpoint(self._engine, self._store, cfg.metrics)
            await self._metrics.start()

    def _make_membership(self) -> ShardMembership | None:
        cfg = self.config
        if cfg.cluster is not None:
            from scheduler.cluster import Membership

            return Membership(cfg.cluster)
        if not is_postgres(cfg.store_url):
            return None  # the engine's own LocalMembership; the file lease guards it
        lease = PostgresLease(
            cfg.store_url,
            holder_name(cfg.node_id, "?", 0),
            check_interval_s=cfg.lease_check_interval_s,
        )
        self._lease = lease
        guard: Any = lease
        if cfg.witness is not None:
            from scheduler.dr import BothLeases, RegionLease

            guard = BothLeases(lease, RegionLease(cfg.witness, cfg.node_id))
        return LeasedMembership(
            guard,
            cfg.engine.shard_count,
            node_id=cfg.node_id,
            retry_interval_s=cfg.lease_retry_interval_s,
            on_change=self._on_lease_change,
        )

    async def _take_lease(self, port: int, db_file: Path | None) -> None:
        host = self.config.server.listen.rpartition(":")[0] or "*"
        holder = holder_name(self.config.node_id, host, port)
        if isinstance(self._lease, PostgresLease):
            self._lease.holder = holder
        elif db_file is not None and self.config.cluster is None:
            self._file_lease = FileLease.beside(db_file, holder)
            self._lease = self._file_lease
        if self._lease is not None:
            await self._lease.acquire()

    async def _on_lease_change(self, serving: bool) -> None:
        self._lease_serving = serving
        witness = self.config.witness
        if witness is not None and self._server is not None:
            # Without the region lease the node takes no call of its region: clients
            # move on to the region's next endpoints (the other site's).
            self._server.set_fenced(
                None
                if serving
                else f"region {witness.region}: this node of site {witness.site} does not "
                "hold the region lease (tickwheel dr status)"
            )
        await self._report_serving()

    async def _on_engine_health(self, serving: bool) -> None:
        self._engine_serving = serving
        await self._report_serving()

    async def _report_serving(self) -> None:
        # NOT_SERVING while the lease is lost or a loop of the engine is stalled.
        if self._server is not None:
            await self._server.set_serving(self._lease_serving and self._engine_serving)

    async def _close(self, grace_s: float | None) -> None:
        steps: list[tuple[str, Any]] = []
        if self._placeholder is not None:
            steps.append(("standby server", self._placeholder.stop))
        if self._metrics is not None:
            steps.append(("metrics", self._metrics.stop))
        if self._server is not None:
            steps.append(("server", lambda s=self._server: s.stop(grace_s)))
        if self._engine is not None:
            steps.append(("engine", self._engine.stop))
        if self._membership is not None:
            # The engine stops it when it started it; this covers a start that failed
            # between the lease and the engine (stop is safe twice).
            steps.append(("membership", self._membership.stop))
        if self._file_lease is not None:
            steps.append(("lease", self._file_lease.release))
        for outlet in reversed(self._outlets):
            steps.append(("outlet", outlet.stop))
        if self._index is not None:
            steps.append(("index", self._index.close))
        if self._quota is not None:
            steps.append(("quota", self._quota.close))
        if self._store is not None:
            steps.append(("store", self._store.close))
        for name, step in steps:
            try:
                await step()
            except Exception:
                _log.exception("node: closing the %s failed", name)
        self._server = self._engine = self._store = None
        self._metrics = None
        self._membership = self._index = self._quota = None
        self._file_lease = self._lease = None
        self._outlets = []
