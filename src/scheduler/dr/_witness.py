"""The region lease (issue 38): which site may serve a region, decided by a witnessed
etcd cluster (docs/regions.md "Automatic failover").

Keys, under ``{prefix}/dr/{region}/`` of an etcd cluster with a member outside both
sites (one in A, one in B, one at a witness, say):

- ``active``: the name of the site that serves the region. Persistent (no lease). The
  first node of a site creates it when it is absent; only :func:`take_region` (the
  orchestrator's promotion, or ``tickwheel dr promote --etcd``) moves it to another site.
- ``alive/{site}/{node}``: one key per node of the serving site, on that node's etcd
  lease (TTL ``lease_ttl_s``).

A node of the serving site holds a :class:`RegionLease`: it dispatches only while its
lease is renewed and ``active`` names its site. It trusts the lease until ``sent +
lease_ttl_s - safety_margin_s`` (``sent``: when the last renewal that succeeded was
sent), so it stops dispatching at least ``safety_margin_s`` before etcd can expire the
lease and delete its ``alive`` key. Registering rewrites ``active`` (same value, new
``mod_revision``) in the transaction that checks it, so an orchestrator that saw no
``alive`` key and then moves ``active`` with a compare on its ``mod_revision`` can never
race a node that registered meanwhile.

Calls aetcd; used by ``scheduler.node`` (the lease of a node started with a witness)
and ``scheduler.dr._orchestrator``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

import aetcd
import aetcd.exceptions
import grpc

from scheduler._aio import cancel_and_wait
from scheduler.cluster import LeaseHeld

_log = logging.getLogger("tickwheel.dr")

ERRORS: tuple[type[BaseException], ...] = (
    aetcd.exceptions.ClientError,
    grpc.RpcError,
    TimeoutError,
    OSError,
)
"""What an etcd call raises when the cluster (or its quorum) cannot be reached."""

RENEW_RETRY_S = 0.05
"""After a failed renewal the next try (on the next member, when there are several)
goes out this soon, not a keep-alive period later: the margin is for that try."""

_CHANNEL_OPTIONS = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 500,
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WitnessConfig:
    """Where the region lease lives and how long it lasts."""

    etcd_endpoints: tuple[str, ...]
    """``host:port`` of the witnessed etcd cluster's members (a node lists its own
    site's member; it moves to the next one on failure)."""
    region: str
    """The region whose lease this is."""
    site: str
    """This process's site (``a``, ``b``, a data-centre name)."""
    prefix: str = "/tickwheel"
    lease_ttl_s: float = 5.0
    """TTL of each node's etcd lease, whole seconds."""
    safety_margin_s: float = 1.0
    """A node stops trusting its lease this long before etcd can expire it."""
    etcd_timeout_s: float = 1.0
    """Deadline of every etcd call."""

    def __post_init__(self) -> None:
        if not self.etcd_endpoints:
            raise ValueError("witness: etcd_endpoints must not be empty")
        for ep in self.etcd_endpoints:
            host, sep, port = ep.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"witness: etcd endpoint {ep!r} is not host:port")
        for name, value in (("region", self.region), ("site", self.site)):
            if not value or "/" in value:
                raise ValueError(f"witness: {name} must be non-empty and contain no '/'")
        if self.lease_ttl_s < 2 or not float(self.lease_ttl_s).is_integer():
            raise ValueError("witness: lease_ttl_s must be a whole number of seconds >= 2")
        if not 0 < self.safety_margin_s < self.lease_ttl_s / 2:
            raise ValueError("witness: safety_margin_s must be in (0, lease_ttl_s / 2)")
        if self.etcd_timeout_s <= 0:
            raise ValueError("witness: etcd_timeout_s must be positive")

    @property
    def keepalive_every_s(self) -> float:
        """How often a node renews its lease: a quarter of the TTL."""
        return self.lease_ttl_s / 4

    def key(self, *parts: str) -> bytes:
        """``{prefix}/dr/{region}/{parts...}``."""
        return "/".join((self.prefix, "dr", self.region, *parts)).encode()


def new_client(endpoint: str, timeout_s: float) -> Any:
    """An aetcd client of one member (untyped)."""
    host, _, port = endpoint.rpartition(":")
    return aetcd.Client(host=host, port=int(port), timeout=timeout_s, options=_CHANNEL_OPTIONS)


