"""Shard ownership through etcd: a node lease, rendezvous placement, create-if-absent claims.

One round (every ``rebalance_interval_s``, or sooner when the lease changes):

1. Without a lease, grant one and register ``{prefix}/nodes/{node_id}`` on it.
2. Read the live nodes and the shard owners (one range read over the cluster's
   prefix). A round that found nothing to do records the store's revision; the next
   rounds first read only this node's registration key, and while the revision, the
   lease and the held shards are the same they stop there (nothing was written, so the
   round would decide the same: an idle node costs etcd one tiny read per round).
3. If the lease is not trusted right now, hold nothing (tell the listener) and stop here.
4. Release the shards this node holds but no longer desires: drop them from ``owned()``,
   await ``on_loss``, then delete the key (only if it is still this claim).
5. Claim each desired shard that has no owner with a transaction
   ``create_revision(key) == 0 -> put key = node_id on the lease``; await ``on_gain``
   for those that succeeded, then add them to ``owned()``. A shard that a live node
   still holds is never taken: its owner releases it in its own round (step 4), so a
   shard moves within two rounds of a join, and within the TTL of a crash.

Trust: the keep-alive task refreshes the lease every ``keepalive_every_s``. The node
trusts its lease until ``sent + lease_ttl_s - safety_margin_s``, where ``sent`` is when
the last successful keep-alive (or the grant) was SENT: the server can only have
renewed it later than that, so the server's expiry is at least ``safety_margin_s``
after the moment this node stops trusting (clock-rate drift aside, which the margin
also covers). A keep-alive answered with TTL 0 means the lease is gone (so is every key
on it): the node drops everything and registers again.

etcd restarts keep leases (etcd renews them when a leader is elected), so a node whose
keep-alives resume before its trust ran out holds on; one that lapsed reports a loss
and, on the next round with a trusted lease, adopts the shard keys still on its lease
(or re-claims them) and reports a gain. Every gain carries the ownership key's create
revision (``on_gain(shard -> claim revision)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

import aetcd
import aetcd.exceptions
import grpc

from scheduler._aio import cancel_and_wait
from scheduler.cluster import _keys, _rendezvous
from scheduler.cluster._config import ClusterConfig
from scheduler.cluster._protocol import ShardListener

_log = logging.getLogger("tickwheel.cluster")

_ERRORS: tuple[type[BaseException], ...] = (
    aetcd.exceptions.ClientError,
    grpc.RpcError,
    TimeoutError,
    OSError,
)
# Reconnect fast after an etcd restart instead of gRPC's default backoff (up to 120 s).
_CHANNEL_OPTIONS = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 500,
}
_CLAIM_CONCURRENCY = 32


class Membership:
    """This node's membership of an etcd-coordinated cluster (see the module docstring)."""

    def __init__(self, config: ClusterConfig, *, listener: ShardListener | None = None) -> None:
        self.config = config
        self._listener = listener
        self._endpoint_index = 0
        self._client: Any = None  # aetcd.Client (untyped)
        self._lease_id: int | None = None
        self._trusted_until = 0.0  # time.monotonic()
        self._held: dict[int, int] = {}  # shard -> claim revision; only what on_gain accepted
        self._lapsed: set[int] = set()  # dropped by a trust gap, on_loss not yet told
        self._gaps = 0  # trust gaps so far: a gain that spans one is not trusted
        self._live: frozenset[str] = frozenset()
        self._addresses: dict[str, str] = {}
        self._members_revision = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._stopping = False
        self._stopped = False
        self._failing = False
        self._yielding = False  # the engine stalled: no renewal (yield_shards)
        self._closing: set[asyncio.Task[None]] = set()
        self._settled: tuple[int, int, dict[int, int]] | None = None
        self.rounds = 0
        """Completed rebalance rounds (for tests and metrics)."""
        self.skipped_rounds = 0
        """Rounds that found nothing written since a settled round (one small read)."""

    # -- the ShardMembership contract ----------------------------------------------------

    @property
    def exclusive(self) -> bool:
        """Other nodes serve the other shards and write work for ours."""
        return False

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self.config.node_id

    @property
    def shard_count(self) -> int:
        """The cluster's fixed shard count."""
        return self.config.shard_count

    def set_listener(self, listener: ShardListener | None) -> None:
        """Where gains and losses go; set it before :meth:`start`."""
        self._listener = listener

    def owned(self) -> frozenset[int]:
        """Shards held under a lease trusted right now (empty once trust ran out)."""
        if not self._trusted():
            return frozenset()
        return frozenset(self._held)

    def owns(self, shard: int) -> bool:
        """Whether ``shard`` is in :meth:`owned` right now."""
        return shard in self._held and self._trusted()

    async def start(self) -> None:
        """Start the keep-alive and rebalance tasks; returns at once (no etcd call)."""
        if self._started or self._stopped:
            return
        self._started = True
        self._client = self._new_client()
        self._tasks = [
            asyncio.create_task(self._keepalive_forever(), name=f"tickwheel-lease-{self.node_id}"),
            asyncio.create_task(
                self._rebalance_forever(), name=f"tickwheel-rebalance-{self.node_id}"
            ),
        ]

    async def stop(self) -> None:
        """Stop trusting, tell the listener, revoke the lease (which frees every shard at
        once) and close the client. Safe before start and twice."""
        if self._stopped:
            return
        self._stopped = True
        self._stopping = True  # owned() is empty from here on
        tasks, self._tasks = self._tasks, []
        with contextlib.suppress(Exception):  # a loop's failure was logged as it happened
            await cancel_and_wait(tasks)
        if self._closing:
            await asyncio.wait(set(self._closing))
        held = frozenset(self._held) | self._lapsed
        self._held, self._lapsed = {}, set()
        if held:
            await self._tell_loss(held)
        client, self._client = self._client, None
        lease, self._lease_id = self._lease_id, None
        if client is None:
            return
        try:
            if lease is not None:
                async with asyncio.timeout(self.config.etcd_timeout_s):
                    await client.revoke_lease(lease)
        except _ERRORS as exc:
            _log.warning(
                "cluster: %s could not revoke its lease (%s); it lapses", self.node_id, exc
            )
        finally:
            await client.close()

    # -- introspection -------------------------------------------------------------------

    def live_nodes(self) -> frozenset[str]:
        """The registered nodes seen by the last round."""
        return self._live

    def members(self) -> tuple[int, Mapping[str, str]]:
        """The live nodes seen by the last round with the address each advertised, and
        a revision that grows whenever that map changes."""
        if not self._addresses:
            return (self._members_revision, {self.node_id: self.config.advertise})
        return (self._members_revision, dict(self._addresses))

    def yield_shards(self, on: bool) -> None:
        """``on``: stop renewing the lease (its keys, and so the shards, go to the other
        nodes once it lapses, within the TTL); ``off``: renew again, or register anew
        if it lapsed meanwhile, and take part in the next rebalance."""
        if on == self._yielding:
            return
        self._yielding = on
        if on:
            _log.error("cluster: %s stops renewing its lease; others take its shards", self.node_id)
        else:
            _log.warning("cluster: %s renews its lease again", self.node_id)
            self._wake.set()

    def trusted_for_s(self) -> float:
        """Seconds left before this node stops trusting its lease (0 when it does not)."""
        if self._stopping or self._lease_id is None:
            return 0.0
        return max(0.0, self._trusted_until - time.monotonic())

    # -- keep-alive ----------------------------------------------------------------------

    def _trusted(self) -> bool:
        return (
            not self._stopping
            and self._lease_id is not None
            and time.monotonic() < self._trusted_until
        )

    def _trust_from(self, sent: float, ttl_s: float) -> None:
        if self._held and time.monotonic() >= self._trusted_until:
            # Trust ran out before this renewal: the shards left owned() then, so they
            # must not come back silently. The loop reports the loss, then re-adopts them
            # (on_gain) if the keys are still on this lease.
            self._lapsed.update(self._held)
            self._held.clear()
            self._wake.set()
        if time.monotonic() >= self._trusted_until:
            self._gaps += 1
        until = sent + min(ttl_s, self.config.lease_ttl_s) - self.config.safety_margin_s
        self._trusted_until = max(self._trusted_until, until)

    async def _keepalive_forever(self) -> None:
        every = self.config.keepalive_every_s
        while True:
            lease = self._lease_id
            if lease is None or self._yielding:
                await asyncio.sleep(min(every, self.config.rebalance_interval_s))
                continue
            client = self._client
            sent = time.monotonic()
            try:
                async with asyncio.timeout(self.config.etcd_timeout_s):
                    reply = await client.refresh_lease(lease)
            except _ERRORS as exc:
                self._note_failure(client, "keep-alive", exc)
                await asyncio.sleep(every / 2)
                continue
            self._note_success()
            if lease != self._lease_id:
                continue  # replaced meanwhile
            if reply is None or reply.TTL <= 0:
                _log.warning("cluster: %s lease %x expired; registering again", self.node_id, lease)
                self._lease_id = None
                self._trusted_until = 0.0
                self._wake.set()
                continue
            self._trust_from(sent, float(reply.TTL))
            await asyncio.sleep(every)

    # -- rebalancing ---------------------------------------------------------------------

    async def _rebalance_forever(self) -> None:
        while True:
            self._wake.clear()
            client = self._client
            try:
                await self._round(client)
            except _ERRORS as exc:
                self._note_failure(client, "rebalance", exc)
            self.rounds += 1
            await self._lapse_check()
            # Sleep a round, but wake when the lease lapses or changes.
            delay = self.config.rebalance_interval_s
            if self._held and self._trusted():
                delay = min(delay, self._trusted_until - time.monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(delay, 0.0)):
                    await self._wake.wait()

    async def _lapse_check(self) -> None:
        if self._held and not self._trusted():
            self._gaps += 1
            self._lapsed.update(self._held)
            self._held.clear()
        if self._lapsed:
            lost = frozenset(self._lapsed)
            self._lapsed.clear()
            _log.warning(
                "cluster: %s stopped trusting its lease; %d shards dropped", self.node_id, len(lost)
            )
            await self._tell_loss(lost)

    async def _round(self, client: Any) -> None:
        if self._yielding:
            return  # no registration, no claim: the lease lapses and others take over
        cfg = self.config
        timeout = cfg.etcd_timeout_s
        if self._lease_id is None:
            await self._lapse_check()
            await self._register(client)
        lease = self._lease_id
        if self._settled is not None and lease is not None and self._trusted():
            # Nothing written under any key since a round that had nothing to do (the
            # store's revision is unchanged; our registration is still there): this
            # round would decide the same, so one single-key read is all it costs.
            async with asyncio.timeout(timeout):
                mine_kv = await client.get(_keys.node(cfg.prefix, self.node_id).encode())
            if mine_kv is not None and self._settled == (
                int(mine_kv.header.revision),
                lease,
                self._held,
            ):
                self.skipped_rounds += 1
                return
        self._settled = None
        # The registrations and the ownership keys in one range read.
        async with asyncio.timeout(timeout):
            kvs = await client.get_prefix(_keys.cluster(cfg.prefix).encode())
        revision = int(kvs.header.revision)
        nodes_prefix = _keys.nodes(cfg.prefix)
        addresses: dict[str, str] = {}
        owners: dict[int, tuple[str, int, int]] = {}
        for kv in kvs:
            key = kv.key.decode()
            if key.startswith(nodes_prefix):
                addresses[key[len(nodes_prefix) :]] = kv.value.decode()
            elif (shard := _keys.shard_of_key(cfg.prefix, key)) is not None:
                owners[shard] = (kv.value.decode(), int(kv.lease), int(kv.create_revision))
        live = set(addresses)
        if self.node_id not in live and lease is not None:
            # Registration put failed earlier, or the lease is about to be found lost.
            async with asyncio.timeout(timeout):
                await client.put(
                    _keys.node(cfg.prefix, self.node_id).encode(),
                    cfg.advertise.encode(),
                    lease=lease,
                )
            live.add(self.node_id)
            addresses[self.node_id] = cfg.advertise
        self._live = frozenset(live)
        if addresses != self._addresses:
            self._addresses = addresses
            self._members_revision += 1
        await self._lapse_check()
        if not self._trusted() or lease is None:
            return
        mine = {
            s: rev
            for s, (node, kv_lease, rev) in owners.items()
            if node == self.node_id and kv_lease == lease
        }
        # Held shards whose key vanished or changed hands (should not happen while the
        # lease is alive; a manual delete, say) are lost at once.
        gone = frozenset(s for s, rev in self._held.items() if mine.get(s) != rev)
        if gone:
            for s in gone:
                del self._held[s]
            await self._tell_loss(gone)
        want = _rendezvous.desired(cfg.shard_count, live, self.node_id)
        # Release first, then claim: a shard moves only through "absent".
        surplus = {s: rev for s, rev in mine.items() if s not in want}
        if surplus:
            held_surplus = frozenset(s for s in surplus if s in self._held)
            for s in held_surplus:
                del self._held[s]
            if held_surplus:
                await self._tell_loss(held_surplus)
            await self._delete_claims(client, surplus)
        adopt = {s: rev for s, rev in mine.items() if s in want and s not in self._held}
        free = sorted(s for s in want if s not in owners)
        claimed = await self._claim(client, free, lease) if free else {}
        gained = {**adopt, **claimed}
        if gained:
            await self._gain(client, gained, lease)
        elif not (gone or surplus or free):
            # Settled at this revision: until a key changes, rounds can skip.
            self._settled = (revision, lease, dict(self._held))

    async def _register(self, client: Any) -> None:
        cfg = self.config
        sent = time.monotonic()
        async with asyncio.timeout(cfg.etcd_timeout_s):
            lease = await client.lease(int(cfg.lease_ttl_s))
        self._lease_id = int(lease.id)
        self._trusted_until = 0.0
        self._trust_from(sent, float(lease.ttl))
        _log.info("cluster: %s registered with lease %x", self.node_id, self._lease_id)
        async with asyncio.timeout(cfg.etcd_timeout_s):
            await client.put(
                _keys.node(cfg.prefix, self.node_id).encode(),
                cfg.advertise.encode(),
                lease=lease.id,
            )

    async def _claim(self, client: Any, shards: list[int], lease: int) -> dict[int, int]:
        """Create-if-absent each shard key on ``lease``; shard -> create revision."""
        cfg = self.config
        limit = asyncio.Semaphore(_CLAIM_CONCURRENCY)
        txn = client.transactions
        node = self.node_id.encode()

        async def one(shard: int) -> tuple[int, int] | None:
            key = _keys.shard(cfg.prefix, shard).encode()
            async with limit, asyncio.timeout(cfg.etcd_timeout_s):
                ok, responses = await client.transaction(
                    compare=[txn.create(key) == 0],
                    success=[txn.put(key, node, lease=lease)],
                    failure=[],
                )
            if not ok:
                return None
            return shard, int(responses[0].response_put.header.revision)

        results = await asyncio.gather(*(one(s) for s in shards), return_exceptions=True)
        claimed: dict[int, int] = {}
        for r in results:
            if isinstance(r, tuple):
                claimed[r[0]] = r[1]
            elif isinstance(r, BaseException) and not isinstance(r, _ERRORS):
                raise r
        if len(claimed) < len(shards) and any(isinstance(r, BaseException) for r in results):
            _log.debug("cluster: %s: some claims failed; retried next round", self.node_id)
        return claimed

    async def _delete_claims(self, client: Any, claims: Mapping[int, int]) -> None:
        """Delete ownership keys, each only if it is still the same claim."""
        cfg = self.config
        txn = client.transactions
        limit = asyncio.Semaphore(_CLAIM_CONCURRENCY)

        async def one(shard: int, rev: int) -> None:
            key = _keys.shard(cfg.prefix, shard).encode()
            async with limit, asyncio.timeout(cfg.etcd_timeout_s):
                await client.transaction(
                    compare=[txn.create(key) == rev], success=[txn.delete(key)], failure=[]
                )

        results = await asyncio.gather(
            *(one(s, r) for s, r in claims.items()), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, _ERRORS):
                raise r

    async def _gain(self, client: Any, gained: dict[int, int], lease: int) -> None:
        gaps = self._gaps
        try:
            if self._listener is not None:
                await self._listener.on_gain(dict(gained))
        except Exception:
            _log.exception("cluster: on_gain failed; releasing %d shards", len(gained))
            await self._delete_claims(client, gained)
            return
        if self._lease_id == lease and self._gaps == gaps and self._trusted():
            self._held.update(gained)
        else:
            # The lease went, or trust lapsed, while the listener ran: take them back
            # (still-valid keys on this lease are adopted again next round).
            await self._tell_loss(frozenset(gained))

    async def _tell_loss(self, shards: frozenset[int]) -> None:
        if self._listener is None:
            return
        try:
            await self._listener.on_loss(shards)
        except Exception:
            _log.exception("cluster: on_loss failed")

    # -- connection ----------------------------------------------------------------------

    def _new_client(self) -> Any:
        endpoint = self.config.etcd_endpoints[self._endpoint_index]
        host, _, port = endpoint.rpartition(":")
        return aetcd.Client(
            host=host,
            port=int(port),
            timeout=self.config.etcd_timeout_s,
            options=_CHANNEL_OPTIONS,
        )

    def _note_success(self) -> None:
        if self._failing:
            self._failing = False
            _log.info("cluster: %s reaches etcd again", self.node_id)

    def _note_failure(self, client: Any, what: str, exc: BaseException) -> None:
        if not self._failing:
            self._failing = True
            _log.warning("cluster: %s: etcd %s failed: %s", self.node_id, what, exc)
        # Move to the next endpoint (only once per failed client, whichever task saw it).
        if len(self.config.etcd_endpoints) > 1 and client is self._client and not self._stopping:
            self._endpoint_index = (self._endpoint_index + 1) % len(self.config.etcd_endpoints)
            self._client = self._new_client()
            old = asyncio.create_task(client.close(), name=f"tickwheel-etcd-close-{self.node_id}")
            self._closing.add(old)
            old.add_done_callback(self._closing.discard)