@dataclasses.dataclass(frozen=True, slots=True)
class RegionState:
    """What the witness says of a region, read in one linearizable range read."""

    active: str | None
    """The site that serves the region (None: never set)."""
    active_revision: int
    """``mod_revision`` of ``active`` (0 when absent)."""
    alive: dict[str, tuple[str, ...]]
    """Site -> the nodes whose lease is alive."""
    revision: int
    """The store's revision at the read."""


async def read_state(client: Any, config: WitnessConfig) -> RegionState:
    """The region's keys, in one read (raises one of :data:`ERRORS` without a quorum)."""
    base = config.key().decode() + "/"
    async with asyncio.timeout(config.etcd_timeout_s):
        kvs = await client.get_prefix(base.encode())
    active: str | None = None
    active_rev = 0
    alive: dict[str, list[str]] = {}
    for kv in kvs:
        rest = kv.key.decode()[len(base) :]
        if rest == "active":
            active, active_rev = kv.value.decode(), int(kv.mod_revision)
        elif rest.startswith("alive/"):
            site, _, node = rest[len("alive/") :].partition("/")
            alive.setdefault(site, []).append(node)
    return RegionState(
        active=active,
        active_revision=active_rev,
        alive={s: tuple(sorted(n)) for s, n in alive.items()},
        revision=int(kvs.header.revision),
    )


async def take_region(
    client: Any, config: WitnessConfig, *, from_site: str | None, revision: int | None
) -> bool:
    """Move ``active`` to ``config.site``. With ``revision``: only if ``active`` is still
    ``from_site`` at that ``mod_revision`` (nobody registered since it was read);
    without: unconditionally (the manual override). True when it was moved."""
    txn = client.transactions
    key = config.key("active")
    compare = []
    if revision is not None:
        compare = [txn.mod(key) == revision, txn.value(key) == (from_site or "").encode()]
    async with asyncio.timeout(config.etcd_timeout_s):
        ok, _ = await client.transaction(
            compare=compare, success=[txn.put(key, config.site.encode())], failure=[]
        )
    return bool(ok)


class RegionLease:
    """A node's hold on its region (the :class:`~scheduler.cluster.NodeLease` contract):
    held while its etcd lease is renewed and ``active`` names its site."""

    def __init__(self, config: WitnessConfig, node_id: str) -> None:
        self.config = config
        self.node_id = node_id
        self._client: Any = None
        self._endpoint = 0
        self._lease_id: int | None = None
        self._trusted_until = 0.0
        self._lost = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.renewals = 0
        """Renewals that succeeded (for tests)."""

    @property
    def held(self) -> bool:
        """Whether this node may dispatch now."""
        return not self._lost.is_set() and time.monotonic() < self._trusted_until

    def _next_client(self) -> Any:
        eps = self.config.etcd_endpoints
        self._endpoint = (self._endpoint + 1) % len(eps)
        return new_client(eps[self._endpoint], self.config.etcd_timeout_s)

    async def acquire(self) -> None:
        """Grant a lease and register under ``alive/`` if ``active`` names this site
        (creating ``active`` when absent); :class:`LeaseHeld` when another site holds
        the region; an etcd error when the quorum cannot be reached."""
        if self.held:
            return
        await self._drop()
        cfg = self.config
        if self._client is None:
            self._client = new_client(cfg.etcd_endpoints[self._endpoint], cfg.etcd_timeout_s)
        client = self._client
        try:
            sent = time.monotonic()
            async with asyncio.timeout(cfg.etcd_timeout_s):
                lease = await client.lease(int(cfg.lease_ttl_s))
            txn = client.transactions
            active, alive = cfg.key("active"), cfg.key("alive", cfg.site, self.node_id)
            site = cfg.site.encode()
            register = [txn.put(active, site), txn.put(alive, b"", lease=lease.id)]
            async with asyncio.timeout(cfg.etcd_timeout_s):
                ok, _ = await client.transaction(
                    compare=[txn.value(active) == site], success=register, failure=[]
                )
                if not ok:  # absent, or another site's
                    ok, _ = await client.transaction(
                        compare=[txn.create(active) == 0], success=register, failure=[]
                    )
            if not ok:
                async with asyncio.timeout(cfg.etcd_timeout_s):
                    holder = await client.get(active)
                    await client.revoke_lease(lease.id)
                who = holder.value.decode() if holder is not None else "?"
                raise LeaseHeld(
                    f"site {who!r} holds region {cfg.region!r} (the witness moved it there: "
                    f"tickwheel dr status); this node of site {cfg.site!r} does not dispatch"
                )
        except ERRORS:
            self._client = self._next_client()
            with contextlib.suppress(Exception):
                await client.close()
            raise
        self._lease_id = int(lease.id)
        self._trusted_until = sent + min(float(lease.ttl), cfg.lease_ttl_s) - cfg.safety_margin_s
        self._lost.clear()
        _log.warning(
            "region lease: node %s of site %s holds region %s (etcd lease %x, ttl %d s)",
            self.node_id,
            cfg.site,
            cfg.region,
            self._lease_id,
            int(cfg.lease_ttl_s),
        )
        self._tasks = [
            asyncio.create_task(self._renew_forever(), name="tickwheel-region-lease"),
            asyncio.create_task(self._watch_trust(), name="tickwheel-region-trust"),
        ]

    async def wait_lost(self) -> None:
        """Return once the lease is lost (trust ran out, or the region moved)."""
        await self._lost.wait()

    async def release(self) -> None:
        """Stop renewing and revoke the lease (its ``alive`` key goes at once)."""
        await self._drop()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _drop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        lease, self._lease_id = self._lease_id, None
        self._trusted_until = 0.0
        if lease is not None and self._client is not None:
            try:
                async with asyncio.timeout(self.config.etcd_timeout_s):
                    await self._client.revoke_lease(lease)
            except ERRORS:
                pass  # it lapses by itself

    def _lose(self, why: str) -> None:
        if not self._lost.is_set():
            self._trusted_until = 0.0
            self._lost.set()
            _log.error(
                "region lease: node %s of site %s lost region %s: %s; dispatching nothing",
                self.node_id,
                self.config.site,
                self.config.region,
                why,
            )

    async def _watch_trust(self) -> None:
        while not self._lost.is_set():
            left = self._trusted_until - time.monotonic()
            if left <= 0:
                self._lose("its lease was not renewed in time (witness unreachable?)")
                return
            await asyncio.sleep(left)

    async def _renew_forever(self) -> None:
        cfg = self.config
        client, lease = self._client, self._lease_id
        wait_s, failures = cfg.keepalive_every_s, 0
        while not self._lost.is_set():
            await asyncio.sleep(wait_s)
            sent = time.monotonic()
            try:
                async with asyncio.timeout(self._attempt_s(sent)):
                    reply = await client.refresh_lease(lease)
                    # A linearizable read after the renewal: it needs the majority, so
                    # an old leader cut off from it (which may still renew leases on its
                    # own for an election timeout) extends no trust.
                    active = await client.get(cfg.key("active"))
            except ERRORS as exc:
                if failures == 0:
                    _log.warning("region lease: renewal failed (%s); trying again", exc)
                failures += 1
                if len(cfg.etcd_endpoints) > 1:  # the next member, at once
                    old, client = client, self._next_client()
                    self._client = client
                    with contextlib.suppress(Exception):
                        await old.close()
                wait_s = RENEW_RETRY_S
                continue
            if failures:
                _log.warning("region lease: renewed again after %d failed tries", failures)
            wait_s, failures = cfg.keepalive_every_s, 0
            if reply is None or reply.TTL <= 0:
                self._lose("etcd expired its lease")
                return
            holder = active.value.decode() if active is not None else None
            if holder != cfg.site:
                self._lose(f"the witness says site {holder!r} holds it now")
                return
            self.renewals += 1
            until = sent + min(float(reply.TTL), cfg.lease_ttl_s) - cfg.safety_margin_s
            self._trusted_until = max(self._trusted_until, until)

    def _attempt_s(self, now: float) -> float:
        """One renewal's deadline: ``etcd_timeout_s``, but never more than half the
        trust left, so a member that died or hangs under the call leaves time to try
        the next one before the node stops trusting its lease."""
        left = self._trusted_until - now
        return min(self.config.etcd_timeout_s, max(RENEW_RETRY_S, left / 2))


class BothLeases:
    """Held while both leases are (the database lease and the region lease)."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second

    @property
    def held(self) -> bool:
        return bool(self.first.held and self.second.held)

    async def acquire(self) -> None:
        await self.first.acquire()
        await self.second.acquire()

    async def wait_lost(self) -> None:
        waits = [
            asyncio.create_task(self.first.wait_lost()),
            asyncio.create_task(self.second.wait_lost()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(waits)

    async def release(self) -> None:
        try:
            await self.second.release()
        finally:
            await self.first.release()
